//! A 2026-07-28 upstream of the tasks extension (`io.modelcontextprotocol/tasks`) behind a
//! 2025-11-25 client with core tasks: its tasks translated both ways, followed, cancelled,
//! bounded (`gateway::session::ext::translated`, `table`).
//!
//! The scripted server, and the gateway in front of it, are `common::ext_server`.

use crate::common;

use common::ext_server::{
    Server, Setup, cancelled_ids, declares, extension_server, gets_of, requests, setup, setup_with, statuses,
};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const RELATED: &str = "io.modelcontextprotocol/related-task";

async fn core_client(s: &Setup) -> HttpMcp {
    let mut c = HttpMcp::new(&s.gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    let tasks = &init["capabilities"]["tasks"];
    assert!(tasks["list"].is_object() && tasks["cancel"].is_object(), "{init}");
    assert!(tasks["requests"]["tools"]["call"].is_object(), "{init}");
    assert!(init["capabilities"].get("extensions").is_none(), "{init}");
    c
}

fn task_call(name: &str) -> Value {
    json!({"name": name, "arguments": {}, "task": {"ttl": 60000}})
}

/// A task-augmented call of `tool`: the task's id.
async fn create_task(c: &mut HttpMcp, tool: &str) -> String {
    let created = c.request("tools/call", task_call(tool)).await;
    created.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.response)).to_string()
}

/// Task `id` does not exist for `c`: -32602 for each task request, and not listed.
async fn assert_unknown(c: &mut HttpMcp, id: &str) {
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(c.request(m, json!({"taskId": id})).await.error_code(), -32602, "{m}");
    }
    let listed = c.request("tasks/list", json!({})).await;
    assert!(listed.result()["tasks"].as_array().unwrap().iter().all(|t| t["taskId"] != id), "{}", listed.response);
}

/// A `tasks/result` of task `id` as request `rpc_id`, on its own event stream.
async fn start_result(c: &HttpMcp, rpc_id: i64, id: &str) -> SseReader {
    let msg = json!({"jsonrpc": "2.0", "id": rpc_id, "method": "tasks/result", "params": {"taskId": id}});
    SseReader::new(c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await.into_body())
}

/// The next `notifications/tasks/status` on `events`.
async fn next_status(events: &mut SseReader) -> Value {
    loop {
        let (_, m) = events.next().await.expect("the stream ended before a status notification");
        if m["method"] == "notifications/tasks/status" {
            return m;
        }
    }
}

