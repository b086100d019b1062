//! Test harness: an in-process gateway on 127.0.0.1, the demo server as stdio child or HTTP
//! upstream, and small MCP clients over Streamable HTTP and stdio that record everything
//! they receive.

#![allow(dead_code)]

mod bearer;
pub mod dialects;
pub mod ext_server;
pub mod gateway_proc;
pub mod modern;
pub mod redis_server;
mod stdio_script;
mod wait;
#[allow(unused_imports)]
pub use {bearer::bearer_tokens, stdio_script::StdioScript, wait::eventually};

pub mod modern_client;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use taskgate::{Config, Gateway, HttpServer, ServerConfig, TransportError, UpstreamConfig, bind_http, sse};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub const STEP: Duration = Duration::from_secs(15);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_taskgate")
}

/// Config text for a stdio upstream running the demo server as a child process.
pub fn stdio_demo_upstream(name: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\ncommand = {:?}\nargs = [\"demo-server\"]\n", bin())
}

pub fn http_upstream(name: &str, url: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\nconnect_timeout = \"3s\"\n")
}

pub fn builtin_upstream(name: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\nbuiltin = \"demo\"\n")
}

pub struct Gw {
    pub addr: SocketAddr,
    pub server: Arc<HttpServer>,
    task: tokio::task::JoinHandle<()>,
}

impl Gw {
    pub fn url(&self, upstream: &str) -> String {
        format!("http://{}/mcp/{upstream}", self.addr)
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn parse_config(text: &str) -> Config {
    Config::parse(text, &|k| std::env::var(k).ok()).unwrap_or_else(|e| panic!("bad test config: {e}\n{text}"))
}

/// A gateway serving `config` (its `[server]` table, if any, plus upstreams) on a free port.
pub async fn start_gateway(config: &str) -> Gw {
    let mut cfg = parse_config(config);
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    let server = HttpServer::new(Gateway::new(cfg));
    let (addr, task) = bind_http(server.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    Gw { addr, server, task }
}

/// The demo server over Streamable HTTP at `/mcp`, in-process.
pub async fn start_demo_http() -> Gw {
    let demo = UpstreamConfig::plain_demo();
    let cfg = Config {
        server: ServerConfig { allowed_hosts: vec!["*".into()], ..Default::default() },
        tasks: Default::default(),
        upstreams: vec![demo.clone()],
    };
    let server = HttpServer::with_routes(Gateway::new(cfg), HashMap::from([("/mcp".to_string(), Arc::new(demo))]));
    let (addr, task) = bind_http(server.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    Gw { addr, server, task }
}

pub fn init_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"elicitation": {}, "sampling": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "taskgate-tests", "version": "0"}
    })
}

/// What a request produced: its response and everything else that came with it.
#[derive(Debug, Default)]
pub struct Outcome {
    pub response: Value,
    pub others: Vec<Value>,
}

impl Outcome {
    pub fn result(&self) -> &Value {
        self.response.get("result").unwrap_or_else(|| panic!("expected a result, got {}", self.response))
    }
    pub fn error_code(&self) -> i64 {
        self.response
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| panic!("expected an error, got {}", self.response))
    }
    /// The request failed on its way to or from `upstream` (-32000) because of `cause`: the
    /// error names the upstream and ends with the cause as the transport words it.
    pub fn assert_upstream_failed(&self, upstream: &str, cause: TransportError) {
        assert_eq!(self.error_code(), -32000, "{}", self.response);
        let msg = self.response["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&format!("upstream '{upstream}'")), "the error names the upstream: {msg}");
        assert!(msg.ends_with(&cause.to_string()), "expected {cause:?}: {msg}");
    }
    pub fn progress(&self) -> Vec<f64> {
        self.others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_f64().unwrap())
            .collect()
    }
}

/// How the test client answers requests from the server.
pub fn answer(req: &Value) -> Value {
    let result = match req["method"].as_str().unwrap_or("") {
        "elicitation/create" => json!({"action": "accept", "content": {"answer": "forty-two"}}),
        "sampling/createMessage" => {
            json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "test"})
        }
        "roots/list" => json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]}),
        _ => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result})
}

