//! Upstream Streamable HTTP against a scripted server: a broken SSE response resumed with
//! `Last-Event-ID`, the upstream's GET stream, its session id, and DELETE when the link closes.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taskgate::TransportError;

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
    // The resumed answer names the upstream id the call had with no probe before it.
    let gw = start_gateway(&format!("{}era = \"legacy\"\n", http_upstream("up", &up.url()))).await;
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
    eventually("the upstream session was deleted", async || up.received_http().contains(&"DELETE".to_string())).await;
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
    out.assert_upstream_failed("up", TransportError::StreamEnded);
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
        // The same for a JSON body and for an SSE event.
        out.assert_upstream_failed("up", TransportError::TooLarge { limit: 8192 });
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

#[tokio::test]
async fn a_response_the_gateway_refuses_fails_its_request_at_once() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}, "logging": {}})),
        "tools/call" => {
            let id = &req["id"];
            match req["params"]["name"].as_str().unwrap() {
                // A number beyond f64 in a JSON body.
                "json" => vec![Step::Plain(
                    200,
                    vec![("content-type", "application/json".into())],
                    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"n":1e400}}}}"#),
                )],
                // On a stream that stays open: a malformed notification (dropped), then the
                // answer with its id twice.
                _ => vec![
                    Step::Raw(
                        r#"data: {"jsonrpc":"2.0","method":"notifications/message","method":"x","params":{}}"#
                            .to_string()
                            + "\n\n",
                    ),
                    Step::Raw(format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"id\":{id},\"result\":{{}}}}\n\n")),
                    Step::Sleep(15_000),
                ],
            }
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("{}request_timeout = \"20s\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let start = Instant::now();
    let out = c.request("tools/call", json!({"name": "json", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32000, "{}", out.response);
    let msg = out.response["error"]["message"].as_str().unwrap();
    assert!(msg.contains("unreadable response: parse error: number out of range"), "{msg}");
    let out = c.request("tools/call", json!({"name": "sse", "arguments": {}})).await;
    let why = "invalid request: a key of the envelope appears twice".to_string();
    out.assert_upstream_failed("up", TransportError::BadResponse(why));
    assert!(out.others.is_empty(), "{:?}", out.others);
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    // The session goes on.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

/// A priming event (SEP-1699): an id and a reconnection time, no data.
fn priming(n: u32, retry_ms: u64) -> Step {
    Step::Raw(format!("id: p-{n}\nretry: {retry_ms}\ndata: \n\n"))
}

/// The `n` of a `p-<n>` event id.
fn primed(req: &Value) -> Option<u32> {
    req["lastEventId"].as_str()?.strip_prefix("p-")?.parse().ok()
}

#[tokio::test]
async fn sse_polling_honours_retry_and_is_not_limited_to_five_reconnects() {
    // The server closes the stream after every event: the POST gets only a priming event,
    // each resumed GET the next one, and the eighth GET the answer.
    let times: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let seen = times.clone();
    let up = Scripted::start_with_get(move |req| {
        if req["http"] == "GET" {
            let Some(n) = primed(req) else { return vec![] };
            seen.lock().unwrap().push((format!("GET p-{n}"), Instant::now()));
            if n < 8 {
                return vec![priming(n + 1, 20)];
            }
            return vec![Step::Then(Arc::new(|got: &[Value]| {
                let call = got.iter().rfind(|m| m["method"] == "tools/call").unwrap();
                vec![Step::SendWithId("p-9".into(), json!({"jsonrpc": "2.0", "id": call["id"].clone(), "result": {"content": [{"type": "text", "text": "polled"}]}}))]
            }))];
        }
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}})),
            "tools/call" => {
                seen.lock().unwrap().push(("POST".into(), Instant::now()));
                vec![priming(1, 700)]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "polled", "{}", out.response);
    let times = times.lock().unwrap().clone();
    let names: Vec<&str> = times.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["POST", "GET p-1", "GET p-2", "GET p-3", "GET p-4", "GET p-5", "GET p-6", "GET p-7", "GET p-8"]);
    // The first reconnection waited the 700 ms the server asked for.
    let waited = times[1].1 - times[0].1;
    assert!(waited >= Duration::from_millis(650), "reconnected after {waited:?}");
}