#[tokio::test]
async fn core_tasks_become_extension_tasks_and_back() {
    // Not followed in the background: tasks/result's own polls are the only ones.
    let s = setup_with("[tasks]\nmax_followed = 0\n").await;
    let mut c = core_client(&s).await;
    let tools = c.request("tools/list", json!({})).await;
    let tools = tools.result()["tools"].as_array().unwrap().clone();
    assert!(tools.iter().all(|t| t["execution"]["taskSupport"] == "optional"), "{tools:?}");

    let created = c.request("tools/call", task_call("slow")).await;
    let task = &created.result()["task"];
    assert_eq!(task["taskId"], "task-1", "ids pass unchanged: {}", created.response);
    assert_eq!(
        (task["status"].as_str(), task["ttl"].as_u64(), task["pollInterval"].as_u64()),
        (Some("working"), Some(60000), Some(100))
    );
    assert!(task.get("ttlMs").is_none() && created.result().get("resultType").is_none(), "{}", created.response);
    let call = requests(&s.up, "tools/call").pop().unwrap();
    assert!(declares(&call) && call["params"].get("task").is_none(), "{call}");

    let got = c.request("tasks/get", json!({"taskId": "task-1"})).await;
    assert_eq!(got.result()["status"], "working");
    assert_eq!(got.result()["statusMessage"], "step 1 of 3");
    assert!(got.result().get("resultType").is_none() && got.result().get("pollIntervalMs").is_none());

    // tasks/result blocks until the task ends, then answers the tool's result, tagged.
    let result = c.request("tasks/result", json!({"taskId": "task-1"})).await;
    assert_eq!(result.result()["content"][0]["text"], "slow done after 3 steps", "{}", result.response);
    assert_eq!(result.result()["_meta"][RELATED], json!({"taskId": "task-1"}));
    assert!(result.result().get("resultType").is_none());
    // The client saw it working (created, then tasks/get): only the change is news.
    assert_eq!(statuses(&result.others), ["completed"], "{:?}", result.others);
    let gets_then = requests(&s.up, "tasks/get").len();
    // Asked again: the same, from what the gateway kept.
    let again = c.request("tasks/result", json!({"taskId": "task-1"})).await;
    assert_eq!(again.response["result"], result.response["result"]);
    let done = c.request("tasks/get", json!({"taskId": "task-1"})).await;
    assert_eq!(done.result()["status"], "completed");
    assert_eq!(requests(&s.up, "tasks/get").len(), gets_then, "a finished task is not asked about again");

    // A failed one: its error is tasks/result's.
    let failed = c.request("tools/call", task_call("fails")).await;
    let id = failed.result()["task"]["taskId"].as_str().unwrap().to_string();
    let err = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(err.response["error"], json!({"code": -32000, "message": "boom"}));

    let list = c.request("tasks/list", json!({})).await;
    let listed: Vec<(Value, Value)> =
        list.result()["tasks"].as_array().unwrap().iter().map(|t| (t["taskId"].clone(), t["status"].clone())).collect();
    assert_eq!(listed, vec![(json!("task-1"), json!("completed")), (json!("task-2"), json!("failed"))]);
    assert_eq!(c.request("tasks/list", json!({"cursor": "nope"})).await.error_code(), -32602);
}

#[tokio::test]
async fn a_core_cancel_is_answered_at_once_and_sticks() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", task_call("stubborn")).await;
    let id = created.result()["task"]["taskId"].clone();
    let cancelled = c.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled.result()["status"], "cancelled", "{}", cancelled.response);
    assert_eq!(cancelled.result()["taskId"], id);
    let cancels = requests(&s.up, "tasks/cancel");
    assert_eq!(cancels.len(), 1);
    assert!(declares(&cancels[0]));
    // The server completes it anyway; for this client it stays cancelled.
    for _ in 0..3 {
        assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "cancelled");
    }
    assert_eq!(c.request("tasks/result", json!({"taskId": id})).await.error_code(), -32603);
    assert_eq!(c.request("tasks/cancel", json!({"taskId": id})).await.error_code(), -32602, "terminal");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"][0]["status"], "cancelled");

    // Unknown ids, and another session's task.
    assert_unknown(&mut c, "nope").await;
    let mut other = core_client(&s).await;
    assert_unknown(&mut other, id.as_str().unwrap()).await;
    assert_eq!(other.request("tasks/list", json!({})).await.result()["tasks"], json!([]));
}

#[tokio::test]
async fn a_plain_answer_to_a_task_call_is_a_hosted_task_already_done() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}, "task": {}})).await;
    let task = &created.result()["task"];
    assert_eq!(task["status"], "completed", "{}", created.response);
    let id = task["taskId"].as_str().unwrap().to_string();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "hi");
    assert!(result.result().get("resultType").is_none(), "{}", result.response);
    assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "completed");
    assert!(requests(&s.up, "tasks/get").is_empty(), "the gateway's own task");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"][0]["taskId"], id.as_str());
}

#[tokio::test]
async fn a_core_client_answers_input_on_its_tasks_result_stream() {
    // Not followed in the background: the status changes are all tasks/result's to tell.
    let s = setup_with("[tasks]\nmax_followed = 0\n").await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", task_call("ask")).await;
    let id = created.result()["task"]["taskId"].clone();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "answer: forty-two", "{}", result.response);
    let asked: Vec<&Value> = result.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
    assert_eq!(asked.len(), 1, "{:?}", result.others);
    assert_eq!(asked[0]["params"]["_meta"][RELATED], json!({"taskId": id}));
    let updates = requests(&s.up, "tasks/update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0]["params"]["inputResponses"]["answer"]["content"]["answer"], "forty-two");
    assert!(statuses(&result.others).contains(&"input_required".to_string()), "{:?}", result.others);
}

