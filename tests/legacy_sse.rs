//! Downstream legacy HTTP+SSE (the 2024-11-05 transport) at `/sse/<name>`: the endpoint
//! event, messages POSTed to it and answered on the stream, the same session features as
//! Streamable HTTP, bad input, the guards and limits, and the stream's end as the session's.

use crate::common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

type HttpClient = Client<HttpConnector, Full<Bytes>>;

fn http() -> HttpClient {
    Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

async fn send(client: &HttpClient, req: hyper::Request<Full<Bytes>>) -> hyper::Response<Incoming> {
    tokio::time::timeout(STEP, client.request(req)).await.expect("request timed out").expect("request failed")
}

/// `GET url` with these headers (an event-stream `Accept` unless given).
async fn get(url: &str, extra: &[(&str, &str)]) -> hyper::Response<Incoming> {
    let mut b = hyper::Request::get(url);
    if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("accept")) {
        b = b.header("accept", "text/event-stream");
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    send(&http(), b.body(Full::new(Bytes::new())).unwrap()).await
}

/// A legacy HTTP+SSE client: the stream it opened and the endpoint that stream announced.
struct Legacy {
    http: HttpClient,
    /// The endpoint as announced (a path with the session query).
    endpoint: String,
    /// `http://addr`, which the endpoint is resolved against.
    origin: String,
    body: Incoming,
    decoder: taskgate::sse::Decoder,
    ready: std::collections::VecDeque<taskgate::sse::Event>,
    /// Messages read while waiting for something else.
    backlog: Vec<Value>,
    next_id: i64,
}

impl Legacy {
    /// Opens `/sse/<upstream>` and reads its `endpoint` event.
    async fn open(gw: &Gw, upstream: &str) -> Legacy {
        let origin = format!("http://{}", gw.addr);
        let resp = get(&format!("{origin}/sse/{upstream}"), &[]).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut c = Legacy {
            http: http(),
            endpoint: String::new(),
            origin,
            body: resp.into_body(),
            decoder: taskgate::sse::Decoder::new(1 << 22),
            ready: Default::default(),
            backlog: vec![],
            next_id: 1,
        };
        let first = c.event().await.expect("the endpoint event");
        assert_eq!(first.event.as_deref(), Some("endpoint"), "{first:?}");
        assert_eq!(first.id, None, "no event ids: the transport has no resumption");
        c.endpoint = first.data;
        c
    }

    /// The session id the endpoint names.
    fn session_id(&self) -> &str {
        self.endpoint.split("sessionId=").nth(1).unwrap()
    }

    /// The next event with data; `None` when the stream ends.
    async fn event(&mut self) -> Option<taskgate::sse::Event> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            let frame = tokio::time::timeout(STEP, self.body.frame()).await.expect("SSE event timed out")?;
            let Ok(data) = frame.ok()?.into_data() else { continue };
            self.ready.extend(self.decoder.feed(&data).unwrap().into_iter().filter(|e| !e.data.is_empty()));
        }
    }

    /// The next message on the stream (a `message` event).
    async fn message(&mut self) -> Value {
        let ev = self.event().await.expect("the stream ended");
        assert_eq!(ev.event.as_deref(), Some("message"), "{ev:?}");
        serde_json::from_str(&ev.data).unwrap()
    }

    /// POSTs raw bytes to the endpoint (or to `endpoint`, if given).
    async fn post_to(&self, endpoint: &str, body: Vec<u8>, extra: &[(&str, &str)]) -> RawResponse {
        let mut b = hyper::Request::post(format!("{}{endpoint}", self.origin));
        if !extra.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            b = b.header("content-type", "application/json");
        }
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        read_all(send(&self.http, b.body(Full::new(Bytes::from(body))).unwrap()).await).await
    }

    async fn post(&self, msg: &Value) -> RawResponse {
        self.post_to(&self.endpoint, serde_json::to_vec(msg).unwrap(), &[]).await
    }

    /// Sends a request and waits for its response on the stream, answering the server's
    /// requests with [`answer`] meanwhile; what else came with it is in `others`.
    async fn request(&mut self, method: &str, params: Value) -> Outcome {
        self.next_id += 1;
        let id = self.next_id;
        let r = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        assert_eq!(r.status, 202, "{method}: {:?}", String::from_utf8_lossy(&r.body));
        self.response(id).await
    }

    async fn response(&mut self, id: i64) -> Outcome {
        if let Some(out) = Outcome::from_backlog(&mut self.backlog, id) {
            return out;
        }
        let mut out = Outcome::default();
        loop {
            let m = self.message().await;
            if is_server_request(&m) {
                assert_eq!(self.post(&answer(&m)).await.status, 202);
            }
            if out.receive(m, id, &mut self.backlog) {
                return out;
            }
        }
    }

    async fn initialize(&mut self, version: &str) -> Value {
        let out = self.request("initialize", init_params(version)).await;
        let r = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        assert_eq!(r.status, 202);
        out.result().clone()
    }
}

