//! Upstream legacy HTTP+SSE (the 2024-11-05 transport) against a scripted server: the
//! `endpoint` event, round trips, a server request on the stream, an endpoint on another
//! origin refused, no endpoint within connect_timeout, a broken stream, and `transport =
//! "auto"` falling back from Streamable HTTP on 400, 404 and 405 only.

use crate::common;

use bytes::Bytes;
use common::*;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// What the scripted server does on its stream after a message is POSTed to it.
enum Act {
    Send(Value),
    /// Closes the event stream (the server's end of the legacy session).
    Break,
}

type Script = dyn Fn(&Value) -> Vec<Act> + Send + Sync;

/// How the scripted server opens a stream and answers a POST on its SSE URL.
#[derive(Clone)]
struct Opening {
    /// The data of the `endpoint` event, `{session}` replaced by the stream's number; no
    /// event at all when `None`.
    endpoint: Option<String>,
    /// The status of a POST on the SSE URL (what `auto` sees first).
    post_on_sse: u16,
}

impl Default for Opening {
    fn default() -> Self {
        Opening { endpoint: Some("/messages?session={session}".into()), post_on_sse: 405 }
    }
}

/// A legacy HTTP+SSE server on 127.0.0.1: `GET /sse` opens a stream whose first event is
/// `endpoint`; `POST /messages?session=N` is answered 202 and the script's acts go to stream
/// N. `initialize` is answered by the server itself. Everything is recorded, as
/// `{"http": METHOD, "path": PATH, "body": MESSAGE}`.
struct LegacyServer {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LegacyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Streams = Arc<Mutex<HashMap<u64, mpsc::Sender<Bytes>>>>;

impl LegacyServer {
    async fn start(opening: Opening, script: impl Fn(&Value) -> Vec<Act> + Send + Sync + 'static) -> LegacyServer {
        let script: Arc<Script> = Arc::new(script);
        let received = Arc::new(Mutex::new(Vec::new()));
        let streams: Streams = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let rec = received.clone();
        let task = tokio::spawn(async move {
            let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let (script, rec, streams, opening, next) =
                    (script.clone(), rec.clone(), streams.clone(), opening.clone(), next.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (script, rec, streams, opening, next) =
                            (script.clone(), rec.clone(), streams.clone(), opening.clone(), next.clone());
                        async move {
                            Ok::<_, std::convert::Infallible>(
                                answer(req, &script, &rec, &streams, &opening, &next).await,
                            )
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        LegacyServer { addr, received, task }
    }

    fn url(&self) -> String {
        format!("http://{}/sse", self.addr)
    }

    fn received(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }

    /// `METHOD PATH` of every HTTP request, in order.
    fn requests(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|r| format!("{} {}", r["http"].as_str().unwrap(), r["path"].as_str().unwrap()))
            .collect()
    }

    /// The methods POSTed to the message endpoint.
    fn posted_methods(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter(|r| r["http"] == "POST" && r["path"].as_str().unwrap().starts_with("/messages"))
            .filter_map(|r| r["body"]["method"].as_str().map(str::to_string))
            .collect()
    }
}

type Body = http_body_util::StreamBody<
    futures_util::stream::BoxStream<'static, Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>,
>;

fn plain(status: u16, text: &'static str) -> Response<Body> {
    use futures_util::StreamExt;
    let body = futures_util::stream::iter([Ok(hyper::body::Frame::data(Bytes::from_static(text.as_bytes())))]);
    let mut r = Response::new(http_body_util::StreamBody::new(body.boxed()));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    r
}

/// Records "GONE /sse" when the event stream it belongs to is dropped.
struct Gone(Arc<Mutex<Vec<Value>>>);

impl Drop for Gone {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(json!({"http": "GONE", "path": "/sse", "body": null}));
    }
}

fn event(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

async fn answer(
    req: Request<Incoming>,
    script: &Arc<Script>,
    rec: &Arc<Mutex<Vec<Value>>>,
    streams: &Streams,
    opening: &Opening,
    next: &std::sync::atomic::AtomicU64,
) -> Response<Body> {
    use futures_util::StreamExt;
    let method = req.method().as_str().to_string();
    let path = req.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    rec.lock().unwrap().push(json!({"http": method, "path": path, "body": msg}));
    match (method.as_str(), path.as_str()) {
        ("GET", "/sse") => {
            let session = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (tx, rx) = mpsc::channel::<Bytes>(64);
            if let Some(endpoint) = &opening.endpoint {
                let _ = tx.try_send(event("endpoint", &endpoint.replace("{session}", &session.to_string())));
            } else {
                let _ = tx.try_send(Bytes::from_static(b": no endpoint for you\n\n"));
            }
            streams.lock().unwrap().insert(session, tx);
            // When the client goes, the body is dropped: recorded as "GONE /sse".
            let gone = Gone(rec.clone());
            let stream = futures_util::stream::unfold((rx, gone), |(mut rx, gone)| async move {
                rx.recv().await.map(|b| (Ok(hyper::body::Frame::data(b)), (rx, gone)))
            });
            let mut r = Response::new(http_body_util::StreamBody::new(stream.boxed()));
            r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            r
        }
        ("POST", "/sse") => plain(opening.post_on_sse, "not here"),
        ("POST", p) if p.starts_with("/messages?session=") => {
            let session: u64 = p.trim_start_matches("/messages?session=").parse().unwrap();
            let Some(tx) = streams.lock().unwrap().get(&session).cloned() else { return plain(404, "no session") };
            let acts = if msg["method"] == "initialize" {
                vec![Act::Send(json!({"jsonrpc": "2.0", "id": msg["id"].clone(), "result": {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "legacy", "version": "0"}
                }}))]
            } else {
                script(&msg)
            };
            for act in acts {
                match act {
                    Act::Send(m) => {
                        let _ = tx.send(event("message", &m.to_string())).await;
                    }
                    Act::Break => {
                        streams.lock().unwrap().remove(&session);
                    }
                }
            }
            plain(202, "Accepted")
        }
        _ => plain(404, "not found"),
    }
}

fn result(req: &Value, text: &str) -> Act {
    Act::Send(
        json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {"content": [{"type": "text", "text": text}]}}),
    )
}

/// Echoes `tools/call` arguments' `text`; answers other requests with `{}`.
fn echo(req: &Value) -> Vec<Act> {
    match req["method"].as_str() {
        Some("tools/call") => vec![result(req, req["params"]["arguments"]["text"].as_str().unwrap_or(""))],
        Some(_) if req.get("id").is_some() => {
            vec![Act::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {}}))]
        }
        _ => vec![],
    }
}