/// A task is followed in the background: a client that never calls `tasks/result` hears of
/// each change (on its GET stream), until the task ends; then it is not polled any more.
#[tokio::test]
async fn status_notifications_arrive_without_a_tasks_result() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let asking = create_task(&mut c, "ask").await;
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let note = next_status(&mut events).await;
    let task = &note["params"];
    assert_eq!((task["taskId"].as_str(), task["status"].as_str()), (Some(asking.as_str()), Some("input_required")));
    assert_eq!((task["ttl"].as_u64(), task["pollInterval"].as_u64()), (Some(60000), Some(100)), "{note}");
    assert!(task.get("inputRequests").is_none() && task.get("pollIntervalMs").is_none(), "{note}");

    let slow = create_task(&mut c, "slow").await;
    let note = next_status(&mut events).await;
    assert_eq!(
        (note["params"]["taskId"].as_str(), note["params"]["status"].as_str()),
        (Some(slow.as_str()), Some("completed"))
    );
    assert_eq!(gets_of(&s.up, &slow), 4, "polled until it ended (one step a poll)");
    assert!(requests(&s.up, "tasks/get").iter().all(declares));
    // What the follower found is kept: the outcome is served without asking again.
    let result = c.request("tasks/result", json!({"taskId": slow})).await;
    assert_eq!(result.result()["content"][0]["text"], "slow done after 3 steps");
    assert_eq!(gets_of(&s.up, &slow), 4);

    // A tasks/result waiting on a followed task still relays its input and ends it.
    let result = c.request("tasks/result", json!({"taskId": asking})).await;
    assert_eq!(result.result()["content"][0]["text"], "answer: forty-two", "{}", result.response);
    assert_eq!(requests(&s.up, "tasks/update").len(), 1);
}

/// `max_followed` bounds the tasks followed at once: one over it is not followed (nobody
/// polls it), and a followed task's place is free again once it ends.
#[tokio::test]
async fn a_followed_tasks_place_is_free_again_once_it_ends() {
    let s = setup_with("[tasks]\nmax_followed = 1\n").await;
    let mut c = core_client(&s).await;
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let first = create_task(&mut c, "slow").await;
    let unfollowed = create_task(&mut c, "slow").await;
    let note = next_status(&mut events).await["params"].take();
    assert_eq!((&note["taskId"], &note["status"]), (&json!(first), &json!("completed")));
    let third = create_task(&mut c, "slow").await;
    let note = next_status(&mut events).await["params"].take();
    assert_eq!((&note["taskId"], &note["status"]), (&json!(third), &json!("completed")));
    let gets = [&first, &third, &unfollowed].map(|t| gets_of(&s.up, t));
    assert_eq!(gets, [4, 4, 0], "each followed one polled until it ended; the one over max_followed not at all");
}

/// The session's end (DELETE over HTTP, EOF over stdio) cancels its tasks that have not ended
/// upstream; an ended one is left alone.
#[tokio::test]
async fn ending_the_session_cancels_its_extension_tasks() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let running = create_task(&mut c, "endless").await;
    let failed = create_task(&mut c, "fails").await;
    assert_eq!(c.request("tasks/result", json!({"taskId": failed})).await.error_code(), -32000);
    assert!(cancelled_ids(&s.up).is_empty());
    // DELETE returns once the session has ended, its cancels acknowledged.
    assert_eq!(c.delete().await, 200);
    assert_eq!(cancelled_ids(&s.up), std::slice::from_ref(&running));
    assert!(declares(&requests(&s.up, "tasks/cancel")[0]));
    assert_eq!(s.state.lock().unwrap().tasks[&running].status, "cancelled");

    let mut stdio = StdioMcp::start(&http_upstream("up", &s.up.url()), "up").await;
    stdio.initialize("2025-11-25").await;
    let created = stdio.request("tools/call", task_call("endless")).await;
    let over_stdio = created.result()["task"]["taskId"].as_str().expect("a task").to_string();
    assert!(stdio.end_input().await.success());
    // The gateway has exited: what it sent before is all there is.
    assert_eq!(cancelled_ids(&s.up), [running, over_stdio]);
}