async fn still_works(c: &mut Legacy) {
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "still here");
}

#[tokio::test]
async fn the_stream_announces_its_endpoint_and_carries_the_answers() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    assert!(c.endpoint.starts_with("/sse/demo/messages?sessionId="), "{}", c.endpoint);
    assert_eq!(c.session_id().len(), 32);
    assert!(c.session_id().bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(gw.server.session_count(), 1, "the stream is the session");

    // A POST is accepted with an empty 202; its response is an event on the stream.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2024-11-05")});
    let r = c.post(&init).await;
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let resp = c.message().await;
    assert_eq!(resp["id"], 1);
    assert_eq!(resp["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(resp["result"]["serverInfo"]["name"], "taskgate-demo");
    assert_eq!(c.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);

    let tools = c.request("tools/list", json!({})).await;
    let names: Vec<&str> =
        tools.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo") && names.contains(&"slow"), "{names:?}");
    assert!(tools.result()["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()));
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "over sse"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "over sse");
    let read = c.request("resources/read", json!({"uri": "demo://readme"})).await;
    assert!(read.result()["contents"][0]["text"].is_string());
    let prompt = c.request("prompts/get", json!({"name": "greet", "arguments": {"name": "sse"}})).await;
    assert!(prompt.result()["messages"].to_string().contains("sse"));
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

#[tokio::test]
async fn progress_comes_before_the_response_on_the_stream() {
    for upstream in [builtin_upstream("demo"), stdio_demo_upstream("demo")] {
        let gw = start_gateway(&upstream).await;
        let mut c = Legacy::open(&gw, "demo").await;
        c.initialize("2024-11-05").await;
        let out = c
            .request(
                "tools/call",
                json!({"name": "slow", "arguments": {"duration_ms": 300, "steps": 3}, "_meta": {"progressToken": "p1"}}),
            )
            .await;
        assert_eq!(out.result()["content"][0]["text"], "done after 3 steps");
        assert_eq!(out.progress(), vec![1.0, 2.0, 3.0]);
        for p in &out.others {
            assert_eq!(p["params"]["progressToken"], "p1");
            assert!(p["params"].get("message").is_none(), "2024-11-05 progress has no message: {p}");
        }
    }
}

#[tokio::test]
async fn a_server_request_is_answered_by_post() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {"question": "where?"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "answer: forty-two");
    let asked: Vec<_> = out.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
    assert_eq!(asked.len(), 1, "{:?}", out.others);
}

#[tokio::test]
async fn hosted_tasks_work_over_the_legacy_transport() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    let init = c.initialize("2025-11-25").await;
    assert!(init["capabilities"]["tasks"].is_object(), "{init}");
    let created = c
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 200, "steps": 2}, "task": {"ttl": 60000}}),
        )
        .await;
    let task_id = created.result()["task"]["taskId"].as_str().expect("a CreateTaskResult").to_string();
    let result = c.request("tasks/result", json!({"taskId": task_id})).await;
    assert_eq!(result.result()["content"][0]["text"], "done after 2 steps");
}