/// The transport's own sequence of HTTP requests is checked here: no `server/discover` probe
/// before the `initialize` (`era = "legacy"`; the probe is tests/modern_upstream.rs's).
fn sse_upstream(url: &str, transport: &str) -> String {
    format!("{}transport = \"{transport}\"\nera = \"legacy\"\n", http_upstream("up", url))
}

fn call(text: &str) -> Value {
    json!({"name": "echo", "arguments": {"text": text}})
}

/// Sends `initialize` and returns the first message of the answer (a result or an error).
async fn try_initialize(c: &HttpMcp) -> Value {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2024-11-05")});
    first_message(&c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await)
}

fn error_text(msg: &Value) -> &str {
    msg["error"]["message"].as_str().unwrap_or_else(|| panic!("expected an error, got {msg}"))
}

#[tokio::test]
async fn messages_go_to_the_endpoint_and_answers_come_on_the_stream() {
    let up = LegacyServer::start(Opening::default(), echo).await;
    let gw = start_gateway(&sse_upstream(&up.url(), "sse")).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2024-11-05").await;
    assert_eq!(init["serverInfo"]["name"], "legacy");
    for text in ["one", "two"] {
        assert_eq!(c.request("tools/call", call(text)).await.result()["content"][0]["text"], text);
    }
    // One stream; everything else POSTed to the endpoint it named, nothing on the SSE URL.
    let requests = up.requests();
    assert_eq!(requests[0], "GET /sse");
    assert!(requests[1..].iter().all(|r| r == "POST /messages?session=1"), "{requests:?}");
    assert_eq!(up.posted_methods(), ["initialize", "notifications/initialized", "tools/call", "tools/call"]);
    // Closing the session ends the stream.
    assert!(!up.requests().contains(&"GONE /sse".to_string()));
    assert_eq!(c.delete().await, 200);
    eventually("the event stream was closed", async || up.requests().contains(&"GONE /sse".to_string())).await;
}