// ---- Streamable HTTP client ----

pub struct HttpMcp {
    pub url: String,
    pub session: Option<String>,
    pub version: Option<String>,
    /// Sent as `Authorization: Bearer` on every request, if set.
    pub bearer: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
    next_id: i64,
}

pub struct RawResponse {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

impl HttpMcp {
    pub fn new(url: &str) -> HttpMcp {
        HttpMcp {
            url: url.to_string(),
            session: None,
            version: None,
            bearer: None,
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build_http(),
            next_id: 1,
        }
    }

    pub fn next_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn builder(&self, method: &str) -> hyper::http::request::Builder {
        let mut b = Request::builder().method(method).uri(&self.url);
        if let Some(s) = &self.session {
            b = b.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            b = b.header("mcp-protocol-version", v);
        }
        if let Some(t) = &self.bearer {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b
    }

    /// Sends a raw POST with extra headers and returns the response still streaming.
    pub async fn post_streaming(&self, body: Vec<u8>, extra: &[(&str, &str)]) -> Response<Incoming> {
        let mut b = self.builder("POST");
        for (k, v) in [("content-type", "application/json"), ("accept", "application/json, text/event-stream")] {
            if !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(k)) {
                b = b.header(k, v);
            }
        }
        let headers = b.headers_mut().unwrap();
        for (k, v) in extra {
            headers.insert(hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        let req = b.body(Full::new(Bytes::from(body))).unwrap();
        tokio::time::timeout(STEP, self.client.request(req)).await.expect("POST timed out").expect("POST failed")
    }

    /// Sends a raw POST and reads the whole response.
    pub async fn post_raw(&self, body: Vec<u8>, extra: &[(&str, &str)]) -> RawResponse {
        let resp = self.post_streaming(body, extra).await;
        read_all(resp).await
    }

    pub async fn get_raw(&self, extra: &[(&str, &str)]) -> Response<Incoming> {
        let mut b = self.builder("GET").header("accept", "text/event-stream");
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        let req = b.body(Full::new(Bytes::new())).unwrap();
        tokio::time::timeout(STEP, self.client.request(req)).await.expect("GET timed out").expect("GET failed")
    }

    pub async fn delete(&self) -> u16 {
        let req = self.builder("DELETE").body(Full::new(Bytes::new())).unwrap();
        let resp = tokio::time::timeout(STEP, self.client.request(req)).await.unwrap().unwrap();
        resp.status().as_u16()
    }

    /// initialize + notifications/initialized; returns the initialize result.
    pub async fn initialize(&mut self, version: &str) -> Value {
        self.initialize_with(init_params(version)).await
    }

    /// [`HttpMcp::initialize`] with these `initialize` params.
    pub async fn initialize_with(&mut self, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
        let resp = self.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
        assert_eq!(resp.status, 200, "initialize failed: {:?}", String::from_utf8_lossy(&resp.body));
        self.session = Some(resp.headers.get("mcp-session-id").expect("session id").to_str().unwrap().to_string());
        let v = first_message(&resp);
        let result = v["result"].clone();
        self.version = Some(result["protocolVersion"].as_str().unwrap().to_string());
        let n = self.notify("notifications/initialized", json!({})).await;
        assert_eq!(n, 202);
        result
    }

    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await.status
    }

    /// A request; server requests that arrive on its stream are answered with [`answer`].
    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        let id = self.next_id();
        self.request_with_id(id, method, params).await
    }

    /// Like `request`, callable concurrently (ids are drawn from a shared counter).
    pub async fn request_owned(&self, method: &str, params: Value) -> Outcome {
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1_000_000);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.request_with_id(id, method, params).await
    }