/// A `tasks/result` the client cancels, or whose session ends, stops polling its task (the
/// task itself runs on: `deaf` ignores cancels). The clock is a third wait, polling at the same
/// interval: while it polls five times, the stopped ones poll at most once more (one may have
/// been on its way).
#[tokio::test]
async fn a_cancelled_tasks_result_stops_polling() {
    // Not followed in the background: only the waits poll.
    let s = setup_with("[tasks]\nmax_followed = 0\n").await;
    let mut a = core_client(&s).await;
    let mut b = core_client(&s).await;
    let mut clock = core_client(&s).await;
    let (ta, tb, tc) =
        (create_task(&mut a, "deaf").await, create_task(&mut b, "deaf").await, create_task(&mut clock, "deaf").await);
    let mut wait_a = start_result(&a, 50, &ta).await;
    let _wait_b = start_result(&b, 60, &tb).await;
    eventually("both waits poll", async || gets_of(&s.up, &ta) >= 2 && gets_of(&s.up, &tb) >= 2).await;

    assert_eq!(a.notify("notifications/cancelled", json!({"requestId": 50})).await, 202);
    assert_eq!(b.delete().await, 200);
    let (before_a, before_b) = (gets_of(&s.up, &ta), gets_of(&s.up, &tb));
    let _ticking = start_result(&clock, 70, &tc).await;
    eventually("the clock polls five times", async || gets_of(&s.up, &tc) >= 5).await;
    assert!(gets_of(&s.up, &ta) <= before_a + 1, "{} after {before_a}", gets_of(&s.up, &ta));
    assert!(gets_of(&s.up, &tb) <= before_b + 1, "{} after {before_b}", gets_of(&s.up, &tb));
    // The cancelled request gets no answer: its stream ends without one.
    while let Some((_, m)) = wait_a.next().await {
        assert!(m.get("id").is_none(), "{m}");
    }
    // The cancelled wait's slot is free again: the task can be waited on anew.
    let _again = start_result(&a, 51, &ta).await;
    eventually("a new wait polls", async || gets_of(&s.up, &ta) >= before_a + 2).await;
}

/// One link for every session (`share = true`): a session's extension tasks are its own, and
/// bridged calls of two sessions at once each get their own answer.
#[tokio::test]
async fn on_a_shared_link_tasks_stay_with_their_session() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}share = true\n", http_upstream("up", &up.url()))).await;
    let s = Setup { up, state, gw };
    let mut a = core_client(&s).await;
    let mut b = core_client(&s).await;
    let id = create_task(&mut a, "slow").await;
    assert_unknown(&mut b, &id).await;
    assert_eq!(b.request("tasks/list", json!({})).await.result()["tasks"], json!([]));
    assert_eq!(
        a.request("tasks/result", json!({"taskId": id})).await.result()["content"][0]["text"],
        "slow done after 3 steps"
    );

    let mut old = HttpMcp::new(&s.gw.url("up"));
    old.initialize("2025-06-18").await;
    let (one, two) = tokio::join!(
        old.request_owned("tools/call", json!({"name": "slow", "arguments": {}})),
        a.request_owned("tools/call", json!({"name": "ask", "arguments": {}})),
    );
    assert_eq!(one.result()["content"][0]["text"], "slow done after 3 steps");
    assert_eq!(two.result()["content"][0]["text"], "answer: forty-two");
}