#[tokio::test]
async fn a_server_request_on_the_stream_reaches_the_client_and_its_answer_the_endpoint() {
    let call_id: Arc<Mutex<Value>> = Arc::default();
    let up = LegacyServer::start(Opening::default(), move |req| {
        if req["method"] == "tools/call" {
            *call_id.lock().unwrap() = req["id"].clone();
            return vec![
                Act::Send(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "asking"}})),
                Act::Send(json!({"jsonrpc": "2.0", "id": "ask-1", "method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5
                }})),
            ];
        }
        if req.get("method").is_none() && req["id"] == "ask-1" {
            let text = req["result"]["content"]["text"].as_str().unwrap_or("?").to_string();
            return vec![result(&json!({"id": call_id.lock().unwrap().clone()}), &format!("client said {text}"))];
        }
        echo(req)
    })
    .await;
    let gw = start_gateway(&sse_upstream(&up.url(), "sse")).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2024-11-05").await;
    let out = c.request("tools/call", call("x")).await;
    assert_eq!(out.result()["content"][0]["text"], "client said sampled");
    // The stream says nothing of which request they serve: with one call in flight, both
    // went to its stream.
    assert!(out.others.iter().any(|m| m["method"] == "sampling/createMessage"), "{:?}", out.others);
    assert!(out.others.iter().any(|m| m["params"]["data"] == "asking"), "{:?}", out.others);
    let answered = up.received().into_iter().find(|r| r["body"]["id"] == "ask-1").expect("the answer was POSTed");
    assert_eq!(answered["path"], "/messages?session=1");
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    for endpoint in ["http://evil.example/messages?session={session}", "//localhost:1/messages"] {
        let opening = Opening { endpoint: Some(endpoint.into()), ..Default::default() };
        let up = LegacyServer::start(opening, echo).await;
        let gw = start_gateway(&sse_upstream(&up.url(), "sse")).await;
        let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
        assert_eq!(msg["error"]["code"], -32000, "{msg}");
        let text = error_text(&msg);
        assert!(text.contains("points to another origin") && text.contains("refused"), "{text}");
        assert!(!text.contains("session="), "the endpoint's query is not shown: {text}");
        assert!(!up.requests().iter().any(|r| r.starts_with("POST")), "nothing was sent anywhere: {:?}", up.requests());
    }
}

#[tokio::test]
async fn no_endpoint_event_within_connect_timeout_is_a_clear_error() {
    let up = LegacyServer::start(Opening { endpoint: None, ..Default::default() }, echo).await;
    let config = format!(
        "[[upstream]]\nname = \"up\"\nurl = \"{}\"\ntransport = \"sse\"\nconnect_timeout = \"300ms\"\n",
        up.url()
    );
    let gw = start_gateway(&config).await;
    let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
    let text = error_text(&msg);
    assert!(text.ends_with(&format!("no `endpoint` event from {} within connect_timeout (300ms)", up.url())), "{text}");
}

