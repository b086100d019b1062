//! Regressions found by a hostile review of the by-token dialects: concurrent starts of one
//! operation token, cancels of reused ids, states left in `input-required` or `working`,
//! retention across upstreams, and a bridged operation's questions.

use crate::common;

use common::dialects::*;
use common::*;
use serde_json::{Value, json};

const DIALECTS: &str = "[upstream.dialects]\nprogress_get = true\nsep1391 = true\nretention = \"10m\"\n";

fn op_call(tool: &str, args: Value, token: &str) -> Value {
    json!({"name": tool, "arguments": args, "operation": {"token": token, "keepAlive": 60}})
}

/// A scripted upstream whose listing takes a while, so that concurrent starts overlap.
async fn slow_listing_upstream() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => {
            vec![Step::Sleep(300), reply(req, json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}))]
        }
        "tools/call" => vec![Step::Sleep(500), reply(req, json!({"content": [{"type": "text", "text": "done"}]}))],
        _ => vec![],
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_token_starts_one_operation_however_many_calls_race() {
    let up = slow_listing_upstream().await;
    let gw = start_gateway(&format!("{}era = \"legacy\"\n{DIALECTS}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize_with(sep_params("2025-06-18")).await;
    let mut handles = vec![];
    for _ in 0..4 {
        let mut d = HttpMcp::new(&gw.url("up"));
        d.session = c.session.clone();
        d.version = c.version.clone();
        handles.push(tokio::spawn(async move { d.request_owned("tools/call", op_call("t", json!({}), "dup")).await }));
    }
    let mut codes = vec![];
    for h in handles {
        let out = h.await.unwrap();
        codes.push(match out.response.pointer("/result/operation/status") {
            Some(_) => 0,
            None => out.error_code(),
        });
    }
    codes.sort();
    assert_eq!(codes, [-32602, -32602, -32602, 0], "one accepted, the others refused as reused");
    eventually("the one operation completes", async || {
        let out = c.request_owned("tools/async/status", json!({"token": "dup"})).await;
        out.response.pointer("/result/status") == Some(&json!("completed"))
    })
    .await;
    let calls = up.received.lock().unwrap().iter().filter(|m| m["method"] == "tools/call").count();
    assert_eq!(calls, 1, "one call upstream");
}

#[tokio::test]
async fn a_cancel_of_a_reused_id_is_the_request_in_flights() {
    let mut c = StdioMcp::start(&format!("{}{DIALECTS}", stdio_demo_upstream("demo")), "demo").await;
    c.initialize_with(sep_params("2025-06-18")).await;
    c.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call",
        "params": op_call("slow", json!({"duration_ms": 60_000, "steps": 60}), "long")}))
        .await;
    assert_eq!(c.wait_response(50).await.result()["operation"]["status"], "working");
    // The id is free again: the client reuses it, then cancels that request.
    c.send(&json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": slow(60_000, 60, json!({"progressToken": "r"}))}))
        .await;
    stdio_state_becomes(&mut c, "r", "working").await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 50}})).await;
    stdio_state_becomes(&mut c, "r", "failed").await;
    let st = c.request("tools/async/status", json!({"token": "long"})).await;
    assert_eq!(st.result()["status"], "working", "the operation is not the cancelled request");
    // With nothing in flight under the id, the cancel is the operation's.
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 50}})).await;
    eventually("the operation is canceled", async || {
        c.request("tools/async/status", json!({"token": "long"})).await.result()["status"] == "canceled"
    })
    .await;
}

#[tokio::test]
async fn one_requests_end_leaves_another_requests_question_pending_and_then_answered() {
    let mut c = StdioMcp::start(&format!("{}{DIALECTS}", stdio_demo_upstream("demo")), "demo").await;
    c.initialize("2025-06-18").await;
    let ask = json!({"name": "ask", "arguments": {}, "_meta": {"progressToken": "s"}});
    c.send(&json!({"jsonrpc": "2.0", "id": 201, "method": "tools/call", "params": ask})).await;
    let q = loop {
        let m = c.recv().await;
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    // A second request under the token ends while the question waits: still asked.
    let echo = json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": "s"}});
    c.request("tools/call", echo).await;
    assert_eq!(stdio_state(&mut c, "s").await, "input-required");
    c.send(&json!({"jsonrpc": "2.0", "id": 203, "method": "tools/call", "params": slow(60_000, 60, json!({"progressToken": "s"}))}))
        .await;
    c.send(&answer(&q)).await;
    c.wait_response(201).await;
    stdio_state_becomes(&mut c, "s", "working").await;
}

/// A client that reuses an id still in flight breaks JSON-RPC: the refusal may end the first
/// request's state, but nothing stays `working` for ever (pinned against the limits).
#[tokio::test]
async fn a_duplicate_id_in_flight_pins_no_state() {
    let mut c = StdioMcp::start(&format!("{}{DIALECTS}", stdio_demo_upstream("demo")), "demo").await;
    c.initialize("2025-06-18").await;
    c.send(&json!({"jsonrpc": "2.0", "id": 300, "method": "tools/call", "params": slow(300, 1, json!({"progressToken": "d1"}))}))
        .await;
    let echo = json!({"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": "d2"}});
    c.send(&json!({"jsonrpc": "2.0", "id": 300, "method": "tools/call", "params": echo})).await;
    let mut answers = vec![c.wait_response(300).await.response, c.wait_response(300).await.response];
    answers.sort_by_key(|a| a.get("error").is_none());
    assert_eq!(answers[0]["error"]["code"], -32600, "the duplicate is refused: {answers:?}");
    let d1 = stdio_state(&mut c, "d1").await;
    assert!(d1 == "completed" || d1 == "failed", "d1 ended: {d1}");
    assert_eq!(stdio_state(&mut c, "d2").await, "", "the refused request was never followed");
}

