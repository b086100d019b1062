//! Progress discipline on every forwarded call, against a scripted upstream that breaks the
//! rules: values must rise, tokens must be known and active, bursts are coalesced.

use crate::common;

use common::*;
use serde_json::json;
use std::time::Duration;

fn caps() -> serde_json::Value {
    json!({"tools": {}})
}

#[tokio::test]
async fn non_rising_unknown_and_late_progress_is_dropped() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, caps()),
        "tools/call" => {
            let tok = req["params"]["_meta"]["progressToken"].clone();
            vec![
                progress(&tok, 1.0),
                progress(&tok, 1.0),
                progress(&tok, 0.5),
                progress(&json!("someone-else"), 5.0),
                progress(&tok, 2.0),
                Step::Sleep(20),
                reply(req, json!({"content": [{"type": "text", "text": "done"}]})),
                progress(&tok, 3.0),
            ]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw =
        start_gateway(&format!("[server]\nprogress_min_interval = \"0ms\"\n{}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
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
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, caps()),
        "tools/call" => {
            let tok = req["params"]["_meta"]["progressToken"].clone();
            let mut steps: Vec<Step> = (1..=200).map(|i| progress(&tok, i as f64)).collect();
            steps.push(reply(req, json!({"content": []})));
            steps
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("[server]\nprogress_min_interval = \"200ms\"\n{}", http_upstream("up", &up.url())))
        .await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    let p = out.progress();
    assert!(p.len() <= 3, "200 notifications in a burst became {}: {p:?}", p.len());
    assert_eq!(p.first(), Some(&1.0));
    assert_eq!(p.last(), Some(&200.0), "the latest value got through before the result");
}

#[tokio::test]
async fn spaced_progress_is_not_delayed() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, caps()),
        "tools/call" => {
            let tok = req["params"]["_meta"]["progressToken"].clone();
            let mut steps = vec![];
            for i in 1..=4 {
                steps.push(progress(&tok, i as f64));
                steps.push(Step::Sleep(60));
            }
            steps.push(reply(req, json!({"content": []})));
            steps
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw =
        start_gateway(&format!("[server]\nprogress_min_interval = \"20ms\"\n{}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}, "_meta": {"progressToken": "t"}})).await;
    assert_eq!(out.progress(), vec![1.0, 2.0, 3.0, 4.0]);
}