/// Two task calls at once where the session has room for one: both pass the room check
/// before the upstream answers, the upstream makes both tasks, and the one past the limit is
/// refused (-32004) and cancelled upstream, while the other is the client's. (Refusing it
/// once held the strategy's lock while the cancel took the session's.)
#[tokio::test]
async fn a_task_made_past_the_limit_is_refused_and_cancelled_upstream() {
    let state = Arc::new(Mutex::new(Server::default()));
    let script = extension_server(state.clone());
    // Both calls reach the upstream before either is answered.
    let up = Scripted::start(move |req: &Value| {
        let mut steps = script(req);
        if req["method"] == "tools/call" && req["params"].get("task").is_none() {
            steps.insert(0, Step::Sleep(300));
        }
        steps
    })
    .await;
    let config = format!("{}[upstream.tasks]\nmax_tasks_per_owner = 1\n", http_upstream("up", &up.url()));
    let s = Setup { up, state, gw: start_gateway(&config).await };
    let c = core_client(&s).await;
    let (a, b) = tokio::join!(
        c.request_owned("tools/call", task_call("slow")),
        c.request_owned("tools/call", task_call("slow"))
    );
    let (made, refused) = if a.response.get("error").is_some() { (b, a) } else { (a, b) };
    assert_eq!(refused.error_code(), -32004, "{}", refused.response);
    let kept = made.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", made.response)).to_string();
    let dropped = if kept == "task-1" { "task-2" } else { "task-1" };
    eventually("the refused task is cancelled upstream", async || cancelled_ids(&s.up) == [dropped]).await;
    // The session goes on: its task is still its own.
    let mut c = c;
    let got = c.request("tasks/get", json!({"taskId": kept})).await;
    assert_eq!(got.result()["taskId"], kept.as_str(), "{}", got.response);
}

/// A hostile extension upstream: every task it shows carries a 100 kB status message and a
/// 100 kB member of its own, and `longid`'s task has an id of 100 kB. A core-tasks client
/// is shown each task within `[tasks]`'s bounds, what the store keeps of its session stays
/// small, and a task whose id is too long is refused (and cancelled upstream).
#[tokio::test]
async fn a_hostile_extension_upstreams_tasks_are_kept_within_their_bytes() {
    let state = Arc::new(Mutex::new(Server::default()));
    let inner = extension_server(state.clone());
    let up = Scripted::start(move |req| {
        let long = req["params"]["name"] == "longid";
        let mut req = req.clone();
        if long {
            req["params"]["name"] = "slow".into();
        }
        let mut steps = inner(&req);
        for step in &mut steps {
            if let Step::Send(m) = step
                && let Some(r) = m.get_mut("result").filter(|r| r.get("taskId").is_some())
            {
                r["statusMessage"] = "m".repeat(100_000).into();
                r["x-pad"] = "p".repeat(100_000).into();
                if long {
                    r["taskId"] = "i".repeat(100_000).into();
                }
            }
        }
        steps
    })
    .await;
    let gw = start_gateway(&format!("[tasks]\nmax_followed = 0\n{}", http_upstream("up", &up.url()))).await;
    let s = Setup { up, state, gw };
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", task_call("slow")).await;
    let task = &created.result()["task"];
    assert!(task["statusMessage"].as_str().unwrap().len() <= 4096, "cut at max_status_message_bytes");
    assert!(
        task.get("x-pad").is_none(),
        "a huge member of the upstream's is not kept: {}",
        created.response.to_string().len()
    );
    let id = task["taskId"].as_str().unwrap().to_string();
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert!(got.response.to_string().len() < 6000, "tasks/get is {} bytes", got.response.to_string().len());
    assert_eq!(got.result()["taskId"], id.as_str());
    // The long id: refused, naming the key, and the upstream is told to drop the task.
    let refused = c.request("tools/call", task_call("longid")).await;
    assert_eq!(refused.error_code(), -32603, "{}", refused.response);
    assert!(refused.response["error"]["message"].as_str().unwrap().contains("max_task_id_bytes"));
    eventually("the long-id task is cancelled upstream", async || {
        cancelled_ids(&s.up).iter().any(|i| i.len() == 100_000)
    })
    .await;
    let listed = c.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"].as_array().unwrap().len(), 1, "only the first is listed");
    assert!(listed.response.to_string().len() < 6000);
}
