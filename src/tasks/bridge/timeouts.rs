//! A bridged call's `request_timeout` and `max_request_time`, and its schedules, on tokio's
//! paused clock, over an upstream scripted in memory: each test says exactly when the call
//! must end, poll, or make a status message progress.

use super::core_tasks::Bridge;
use super::statuses::STATUS_AS_PROGRESS_DELAY;
use super::*;
use crate::jsonrpc::{self, Id, REQUEST_TIMEOUT};
use crate::locks::Mutex;
use serde_json::json;
use tokio::time::Instant;

const REQUEST_TIMEOUT_S: u64 = 10;
const MAX_REQUEST_TIME_S: u64 = 60;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn task(message: &str) -> Value {
    json!({"taskId": "t-1", "status": "working", "statusMessage": message,
        "createdAt": "2026-01-01T00:00:00Z", "ttl": 3_600_000, "pollInterval": 5000})
}

/// A task server: `tasks/result` answers what the test queued (then never), `tasks/get`
/// shows whatever the test last set.
struct Upstream {
    /// Whether the task-augmented call is answered with the task (else it never is).
    creates: bool,
    task: Mutex<Value>,
    follower: Mutex<Option<Arc<dyn TaskFollower>>>,
    /// The methods the gateway sent, in order.
    sent: Mutex<Vec<String>>,
    /// How long each `tasks/get` takes to be answered.
    get_takes: Mutex<Duration>,
    /// When each `tasks/get` was sent.
    gets: Mutex<Vec<Instant>>,
    /// The status messages made progress, and when.
    progress: Mutex<Vec<(Instant, String)>>,
    /// The answers of the next `tasks/result`s, in order (their `result` or `error`).
    results: Mutex<std::collections::VecDeque<Value>>,
    /// A status notification sent just before a `tasks/result` is answered.
    note_before_result: Mutex<Option<Value>>,
}

impl Upstream {
    fn new(creates: bool) -> Arc<Upstream> {
        Arc::new(Upstream {
            creates,
            task: Mutex::new(task("started")),
            follower: Mutex::new(None),
            sent: Mutex::new(vec![]),
            get_takes: Mutex::new(Duration::ZERO),
            gets: Mutex::new(vec![]),
            progress: Mutex::new(vec![]),
            results: Mutex::new(Default::default()),
            note_before_result: Mutex::new(None),
        })
    }

    fn follower(&self) -> Arc<dyn TaskFollower> {
        self.follower.lock().unwrap().clone().expect("the call follows its task")
    }

    fn sent(&self) -> Vec<String> {
        self.sent.lock().unwrap().clone()
    }
}

impl BridgeLink for Upstream {
    fn upstream_name(&self) -> &str {
        "up"
    }

    async fn request_for(&self, msg: Value, _on_behalf_of: Option<ClientRef>) -> Result<Value, RpcError> {
        let method = msg["method"].as_str().unwrap().to_string();
        self.sent.lock().unwrap().push(method.clone());
        match method.as_str() {
            "tools/call" if self.creates => {
                let task = self.task.lock().unwrap().clone();
                Ok(json!({"jsonrpc": "2.0", "id": 0, "result": {"task": task}}))
            }
            "tasks/cancel" => Ok(json!({"jsonrpc": "2.0", "id": 0, "result": {}})),
            "tasks/result" => {
                let queued = self.results.lock().unwrap().pop_front();
                match queued {
                    Some(Value::Object(mut outcome)) => {
                        if let Some(note) = self.note_before_result.lock().unwrap().take() {
                            self.follower().status(note);
                        }
                        outcome.extend([("jsonrpc".into(), json!("2.0")), ("id".into(), json!(0))]);
                        Ok(Value::Object(outcome))
                    }
                    Some(other) => panic!("queued {other}"),
                    None => std::future::pending().await,
                }
            }
            _ => std::future::pending().await,
        }
    }

    async fn request_for_declaring(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
        _: Option<serde_json::Map<String, Value>>,
    ) -> Result<Value, RpcError> {
        self.request_for(msg, on_behalf_of).await
    }

    async fn request(&self, method: crate::jsonrpc::Method, _params: Value) -> Result<Value, RpcError> {
        self.sent.lock().unwrap().push(method.as_str().to_string());
        assert_eq!(method, crate::jsonrpc::Method::TasksGet);
        self.gets.lock().unwrap().push(Instant::now());
        let takes = *self.get_takes.lock().unwrap();
        tokio::time::sleep(takes).await;
        let task = self.task.lock().unwrap().clone();
        if task.is_null() {
            return Ok(json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "no such task"}}));
        }
        Ok(json!({"jsonrpc": "2.0", "id": 0, "result": task}))
    }

    fn start_bridge(&self, _: &str, _: &ClientRef, _: Option<&ProgressToken>, follower: Arc<dyn TaskFollower>) {
        *self.follower.lock().unwrap() = Some(follower);
    }

    fn end_bridge(&self, _: &str) {
        self.follower.lock().unwrap().take();
    }

    fn synthesize_progress(&self, _: &str, message: &str) {
        self.progress.lock().unwrap().push((Instant::now(), message.to_string()));
    }
}