#[tokio::test]
async fn cancellation_reaches_the_upstream_and_ends_the_request() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2024-11-05").await;
    let slow = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 5000, "steps": 2}}});
    assert_eq!(c.post(&slow).await.status, 202);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}});
    assert_eq!(c.post(&cancel).await.status, 202);
    // The id is free again at once: nothing more is owed for it.
    let again = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    assert_eq!(c.post(&again).await.status, 202);
    assert_eq!(c.response(99).await.result(), &json!({}));
    eventually("the upstream saw the cancellation", async || {
        stats_cancelled(&c.request("resources/read", json!({"uri": "demo://stats"})).await) == 1
    })
    .await;
}

#[tokio::test]
async fn bad_input_gets_a_precise_error_and_harms_nothing() {
    let gw = start_gateway(&format!("[server]\nmax_body_bytes = 2048\n{}", builtin_upstream("demo"))).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2024-11-05").await;
    let mut other = Legacy::open(&gw, "demo").await;
    other.initialize("2024-11-05").await;
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"})).unwrap();

    let unknown = "/sse/demo/messages?sessionId=0123456789abcdef0123456789abcdef";
    let r = c.post_to(unknown, ping.clone(), &[]).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32600);
    assert_eq!(c.post_to("/sse/demo/messages", ping.clone(), &[]).await.status, 400, "no sessionId");
    // A session is only found on the endpoint of the upstream it was opened for.
    let elsewhere = c.endpoint.replace("/sse/demo/", "/sse/nope/");
    assert_eq!(c.post_to(&elsewhere, ping.clone(), &[]).await.status, 404);

    let endpoint = c.endpoint.clone();
    let r = c.post_to(&endpoint, b"{not json".to_vec(), &[]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32700);
    for bad in [json!({"hello": "world"}), json!({"jsonrpc": "2.0", "id": 5, "method": 3}), json!(7)] {
        let r = c.post(&bad).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.json()["error"]["code"], -32600, "{bad}");
    }
    let big = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x".repeat(4096)}}});
    assert_eq!(c.post(&big).await.status, 413);
    assert_eq!(c.post_to(&endpoint, ping.clone(), &[("content-type", "text/plain")]).await.status, 415);
    let r = c.post_to(&endpoint, ping.clone(), &[("mcp-protocol-version", "1999-01-01")]).await;
    assert_eq!(r.status, 400);
    // Another version the gateway speaks than the session's: accepted, as the spec has it.
    let spoken = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 4, "method": "ping"})).unwrap();
    let r = c.post_to(&endpoint, spoken, &[("mcp-protocol-version", "2025-06-18")]).await;
    assert_eq!(r.status, 202, "a version the gateway speaks, though not the session's");
    assert_eq!(c.response(4).await.result(), &json!({}));
    assert_eq!(c.post_to(&endpoint, ping.clone(), &[("mcp-protocol-version", "2024-11-05")]).await.status, 202);
    assert_eq!(c.response(5).await.result(), &json!({}));
    // Batches exist only in 2025-03-26.
    let r = c.post(&json!([{"jsonrpc": "2.0", "id": 10, "method": "ping"}])).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32600);
    // An id in flight cannot be reused.
    let slow = json!({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 300, "steps": 1}}});
    assert_eq!(c.post(&slow).await.status, 202);
    let r = c.post(&json!({"jsonrpc": "2.0", "id": 11, "method": "ping"})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["id"], 11);
    assert_eq!(c.response(11).await.result()["content"][0]["text"], "done after 1 steps");
    // A second initialize is an error on the stream, like any request's.
    assert_eq!(c.request("initialize", init_params("2024-11-05")).await.error_code(), -32600);

    // None of it put anything on the stream: the next message is the next response.
    c.next_id = 40;
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(echo.response["id"], 41);
    assert!(echo.others.is_empty() && c.backlog.is_empty(), "{:?} {:?}", echo.others, c.backlog);
    still_works(&mut other).await;
    assert_eq!(gw.server.session_count(), 2);
}

#[tokio::test]
async fn batches_in_a_2025_03_26_session() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2025-03-26").await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "one"}}},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "id": 22, "method": "initialize", "params": init_params("2025-03-26")},
        {"jsonrpc": "2.0", "bogus": true}
    ]);
    assert_eq!(c.post(&batch).await.status, 202);
    let mut got = vec![];
    for _ in 0..3 {
        got.push(c.message().await);
    }
    let one = got.iter().find(|m| m["id"] == 21).expect("the echo's response");
    assert_eq!(one["result"]["content"][0]["text"], "one");
    let init = got.iter().find(|m| m["id"] == 22).expect("initialize refused");
    assert_eq!(init["error"]["code"], -32600);
    assert!(got.iter().any(|m| m["id"].is_null() && m["error"]["code"] == -32600), "{got:?}");
}

