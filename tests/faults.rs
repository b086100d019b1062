//! Upstream faults: a stdio server that dies mid-call, an HTTP upstream that is not there.

use crate::common;

use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

async fn dies_mid_call(client: &mut Mcp) {
    client.initialize("2025-06-18").await;
    // Two calls in flight when the child exits: `slow` would take 10 s; `crash` ends the process.
    let (slow, crash) = match client {
        Mcp::Http(c) => {
            let start = Instant::now();
            let (slow, crash) = tokio::join!(
                c.request_owned("tools/call", json!({"name": "slow", "arguments": {"duration_ms": 10000, "steps": 2}})),
                c.request_owned("tools/call", json!({"name": "crash", "arguments": {"delay_ms": 200}})),
            );
            assert!(start.elapsed() < Duration::from_secs(3), "errors came after {:?}", start.elapsed());
            (slow, crash)
        }
        Mcp::Stdio(c) => {
            c.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 10000, "steps": 2}}})).await;
            c.send(&json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call", "params": {"name": "crash", "arguments": {"delay_ms": 200}}})).await;
            let start = Instant::now();
            let slow = c.wait_response(100).await;
            let crash = c.wait_response(101).await;
            assert!(start.elapsed() < Duration::from_secs(3), "errors came after {:?}", start.elapsed());
            (slow, crash)
        }
    };
    for out in [&slow, &crash] {
        assert_eq!(out.error_code(), -32000, "{}", out.response);
        let msg = out.response["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("'up'") && msg.contains("exit status: 3"),
            "the error names the upstream and its exit status: {msg}"
        );
    }
    // The next request gets a fresh link, transparently re-initialized.
    let echo = client.request("tools/call", json!({"name": "echo", "arguments": {"text": "back"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "back");
}

#[tokio::test]
async fn stdio_upstream_dies_mid_call_over_http() {
    let gw = start_gateway(&stdio_demo_upstream("up")).await;
    dies_mid_call(&mut Mcp::Http(HttpMcp::new(&gw.url("up")))).await;
}

#[tokio::test]
async fn stdio_upstream_dies_mid_call_over_stdio() {
    dies_mid_call(&mut Mcp::Stdio(StdioMcp::start(&stdio_demo_upstream("up"), "up").await)).await;
}

#[tokio::test]
async fn unreachable_http_upstream_is_a_clear_error() {
    // A port nothing listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gw = start_gateway(&http_upstream("up", &format!("http://user:pw@127.0.0.1:{port}/mcp?api_key=sekrit"))).await;
    let c = HttpMcp::new(&gw.url("up"));
    let start = Instant::now();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")});
    let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    assert!(start.elapsed() < Duration::from_secs(5));
    let msg = first_message(&r);
    assert_eq!(msg["error"]["code"], -32000, "{msg}");
    let text = msg["error"]["message"].as_str().unwrap();
    assert!(text.contains("upstream 'up'"), "{msg}");
    // The URL is shown without its secrets.
    assert!(text.contains(&format!("http://***@127.0.0.1:{port}/mcp?…")), "{msg}");
    assert!(!text.contains("pw") && !text.contains("sekrit"), "{msg}");
    assert!(r.headers.get("mcp-session-id").is_none(), "a failed initialize starts no session");
    assert_eq!(gw.server.session_count(), 0);
}

#[tokio::test]
async fn a_command_that_cannot_start_is_a_clear_error() {
    let mut c = StdioMcp::start("[[upstream]]\nname = \"up\"\ncommand = \"/nonexistent/server\"\n", "up").await;
    let out = c.request("initialize", init_params("2025-06-18")).await;
    assert_eq!(out.error_code(), -32000);
    let text = out.response["error"]["message"].as_str().unwrap();
    assert!(text.contains("upstream 'up'") && text.contains("/nonexistent/server"), "names the command: {text}");
}

#[tokio::test]
async fn taskgate_stdio_answers_a_line_that_is_not_utf8_and_goes_on() {
    let mut c = StdioMcp::start(&format!("[server]\nmax_body_bytes = 4096\n{}", builtin_upstream("up")), "up").await;
    c.initialize("2025-06-18").await;
    c.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":50,\"method\":\"ping\",\"params\":{\"x\":\"\xff\"}}").await;
    let err = c.recv().await;
    assert_eq!(err["error"]["code"], -32700, "{err}");
    assert_eq!(err["id"], serde_json::Value::Null, "{err}");
    // A request over max_body_bytes is answered under its own id.
    let long =
        format!("{{\"jsonrpc\":\"2.0\",\"id\":51,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}", "y".repeat(5000));
    c.send_line(&long).await;
    let err = c.recv().await;
    assert_eq!((err["id"].clone(), err["error"]["code"].clone()), (json!(51), json!(-32600)), "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("max_body_bytes"), "names the limit: {err}");
    // Still serving.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    assert!(c.child.try_wait().unwrap().is_none(), "taskgate stdio exited");
}

#[tokio::test]
async fn taskgate_stdio_refuses_a_line_of_too_many_values_under_its_id_and_goes_on() {
    let config = format!("[server]\nmax_body_values = 1000\n{}", builtin_upstream("up"));
    let mut c = StdioMcp::start(&config, "up").await;
    c.initialize("2025-06-18").await;
    let pad = vec!["{}"; 800].join(",");
    c.send_line(&format!(r#"{{"jsonrpc":"2.0","id":52,"method":"ping","params":{{"pad":[{pad}]}}}}"#)).await;
    let err = c.recv().await;
    assert_eq!((err["id"].clone(), err["error"]["code"].clone()), (json!(52), json!(-32600)), "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("max_body_values"), "names the limit: {err}");
    let pad = vec!["{}"; 300].join(",");
    c.send_line(&format!(r#"{{"jsonrpc":"2.0","id":53,"method":"ping","params":{{"pad":[{pad}]}}}}"#)).await;
    assert_eq!(c.recv().await["result"], json!({}));
    assert!(c.child.try_wait().unwrap().is_none(), "taskgate stdio exited");
}

/// The client's answer to a server request, too long to read, fails that request at once
/// (the upstream gets an error response) instead of leaving it waiting for request_timeout.
#[tokio::test]
async fn taskgate_stdio_fails_the_server_request_a_too_long_client_answer_was_for() {
    let config = format!("[server]\nmax_body_bytes = 4096\n{}", builtin_upstream("up"));
    let mut c = StdioMcp::start(&config, "up").await;
    c.initialize("2025-06-18").await;
    c.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "q?"}}}))
        .await;
    let ask = c.recv().await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"].clone(),
        "result": {"action": "accept", "content": {"answer": "z".repeat(5000)}}});
    c.send(&answer).await;
    // Nothing is said to the client about its own response; its call ends with the failure.
    let out = c.recv().await;
    assert_eq!(out["id"], 7, "{out}");
    assert_eq!(out["result"]["isError"], true, "{out}");
    let text = out["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("elicitation failed") && text.contains("max_body_bytes"), "{text}");
    assert!(c.child.try_wait().unwrap().is_none(), "taskgate stdio exited");
}
