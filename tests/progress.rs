//! Progress discipline on every forwarded call, against a scripted upstream that breaks the
//! rules: values must rise, tokens must be known and active, bursts are coalesced.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::Duration;

/// A tools-only server whose `tools/call` plays `steps(request, its progress token)`.
async fn progress_server(steps: fn(&Value, &Value) -> Vec<Step>) -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => steps(req, &req["params"]["_meta"]["progressToken"]),
        _ => vec![reply(req, json!({}))],
    })
    .await
}

/// A session with a gateway in front of `up` that passes progress on at most every `min_interval`.
async fn session(up: &Scripted, min_interval: &str) -> (Gw, HttpMcp) {
    let config = format!("[server]\nprogress_min_interval = \"{min_interval}\"\n{}", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    (gw, c)
}

#[tokio::test]
async fn non_rising_unknown_and_late_progress_is_dropped() {
    let up = progress_server(|req, tok| {
        vec![
            progress(tok, 1.0),
            progress(tok, 1.0),
            progress(tok, 0.5),
            progress(&json!("someone-else"), 5.0),
            progress(tok, 2.0),
            Step::Sleep(20),
            reply(req, json!({"content": [{"type": "text", "text": "done"}]})),
            progress(tok, 3.0),
        ]
    })
    .await;
    let (_gw, mut c) = session(&up, "0ms").await;
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": 7}})).await;
    assert_eq!(out.result()["content"][0]["text"], "done");
    assert_eq!(out.progress(), vec![1.0, 2.0]);
    assert!(out.others.iter().all(|m| m["params"]["progressToken"] == 7));
    let late = tokio::time::timeout(Duration::from_millis(300), get_stream.next()).await;
    assert!(late.is_err(), "nothing follows the end of the operation: {late:?}");
}

#[tokio::test]
async fn bursts_coalesce_and_the_latest_value_comes_before_the_result() {
    let up = progress_server(|req, tok| {
        let mut steps: Vec<Step> = (1..=200).map(|i| progress(tok, i as f64)).collect();
        steps.push(reply(req, json!({"content": []})));
        steps
    })
    .await;
    let (_gw, mut c) = session(&up, "200ms").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    let p = out.progress();
    // The burst allowance (10 by default) passes whole, as a direct client would see it; the
    // rest is coalesced, the interval being far longer than the burst.
    assert_eq!(p[..10], (1..=10).map(f64::from).collect::<Vec<_>>(), "{p:?}");
    assert!(p.len() <= 13, "200 notifications in a burst became {}: {p:?}", p.len());
    assert_eq!(p.last(), Some(&200.0), "the latest value got through before the result");
}

#[tokio::test]
async fn a_burst_within_the_allowance_reaches_the_client_whole_and_a_burst_of_one_coalesces() {
    let up = progress_server(|req, tok| {
        let mut steps: Vec<Step> = (1..=3).map(|i| progress(tok, i as f64)).collect();
        steps.push(reply(req, json!({"content": []})));
        steps
    })
    .await;
    // Three steps back to back, as a server reports a short operation: all three, as direct.
    let (_gw, mut c) = session(&up, "1s").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    assert_eq!(out.progress(), vec![1.0, 2.0, 3.0]);
    // With no burst allowed, the first goes and the latest comes before the result.
    let config =
        format!("[server]\nprogress_min_interval = \"1s\"\nprogress_burst = 1\n{}", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    assert_eq!(out.progress(), vec![1.0, 3.0]);
}

#[tokio::test]
async fn spaced_progress_is_not_delayed() {
    let up = progress_server(|req, tok| {
        let mut steps = vec![];
        for i in 1..=4 {
            steps.push(progress(tok, i as f64));
            steps.push(Step::Sleep(60));
        }
        steps.push(reply(req, json!({"content": []})));
        steps
    })
    .await;
    let (_gw, mut c) = session(&up, "20ms").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    assert_eq!(out.progress(), vec![1.0, 2.0, 3.0, 4.0]);
}