/// Starts a bridged call over `up`; it runs until the test awaits it.
fn start(up: &Arc<Upstream>) -> (tokio::task::JoinHandle<Ending>, CancellationToken) {
    let cancel = CancellationToken::new();
    let bridge = Bridge {
        plain: PlainCall {
            link: up.clone(),
            client: ClientRef { session: 1, id: Id::Num(7) },
            request: jsonrpc::request(
                &Id::Num(7),
                crate::jsonrpc::Method::ToolsCall,
                json!({"name": "research", "_meta": {"progressToken": "p"}}),
            ),
            request_timeout: secs(REQUEST_TIMEOUT_S),
            max_request_time: secs(MAX_REQUEST_TIME_S),
            cancel: cancel.clone(),
        },
        ttl: secs(3600),
    };
    let call = tokio::spawn(bridge.run());
    (call, cancel)
}

/// Progress from the upstream every 3 s, a sign of life that keeps request_timeout away,
/// until the test aborts it.
fn progress_every_3s(up: &Arc<Upstream>) -> tokio::task::JoinHandle<()> {
    let up = up.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(secs(3)).await;
            if let Some(f) = up.follower.lock().unwrap().clone() {
                f.progress();
            }
        }
    })
}

/// Returns once the call has asked the upstream for its task.
async fn created(up: &Upstream) {
    while up.sent().is_empty() {
        tokio::task::yield_now().await;
    }
}

