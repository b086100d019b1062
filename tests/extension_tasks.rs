//! A 2026-07-28 upstream of the tasks extension (`io.modelcontextprotocol/tasks`) behind
//! legacy clients: blocking calls bridged through its tasks.
//!
//! The scripted server is `common::ext_server`.

use crate::common;

use common::ext_server::{Server, declares, extension_server};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

struct Setup {
    up: Scripted,
    state: Arc<Mutex<Server>>,
    gw: Gw,
}

async fn setup() -> Setup {
    setup_with("").await
}

/// The gateway in front of the scripted server, with `config` before the upstream's table
/// (e.g. `[tasks]` keys).
async fn setup_with(config: &str) -> Setup {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{config}{}", http_upstream("up", &up.url()))).await;
    Setup { up, state, gw }
}

fn requests(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
}

/// The `tasks/get` the upstream has had for task `id`.
fn gets_of(up: &Scripted, id: &str) -> usize {
    requests(up, "tasks/get").iter().filter(|g| g["params"]["taskId"] == id).count()
}

/// The ids of the tasks the upstream was asked to cancel, in order.
fn cancelled_ids(up: &Scripted) -> Vec<String> {
    requests(up, "tasks/cancel").iter().map(|c| c["params"]["taskId"].as_str().unwrap_or("").to_string()).collect()
}

/// The `notifications/tasks/status` among `msgs`, by status.
fn statuses(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m["method"] == "notifications/tasks/status")
        .map(|m| m["params"]["status"].as_str().unwrap_or("").to_string())
        .collect()
}

fn progress_messages(out: &Outcome) -> Vec<String> {
    out.others
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn a_blocking_call_the_upstream_serves_only_as_a_task_is_bridged() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;

    let out = c.request("tools/call", json!({"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}})).await;
    assert_eq!(
        out.result(),
        &json!({"content": [{"type": "text", "text": "slow done after 3 steps"}], "isError": false})
    );
    // Every status message became progress under the client's token, in order, rising.
    assert_eq!(
        progress_messages(&out),
        ["step 0 of 3", "step 1 of 3", "step 2 of 3", "step 3 of 3"],
        "{:?}",
        out.others
    );
    let values = out.progress();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert!(out.others.iter().all(|m| m["params"]["progressToken"] == "p"), "{:?}", out.others);

    // Sent plain first, then once declaring the extension; followed by tasks/get, declaring it.
    let calls = requests(&s.up, "tools/call");
    assert_eq!(calls.len(), 2);
    assert!(!declares(&calls[0]) && declares(&calls[1]), "{calls:?}");
    assert!(calls[1]["params"].get("task").is_none());
    let gets = requests(&s.up, "tasks/get");
    assert_eq!(gets.len(), 4, "one per step until terminal");
    assert!(gets.iter().all(|g| declares(g) && g["params"]["taskId"] == "task-1"));
    assert!(requests(&s.up, "tasks/cancel").is_empty(), "a finished task is not cancelled");

    // A plain tool stays plain: no retry, no extension.
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "hi");
    assert_eq!(requests(&s.up, "tools/call").len(), 3);
    // An unknown tool's error passes as it is.
    assert_eq!(c.request("tools/call", json!({"name": "nope", "arguments": {}})).await.error_code(), -32602);
}

#[tokio::test]
async fn a_failed_task_answers_its_inline_error() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-03-26").await;
    let out = c.request("tools/call", json!({"name": "fails", "arguments": {}})).await;
    assert_eq!(out.response["error"], json!({"code": -32000, "message": "boom"}), "{}", out.response);
    assert!(out.progress().is_empty(), "no token, no progress");
}

#[tokio::test]
async fn input_requests_reach_the_client_once_and_go_back_as_tasks_update() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "answer: forty-two", "{}", out.response);
    let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
    assert_eq!(asked.len(), 1, "the key is relayed once, though polls repeat it: {:?}", out.others);
    assert_eq!(asked[0]["params"]["message"], "colour?");
    assert!(asked[0]["params"].get("_meta").is_none(), "no related-task: the task is the gateway's");
    let updates = requests(&s.up, "tasks/update");
    assert_eq!(updates.len(), 1);
    assert!(declares(&updates[0]));
    assert_eq!(
        updates[0]["params"]["inputResponses"],
        json!({"answer": {"action": "accept", "content": {"answer": "forty-two"}}})
    );
}

#[tokio::test]
async fn an_error_answer_to_an_input_request_cancels_the_task() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    let mut events = SseReader::new(resp.into_body());
    let mut answer = None;
    while let Some((_, m)) = events.next().await {
        if m["method"] == "elicitation/create" {
            let refusal = json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32600, "message": "no thanks"}});
            assert_eq!(c.post_raw(serde_json::to_vec(&refusal).unwrap(), &[]).await.status, 202);
        } else if m["id"] == 7 {
            answer = Some(m);
            break;
        }
    }
    let answer = answer.expect("an answer");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("no thanks"), "{answer}");
    let cancels = requests(&s.up, "tasks/cancel");
    assert_eq!(cancels.len(), 1);
    assert!(declares(&cancels[0]) && cancels[0]["params"]["taskId"] == "task-1");
    assert!(requests(&s.up, "tasks/update").is_empty());
}

