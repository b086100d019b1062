//! What a request must say: `Accept`, its session's path, `MCP-Protocol-Version`.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

#[tokio::test]
async fn accept_json_alone_never_gets_an_event_stream() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let json_only = [("accept", "application/json")];

    // Longer than json_response_window, with progress: still one JSON body.
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": 400, "steps": 4}, "_meta": {"progressToken": "p"}}});
    let r = c.post_raw(body(&slow), &json_only).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.json()["result"]["content"][0]["text"], "done after 4 steps");

    // A server request while it runs goes to the GET stream, and its answer gets through.
    let get = c.get_raw(&[]).await;
    let mut stream = SseReader::new(get.into_body());
    let ask = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "json?"}}});
    // The POST's headers come with its response: answer the elicitation meanwhile.
    let answering = async {
        let (_, elicit) = stream.next().await.unwrap();
        assert_eq!(elicit["method"], "elicitation/create");
        assert_eq!(c.post_raw(body(&answer(&elicit)), &[]).await.status, 202);
    };
    let (r, ()) = tokio::join!(c.post_raw(body(&ask), &json_only), answering);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.json()["result"]["content"][0]["text"], "answer: forty-two");
}

#[tokio::test]
async fn a_session_is_bound_to_its_upstream_path() {
    let gw = start_gateway(&format!("{}{}", builtin_upstream("a"), builtin_upstream("b"))).await;
    let mut c = HttpMcp::new(&gw.url("a"));
    c.initialize("2025-06-18").await;
    let mut other = HttpMcp::new(&gw.url("b"));
    other.session = c.session.clone();
    other.version = c.version.clone();
    let r = other.post_raw(body(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})), &[]).await;
    assert_eq!(r.status, 404);
    assert_eq!(other.get_raw(&[]).await.status(), 404);
    assert_eq!(other.delete().await, 404);
    assert_eq!(gw.server.session_count(), 1, "the session survives");
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "on a"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "on a");
}

#[tokio::test]
async fn protocol_version_is_checked_on_get_and_delete() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let mut bad = HttpMcp::new(&gw.url("demo"));
    bad.session = c.session.clone();
    bad.version = Some("1999-01-01".into());
    assert_eq!(bad.get_raw(&[]).await.status(), 400);
    assert_eq!(bad.delete().await, 400);
    assert_eq!(gw.server.session_count(), 1, "a refused DELETE ends nothing");
    assert_eq!(c.get_raw(&[]).await.status(), 200);
    assert_eq!(c.delete().await, 200);
}

#[tokio::test]
async fn a_key_the_gateway_reads_twice_is_refused_with_the_request_id() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    // The gateway would route progress by no token, the upstream report it under "b".
    let twice = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":"a","progressToken":"b"}}}"#;
    let r = c.post_raw(twice.to_vec(), &[]).await;
    assert_eq!(r.status, 400);
    let resp = r.json();
    assert_eq!((resp["id"].clone(), resp["error"]["code"].clone()), (json!(7), json!(-32600)), "{resp}");
    assert!(resp["error"]["message"].as_str().unwrap().contains("params._meta.progressToken"), "{resp}");
    // A key it never reads is the upstream's business.
    let unread = br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x","text":"y"}}}"#;
    let r = c.post_raw(unread.to_vec(), &[("accept", "application/json")]).await;
    assert_eq!(r.json()["result"]["content"][0]["text"], "y");
}