#[tokio::test]
async fn sse_polling_stops_at_max_request_time() {
    // A server that primes forever and never answers.
    let up = Scripted::start_with_get(|req| {
        if req["http"] == "GET" {
            return primed(req).map(|n| vec![priming(n + 1, 30)]).unwrap_or_default();
        }
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}})),
            "tools/call" => vec![priming(1, 30)],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&format!("{}max_request_time = \"1s\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    let gets = || up.received_http().iter().filter(|h| *h == "GET").count();
    assert!(gets() > 5, "it polled");
    // Polling stops: the count of GETs settles (bounded wait; it would grow every ~30 ms).
    let mut last = gets();
    let mut stable = 0;
    for _ in 0..20 {
        // Kept: that polling has stopped can only be seen as a count that stays still a while.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = gets();
        stable = if now == last { stable + 1 } else { 0 };
        last = now;
        if stable == 3 {
            break;
        }
    }
    assert_eq!(stable, 3, "the gateway kept polling after max_request_time ({last} GETs)");
}

/// An OAuth-style refusal: HTTP 401 with a challenge and a body that is not JSON-RPC.
fn unauthorized() -> Step {
    Step::Plain(
        401,
        vec![
            ("content-type", "application/json".into()),
            (
                "www-authenticate",
                r#"Bearer error="invalid_token", resource_metadata="http://127.0.0.1/.well-known/oauth""#.into(),
            ),
        ],
        r#"{"error":"invalid_token"}"#.into(),
    )
}

fn assert_unauthorized(msg: &Value) {
    assert_eq!(msg["error"]["code"], -32000, "{msg}");
    let text = msg["error"]["message"].as_str().unwrap();
    assert!(text.contains("401"), "{text}");
    assert!(text.contains(r#"Bearer error="invalid_token""#), "the challenge is shown: {text}");
}

#[tokio::test]
async fn an_oauth_401_fails_the_call_at_once() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => vec![unauthorized()],
        // A JSON-RPC error in an HTTP error is passed on as it is.
        "prompts/list" => vec![Step::Plain(
            400,
            vec![("content-type", "application/json".into())],
            json!({"jsonrpc": "2.0", "id": req["id"].clone(), "error": {"code": -32602, "message": "bad cursor"}})
                .to_string(),
        )],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("{}request_timeout = \"3s\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let start = Instant::now();
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_unauthorized(&out.response);
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    let out = c.request("prompts/list", json!({})).await;
    assert_eq!(out.response["error"], json!({"code": -32602, "message": "bad cursor"}), "{}", out.response);
}

#[tokio::test]
async fn an_oauth_401_on_initialize_is_a_clear_error_and_starts_no_session() {
    let up = Scripted::start(|_| vec![unauthorized()]).await;
    // Secrets in the URL are not shown.
    let url = up.url().replace("http://", "http://user:pw@") + "?api_key=sekrit";
    let gw = start_gateway(&format!("{}request_timeout = \"3s\"\n", http_upstream("up", &url))).await;
    let c = HttpMcp::new(&gw.url("up"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")});
    let start = Instant::now();
    let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    let msg = first_message(&r);
    assert_unauthorized(&msg);
    let text = msg["error"]["message"].as_str().unwrap();
    assert!(text.contains(&format!("http://***@{}/mcp?…", up.addr)), "{text}");
    assert!(!text.contains("pw") && !text.contains("sekrit"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    assert!(r.headers.get("mcp-session-id").is_none(), "a refused initialize starts no session");
}

#[tokio::test]
async fn an_oauth_401_on_a_notification_is_logged_and_the_session_goes_on() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        m if m.starts_with("notifications/") => vec![unauthorized()],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let start = Instant::now();
    // notifications/initialized gets 401 upstream; the client's POST is still accepted.
    c.initialize("2025-06-18").await;
    assert_eq!(c.notify("notifications/roots/list_changed", json!({})).await, 202);
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    assert!(up.received_methods().contains(&"notifications/roots/list_changed".to_string()));
}

#[tokio::test]
async fn a_retry_past_max_request_time_fails_the_call_at_once() {
    let up = Scripted::start_with_get(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => vec![priming(1, u64::MAX)],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!("{}max_request_time = \"1m\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let start = Instant::now();
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("max_request_time (1m)"), "{}", out.response);
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
}
