//! The by-token dialects (`[upstream.dialects]`): the progress-state proposal's
//! `progress/get` and SEP-1391 operations, over Streamable HTTP and stdio, in front of the
//! demo server (hosted) and of a task-capable upstream (bridged).

use crate::common;

use common::dialects::*;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const DIALECTS: &str = "[upstream.dialects]\nprogress_get = true\nsep1391 = true\nretention = \"300ms\"\n[upstream.tasks]\nmin_ttl = \"300ms\"\n";

fn demo_with_dialects() -> String {
    format!("{}{DIALECTS}", builtin_upstream("demo"))
}

fn stdio_config() -> String {
    format!("{}{DIALECTS}", stdio_demo_upstream("demo"))
}

fn progress_get(token: &str) -> (&'static str, Value) {
    ("progress/get", json!({"progressToken": token}))
}

fn state(out: &Outcome) -> String {
    out.result()["_meta"]["progress"]["state"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn progress_state_follows_a_call_to_its_result_over_http() {
    let gw = start_gateway(&demo_with_dialects()).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let c = Arc::new(c);
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.request_owned("tools/call", slow(1500, 5, json!({"progressToken": "p1"}))).await })
    };
    eventually("progress/get shows the call working, with its progress", async || {
        let (m, p) = progress_get("p1");
        let out = c.request_owned(m, p).await;
        out.response.get("result").is_some()
            && state(&out) == "working"
            && out.result()["_meta"]["progress"]["progress"].as_f64().is_some_and(|v| v >= 1.0)
    })
    .await;
    let out = call.await.unwrap();
    let meta = &out.result()["_meta"]["progress"];
    assert_eq!(meta["state"], "completed", "{}", out.response);
    assert_eq!(meta["progressToken"], "p1");
    assert!(meta["timestamp"].is_string());
    // Fetched again, and again: the same result.
    for _ in 0..2 {
        let (m, p) = progress_get("p1");
        let got = c.request_owned(m, p).await;
        assert_eq!(state(&got), "completed");
        assert_eq!(got.result()["content"], out.result()["content"]);
        assert_eq!(got.result()["_meta"]["progress"]["progress"], 5);
    }
    // Another session cannot read it; bad and unknown tokens are refused.
    let mut other = HttpMcp::new(&gw.url("demo"));
    other.initialize("2025-06-18").await;
    let (m, p) = progress_get("p1");
    assert_eq!(other.request(m, p).await.error_code(), -32602);
    assert_eq!(c.request_owned("progress/get", json!({})).await.error_code(), -32602);
    assert_eq!(c.request_owned("progress/get", json!({"progressToken": {"x": 1}})).await.error_code(), -32602);
    let (m, p) = progress_get("never-used");
    assert_eq!(c.request_owned(m, p).await.error_code(), -32602);
    // The session still works, and the state expires with its retention.
    let echo = c.request_owned("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "hi");
    eventually("the state expires", async || {
        let (m, p) = progress_get("p1");
        c.request_owned(m, p).await.response.pointer("/error/code") == Some(&json!(-32602))
    })
    .await;
}

