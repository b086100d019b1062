//! Upstream Streamable HTTP against a scripted server: a broken SSE response resumed with
//! `Last-Event-ID`, the upstream's GET stream, its session id, and DELETE when the link closes.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

fn note(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

#[tokio::test]
async fn a_broken_upstream_stream_is_resumed_and_the_session_is_deleted_at_the_end() {
    let up = Scripted::start_with_get(|req| {
        if req["http"] == "GET" {
            return match req["lastEventId"].as_str() {
                // Resuming the tools/call stream: the rest of it.
                Some("call-1") => vec![
                    Step::SendWithId("call-2".into(), note("notifications/progress", json!({"progressToken": "t", "progress": 2}))),
                    Step::SendWithId("call-3".into(), json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "resumed"}]}})),
                ],
                Some(_) => vec![],
                // The standalone stream: one log message, then it stays quiet.
                None => vec![
                    Step::Send(note("notifications/message", json!({"level": "info", "data": "from the GET stream"}))),
                    Step::Sleep(5000),
                ],
            };
        }
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "logging": {}})),
            // The response stream breaks after the first event.
            "tools/call" => vec![Step::SendWithId(
                "call-1".into(),
                note("notifications/progress", json!({"progressToken": req["params"]["_meta"]["progressToken"], "progress": 1})),
            )],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());

    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "resumed");
    assert_eq!(out.progress(), vec![1.0, 2.0]);

    let (_, log) = get_stream.next().await.unwrap();
    assert_eq!(log["params"]["data"], "from the GET stream");

    let received = up.received.lock().unwrap().clone();
    let gets: Vec<&Value> = received.iter().filter(|m| m["http"] == "GET").collect();
    assert!(gets.iter().any(|g| g["lastEventId"].is_null()), "the standalone GET stream was opened");
    assert!(gets.iter().any(|g| g["lastEventId"] == "call-1"), "the broken stream was resumed from its last event");

    assert_eq!(c.delete().await, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(up.received_http().contains(&"DELETE".to_string()), "the upstream session was deleted");
}

#[tokio::test]
async fn upstream_http_errors_become_json_rpc_errors() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        // A stream that ends without an answer and without event ids cannot be resumed.
        "tools/call" => vec![],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32000);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("before answering"), "{}", out.response);
    // The session goes on.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

/// A `tools/call` answer whose `content` holds `n` small items.
fn big_result(id: &Value, n: usize) -> Value {
    let items: Vec<Value> = (0..n).map(|i| json!({"type": "text", "text": format!("item {i}")})).collect();
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": items}})
}

#[tokio::test]
async fn an_upstream_response_over_max_body_bytes_is_a_clear_error() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => match req["params"]["name"].as_str().unwrap() {
            "json" => vec![Step::Plain(
                200,
                vec![("content-type", "application/json".into())],
                big_result(&req["id"], 1000).to_string(),
            )],
            // One event of many short `data:` lines (each item on its own line).
            _ => {
                let text = serde_json::to_string_pretty(&big_result(&req["id"], 1000)).unwrap();
                let lines: Vec<String> = text.lines().map(|l| format!("data: {l}\n")).collect();
                vec![Step::Raw(format!("id: e1\n{}\n", lines.concat()))]
            }
        },
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("[server]\nmax_body_bytes = 8192\n{}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    for name in ["json", "sse"] {
        let out = c.request("tools/call", json!({"name": name, "arguments": {}})).await;
        assert_eq!(out.error_code(), -32000, "{name}: {}", out.response);
        let msg = out.response["error"]["message"].as_str().unwrap();
        assert!(msg.contains("response exceeds max_body_bytes"), "{name}: {msg}");
    }
    // The session goes on.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

#[tokio::test]
async fn a_batch_in_an_sse_event_is_delivered_message_by_message() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}, "logging": {}})),
        "tools/call" => vec![Step::Send(json!([
            note("notifications/message", json!({"level": "info", "data": "in a batch"})),
            {"jsonrpc": "2.0", "id": req["id"].clone(), "result": {"content": [{"type": "text", "text": "batched"}]}},
        ]))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("{}request_timeout = \"3s\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "batched");
    assert!(out.others.iter().any(|m| m["params"]["data"] == "in a batch"), "{:?}", out.others);
}
