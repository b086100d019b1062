//! Downstream Streamable HTTP: sessions, headers, bad input, limits, batches, resumption.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

async fn session(gw: &Gw, version: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize(version).await;
    c
}

async fn still_works(c: &mut HttpMcp) {
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "still here");
}

#[tokio::test]
async fn bad_input_gets_a_precise_error_and_harms_nothing() {
    let gw = start_gateway(&format!("[server]\nmax_body_bytes = 2048\n{}", builtin_upstream("demo"))).await;
    let mut a = session(&gw, "2025-06-18").await;
    let mut b = session(&gw, "2025-06-18").await;

    let r = a.post_raw(b"{not json".to_vec(), &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32700);

    for bad in [
        json!({"hello": "world"}),
        json!({"jsonrpc": "2.0", "id": 5}),
        json!({"jsonrpc": "2.0", "id": 5, "method": 3}),
        json!(7),
    ] {
        let r = a.post_raw(body(&bad), &[]).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.json()["error"]["code"], -32600, "{bad}");
    }

    let big = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x".repeat(4096)}}});
    let r = a.post_raw(body(&big), &[]).await;
    assert_eq!(r.status, 413);

    let r = a
        .post_raw(body(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"})), &[("content-type", "text/plain")])
        .await;
    assert_eq!(r.status, 415);

    // A batch is not allowed in a 2025-06-18 session.
    let r = a.post_raw(body(&json!([{"jsonrpc": "2.0", "id": 10, "method": "ping"}])), &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32600);

    let r = a
        .post_raw(
            body(&json!({"jsonrpc": "2.0", "id": 11, "method": "ping"})),
            &[("mcp-protocol-version", "1999-01-01")],
        )
        .await;
    assert_eq!(r.status, 400);

    // A second initialize in the same session is refused.
    let again = a.request("initialize", init_params("2025-06-18")).await;
    assert_eq!(again.error_code(), -32600);

    still_works(&mut a).await;
    still_works(&mut b).await;
    assert_eq!(gw.server.session_count(), 2);
}

#[tokio::test]
async fn sessions_are_required_random_and_end_with_delete() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut no_session = HttpMcp::new(&gw.url("demo"));
    let r = no_session.post_raw(body(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})), &[]).await;
    assert_eq!(r.status, 400);

    no_session.session = Some("0123456789abcdef0123456789abcdef".into());
    let r = no_session.post_raw(body(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})), &[]).await;
    assert_eq!(r.status, 404);

    let a = session(&gw, "2025-11-25").await;
    let b = session(&gw, "2025-11-25").await;
    let (sa, sb) = (a.session.clone().unwrap(), b.session.clone().unwrap());
    assert_ne!(sa, sb);
    assert_eq!(sa.len(), 32);
    assert!(sa.bytes().all(|c| c.is_ascii_hexdigit()));

    assert_eq!(a.delete().await, 200);
    let r = a.post_raw(body(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})), &[]).await;
    assert_eq!(r.status, 404);
    assert_eq!(a.get_raw(&[]).await.status(), 404);
    assert_eq!(gw.server.session_count(), 1);

    let other = HttpMcp::new(&format!("http://{}/nope", gw.addr));
    assert_eq!(other.post_raw(body(&json!({})), &[]).await.status, 404);
}