#[tokio::test]
async fn progress_state_of_questions_cancels_and_errors_over_stdio() {
    let mut c = StdioMcp::start(&stdio_config(), "demo").await;
    c.initialize("2025-06-18").await;
    // A question: `input-required` until the client answers it.
    let ask = json!({"name": "ask", "arguments": {}, "_meta": {"progressToken": "q1"}});
    c.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": ask})).await;
    let question = loop {
        let m = c.recv().await;
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    let (m, p) = progress_get("q1");
    assert_eq!(state(&c.request(m, p).await), "input-required");
    c.send(&answer(&question)).await;
    let out = c.wait_response(100).await;
    assert_eq!(out.result()["_meta"]["progress"]["state"], "completed");
    let (m, p) = progress_get("q1");
    let got = c.request(m, p).await;
    assert_eq!(got.result()["content"][0]["text"], "answer: forty-two");

    // A cancelled call fails.
    c.send(&json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call", "params": slow(60_000, 60, json!({"progressToken": "c1"}))}))
        .await;
    let (m, p) = progress_get("c1");
    assert_eq!(state(&c.request(m, p).await), "working");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 101}})).await;
    stdio_state_becomes(&mut c, "c1", "failed").await;

    // An error fails, with the error kept.
    let bad = json!({"name": "no-such-tool", "arguments": {}, "_meta": {"progressToken": "e1"}});
    assert_eq!(c.request("tools/call", bad).await.error_code(), -32602);
    let (m, p) = progress_get("e1");
    let got = c.request(m, p).await;
    assert_eq!(state(&got), "failed");
    assert_eq!(got.result()["error"]["code"], -32602);

    // A token reused while its call runs continues its state; once ended, it starts over.
    c.send(&json!({"jsonrpc": "2.0", "id": 102, "method": "tools/call", "params": slow(400, 2, json!({"progressToken": "r1"}))}))
        .await;
    let echo = json!({"name": "echo", "arguments": {"text": "again"}, "_meta": {"progressToken": "r1"}});
    let second = c.request("tools/call", echo).await;
    assert_eq!(second.result()["_meta"]["progress"]["state"], "working", "the first call still runs");
    let first = c.wait_response(102).await;
    assert_eq!(first.result()["_meta"]["progress"]["state"], "completed");
    let (m, p) = progress_get("r1");
    assert_eq!(c.request(m, p).await.result()["content"][0]["text"], "done after 2 steps");
}

#[tokio::test]
async fn without_the_dialect_progress_get_is_the_upstreams_and_results_are_untouched() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", slow(10, 1, json!({"progressToken": "p"}))).await;
    assert!(out.result().get("_meta").is_none(), "{}", out.response);
    let (m, p) = progress_get("p");
    assert_eq!(c.request(m, p).await.error_code(), -32601);
    // Nor is SEP-1391 spoken: the operation parameter is the upstream's to ignore.
    assert_eq!(c.request("tools/async/status", json!({"token": "x"})).await.error_code(), -32601);
}

/// Polls `tools/async/status` until it says `want`.
async fn status_becomes(c: &HttpMcp, token: &str, want: &str) {
    eventually(&format!("operation {token} becomes {want}"), async || {
        let out = c.request_owned("tools/async/status", json!({"token": token})).await;
        out.response.pointer("/result/status") == Some(&json!(want))
    })
    .await;
}

fn op_call(tool: &str, args: Value, token: &str, keep_alive: Value) -> Value {
    json!({"name": tool, "arguments": args, "operation": {"token": token, "keepAlive": keep_alive}})
}