    async fn request_with_id(&self, id: i64, method: &str, params: Value) -> Outcome {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
        assert_eq!(resp.status(), 200, "{method} got HTTP {}", resp.status());
        let sse = resp.headers().get("content-type").unwrap().to_str().unwrap().starts_with("text/event-stream");
        if !sse {
            let raw = read_all(resp).await;
            return Outcome { response: raw.json(), others: vec![] };
        }
        let mut out = Outcome::default();
        let mut events = SseReader::new(resp.into_body());
        while let Some((_, m)) = events.next().await {
            if m.get("method").is_some() && m.get("id").is_some() {
                let reply = answer(&m);
                let r = self.post_raw(serde_json::to_vec(&reply).unwrap(), &[]).await;
                assert_eq!(r.status, 202);
                out.others.push(m);
            } else if m.get("method").is_none() && m["id"] == json!(id) {
                out.response = m;
                return out;
            } else {
                out.others.push(m);
            }
        }
        panic!("stream ended without a response to {method}; got {:?}", out.others);
    }
}

pub async fn read_all(resp: Response<Incoming>) -> RawResponse {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body =
        tokio::time::timeout(STEP, resp.into_body().collect()).await.expect("body timed out").unwrap().to_bytes();
    RawResponse { status, headers, body }
}

/// The first JSON-RPC message of a JSON or SSE response.
pub fn first_message(resp: &RawResponse) -> Value {
    let ct = resp.headers.get("content-type").map(|v| v.to_str().unwrap()).unwrap_or("");
    if ct.starts_with("text/event-stream") {
        let mut d = sse::Decoder::new(1 << 20);
        let evs = d.feed(&resp.body).unwrap();
        serde_json::from_str(&evs.iter().find(|e| !e.data.is_empty()).unwrap().data).unwrap()
    } else {
        resp.json()
    }
}

/// Reads SSE events (id, message) from a body, with a timeout per event.
pub struct SseReader {
    body: Incoming,
    decoder: sse::Decoder,
    ready: std::collections::VecDeque<(Option<String>, Value)>,
}

impl SseReader {
    pub fn new(body: Incoming) -> SseReader {
        SseReader { body, decoder: sse::Decoder::new(1 << 22), ready: Default::default() }
    }

    pub async fn next(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            let frame = tokio::time::timeout(STEP, self.body.frame()).await.expect("SSE event timed out")?;
            let Ok(data) = frame.ok()?.into_data() else { continue };
            for ev in self.decoder.feed(&data).unwrap() {
                if !ev.data.is_empty() {
                    self.ready.push_back((ev.id.clone(), serde_json::from_str(&ev.data).unwrap()));
                }
            }
        }
    }
}

// ---- stdio client (taskgate stdio as a child process) ----

pub struct StdioMcp {
    pub child: tokio::process::Child,
    /// `None` once the client's input has ended ([`StdioMcp::end_input`]).
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: i64,
    /// Messages read while waiting for something else.
    pub backlog: Vec<Value>,
    _dir: tempfile::TempDir,
}

impl StdioMcp {
    /// Runs `taskgate stdio` with `config` in front of `upstream`.
    pub async fn start(config: &str, upstream: &str) -> StdioMcp {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = tokio::process::Command::new(bin())
            .args(["stdio", "--config", path.to_str().unwrap(), "--upstream", upstream])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        StdioMcp { child, stdin, lines, next_id: 1, backlog: vec![], _dir: dir }
    }

    pub async fn send(&mut self, msg: &Value) {
        self.send_line(&serde_json::to_string(msg).unwrap()).await;
    }

