//! JSON-RPC batches (2025-03-26 sessions only): bounded, exactly one answer per request,
//! and a stream that always ends.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// Every message of a batch answer (an event stream or a JSON array), read to its end
/// within a few seconds: a stream that never ends fails the test.
async fn batch_answer(c: &HttpMcp, batch: &Value) -> (u16, Vec<Value>) {
    let resp = c.post_streaming(body(batch), &[]).await;
    let status = resp.status().as_u16();
    let ct = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let bytes = tokio::time::timeout(Duration::from_secs(5), http_body_util::BodyExt::collect(resp.into_body()))
        .await
        .expect("the batch's answer never ended")
        .unwrap()
        .to_bytes();
    let msgs = if ct.starts_with("text/event-stream") {
        let mut d = taskgate::sse::Decoder::new(1 << 24);
        d.feed(&bytes)
            .unwrap()
            .into_iter()
            .filter(|e| !e.data.is_empty())
            .map(|e| serde_json::from_str(&e.data).unwrap())
            .collect()
    } else {
        match serde_json::from_slice::<Value>(&bytes).unwrap() {
            Value::Array(items) => items,
            one => vec![one],
        }
    };
    (status, msgs)
}

async fn session(gw: &Gw) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-03-26").await;
    c
}

fn echo(id: i64, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}})
}

#[tokio::test]
async fn a_batch_over_max_batch_is_refused_whole() {
    let gw = start_gateway(&format!("[server]\nmax_batch = 4\n{}", builtin_upstream("demo"))).await;
    let c = session(&gw).await;
    let five: Vec<Value> = (0..5).map(|i| echo(100 + i, "x")).collect();
    let r = c.post_raw(body(&json!(five)), &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32600);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains('4'), "names the limit: {}", r.json());
    let four: Vec<Value> = (0..4).map(|i| echo(200 + i, "y")).collect();
    let (status, msgs) = batch_answer(&c, &json!(four)).await;
    assert_eq!(status, 200);
    assert_eq!(msgs.len(), 4);
}

#[tokio::test]
async fn a_batch_with_no_accepted_request_ends_with_its_errors() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = session(&gw).await;
    let batch = json!([
        {"jsonrpc": "2.0", "bogus": true},
        {"jsonrpc": "2.0", "id": 31, "method": "initialize", "params": init_params("2025-03-26")},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
    ]);
    let (status, msgs) = batch_answer(&c, &batch).await;
    assert_eq!(status, 200);
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs.iter().all(|m| m["error"]["code"] == -32600), "{msgs:?}");
    assert!(msgs.iter().any(|m| m["id"] == 31));
}

#[tokio::test]
async fn duplicate_ids_in_a_batch_get_one_answer_each() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = session(&gw).await;
    let batch = json!([echo(41, "first"), echo(41, "second"), echo(42, "third")]);
    let (status, msgs) = batch_answer(&c, &batch).await;
    assert_eq!(status, 200);
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let with_41: Vec<&Value> = msgs.iter().filter(|m| m["id"] == 41).collect();
    assert_eq!(with_41.len(), 2, "{msgs:?}");
    assert!(with_41.iter().any(|m| m["result"]["content"][0]["text"] == "first"), "the first keeps its result");
    assert!(with_41.iter().any(|m| m["error"]["code"] == -32600), "the duplicate is refused");
    assert!(msgs.iter().any(|m| m["id"] == 42 && m["result"]["content"][0]["text"] == "third"));
    // An id still in flight on another POST is refused for that entry only.
    let slow = json!({"jsonrpc": "2.0", "id": 43, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 800, "steps": 1}}});
    let pending = c.post_streaming(body(&slow), &[]).await;
    let (_, msgs) = batch_answer(&c, &json!([echo(43, "clash"), echo(44, "fine")])).await;
    assert_eq!(msgs.len(), 2, "{msgs:?}");
    assert!(msgs.iter().any(|m| m["id"] == 43 && m["error"]["code"] == -32600), "{msgs:?}");
    assert!(msgs.iter().any(|m| m["id"] == 44 && m["result"]["content"][0]["text"] == "fine"), "{msgs:?}");
    assert_eq!(first_message(&read_all(pending).await)["result"]["content"][0]["text"], "done after 1 steps");
}

#[tokio::test]
async fn a_full_batch_gets_every_response_even_with_a_small_event_buffer() {
    let gw = start_gateway(&format!("[server]\nevent_buffer = 16\n{}", builtin_upstream("demo"))).await;
    let c = session(&gw).await;
    let batch: Vec<Value> = (0..64).map(|i| echo(1000 + i, &format!("n{i}"))).collect();
    let (status, msgs) = batch_answer(&c, &json!(batch)).await;
    assert_eq!(status, 200);
    assert_eq!(msgs.len(), 64, "one answer per request");
    for i in 0..64 {
        let m = msgs.iter().find(|m| m["id"] == 1000 + i).unwrap_or_else(|| panic!("no answer to {}", 1000 + i));
        assert_eq!(m["result"]["content"][0]["text"], format!("n{i}"));
    }
}

#[tokio::test]
async fn a_json_only_batch_is_answered_with_one_json_array() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = session(&gw).await;
    let slow = json!({"jsonrpc": "2.0", "id": 51, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": 300, "steps": 3}, "_meta": {"progressToken": 5}}});
    let batch = json!([slow, echo(52, "quick"), {"jsonrpc": "2.0", "bogus": true}]);
    let r = c.post_raw(body(&batch), &[("accept", "application/json")]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    let msgs = r.json();
    let msgs = msgs.as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs.iter().any(|m| m["id"] == 51 && m["result"]["content"][0]["text"] == "done after 3 steps"));
    assert!(msgs.iter().any(|m| m["id"] == 52 && m["result"]["content"][0]["text"] == "quick"));
    assert!(msgs.iter().any(|m| m["error"]["code"] == -32600));
}