#[tokio::test]
async fn cancelling_the_call_or_ending_the_session_cancels_the_task() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let msg =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "endless", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    // Once the task exists upstream and is being followed, the client cancels.
    eventually("the task is followed", async || !requests(&s.up, "tasks/get").is_empty()).await;
    c.notify("notifications/cancelled", json!({"requestId": 9, "reason": "enough"})).await;
    eventually("the task is cancelled", async || !requests(&s.up, "tasks/cancel").is_empty()).await;
    assert_eq!(requests(&s.up, "tasks/cancel")[0]["params"]["taskId"], "task-1");
    assert_eq!(s.state.lock().unwrap().tasks["task-1"].status, "cancelled");
    drop(resp);

    // A second call, then the session ends (DELETE): its task is cancelled too.
    let msg =
        json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "endless", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    eventually("task-2 is followed", async || {
        requests(&s.up, "tasks/get").iter().any(|g| g["params"]["taskId"] == "task-2")
    })
    .await;
    assert_eq!(c.delete().await, 200);
    eventually("task-2 is cancelled", async || requests(&s.up, "tasks/cancel").len() == 2).await;
    assert_eq!(requests(&s.up, "tasks/cancel")[1]["params"]["taskId"], "task-2");
    drop(resp);
}

#[tokio::test]
async fn a_2025_11_25_client_calling_without_a_task_is_bridged_too() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "slow", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "slow done after 3 steps");
    assert!(out.result().get("resultType").is_none() && out.result().get("_meta").is_none(), "{}", out.response);
}

// ---- a 2025-11-25 client with core tasks: translated both ways ----

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

/// A bridged task that shows no change for `request_timeout` fails the call with -32001, and
/// is cancelled upstream.
#[tokio::test]
async fn a_bridged_task_without_change_times_out_and_is_cancelled() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}request_timeout = \"600ms\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "stuck", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("request_timeout"), "{}", out.response);
    eventually("the task is cancelled", async || !requests(&up, "tasks/cancel").is_empty()).await;
    assert_eq!(state.lock().unwrap().tasks["task-1"].status, "cancelled");
}

/// SEP-1391 operations (`[upstream.dialects] sep1391`) in front of an extension server: each
/// runs on the server's own task, declared from the start, and the client polls by token.
#[tokio::test]
async fn sep1391_operations_run_on_extension_tasks() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}[upstream.dialects]\nsep1391 = true\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let mut params = init_params("2025-06-18");
    params["capabilities"]["experimental"] = json!({"sep-1391": {}});
    c.initialize_with(params).await;
    let op = |tool: &str, token: &str| json!({"name": tool, "arguments": {}, "operation": {"token": token}});
    let status = async |c: &HttpMcp, token: &str| {
        let out = c.request_owned("tools/async/status", json!({"token": token})).await;
        out.response.pointer("/result/status").and_then(Value::as_str).unwrap_or("").to_string()
    };

    let started = c.request("tools/call", op("slow", "s1")).await;
    assert_eq!(started.result()["operation"]["status"], "working", "{}", started.response);
    eventually("s1 completes", async || status(&c, "s1").await == "completed").await;
    let got = c.request("tools/async/result", json!({"token": "s1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "slow done after 3 steps", "{}", got.response);
    let calls = requests(&up, "tools/call");
    assert_eq!(calls.len(), 1, "declared from the start, never refused: {calls:?}");
    assert!(declares(&calls[0]));

    // Its question reaches the client's GET stream with the operation's token.
    c.request("tools/call", op("ask", "a1")).await;
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let (_, question) = tokio::time::timeout(STEP, events.next()).await.unwrap().unwrap();
    assert_eq!(question["params"]["_operation"]["token"], "a1", "{question}");
    assert_eq!(status(&c, "a1").await, "input_required");
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await.status, 202);
    eventually("a1 completes", async || status(&c, "a1").await == "completed").await;
    let got = c.request("tools/async/result", json!({"token": "a1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "answer: forty-two");

    // A cancel of the original call cancels the upstream task.
    let call = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": op("endless", "e1")});
    c.post_raw(serde_json::to_vec(&call).unwrap(), &[]).await;
    eventually("e1 is followed", async || requests(&up, "tasks/get").iter().any(|g| g["params"]["taskId"] == "task-3"))
        .await;
    c.notify("notifications/cancelled", json!({"requestId": 500})).await;
    assert_eq!(status(&c, "e1").await, "canceled");
    eventually("the upstream task is cancelled", async || {
        requests(&up, "tasks/cancel").iter().any(|r| r["params"]["taskId"] == "task-3")
    })
    .await;
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
