//! A scripted upstream over Streamable HTTP: a test writes its answers as [`Step`]s.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use taskgate::sse;

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
        let rec = Recorder { received: received.clone(), arrived: Arc::new(tokio::sync::Notify::new()) };
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

/// What the server has received, and a signal for each arrival.
#[derive(Clone)]
struct Recorder {
    received: Arc<std::sync::Mutex<Vec<Value>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Recorder {
    fn push(&self, msg: Value) {
        self.received.lock().unwrap().push(msg);
        self.arrived.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Value>> {
        self.received.lock().unwrap()
    }

    /// Waits until `cond` holds of what has been received, woken by each arrival; `false`
    /// if it does not within `within`.
    async fn wait_until(&self, within: Duration, cond: impl Fn(&[Value]) -> bool) -> bool {
        let until = async {
            loop {
                let arrival = self.arrived.notified();
                tokio::pin!(arrival);
                arrival.as_mut().enable(); // before looking, so that no arrival is missed
                if cond(&self.lock()) {
                    return;
                }
                arrival.await;
            }
        };
        tokio::time::timeout(within, until).await.is_ok()
    }
}

type ScriptBody = http_body_util::StreamBody<
    futures_util::stream::BoxStream<'static, Result<hyper::body::Frame<Bytes>, std::convert::Infallible>>,
>;

async fn scripted_answer(
    req: Request<Incoming>,
    script: Arc<Script>,
    rec: Recorder,
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
    rec.push(msg.clone());
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
                // The scripted server's own slowness, which is what its tests are about.
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
                    let answered = |got: &[Value]| got.iter().any(|m| m.get("method").is_none() && m["id"] == id);
                    // Unanswered after 10 s, the script goes on anyway.
                    rec.wait_until(Duration::from_secs(10), answered).await;
                }
                Step::Then(f) => {
                    let got = rec.lock().clone();
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

/// The requests of `method` that `up` has received, in order.
pub fn calls_to(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
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
