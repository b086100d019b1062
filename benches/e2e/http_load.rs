//! Load over Streamable HTTP: client sessions on keep-alive connections, the echo loop and
//! the progress loop.

use crate::mcp::{
    INITIALIZED, Reply, SESSION_HEADER, SseReader, VERSION_HEADER, echo_request, initialize_request, slow_request,
};
use crate::measure::{Window, measure};
use crate::procs::{Proc, children_of};
use crate::report::{Run, Tally};
use crate::{PROTOCOL_VERSION, Plan, TIMEOUT};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::time::Instant;

/// The role of a gateway's stdio upstream among the watched processes.
pub(crate) const UPSTREAM: &str = "upstream";

/// One client session on its own keep-alive HTTP/1.1 connection.
pub(crate) struct HttpClient {
    pub(crate) send: SendRequest<Full<Bytes>>,
    pub(crate) addr: SocketAddr,
    pub(crate) host: HeaderValue,
    pub(crate) path: String,
    /// The protocol version it initializes with (and then sends in `mcp-protocol-version`).
    pub(crate) version: &'static str,
    pub(crate) session: Option<HeaderValue>,
    pub(crate) next_id: u64,
}

impl HttpClient {
    pub(crate) async fn connect(addr: SocketAddr, path: &str, version: &'static str) -> Result<HttpClient, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(HttpClient {
            send,
            addr,
            host: HeaderValue::from_str(&addr.to_string()).expect("an address is a valid header"),
            path: path.to_string(),
            version,
            session: None,
            next_id: 0,
        })
    }

    pub(crate) fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub(crate) async fn send(
        &mut self,
        method: Method,
        body: Bytes,
        last_event_id: Option<&str>,
    ) -> Result<Response<hyper::body::Incoming>, String> {
        let mut b = Request::builder()
            .method(method)
            .uri(self.path.as_str())
            .header(HOST, self.host.clone())
            .header(ACCEPT, "application/json, text/event-stream");
        if !body.is_empty() {
            b = b.header(CONTENT_TYPE, "application/json");
        }
        if let Some(s) = &self.session {
            b = b.header(SESSION_HEADER, s.clone()).header(VERSION_HEADER, self.version);
        }
        if let Some(l) = last_event_id {
            b = b.header("last-event-id", l);
        }
        let req = b.body(Full::new(body)).map_err(|e| e.to_string())?;
        let go = async {
            self.send.ready().await.map_err(|e| format!("connection: {e}"))?;
            self.send.send_request(req).await.map_err(|e| format!("request: {e}"))
        };
        tokio::time::timeout(TIMEOUT, go).await.map_err(|_| format!("no response within {TIMEOUT:?}"))?
    }

    /// POSTs a message and reads the whole answer: (status, is an event stream, body).
    pub(crate) async fn post(&mut self, body: String) -> Result<(StatusCode, bool, Bytes), String> {
        let resp = self.send(Method::POST, Bytes::from(body), None).await?;
        let status = resp.status();
        let sse = is_event_stream(&resp);
        if self.session.is_none()
            && let Some(s) = resp.headers().get(SESSION_HEADER)
        {
            self.session = Some(s.clone());
        }
        let body = tokio::time::timeout(TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| "body timed out".to_string())?
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((status, sse, body))
    }

    /// `initialize` + `notifications/initialized`: a session ready for calls.
    pub(crate) async fn initialize(&mut self) -> Result<(), String> {
        let id = self.id();
        let (status, sse, body) = self.post(initialize_request(id, self.version)).await?;
        if status != StatusCode::OK {
            return Err(format!("initialize: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        check_answer(sse, &body, id)?;
        if self.session.is_none() {
            return Err("initialize: no mcp-session-id header".into());
        }
        let (status, _, body) = self.post(INITIALIZED.to_string()).await?;
        if status != StatusCode::ACCEPTED {
            return Err(format!("notifications/initialized: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        Ok(())
    }
}

pub(crate) fn is_event_stream(resp: &Response<hyper::body::Incoming>) -> bool {
    resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Checks that a body (JSON or an event stream) holds a successful response to `id`.
fn check_answer(sse: bool, body: &[u8], id: u64) -> Result<(), String> {
    if !sse {
        let r = Reply::parse(body)?;
        if !r.answers(id) {
            return Err(format!("expected the response to {id}, got {}", String::from_utf8_lossy(body)));
        }
        return r.ok();
    }
    let mut found = Err(format!("no response to {id} in the stream"));
    let mut reader = SseReader::default();
    reader.feed(body, |data| {
        let r = Reply::parse(data)?;
        if r.answers(id) {
            found = r.ok();
        }
        Ok(())
    })?;
    found
}

pub(crate) async fn connect_sessions(
    addr: SocketAddr,
    path: &str,
    c: usize,
    version: &'static str,
) -> Result<Vec<HttpClient>, String> {
    let mut clients = Vec::with_capacity(c);
    for _ in 0..c {
        let mut cl = HttpClient::connect(addr, path, version).await?;
        cl.initialize().await?;
        clients.push(cl);
    }
    Ok(clients)
}

/// The echo loop of `c` sessions. `upstream_children_of`: a gateway whose stdio upstreams
/// (started by the sessions' initialize) are watched too, each as `upstream`.
pub(crate) async fn http_echo(
    addr: SocketAddr,
    path: &str,
    c: usize,
    plan: Plan,
    watch: &[(&str, &Proc)],
    upstream_children_of: Option<&Proc>,
) -> Result<Run, String> {
    let clients = connect_sessions(addr, path, c, PROTOCOL_VERSION).await?;
    let mut watched: Vec<_> = watch.iter().map(|(role, p)| p.watch(role)).collect();
    if let Some(p) = upstream_children_of {
        watched.extend(children_of(p.pid()).into_iter().map(|pid| (UPSTREAM.to_string(), pid)));
    }
    let window = Window::after_warmup(plan);
    let work = async move {
        let tasks: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(echo_loop(cl, window))).collect();
        let mut total = Tally::new();
        for t in tasks {
            total.merge(t.await.map_err(|e| e.to_string())??);
        }
        Ok(total)
    };
    measure(window, &watched, work).await
}

/// One session's closed loop: the next call goes out when the last one is answered.
async fn echo_loop(mut cl: HttpClient, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let id = cl.id();
        let (status, sse, body) = cl.post(echo_request(id)).await?;
        let t1 = Instant::now();
        if status != StatusCode::OK {
            return Err(format!("tools/call: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        check_answer(sse, &body, id)?;
        if window.contains(t1) {
            tally.done += 1;
            tally.sse += u64::from(sse);
            tally.record(t1 - t0);
        }
    }
}

pub(crate) async fn progress(
    addr: SocketAddr,
    path: &str,
    steps: u64,
    plan: Plan,
    watch: &[(&str, &Proc)],
    upstream_children_of: Option<&Proc>,
) -> Result<Run, String> {
    let mut clients = connect_sessions(addr, path, 1, PROTOCOL_VERSION).await?;
    let cl = clients.pop().expect("one session");
    let mut watched: Vec<_> = watch.iter().map(|(role, p)| p.watch(role)).collect();
    // A stdio upstream is a child of the gateway, started by the session's initialize.
    if let Some(p) = upstream_children_of {
        watched.extend(children_of(p.pid()).into_iter().map(|pid| ("upstream demo".to_string(), pid)));
    }
    let window = Window::after_warmup(plan);
    measure(window, &watched, progress_loop(cl, steps, window)).await
}

/// Calls `slow` with many steps in a closed loop. Counts, inside the window, how far the
/// reported progress advanced (steps: what the upstream sent, whether every notification got
/// through or coalescing merged some) and how many notifications arrived. A stream the server
/// drops is resumed with `Last-Event-ID`.
async fn progress_loop(mut cl: HttpClient, steps: u64, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let id = cl.id();
        let mut resp = cl.send(Method::POST, Bytes::from(slow_request(id, steps)), None).await?;
        if resp.status() != StatusCode::OK {
            return Err(format!("slow: HTTP {}", resp.status()));
        }
        let mut reader = SseReader::default();
        let mut value = 0u64;
        let mut events = 0u64;
        let mut answered = false;
        let mut stalled = 0;
        let mut trail = Vec::new();
        loop {
            let sse = is_event_stream(&resp);
            trail.push(format!("HTTP {} {}", resp.status(), if sse { "SSE" } else { "not SSE" }));
            if !sse {
                // Plain JSON: the response alone (no room for notifications before it).
                let body = tokio::time::timeout(TIMEOUT, resp.into_body().collect())
                    .await
                    .map_err(|_| "body timed out".to_string())?
                    .map_err(|e| format!("body: {e}"))?
                    .to_bytes();
                let r = Reply::parse(&body)?;
                if !r.answers(id) {
                    return Err(format!("slow: unexpected answer {}", String::from_utf8_lossy(&body)));
                }
                r.ok()?;
                break;
            }
            let mut body = resp.into_body();
            let before = events;
            loop {
                let frame = tokio::time::timeout(TIMEOUT, body.frame())
                    .await
                    .map_err(|_| format!("no event for {TIMEOUT:?}"))?;
                let Some(frame) = frame else { break };
                let frame = frame.map_err(|e| format!("stream: {e}"))?;
                let Ok(data) = frame.into_data() else { continue };
                let in_window = window.contains(Instant::now());
                let mut on_message = |d: &[u8]| -> Result<(), String> {
                    let r = Reply::parse(d)?;
                    if r.method.as_deref() == Some("notifications/progress") {
                        let v = r.params.and_then(|p| p.progress).unwrap_or(0.0) as u64;
                        events += 1;
                        if in_window {
                            tally.events += 1;
                            tally.done += v.saturating_sub(value);
                        }
                        value = value.max(v);
                    } else if r.answers(id) {
                        r.ok()?;
                        answered = true;
                    }
                    Ok(())
                };
                reader.feed(&data, &mut on_message)?;
            }
            trail.push(format!("{} notifications", events - before));
            if answered {
                break;
            }
            let Some(last) = reader.last_id.clone() else { return Err("the stream ended without a response".into()) };
            // The server drops a stream its client does not drain fast enough; resuming is the
            // client's job. Give up only when resuming stops making progress.
            stalled = if events == before { stalled + 1 } else { 0 };
            tally.resumed += 1;
            if stalled >= 3 || trail.len() > 30_000 {
                trail.drain(..trail.len().saturating_sub(12));
                return Err(format!("the stream kept ending without a response: …, {}", trail.join(", ")));
            }
            trail.push(format!("resume after {last}"));
            reader = SseReader { last_id: Some(last.clone()), ..Default::default() };
            resp = cl.send(Method::GET, Bytes::new(), Some(&last)).await?;
        }
        let t1 = Instant::now();
        // The final value must arrive before the result, coalescing or not.
        if value < steps {
            tally.lost += 1;
        }
        if t0 >= window.start && t1 <= window.end {
            tally.record(t1 - t0);
        }
    }
}