#[tokio::test]
async fn a_bridged_operations_question_is_the_gateways_and_its_answer_completes_it() {
    // 2025-11-25 tasks upstream (legacy era): the operation is bridged to them.
    let upstream = start_gateway(&builtin_upstream("demo")).await;
    let config = format!(
        "{}era = \"legacy\"\n[upstream.dialects]\nsep1391 = true\n",
        http_upstream("up", &upstream.url("demo"))
    );
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize_with(sep_params("2025-11-25")).await;
    let started = c.request("tools/call", op_call("ask", json!({}), "b-ask")).await;
    assert_eq!(started.result()["operation"]["status"], "working", "{}", started.response);
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let question = loop {
        let (_, m) = tokio::time::timeout(STEP, events.next()).await.unwrap().unwrap();
        if m["method"] == "elicitation/create" {
            break m;
        }
        // Status notifications of the operation's task carry its token too.
        if m["method"] == "notifications/tasks/status" {
            assert_eq!(m["params"]["_operation"]["token"], "b-ask", "{m}");
        }
    };
    assert_eq!(question["params"]["_operation"]["token"], "b-ask");
    assert!(
        question.pointer("/params/_meta/io.modelcontextprotocol~1related-task").is_none(),
        "the upstream's task is the gateway's: {question}"
    );
    let st = c.request("tools/async/status", json!({"token": "b-ask"})).await;
    assert_eq!(st.result()["status"], "input_required");
    c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await;
    eventually("the operation completes", async || {
        let out = c.request_owned("tools/async/status", json!({"token": "b-ask"})).await;
        out.response.pointer("/result/status") == Some(&json!("completed"))
    })
    .await;
    let got = c.request("tools/async/result", json!({"token": "b-ask"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "answer: forty-two", "{}", got.response);
}

#[tokio::test]
async fn each_upstreams_retention_holds_whatever_the_others_is() {
    let config = format!(
        "{}[upstream.dialects]\nprogress_get = true\nretention = \"24h\"\n{}[upstream.dialects]\nprogress_get = true\nretention = \"200ms\"\n",
        builtin_upstream("long"),
        builtin_upstream("short")
    );
    let gw = start_gateway(&config).await;
    let mut a = HttpMcp::new(&gw.url("long"));
    a.initialize("2025-06-18").await;
    a.request("tools/call", slow(10, 1, json!({"progressToken": "x"}))).await;
    let mut b = HttpMcp::new(&gw.url("short"));
    b.initialize("2025-06-18").await;
    b.request("tools/call", slow(10, 1, json!({"progressToken": "y"}))).await;
    eventually("the short retention passes", async || {
        let got = b.request_owned("progress/get", json!({"progressToken": "y"})).await;
        got.response.pointer("/error/code") == Some(&json!(-32602))
    })
    .await;
    let kept = a.request("progress/get", json!({"progressToken": "x"})).await;
    assert_eq!(kept.result()["_meta"]["progress"]["state"], "completed");
}

#[tokio::test]
async fn a_withdrawn_question_no_longer_makes_its_request_wait() {
    let up = Scripted::start(|req| {
        let id = req["id"].clone();
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}})),
            "tools/list" => vec![reply(req, json!({"tools": [{"name": "hang", "inputSchema": {"type": "object"}}]}))],
            "tools/call" => vec![
                Step::Send(json!({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
                    "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}}})),
                Step::Sleep(200),
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "e1", "reason": "never mind"}})),
                Step::Sleep(5000),
                Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}})),
            ],
            _ => vec![],
        }
    })
    .await;
    let config =
        format!("{}era = \"legacy\"\n[upstream.dialects]\nprogress_get = true\n", http_upstream("up", &up.url()));
    let mut c = StdioMcp::start(&config, "up").await;
    c.initialize("2025-06-18").await;
    c.send(&json!({"jsonrpc": "2.0", "id": 400, "method": "tools/call",
        "params": {"name": "hang", "arguments": {}, "_meta": {"progressToken": "w"}}}))
        .await;
    loop {
        let m = c.recv().await;
        if m["method"] == "notifications/cancelled" {
            break;
        }
    }
    stdio_state_becomes(&mut c, "w", "working").await;
}

#[tokio::test]
async fn a_client_that_did_not_opt_in_is_outdated_whatever_its_operation_says() {
    let gw = start_gateway(&format!("{}{DIALECTS}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    for op in [json!("not an object"), json!({"keepAlive": -1}), json!({"token": "ok"})] {
        let call = json!({"name": "echo", "arguments": {}, "operation": op});
        assert_eq!(c.request("tools/call", call).await.error_code(), -32600, "{op}");
    }
}