#[tokio::test]
async fn origin_and_host_are_checked() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let init = body(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")}));
    let r = c.post_raw(init.clone(), &[("origin", "https://evil.example")]).await;
    assert_eq!(r.status, 403);
    let r = c.post_raw(init.clone(), &[("host", "evil.example:8700")]).await;
    assert_eq!(r.status, 403);
    assert_eq!(gw.server.session_count(), 0);
    let r = c.post_raw(init, &[("origin", "http://localhost:5173")]).await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn session_limit_and_idle_timeout() {
    let gw = start_gateway(&format!(
        "[server]\nmax_sessions = 2\nsession_idle_timeout = \"300ms\"\n{}",
        stdio_demo_upstream("demo")
    ))
    .await;
    let _a = session(&gw, "2025-06-18").await;
    let _b = session(&gw, "2025-06-18").await;
    let c = HttpMcp::new(&gw.url("demo"));
    let r = c
        .post_raw(
            body(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")})),
            &[],
        )
        .await;
    assert_eq!(r.status, 503);
    // Both sessions idle out; their links (child processes) go with them.
    eventually("both sessions idled out", async || gw.server.session_count() == 0).await;
    let mut d = session(&gw, "2025-06-18").await;
    still_works(&mut d).await;
}

#[tokio::test]
async fn batches_in_2025_03_26_sessions() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = session(&gw, "2025-03-26").await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "one"}}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": 22, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 1}}},
        {"jsonrpc": "2.0", "bogus": true}
    ]);
    let r = c.post_raw(body(&batch), &[]).await;
    assert_eq!(r.status, 200);
    let mut d = taskgate::sse::Decoder::new(1 << 20);
    let msgs: Vec<Value> =
        d.feed(&r.body).unwrap().into_iter().map(|e| serde_json::from_str(&e.data).unwrap()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let by_id = |id: i64| msgs.iter().find(|m| m["id"] == json!(id)).unwrap().clone();
    assert_eq!(by_id(21)["result"]["content"][0]["text"], "one");
    assert_eq!(by_id(22)["result"]["content"][0]["text"], "2");
    assert!(msgs.iter().any(|m| m["error"]["code"] == -32600));
}

#[tokio::test]
async fn a_broken_stream_resumes_with_last_event_id() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = session(&gw, "2025-11-25").await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": 600, "steps": 6}, "_meta": {"progressToken": 70}}});
    let resp = c.post_streaming(body(&call), &[]).await;
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut events = SseReader::new(resp.into_body());
    let (first_id, first) = events.next().await.unwrap();
    assert_eq!(first["params"]["progress"], 1);
    drop(events); // the connection breaks after the first event

    // Kept: progress must go on while no one is connected, for the resumption to replay it,
    // and nothing outside the session shows what it buffered: two of the call's 100 ms steps.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resumed = c.get_raw(&[("last-event-id", first_id.as_deref().unwrap())]).await;
    assert_eq!(resumed.status(), 200);
    let mut events = SseReader::new(resumed.into_body());
    let mut progress = vec![];
    loop {
        let (_, m) = events.next().await.expect("the resumed stream carries the response");
        if m["id"] == 7 {
            assert_eq!(m["result"]["content"][0]["text"], "done after 6 steps");
            break;
        }
        progress.push(m["params"]["progress"].as_i64().unwrap());
    }
    assert_eq!(progress, vec![2, 3, 4, 5, 6], "exactly the rest of the stream, in order");
    assert!(events.next().await.is_none(), "the stream ends after its response");
}

#[tokio::test]
async fn unrelated_messages_use_the_get_stream() {
    // A stdio upstream cannot say which request its elicitation belongs to: with two calls in
    // flight it goes to the GET stream, and the answer still reaches the upstream.
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = session(&gw, "2025-06-18").await;
    let get = c.get_raw(&[]).await;
    assert_eq!(get.status(), 200);
    let mut stream = SseReader::new(get.into_body());
    let slow = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 1500, "steps": 1}}});
    let slow_post = c.post_streaming(body(&slow), &[]).await;
    let id = c.next_id();
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "where?"}}});
    let post = c.post_streaming(body(&call), &[]).await;
    let (_, elicit) = stream.next().await.unwrap();
    assert_eq!(elicit["method"], "elicitation/create");
    let r = c.post_raw(body(&answer(&elicit)), &[]).await;
    assert_eq!(r.status, 202);
    let out = read_all(post).await;
    assert_eq!(first_message(&out)["result"]["content"][0]["text"], "answer: forty-two");
    assert_eq!(first_message(&read_all(slow_post).await)["result"]["content"][0]["text"], "done after 1 steps");
}