#[tokio::test]
async fn origin_host_and_methods_are_checked() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let base = format!("http://{}", gw.addr);
    assert_eq!(get(&format!("{base}/sse/demo"), &[("origin", "https://evil.example")]).await.status(), 403);
    assert_eq!(get(&format!("{base}/sse/demo"), &[("host", "evil.example:8700")]).await.status(), 403);
    assert_eq!(get(&format!("{base}/sse/nope"), &[]).await.status(), 404);
    assert_eq!(get(&format!("{base}/sse/demo"), &[("accept", "application/json")]).await.status(), 406);
    assert_eq!(get(&format!("{base}/sse/demo"), &[("mcp-protocol-version", "1999-01-01")]).await.status(), 400);
    assert_eq!(gw.server.session_count(), 0, "no refused stream opened a session");

    let mut c = Legacy::open(&gw, "demo").await;
    let endpoint = c.endpoint.clone();
    let init = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2024-11-05")}),
    )
    .unwrap();
    let r = c.post_to(&endpoint, init.clone(), &[("origin", "https://evil.example")]).await;
    assert_eq!(r.status, 403);
    let r = c.post_to("/sse/demo", init.clone(), &[]).await;
    assert_eq!((r.status, r.headers["allow"].to_str().unwrap()), (405, "GET"));
    let r = read_all(get(&format!("{base}{endpoint}"), &[]).await).await;
    assert_eq!((r.status, r.headers["allow"].to_str().unwrap()), (405, "POST"));
    // A browser page of an allowed origin may use it.
    let r = c.post_to(&endpoint, init, &[("origin", "http://localhost:5173")]).await;
    assert_eq!(r.status, 202);
    assert_eq!(c.message().await["result"]["protocolVersion"], "2024-11-05");
}

#[tokio::test]
async fn closing_the_stream_ends_the_session() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2024-11-05").await;
    still_works(&mut c).await;
    let endpoint = c.endpoint.clone();
    assert_eq!(gw.server.session_count(), 1);
    drop(c);
    eventually("the session ended with its stream", async || gw.server.session_count() == 0).await;
    // Its endpoint is gone; another session's stream is unaffected.
    let mut d = Legacy::open(&gw, "demo").await;
    let ping = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).unwrap();
    assert_eq!(d.post_to(&endpoint, ping, &[]).await.status, 404);
    d.initialize("2024-11-05").await;
    still_works(&mut d).await;
}

