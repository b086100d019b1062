//! A 2026-07-28 upstream of the tasks extension (`io.modelcontextprotocol/tasks`) behind
//! legacy clients: blocking calls bridged through its tasks (SEP-1391 operations too). A
//! 2025-11-25 client's core tasks translated to its tasks are `extension_core_tasks`.
//!
//! The scripted server is `common::ext_server`.

use crate::common;

use common::ext_server::{Server, declares, extension_server, requests, setup};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

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
async fn an_input_request_the_client_did_not_declare_fails_the_call() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    let mut params = init_params("2025-06-18");
    params["capabilities"] = json!({"sampling": {}});
    c.initialize_with(params).await;
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32601, "{}", out.response);
    assert_eq!(
        out.response["error"]["message"],
        "the upstream task asked for input: the client does not support elicitation/create"
    );
    assert!(out.others.iter().all(|m| m["method"] != "elicitation/create"), "never asked: {:?}", out.others);
    assert!(requests(&s.up, "tasks/update").is_empty());
    // The task cannot go on without the answer: it is cancelled upstream.
    eventually("the task is cancelled upstream", async || requests(&s.up, "tasks/cancel").len() == 1).await;
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