/// The call's answer, which must be a timeout: its message.
async fn timed_out(call: tokio::task::JoinHandle<Ending>) -> String {
    let Ending::Answer(resp) = call.await.unwrap() else { panic!("the call was not answered") };
    assert_eq!(resp["id"], 7, "{resp}");
    assert_eq!(resp["error"]["code"], REQUEST_TIMEOUT, "{resp}");
    resp["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test(start_paused = true)]
async fn without_signs_of_life_the_call_ends_at_request_timeout_and_its_task_is_cancelled() {
    let up = Upstream::new(true);
    let start_at = Instant::now();
    let (call, cancel) = start(&up);
    let msg = timed_out(call).await;
    assert!(msg.contains("no progress or status change within request_timeout"), "{msg}");
    assert_eq!(start_at.elapsed(), secs(REQUEST_TIMEOUT_S));
    assert!(cancel.is_cancelled());
    assert_eq!(up.sent().last().map(String::as_str), Some("tasks/cancel"), "{:?}", up.sent());
    assert!(up.sent().contains(&"tasks/get".to_string()), "polled on the way: {:?}", up.sent());
}

#[tokio::test(start_paused = true)]
async fn each_sign_of_life_starts_request_timeout_again() {
    // At 3 s: a status notification, progress, or a status change that the poll at 5 s sees.
    for (sign, seen_at) in [("note", 3), ("progress", 3), ("poll", 5)] {
        let up = Upstream::new(true);
        let start_at = Instant::now();
        let (call, _) = start(&up);
        tokio::time::sleep(secs(3)).await;
        match sign {
            "note" => up.follower().status(json!({"method": "notifications/tasks/status", "params": task("half way")})),
            "progress" => up.follower().progress(),
            _ => *up.task.lock().unwrap() = task("half way"),
        }
        let msg = timed_out(call).await;
        assert!(msg.contains("request_timeout"), "{sign}: {msg}");
        assert_eq!(start_at.elapsed(), secs(seen_at + REQUEST_TIMEOUT_S), "{sign}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_sign_of_life_while_a_poll_waits_starts_request_timeout_again() {
    // The poll at 5 s takes 8 s; at 7 s, while it waits, a status notification or progress.
    // Before: the call heard neither until the poll's answer at 13 s, and timed out then.
    for sign in ["note", "progress"] {
        let up = Upstream::new(true);
        *up.get_takes.lock().unwrap() = secs(8);
        let start_at = Instant::now();
        let (call, _) = start(&up);
        tokio::time::sleep(secs(7)).await;
        assert_eq!(up.sent().last().map(String::as_str), Some("tasks/get"), "{sign}: the poll waits");
        match sign {
            "note" => up.follower().status(json!({"method": "notifications/tasks/status", "params": task("half way")})),
            _ => up.follower().progress(),
        }
        let msg = timed_out(call).await;
        assert!(msg.contains("request_timeout"), "{sign}: {msg}");
        assert_eq!(start_at.elapsed(), secs(7 + REQUEST_TIMEOUT_S), "{sign}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_waits_past_request_timeout_does_not_hold_the_call() {
    let up = Upstream::new(true);
    *up.get_takes.lock().unwrap() = secs(3600);
    let start_at = Instant::now();
    let (call, _) = start(&up);
    let msg = timed_out(call).await;
    assert!(msg.contains("request_timeout"), "{msg}");
    assert_eq!(start_at.elapsed(), secs(REQUEST_TIMEOUT_S));
}

#[tokio::test(start_paused = true)]
async fn max_request_time_ends_the_call_whatever_its_signs_of_life() {
    let up = Upstream::new(true);
    let start_at = Instant::now();
    let (call, cancel) = start(&up);
    let keep_alive = progress_every_3s(&up);
    let msg = timed_out(call).await;
    keep_alive.abort();
    assert!(msg.contains("no result within max_request_time"), "{msg}");
    assert_eq!(start_at.elapsed(), secs(MAX_REQUEST_TIME_S));
    assert!(cancel.is_cancelled());
    assert_eq!(up.sent().last().map(String::as_str), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn while_its_task_is_created_only_max_request_time_applies() {
    // The upstream may run the call plainly after all: request_timeout does not cut it.
    let up = Upstream::new(false);
    let start_at = Instant::now();
    let (call, _) = start(&up);
    let msg = timed_out(call).await;
    assert!(msg.contains("creating the task"), "{msg}");
    // At max_request_time the upstream gets request_timeout more to show a task it made.
    assert_eq!(start_at.elapsed(), secs(MAX_REQUEST_TIME_S + REQUEST_TIMEOUT_S));
    assert_eq!(up.sent(), vec!["tools/call"], "no task to cancel");
}

#[tokio::test(start_paused = true)]
async fn a_client_that_cancels_gets_no_answer_and_the_task_is_cancelled_at_once() {
    let up = Upstream::new(true);
    let (call, cancel) = start(&up);
    tokio::time::sleep(secs(3)).await;
    let start_at = Instant::now();
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
    assert_eq!(start_at.elapsed(), Duration::ZERO);
    assert_eq!(up.sent().last().map(String::as_str), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn the_poll_keeps_its_interval_and_a_status_message_becomes_progress_after_its_delay() {
    let up = Upstream::new(true);
    let t0 = Instant::now();
    let (call, cancel) = start(&up);
    // The status at creation ("started") and the one the poll at 5 s sees ("step 2").
    tokio::time::sleep(secs(3)).await;
    *up.task.lock().unwrap() = task("step 2");
    tokio::time::sleep(secs(8)).await;
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
    let gets: Vec<Duration> = up.gets.lock().unwrap().iter().map(|at| *at - t0).collect();
    assert_eq!(gets, [secs(5), secs(10)], "tasks/get at the task's pollInterval");
    let progress: Vec<(Duration, String)> =
        up.progress.lock().unwrap().iter().map(|(at, m)| (*at - t0, m.clone())).collect();
    let delay = STATUS_AS_PROGRESS_DELAY;
    assert_eq!(progress, [(delay, "started".to_string()), (secs(5) + delay, "step 2".to_string())]);
}

#[tokio::test(start_paused = true)]
async fn a_poll_answer_that_names_no_interval_keeps_the_last_one() {
    let up = Upstream::new(true);
    let t0 = Instant::now();
    let (call, cancel) = start(&up);
    // Created with a 5 s pollInterval; every tasks/get answer leaves the field out.
    created(&up).await;
    up.task.lock().unwrap().as_object_mut().unwrap().remove("pollInterval");
    // A new status for the poll at 5 s to see, so that request_timeout runs to 15 s.
    tokio::time::sleep(secs(3)).await;
    up.task.lock().unwrap()["statusMessage"] = json!("step 2");
    tokio::time::sleep(secs(8)).await;
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
    let gets: Vec<Duration> = up.gets.lock().unwrap().iter().map(|at| *at - t0).collect();
    assert_eq!(gets, [secs(5), secs(10)], "not the 1 s of a task that never named one");
}

/// A server that answers the first `tasks/result` at once with an error while its task
/// runs (it does not block): the call falls back to polling.
fn not_blocking() -> Arc<Upstream> {
    let up = Upstream::new(true);
    up.results.lock().unwrap().push_back(json!({"error": {"code": -32603, "message": "not done yet"}}));
    up
}

#[tokio::test(start_paused = true)]
async fn after_an_early_tasks_result_error_the_polls_fetch_the_result_once_the_task_ends() {
    let up = not_blocking();
    up.results.lock().unwrap().push_back(json!({"result": {"content": [{"type": "text", "text": "done"}]}}));
    let t0 = Instant::now();
    let (call, _) = start(&up);
    tokio::time::sleep(secs(3)).await;
    up.task.lock().unwrap()["status"] = json!("completed");
    let Ending::Answer(resp) = call.await.unwrap() else { panic!("the call was not answered") };
    assert_eq!((&resp["id"], &resp["result"]["content"][0]["text"]), (&json!(7), &json!("done")), "{resp}");
    assert_eq!(t0.elapsed(), secs(5), "at the poll that saw the task end");
    let sent = up.sent();
    assert_eq!(sent, ["tools/call", "tasks/result", "tasks/get", "tasks/get", "tasks/result"], "{sent:?}");
}

#[tokio::test(start_paused = true)]
async fn the_fallback_tasks_result_is_bounded_by_request_timeout_and_the_clients_cancel() {
    // The task ends at 3 s; the poll at 5 s sees it; its tasks/result is never answered.
    for cancels in [false, true] {
        let up = not_blocking();
        let t0 = Instant::now();
        let (call, cancel) = start(&up);
        tokio::time::sleep(secs(3)).await;
        up.task.lock().unwrap()["status"] = json!("completed");
        if cancels {
            tokio::time::sleep(secs(4)).await;
            assert_eq!(up.sent().last().map(String::as_str), Some("tasks/result"), "the fetch waits");
            cancel.cancel();
            assert!(matches!(call.await.unwrap(), Ending::Cancelled));
            assert_eq!(t0.elapsed(), secs(7), "at once");
        } else {
            let msg = timed_out(call).await;
            assert!(msg.contains("did not answer tasks/result"), "{msg}");
            assert_eq!(t0.elapsed(), secs(5 + REQUEST_TIMEOUT_S));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_fails_ends_the_call_with_its_error_and_cancels_the_task() {
    let up = Upstream::new(true);
    let t0 = Instant::now();
    let (call, cancel) = start(&up);
    created(&up).await;
    // From now on, tasks/get answers that the upstream knows no such task.
    *up.task.lock().unwrap() = Value::Null;
    let Ending::Answer(resp) = call.await.unwrap() else { panic!("the call was not answered") };
    assert_eq!((&resp["id"], &resp["error"]["code"]), (&json!(7), &json!(-32602)), "{resp}");
    let msg = resp["error"]["message"].as_str().unwrap();
    assert!(msg.contains("the upstream lost the bridged task: no such task"), "{msg}");
    assert_eq!(t0.elapsed(), secs(5), "at the poll");
    assert!(cancel.is_cancelled(), "the client will not have the task's result");
    assert_eq!(up.sent().last().map(String::as_str), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn max_request_time_ends_the_call_while_the_fallback_tasks_result_waits() {
    // Progress every 3 s keeps request_timeout away; the task ends at 52 s, the poll at 55 s
    // sees it, and its tasks/result is never answered.
    let up = not_blocking();
    let t0 = Instant::now();
    let (call, cancel) = start(&up);
    let keep_alive = progress_every_3s(&up);
    tokio::time::sleep(secs(52)).await;
    up.task.lock().unwrap()["status"] = json!("completed");
    let msg = timed_out(call).await;
    keep_alive.abort();
    assert!(msg.contains("no result within max_request_time"), "{msg}");
    assert_eq!(t0.elapsed(), secs(MAX_REQUEST_TIME_S), "not at 55 s + request_timeout");
    assert!(cancel.is_cancelled());
    let sent = up.sent();
    assert_eq!(sent[sent.len() - 2..], ["tasks/result", "tasks/cancel"], "{sent:?}");
}

#[tokio::test(start_paused = true)]
async fn a_status_sent_just_before_the_result_becomes_progress_before_the_answer() {
    // The server's last status and the answer of the blocking tasks/result arrive together.
    let up = Upstream::new(true);
    up.results.lock().unwrap().push_back(json!({"result": {"content": []}}));
    let note = {
        let mut t = task("finishing");
        t["lastUpdatedAt"] = json!("2026-01-01T00:00:09Z");
        json!({"method": "notifications/tasks/status", "params": t})
    };
    *up.note_before_result.lock().unwrap() = Some(note);
    let (call, _) = start(&up);
    let Ending::Answer(resp) = call.await.unwrap() else { panic!("the call was not answered") };
    assert!(resp.get("result").is_some(), "{resp}");
    let progress: Vec<String> = up.progress.lock().unwrap().iter().map(|(_, m)| m.clone()).collect();
    assert_eq!(progress, ["started", "finishing"], "each status message, before the answer");
}