#[tokio::test]
async fn both_transports_share_max_sessions() {
    let gw = start_gateway(&format!("[server]\nmax_sessions = 1\n{}", builtin_upstream("demo"))).await;
    let base = format!("http://{}", gw.addr);
    let legacy = Legacy::open(&gw, "demo").await;
    let mut streamable = HttpMcp::new(&gw.url("demo"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")});
    assert_eq!(streamable.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await.status, 503);
    assert_eq!(get(&format!("{base}/sse/demo"), &[]).await.status(), 503);
    drop(legacy);
    eventually("the legacy session ended", async || gw.server.session_count() == 0).await;
    streamable.initialize("2025-06-18").await;
    let r = read_all(get(&format!("{base}/sse/demo"), &[]).await).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.json()["error"]["code"], -32004);
}

#[tokio::test]
async fn the_stream_is_kept_alive_while_idle() {
    let gw = start_gateway(&format!(
        "[server]\nsse_keepalive = \"50ms\"\nsession_idle_timeout = \"100ms\"\n{}",
        builtin_upstream("demo")
    ))
    .await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2024-11-05").await;
    // Keep-alive comments arrive while nothing else does; an open stream is a session in use,
    // however long it is idle.
    let mut seen = Vec::new();
    while seen.windows(12).filter(|w| *w == b": keepalive\n").count() < 5 {
        let frame = tokio::time::timeout(STEP, c.body.frame()).await.unwrap().unwrap().unwrap();
        seen.extend_from_slice(&frame.into_data().unwrap());
    }
    assert!(!seen.windows(5).any(|w| w == b"data:"), "nothing but keep-alives: {:?}", String::from_utf8_lossy(&seen));
    assert_eq!(gw.server.session_count(), 1);
    still_works(&mut c).await;
}

#[tokio::test]
async fn shutdown_drains_then_answers_what_is_left_and_ends_the_stream() {
    let gw = start_gateway(&format!("[server]\ndrain_timeout = \"1s\"\n{}", stdio_demo_upstream("demo"))).await;
    let mut c = Legacy::open(&gw, "demo").await;
    c.initialize("2024-11-05").await;
    let slow = |id: i64, ms: u64, steps: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": ms, "steps": steps}, "_meta": {"progressToken": id}}});
    assert_eq!(c.post(&slow(10, 600, 3)).await.status, 202);
    assert_eq!(c.post(&slow(11, 20_000, 200)).await.status, 202);
    // Both run upstream: each has sent progress.
    let mut tokens = std::collections::HashSet::new();
    while tokens.len() < 2 {
        let m = c.message().await;
        assert_eq!(m["method"], "notifications/progress", "{m}");
        tokens.insert(m["params"]["progressToken"].as_i64().unwrap());
    }
    let server = gw.server.clone();
    let shutdown = tokio::spawn(async move { server.shutdown().await });
    let done = c.response(10).await;
    assert_eq!(done.result()["content"][0]["text"], "done after 3 steps");
    let cut = c.response(11).await;
    assert_eq!(cut.error_code(), -32000);
    assert!(cut.response["error"]["message"].as_str().unwrap().contains("shutting down"), "{}", cut.response);
    assert!(c.event().await.is_none(), "the stream ends after the last answer");
    tokio::time::timeout(STEP, shutdown).await.expect("shutdown is bounded").unwrap();
    assert_eq!(gw.server.session_count(), 0);
}

#[tokio::test]
async fn an_initialize_whose_post_goes_away_may_be_sent_again() {
    // A slow upstream handshake, and a client whose POST of initialize gives up before it
    // ends: the session is the client's (it holds the stream), and is not left half
    // initialized, refusing every initialize and every request after.
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => {
            let mut steps = vec![Step::Sleep(400)];
            steps.extend(init_result(req, json!({"tools": {}})));
            steps
        }
        _ => vec![reply(req, json!({"content": [{"type": "text", "text": "still here"}]}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = Legacy::open(&gw, "up").await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2024-11-05")});
    assert!(tokio::time::timeout(std::time::Duration::from_millis(100), c.post(&init)).await.is_err());
    let again = c.initialize("2024-11-05").await;
    assert_eq!(again["protocolVersion"], "2024-11-05");
    still_works(&mut c).await;
}

/// A body of many tiny values (what parsing multiplies most) is refused before it is parsed,
/// on both transports, with the session and other requests unaffected.
#[tokio::test]
async fn a_body_of_too_many_values_is_refused_before_it_is_parsed() {
    let gw = start_gateway(&format!("[server]\nmax_body_values = 10000\n{}", builtin_upstream("demo"))).await;
    let call = |n: usize| {
        let pad = vec!["{}"; n].join(",");
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"x","pad":[{pad}]}}}}}}"#
        )
        .into_bytes()
    };
    // Streamable HTTP.
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let r = c.post_raw(call(6000), &[]).await;
    assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["error"]["code"], -32600);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("server.max_body_values"), "{}", r.json());
    let within = c.post_raw(call(2000), &[]).await;
    assert_eq!(first_message(&within)["result"]["content"][0]["text"], "x");
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "after"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "after");
    // Legacy HTTP+SSE.
    let mut l = Legacy::open(&gw, "demo").await;
    l.initialize("2024-11-05").await;
    let endpoint = l.endpoint.clone();
    let r = l.post_to(&endpoint, call(6000), &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("server.max_body_values"), "{}", r.json());
    still_works(&mut l).await;
}