#[tokio::test]
async fn a_stdio_servers_request_during_its_only_call_goes_to_that_calls_stream() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = session(&gw, "2025-06-18").await;
    let get = c.get_raw(&[]).await;
    let mut get_stream = SseReader::new(get.into_body());
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {"question": "here?"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "answer: forty-two");
    assert!(out.others.iter().any(|m| m["method"] == "elicitation/create"), "asked on the call's own stream");
    drop(c);
    let nothing = tokio::time::timeout(Duration::from_millis(200), get_stream.next()).await;
    assert!(nothing.is_err(), "nothing went to the GET stream");
}

#[tokio::test]
async fn cancellation_follows_its_request() {
    for upstream in [builtin_upstream("demo"), stdio_demo_upstream("demo")] {
        let gw = start_gateway(&upstream).await;
        let mut c = session(&gw, "2025-06-18").await;
        let call = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"duration_ms": 5000, "steps": 50}, "_meta": {"progressToken": 9}}});
        let pending = c.post_streaming(body(&call), &[]).await;
        // The response never comes (the call is cancelled), but its first progress does once
        // the upstream runs it.
        let mut events = SseReader::new(pending.into_body());
        let (_, first) = events.next().await.expect("progress before the cancellation");
        assert_eq!(first["method"], "notifications/progress", "{first}");
        assert_eq!(
            c.notify("notifications/cancelled", json!({"requestId": 99, "reason": "changed my mind"})).await,
            202
        );
        eventually("the upstream saw the cancellation", async || {
            stats_cancelled(&c.request("resources/read", json!({"uri": "demo://stats"})).await) == 1
        })
        .await;
    }
}

/// A session in use is not idle: one with its GET stream connected, and one that keeps
/// sending requests, both outlive several idle timeouts; each idles out once left alone.
#[tokio::test]
async fn sessions_in_use_do_not_idle_out() {
    let gw = start_gateway(&format!("[server]\nsession_idle_timeout = \"300ms\"\n{}", builtin_upstream("demo"))).await;
    let listening = session(&gw, "2025-06-18").await;
    let stream = listening.get_raw(&[]).await;
    assert_eq!(stream.status(), 200);
    let mut busy = session(&gw, "2025-06-18").await;
    for _ in 0..9 {
        // Kept: time passing with the session in use is the subject (3 idle timeouts).
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(busy.request("ping", json!({})).await.result(), &json!({}));
    }
    assert_eq!(gw.server.session_count(), 2, "a session in use idled out");
    drop(stream);
    eventually("sessions left alone idle out", async || gw.server.session_count() == 0).await;
}

/// `MCP-Protocol-Version` on GET and DELETE as on POST: absent, or any version the gateway
/// speaks (not only the negotiated one), is accepted; an unknown one is 400 and changes
/// nothing (the session is not deleted).
#[tokio::test]
async fn protocol_version_is_checked_on_get_and_delete_too() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = session(&gw, "2025-06-18").await;
    // The client sends `c.version` as its MCP-Protocol-Version.
    for version in ["1999-01-01", "garbage"] {
        c.version = Some(version.into());
        let r = read_all(c.get_raw(&[]).await).await;
        assert_eq!(r.status, 400, "GET with {version}");
        assert_eq!(r.json()["error"]["code"], -32600);
        let r = c.post_raw(body(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})), &[]).await;
        assert_eq!(r.status, 400, "POST with {version}");
    }
    for version in ["2025-06-18", "2025-11-25", "2025-03-26"] {
        c.version = Some(version.into());
        let get = c.get_raw(&[]).await;
        assert_eq!(get.status(), 200, "GET with {version}");
        drop(get);
    }
    c.version = None;
    let get = c.get_raw(&[]).await;
    assert_eq!(get.status(), 200, "an absent header is accepted");
    drop(get);

    for version in ["1999-01-01", "2025-03-27"] {
        c.version = Some(version.into());
        assert_eq!(c.delete().await, 400, "DELETE with {version}");
    }
    assert_eq!(gw.server.session_count(), 1, "a refused DELETE deletes nothing");
    c.version = Some("2025-06-18".into());
    still_works(&mut c).await;
    assert_eq!(c.delete().await, 200);
    assert_eq!(gw.server.session_count(), 0);
}