    pub async fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes()).await;
    }

    /// One line of raw bytes (need not be UTF-8).
    pub async fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("the client's input has ended");
        stdin.write_all(line).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Ends the client's input (EOF on the gateway's stdin), as a client that goes away
    /// does, and waits (at most [`STEP`]) for the gateway to exit.
    pub async fn end_input(&mut self) -> std::process::ExitStatus {
        self.stdin = None;
        tokio::time::timeout(STEP, self.child.wait()).await.expect("the gateway did not exit at EOF").unwrap()
    }

    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(STEP, self.lines.next_line())
            .await
            .expect("stdout timed out")
            .unwrap()
            .expect("stdout closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"))
    }

    pub async fn initialize(&mut self, version: &str) -> Value {
        self.initialize_with(init_params(version)).await
    }

    /// [`StdioMcp::initialize`] with these `initialize` params.
    pub async fn initialize_with(&mut self, params: Value) -> Value {
        let out = self.request("initialize", params).await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        out.result().clone()
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        self.wait_response(id).await
    }

    pub async fn wait_response(&mut self, id: i64) -> Outcome {
        let mut out = Outcome::default();
        if let Some(pos) = self.backlog.iter().position(|m| m.get("method").is_none() && m["id"] == json!(id)) {
            out.response = self.backlog.remove(pos);
            return out;
        }
        loop {
            let m = self.recv().await;
            if m.get("method").is_some() && m.get("id").is_some() {
                let reply = answer(&m);
                self.send(&reply).await;
                out.others.push(m);
            } else if m.get("method").is_none() && m["id"] == json!(id) {
                out.response = m;
                return out;
            } else if m.get("method").is_none() {
                self.backlog.push(m);
            } else {
                out.others.push(m);
            }
        }
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Either client, for tests that run over both downstream transports.
pub enum Mcp {
    Http(HttpMcp),
    Stdio(StdioMcp),
}

impl Mcp {
    pub async fn initialize(&mut self, version: &str) -> Value {
        match self {
            Mcp::Http(c) => c.initialize(version).await,
            Mcp::Stdio(c) => c.initialize(version).await,
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        match self {
            Mcp::Http(c) => c.request(method, params).await,
            Mcp::Stdio(c) => c.request(method, params).await,
        }
    }
}

// ---- a scripted upstream over Streamable HTTP ----

/// One step of a scripted answer: a message on the response stream, or a pause.
#[derive(Clone)]
pub enum Step {
    Send(Value),
    /// A message as an SSE event with this id (so a broken stream can be resumed).
    SendWithId(String, Value),
    /// Raw bytes on the event stream (e.g. an event with a `retry` field).
    Raw(String),
    /// As the only step: answer with this HTTP status, headers and body instead of a stream.
    Plain(u16, Vec<(&'static str, String)>, String),
    Sleep(u64),
    /// Waits (at most 10 s) until the server has received a response with this id.
    AwaitResponse(Value),
    /// Computes further steps from everything received so far.
    Then(Arc<Continuation>),
}

/// Further steps computed from what the scripted server has received.
pub type Continuation = dyn Fn(&[Value]) -> Vec<Step> + Send + Sync;

/// A script sees each message and the headers of the HTTP request that carried it.
type Script = dyn Fn(&Value, &hyper::HeaderMap) -> Vec<Step> + Send + Sync;

/// An upstream MCP server whose answers a test writes: for each request the script returns
/// the steps of its SSE response. Everything it receives is recorded.
pub struct Scripted {
    pub addr: SocketAddr,
    pub received: Arc<std::sync::Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Scripted {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn received_http(&self) -> Vec<String> {
        self.received.lock().unwrap().iter().filter_map(|m| m["http"].as_str().map(str::to_string)).collect()
    }

    pub fn received_methods(&self) -> Vec<String> {
        self.received.lock().unwrap().iter().filter_map(|m| m["method"].as_str().map(str::to_string)).collect()
    }

    /// Starts the server. `initialize` is answered by the script too (see [`init_result`]);
    /// GET is refused with 405.
    pub async fn start(script: impl Fn(&Value) -> Vec<Step> + Send + Sync + 'static) -> Scripted {
        Self::start_with(move |m: &Value, _: &hyper::HeaderMap| script(m), false).await
    }

    /// Like `start`, and the script sees each request's HTTP headers too.
    pub async fn start_with_headers(
        script: impl Fn(&Value, &hyper::HeaderMap) -> Vec<Step> + Send + Sync + 'static,
    ) -> Scripted {
        Self::start_with(script, false).await
    }

    /// Like `start`, and GET requests go to the script too, as `{"http": "GET", "lastEventId"}`.
    pub async fn start_with_get(script: impl Fn(&Value) -> Vec<Step> + Send + Sync + 'static) -> Scripted {
        Self::start_with(move |m: &Value, _: &hyper::HeaderMap| script(m), true).await
    }

    async fn start_with(
        script: impl Fn(&Value, &hyper::HeaderMap) -> Vec<Step> + Send + Sync + 'static,
        serve_get: bool,
    ) -> Scripted {
        let script: Arc<Script> = Arc::new(script);
        let received = Arc::new(std::sync::Mutex::new(Vec::new()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let rec = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let script = script.clone();
                let rec = rec.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let script = script.clone();
                        let rec = rec.clone();
                        async move { Ok::<_, std::convert::Infallible>(scripted_answer(req, script, rec, serve_get).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        Scripted { addr, received, task }
    }
}

type ScriptBody = http_body_util::StreamBody<
    futures_util::stream::BoxStream<'static, Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>,
>;

async fn scripted_answer(
    req: Request<Incoming>,
    script: Arc<Script>,
    rec: Arc<std::sync::Mutex<Vec<Value>>>,
    serve_get: bool,
) -> Response<ScriptBody> {
    use futures_util::StreamExt;
    let empty = |status: u16| {
        let mut r = Response::new(http_body_util::StreamBody::new(futures_util::stream::empty().boxed()));
        *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
        r
    };
    // GET and DELETE reach the script as {"http": METHOD, "lastEventId": ...}; a GET the
    // script has no steps for is 405.
    let headers = req.headers().clone();
    let msg: Value = if req.method() == hyper::Method::POST {
        let body = req.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&body).unwrap()
    } else {
        let last = req.headers().get("last-event-id").map(|v| v.to_str().unwrap().to_string());
        json!({"http": req.method().as_str(), "lastEventId": last})
    };
    rec.lock().unwrap().push(msg.clone());
    if msg["http"] == "DELETE" {
        return empty(200);
    }
    if msg["http"] == "GET" && !serve_get {
        return empty(405);
    }
    // Notifications and responses get 202, unless the script answers them with Step::Plain.
    let steps = script(&msg, &headers);
    if msg.get("http").is_none()
        && (msg.get("method").is_none() || msg.get("id").is_none())
        && !matches!(steps.as_slice(), [Step::Plain(..)])
    {
        return empty(202);
    }
    if msg.get("http").is_some() && steps.is_empty() {
        return empty(405);
    }
    if let [Step::Plain(status, headers, body)] = steps.as_slice() {
        let body = futures_util::stream::iter([Ok(hyper::body::Frame::data(Bytes::from(body.clone())))]);
        let mut r = Response::new(http_body_util::StreamBody::new(body.boxed()));
        *r.status_mut() = hyper::StatusCode::from_u16(*status).unwrap();
        for (k, v) in headers {
            r.headers_mut().insert(*k, v.parse().unwrap());
        }
        return r;
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut queue: std::collections::VecDeque<Step> = steps.into();
        while let Some(step) = queue.pop_front() {
            match step {
                Step::Raw(text) => {
                    if tx.send(Bytes::from(text)).await.is_err() {
                        return;
                    }
                }
                Step::Plain(..) => panic!("Step::Plain must be the only step"),
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::Send(m) => {
                    let ev = sse::encode_event(None, &serde_json::to_vec(&m).unwrap());
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                Step::SendWithId(id, m) => {
                    let ev = sse::encode_event(Some(&id), &serde_json::to_vec(&m).unwrap());
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                Step::AwaitResponse(id) => {
                    for _ in 0..1000 {
                        let seen = rec.lock().unwrap().iter().any(|m| m.get("method").is_none() && m["id"] == id);
                        if seen {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Step::Then(f) => {
                    let got = rec.lock().unwrap().clone();
                    for (i, s) in f(&got).into_iter().enumerate() {
                        queue.insert(i, s);
                    }
                }
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(hyper::body::Frame::data(b)), rx))
    });
    let mut r = Response::new(http_body_util::StreamBody::new(stream.boxed()));
    r.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
    if msg["method"] == "initialize" {
        r.headers_mut().insert("mcp-session-id", "scripted-session".parse().unwrap());
    }
    r
}

/// The `initialize` result of a scripted server with these capabilities.
pub fn init_result(req: &Value, capabilities: Value) -> Vec<Step> {
    vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {
        "protocolVersion": req["params"]["protocolVersion"].clone(),
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted", "version": "0"}
    }}))]
}

pub fn reply(req: &Value, result: Value) -> Step {
    Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result}))
}

pub fn progress(token: &Value, value: f64) -> Step {
    Step::Send(
        json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": value}}),
    )
}