#[tokio::test]
async fn operations_run_hosted_and_their_results_are_fetched_again() {
    let gw = start_gateway(&demo_with_dialects()).await;
    // A client that did not opt in: nothing of the dialect.
    let mut old = HttpMcp::new(&gw.url("demo"));
    old.initialize("2025-06-18").await;
    let tools = old.request("tools/list", json!({})).await;
    assert!(tools.result()["tools"].as_array().unwrap().iter().all(|t| t.get("invocationMode").is_none()));
    let call = op_call("echo", json!({"text": "x"}), "t0", json!(60));
    assert_eq!(old.request("tools/call", call).await.error_code(), -32600);
    assert_eq!(old.request("tools/async/status", json!({"token": "t0"})).await.error_code(), -32600);

    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize_with(sep_params("2025-06-18")).await;
    let tools = c.request("tools/list", json!({})).await;
    let slow_tool = tools.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "slow").unwrap().clone();
    assert_eq!(slow_tool["invocationMode"], "async");

    let started =
        c.request("tools/call", op_call("slow", json!({"duration_ms": 600, "steps": 3}), "op1", json!(60))).await;
    assert_eq!(started.result()["operation"], json!({"keepAlive": 60, "pollFrequency": 1, "status": "working"}));
    assert_eq!(started.result()["content"], json!([]));
    // Not done yet: no result; the token cannot start another.
    assert_eq!(c.request("tools/async/result", json!({"token": "op1"})).await.error_code(), -32602);
    let again = op_call("echo", json!({"text": "x"}), "op1", json!(60));
    assert_eq!(c.request("tools/call", again).await.error_code(), -32602);
    status_becomes(&c, "op1", "completed").await;
    for _ in 0..2 {
        let got = c.request("tools/async/result", json!({"token": "op1"})).await;
        assert_eq!(got.result()["result"]["content"][0]["text"], "done after 3 steps", "{}", got.response);
    }
    // Unknown tokens, bad params, another session's token.
    let missing = c.request("tools/async/status", json!({"token": "nope"})).await;
    assert_eq!(missing.error_code(), -32602);
    assert!(missing.response["error"]["message"].as_str().unwrap().contains("not found"));
    assert_eq!(c.request("tools/async/status", json!({})).await.error_code(), -32602);
    let bad = json!({"name": "echo", "arguments": {}, "operation": {"keepAlive": 5}});
    assert_eq!(c.request("tools/call", bad).await.error_code(), -32602);
    let mut third = HttpMcp::new(&gw.url("demo"));
    third.initialize_with(sep_params("2025-06-18")).await;
    assert_eq!(third.request("tools/async/result", json!({"token": "op1"})).await.error_code(), -32602);

    // A failing tool: failed, with its result (`isError`) still fetchable.
    c.request("tools/call", op_call("fail", json!({}), "op-fail", json!(60))).await;
    status_becomes(&c, "op-fail", "failed").await;
    let got = c.request("tools/async/result", json!({"token": "op-fail"})).await;
    assert_eq!(got.result()["result"]["isError"], true);

    // keepAlive 0 is kept the shortest time allowed, then it has expired.
    c.request("tools/call", op_call("echo", json!({"text": "brief"}), "op-brief", json!(0))).await;
    status_becomes(&c, "op-brief", "completed").await;
    eventually("the operation expires after its keepAlive", async || {
        let out = c.request_owned("tools/async/status", json!({"token": "op-brief"})).await;
        out.response["error"]["message"].as_str().is_some_and(|m| m.contains("expired"))
    })
    .await;
}

#[tokio::test]
async fn a_cancel_of_the_original_request_cancels_the_operation() {
    let gw = start_gateway(&demo_with_dialects()).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize_with(sep_params("2025-11-25")).await;
    let call = json!({"jsonrpc": "2.0", "id": 777, "method": "tools/call",
        "params": op_call("slow", json!({"duration_ms": 60_000, "steps": 60}), "long", json!(60))});
    let resp = c.post_raw(serde_json::to_vec(&call).unwrap(), &[]).await;
    assert_eq!(first_message(&resp)["result"]["operation"]["status"], "working");
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 777})).await, 202);
    status_becomes(&c, "long", "canceled").await;
    assert_eq!(c.request("tools/async/result", json!({"token": "long"})).await.error_code(), -32602);
}