#[tokio::test]
async fn a_broken_stream_closes_the_link_and_fails_what_is_in_flight_at_once() {
    let up = LegacyServer::start(Opening::default(), |req| match req["params"]["name"].as_str() {
        Some("break") => vec![Act::Break],
        Some("hang") => vec![],
        _ => echo(req),
    })
    .await;
    // request_timeout is far beyond the test's own bounded waits: an answer in time is the
    // broken stream's.
    let gw = start_gateway(&format!("{}request_timeout = \"10m\"\n", sse_upstream(&up.url(), "sse"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2024-11-05").await;
    // A call left unanswered, and one whose answer is the end of the stream: both fail.
    let named = |name: &str| json!({"name": name, "arguments": {}});
    let (hung, broke) = tokio::join!(c.request_owned("tools/call", named("hang")), async {
        eventually("the first call reached the server", async || {
            up.received().iter().any(|r| r["body"]["params"]["name"] == "hang")
        })
        .await;
        c.request_owned("tools/call", named("break")).await
    });
    for out in [hung, broke] {
        assert_eq!(out.error_code(), -32000, "{}", out.response);
        let text = error_text(&out.response);
        assert!(text.contains(&format!("the HTTP+SSE event stream from {} ended", up.url())), "{text}");
    }
    // The next request gets a new link: a new stream.
    assert_eq!(c.request("tools/call", call("again")).await.result()["content"][0]["text"], "again");
    assert_eq!(up.requests().iter().filter(|r| *r == "GET /sse").count(), 2, "{:?}", up.requests());
}

#[tokio::test]
async fn auto_falls_back_to_the_legacy_transport_on_400_404_and_405() {
    for status in [400, 404, 405] {
        let up = LegacyServer::start(Opening { post_on_sse: status, ..Default::default() }, echo).await;
        let gw = start_gateway(&sse_upstream(&up.url(), "auto")).await;
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize("2024-11-05").await;
        assert_eq!(init["serverInfo"]["name"], "legacy", "after {status}");
        assert_eq!(c.request("tools/call", call("via sse")).await.result()["content"][0]["text"], "via sse");
        let requests = up.requests();
        assert_eq!(requests[..3], ["POST /sse", "GET /sse", "POST /messages?session=1"], "after {status}");
        assert_eq!(up.received()[0]["body"]["method"], "initialize");
        assert_eq!(up.posted_methods(), ["initialize", "notifications/initialized", "tools/call"]);
    }
    // Without `transport`, an upstream is "auto".
    let up = LegacyServer::start(Opening::default(), echo).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    assert_eq!(c.initialize("2024-11-05").await["serverInfo"]["name"], "legacy");
}

#[tokio::test]
async fn auto_does_not_take_a_server_error_or_an_unreachable_server_for_legacy() {
    let up = LegacyServer::start(Opening { post_on_sse: 500, ..Default::default() }, echo).await;
    let gw = start_gateway(&sse_upstream(&up.url(), "auto")).await;
    let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
    let text = error_text(&msg);
    assert!(text.contains("HTTP 500"), "{text}");
    assert_eq!(up.requests(), ["POST /sse"], "no GET for a 500");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let gw = start_gateway(&sse_upstream(&format!("http://127.0.0.1:{port}/sse"), "auto")).await;
    let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
    assert!(error_text(&msg).contains("cannot reach"), "{msg}");
}

#[tokio::test]
async fn auto_reports_both_transports_when_neither_works() {
    // A 404 on the POST, and no event stream at the same URL either.
    let up = Scripted::start(|_| vec![Step::Plain(404, vec![], "no such path".into())]).await;
    let gw = start_gateway(&sse_upstream(&up.url(), "auto")).await;
    let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
    let text = error_text(&msg);
    assert!(text.contains("neither transport works: Streamable HTTP got HTTP 404"), "{text}");
    assert!(text.contains("legacy HTTP+SSE: HTTP 405"), "{text}");
    assert_eq!(up.received_http(), ["GET"], "the fallback tried the same URL");
}

#[tokio::test]
async fn streamable_http_is_not_probed_for_legacy() {
    // `transport = "streamable-http"`: a 404 on initialize is an error, no GET follows.
    let up = LegacyServer::start(Opening { post_on_sse: 404, ..Default::default() }, echo).await;
    let gw = start_gateway(&sse_upstream(&up.url(), "streamable-http")).await;
    let msg = try_initialize(&HttpMcp::new(&gw.url("up"))).await;
    assert!(error_text(&msg).contains("HTTP 404"), "{msg}");
    assert_eq!(up.requests(), ["POST /sse"]);
}

#[tokio::test]
async fn a_batch_on_the_legacy_stream_is_delivered_message_by_message() {
    let up = LegacyServer::start(Opening::default(), |req| match req["params"]["name"].as_str() {
        Some("batch") => vec![Act::Send(json!([
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "in a batch"}},
            42,
            {"jsonrpc": "2.0", "id": req["id"].clone(), "result": {"content": [{"type": "text", "text": "batched"}]}},
        ]))],
        _ => echo(req),
    })
    .await;
    let gw = start_gateway(&sse_upstream(&up.url(), "sse")).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2024-11-05").await;
    let out = c.request("tools/call", json!({"name": "batch", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "batched");
    assert!(out.others.iter().any(|m| m["params"]["data"] == "in a batch"), "{:?}", out.others);
}
