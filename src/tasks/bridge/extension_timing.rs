//! The extension dialect in the one follow loop, on tokio's paused clock over an upstream
//! scripted in memory: its `tasks/get` is bounded by the call's clock, and an answered input
//! request is looked at at once, even while a poll is in flight.

use super::extension::{AskClient, ExtBridge};
use super::*;
use crate::jsonrpc::{self, Id, Method, REQUEST_TIMEOUT};
use crate::locks::Mutex;
use serde_json::{Map, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

const REQUEST_TIMEOUT_S: u64 = 10;
const MAX_REQUEST_TIME_S: u64 = 60;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// An extension task as `tasks/get` shows it, polled every 5 s.
fn task(status: &str) -> Value {
    let mut t = json!({"taskId": "t-1", "resultType": "task", "status": status, "pollIntervalMs": 5000});
    if status == "input_required" {
        t["inputRequests"] = json!({"k": {"method": "elicitation/create",
            "params": {"message": "which?", "requestedSchema": {"type": "object", "properties": {}}}}});
    }
    t
}

/// A server of the tasks extension: the call becomes a task at once; `tasks/get` shows what
/// the test last set, after `get_takes`; `tasks/update` is answered after `update_takes`.
struct Upstream {
    task: Mutex<Value>,
    get_takes: Mutex<Duration>,
    update_takes: Mutex<Duration>,
    /// The methods the gateway sent, and when.
    sent: Mutex<Vec<(Duration, String)>>,
    t0: Instant,
}

impl Upstream {
    fn new(task: Value) -> Arc<Upstream> {
        Arc::new(Upstream {
            task: Mutex::new(task),
            get_takes: Mutex::new(Duration::ZERO),
            update_takes: Mutex::new(Duration::ZERO),
            sent: Mutex::new(vec![]),
            t0: Instant::now(),
        })
    }

    /// When each request with this method was sent.
    fn sent_at(&self, method: &str) -> Vec<Duration> {
        self.sent.lock().unwrap().iter().filter(|(_, m)| m == method).map(|(at, _)| *at).collect()
    }

    fn last_sent(&self) -> Option<String> {
        self.sent.lock().unwrap().last().map(|(_, m)| m.clone())
    }
}

impl BridgeLink for Upstream {
    fn upstream_name(&self) -> &str {
        "up"
    }

    async fn request_for(&self, msg: Value, on_behalf_of: Option<ClientRef>) -> Result<Value, RpcError> {
        self.request_for_declaring(msg, on_behalf_of, None).await
    }

    async fn request_for_declaring(
        &self,
        msg: Value,
        _: Option<ClientRef>,
        _: Option<Map<String, Value>>,
    ) -> Result<Value, RpcError> {
        let method = msg["method"].as_str().unwrap().to_string();
        self.sent.lock().unwrap().push((self.t0.elapsed(), method.clone()));
        let result = match method.as_str() {
            "tools/call" => self.task.lock().unwrap().clone(),
            "tasks/get" => {
                let takes = *self.get_takes.lock().unwrap();
                tokio::time::sleep(takes).await;
                self.task.lock().unwrap().clone()
            }
            "tasks/update" => {
                let takes = *self.update_takes.lock().unwrap();
                tokio::time::sleep(takes).await;
                json!({})
            }
            "tasks/cancel" => json!({}),
            other => panic!("the bridge sent {other}"),
        };
        Ok(json!({"jsonrpc": "2.0", "id": 0, "result": result}))
    }

    async fn request(&self, method: Method, params: Value) -> Result<Value, RpcError> {
        self.request_for(jsonrpc::request(&Id::Num(0), method, params), None).await
    }

    fn start_bridge(&self, _: &str, _: &ClientRef, _: Option<&ProgressToken>, _: Arc<dyn TaskFollower>) {}

    fn end_bridge(&self, _: &str) {}

    fn synthesize_progress(&self, _: &str, _: &str) {}
}

/// An input request asked of the client: its key, and where the answer goes.
type Asked = (String, mpsc::Sender<(String, Value)>);

/// The client: each input request asked of it is kept for the test to answer.
#[derive(Default)]
struct Client {
    asked: Mutex<Vec<Asked>>,
}

impl AskClient for Client {
    fn ask(&self, _: &Id, _: Value, key: String, answers: mpsc::Sender<(String, Value)>) -> Result<(), RpcError> {
        self.asked.lock().unwrap().push((key, answers));
        Ok(())
    }
}

impl Client {
    /// Answers the one input request asked so far.
    async fn answer(&self) {
        let (key, answers) = self.asked.lock().unwrap().pop().expect("an input request was asked");
        let resp = json!({"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {}}});
        answers.send((key, resp)).await.unwrap();
    }
}

fn start(up: &Arc<Upstream>, client: &Arc<Client>) -> (tokio::task::JoinHandle<Ending>, CancellationToken) {
    start_with(up, client, 8)
}

fn start_with(
    up: &Arc<Upstream>,
    client: &Arc<Client>,
    max_input: usize,
) -> (tokio::task::JoinHandle<Ending>, CancellationToken) {
    let cancel = CancellationToken::new();
    let bridge = ExtBridge {
        plain: PlainCall {
            link: up.clone(),
            client: ClientRef { session: 1, id: Id::Num(7) },
            request: jsonrpc::request(&Id::Num(7), Method::ToolsCall, json!({"name": "research"})),
            request_timeout: secs(REQUEST_TIMEOUT_S),
            max_request_time: secs(MAX_REQUEST_TIME_S),
            cancel: cancel.clone(),
        },
        created: None,
        max_input,
        asker: client.clone(),
        capabilities: Map::new(),
    };
    (tokio::spawn(bridge.run()), cancel)
}

/// The call's answer, which must be a timeout: its message, and when it came.
async fn timed_out(call: tokio::task::JoinHandle<Ending>, up: &Upstream) -> (String, Duration) {
    let Ending::Answer(resp) = call.await.unwrap() else { panic!("the call was not answered") };
    assert_eq!((&resp["id"], &resp["error"]["code"]), (&json!(7), &json!(REQUEST_TIMEOUT)), "{resp}");
    (resp["error"]["message"].as_str().unwrap().to_string(), up.t0.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_poll_in_flight_does_not_hold_the_call_past_max_request_time() {
    // Each tasks/get takes 4 s and shows a new status: a sign of life every 9 s, so only
    // max_request_time can end the call; at 60 s a poll is in flight (sent at 59 s).
    let up = Upstream::new(task("working"));
    *up.get_takes.lock().unwrap() = secs(4);
    let updates = {
        let up = up.clone();
        tokio::spawn(async move {
            for n in 0.. {
                tokio::time::sleep(secs(1)).await;
                up.task.lock().unwrap()["statusMessage"] = json!(format!("step {n}"));
            }
        })
    };
    let (call, cancel) = start(&up, &Arc::new(Client::default()));
    let (msg, at) = timed_out(call, &up).await;
    updates.abort();
    assert!(msg.contains("no result within max_request_time"), "{msg}");
    assert_eq!(at, secs(MAX_REQUEST_TIME_S), "not when the poll in flight is answered");
    assert!(cancel.is_cancelled());
    assert_eq!(up.last_sent().as_deref(), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_is_never_answered_ends_the_call_at_request_timeout() {
    let up = Upstream::new(task("working"));
    *up.get_takes.lock().unwrap() = secs(3600);
    let (call, _) = start(&up, &Arc::new(Client::default()));
    let (msg, at) = timed_out(call, &up).await;
    assert!(msg.contains("no progress or status change within request_timeout"), "{msg}");
    assert_eq!(at, secs(REQUEST_TIMEOUT_S));
}

/// A task that asks for input, answered at `answered_at` (then it works on); each
/// `tasks/get` takes `get_takes`. The client cancels at `cancelled_at`; the upstream is
/// returned to say what it was sent, and when.
async fn answered(answered_at: u64, get_takes: u64, cancelled_at: u64) -> Arc<Upstream> {
    let up = Upstream::new(task("input_required"));
    *up.get_takes.lock().unwrap() = secs(get_takes);
    let client = Arc::new(Client::default());
    let (call, cancel) = start(&up, &client);
    tokio::time::sleep(secs(answered_at)).await;
    *up.task.lock().unwrap() = task("working");
    client.answer().await;
    tokio::time::sleep(secs(cancelled_at - answered_at)).await;
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
    up
}

#[tokio::test(start_paused = true)]
async fn an_answered_input_request_is_looked_at_at_once() {
    let up = answered(3, 0, 9).await;
    assert_eq!(up.sent_at("tasks/update"), [secs(3)]);
    assert_eq!(up.sent_at("tasks/get"), [secs(3), secs(8)], "at once, then at the task's interval");
}

#[tokio::test(start_paused = true)]
async fn an_input_answered_while_a_poll_is_in_flight_is_looked_at_when_it_is_answered() {
    // The poll at 5 s takes 2 s; the answer at 6 s may be newer than what that poll shows.
    let up = answered(6, 2, 15).await;
    assert_eq!(up.sent_at("tasks/update"), [secs(6)]);
    assert_eq!(up.sent_at("tasks/get"), [secs(5), secs(7), secs(14)]);
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_times_out_with_the_call_ends_it_as_the_call_and_cancels_the_task() {
    // The answer at 3 s is a sign of life and starts a poll at once: the call's
    // request_timeout and the poll's own end at the same instant, 13 s.
    let up = Upstream::new(task("input_required"));
    let client = Arc::new(Client::default());
    let (call, cancel) = start(&up, &client);
    tokio::time::sleep(secs(3)).await;
    *up.get_takes.lock().unwrap() = secs(3600);
    client.answer().await;
    let (msg, at) = timed_out(call, &up).await;
    assert!(msg.contains("no progress or status change within request_timeout"), "{msg}");
    assert_eq!(at, secs(3 + REQUEST_TIMEOUT_S));
    assert!(cancel.is_cancelled());
    assert_eq!(up.last_sent().as_deref(), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn a_client_that_cancels_while_its_answer_goes_up_gets_no_answer_at_once() {
    let up = Upstream::new(task("input_required"));
    *up.update_takes.lock().unwrap() = secs(3600);
    let client = Arc::new(Client::default());
    let (call, cancel) = start(&up, &client);
    tokio::time::sleep(secs(1)).await;
    client.answer().await;
    tokio::time::sleep(secs(2)).await;
    assert_eq!(up.last_sent().as_deref(), Some("tasks/update"), "the answer goes up and waits");
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
    assert_eq!(up.t0.elapsed(), secs(3), "at once, not when tasks/update gives up");
    assert_eq!(up.last_sent().as_deref(), Some("tasks/cancel"));
}

#[tokio::test(start_paused = true)]
async fn every_answer_of_a_task_that_asks_many_at_once_is_taken() {
    // 40 questions at once; the client answers them all while the first goes up (1 s each).
    const ASKED: usize = 40;
    let mut t = task("input_required");
    t["inputRequests"] =
        (0..ASKED).map(|n| (format!("k{n}"), t["inputRequests"]["k"].clone())).collect::<Map<String, Value>>().into();
    let up = Upstream::new(t);
    *up.update_takes.lock().unwrap() = secs(1);
    let client = Arc::new(Client::default());
    let (call, cancel) = start_with(&up, &client, 64);
    while client.asked.lock().unwrap().len() < ASKED {
        tokio::task::yield_now().await;
    }
    let resp = json!({"jsonrpc": "2.0", "id": 1, "result": {"action": "accept", "content": {}}});
    for (key, answers) in client.asked.lock().unwrap().drain(..) {
        // As the session hands answers over: without waiting.
        answers.try_send((key, resp.clone())).expect("room for every answer");
    }
    tokio::time::sleep(secs(ASKED as u64 + 1)).await;
    assert_eq!(up.sent_at("tasks/update").len(), ASKED, "each answer went up");
    cancel.cancel();
    assert!(matches!(call.await.unwrap(), Ending::Cancelled));
}