#[tokio::test]
async fn an_operations_questions_carry_its_token_over_stdio() {
    let mut c = StdioMcp::start(&stdio_config(), "demo").await;
    c.initialize_with(sep_params("2025-06-18")).await;
    let started = c.request("tools/call", op_call("ask", json!({}), "ask1", json!(60))).await;
    assert_eq!(started.result()["operation"]["status"], "working");
    let question = loop {
        let m = c.recv().await;
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    assert_eq!(question["params"]["_operation"]["token"], "ask1", "{question}");
    let status = c.request("tools/async/status", json!({"token": "ask1"})).await;
    assert_eq!(status.result()["status"], "input_required");
    let mut reply = answer(&question);
    reply["result"]["_operation"] = json!({"token": "ask1"});
    c.send(&reply).await;
    eventually("the operation completed", async || {
        c.request("tools/async/status", json!({"token": "ask1"})).await.result()["status"] == "completed"
    })
    .await;
    let got = c.request("tools/async/result", json!({"token": "ask1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "answer: forty-two");
}

#[tokio::test]
async fn operations_are_bridged_to_an_upstream_that_runs_tasks() {
    // The upstream: a gateway hosting the demo's tools as 2025-11-25 tasks.
    // Shared, so that one demo server serves every session and its stats count them all.
    let upstream = start_gateway(&format!("{}share = true\n", builtin_upstream("demo"))).await;
    let config = format!("{}[upstream.dialects]\nsep1391 = true\n", http_upstream("up", &upstream.url("demo")));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize_with(sep_params("2025-11-25")).await;
    let tools = c.request("tools/list", json!({})).await;
    let slow_tool = tools.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "slow").unwrap().clone();
    assert_eq!(slow_tool["invocationMode"], "async", "{slow_tool}");
    let started =
        c.request("tools/call", op_call("slow", json!({"duration_ms": 300, "steps": 3}), "b1", json!(60))).await;
    assert_eq!(started.result()["operation"]["status"], "working", "{}", started.response);
    status_becomes(&c, "b1", "completed").await;
    let got = c.request("tools/async/result", json!({"token": "b1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "done after 3 steps", "{}", got.response);

    // Cancelled: the upstream's task is cancelled too.
    let call = json!({"jsonrpc": "2.0", "id": 900, "method": "tools/call",
        "params": op_call("slow", json!({"duration_ms": 60_000, "steps": 60}), "b2", json!(60))});
    c.post_raw(serde_json::to_vec(&call).unwrap(), &[]).await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 900})).await, 202);
    status_becomes(&c, "b2", "canceled").await;
    let mut direct = HttpMcp::new(&upstream.url("demo"));
    direct.initialize("2025-11-25").await;
    eventually("the demo counts the cancelled call", async || {
        let stats = direct.request_owned("resources/read", json!({"uri": "demo://stats"})).await;
        stats.result()["contents"][0]["text"].as_str().is_some_and(|t| t.contains("\"cancelled\":1"))
    })
    .await;
}

#[tokio::test]
async fn over_http_an_operations_question_waits_for_the_get_stream() {
    let gw = start_gateway(&demo_with_dialects()).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize_with(sep_params("2025-06-18")).await;
    c.request("tools/call", op_call("ask", json!({}), "ask-http", json!(60))).await;
    status_becomes(&c, "ask-http", "input_required").await;
    // The question was asked while no stream was open: the GET stream opened now gets it.
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let (_, question) = tokio::time::timeout(STEP, events.next()).await.unwrap().unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["_operation"]["token"], "ask-http");
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await.status, 202);
    status_becomes(&c, "ask-http", "completed").await;
    let got = c.request("tools/async/result", json!({"token": "ask-http"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "answer: forty-two");
}

#[tokio::test]
async fn an_operations_progress_carries_its_token_over_stdio() {
    let mut c = StdioMcp::start(&stdio_config(), "demo").await;
    c.initialize_with(sep_params("2025-06-18")).await;
    let mut call = op_call("slow", json!({"duration_ms": 300, "steps": 3}), "op-p", json!(60));
    call["_meta"] = json!({"progressToken": "pp"});
    let started = c.request("tools/call", call).await;
    assert_eq!(started.result()["operation"]["status"], "working");
    let mut seen = 0;
    while seen < 3 {
        let m = c.recv().await;
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "pp", "{m}");
            assert_eq!(m["params"]["_operation"]["token"], "op-p", "{m}");
            seen += 1;
        }
    }
}

#[tokio::test]
async fn progress_state_in_front_of_an_upstream_that_runs_tasks() {
    let upstream = start_gateway(&builtin_upstream("demo")).await;
    let config = format!("{}[upstream.dialects]\nprogress_get = true\n", http_upstream("up", &upstream.url("demo")));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", slow(300, 3, json!({"progressToken": "t1"}))).await;
    assert_eq!(out.result()["_meta"]["progress"]["state"], "completed", "{}", out.response);
    let (m, p) = progress_get("t1");
    let got = c.request(m, p).await;
    assert_eq!(got.result()["content"][0]["text"], "done after 3 steps");
    assert_eq!(got.result()["_meta"]["progress"]["progress"], 3);
    // A task-augmented call's state is its task's: progress/get does not follow it.
    let mut task_call = slow(10, 1, json!({"progressToken": "t2"}));
    task_call["task"] = json!({"ttl": 60000});
    let created = c.request("tools/call", task_call).await;
    assert!(created.result()["task"]["taskId"].is_string(), "{}", created.response);
    let (m, p) = progress_get("t2");
    assert_eq!(c.request(m, p).await.error_code(), -32602);
}
