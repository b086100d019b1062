//! Downstream Streamable HTTP (protocol 2025-03-26 … 2025-11-25): POST with JSON or SSE
//! responses, the GET stream, DELETE, session ids, Origin/Host checks, body limits, and
//! `Last-Event-ID` resumption. Each upstream is served at `/mcp/<name>`.

use crate::config::UpstreamConfig;
use crate::gateway::Gateway;
use crate::gateway::session::Session;
use crate::jsonrpc::{self, Frame, INVALID_REQUEST, Id, Kind, RpcError};
use crate::mcp::ProtocolVersion;
use crate::transport::sse;
use crate::transport::streams::{Outgoing, Streams};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// One downstream HTTP session.
struct HttpSession {
    session: Arc<Session>,
    streams: Arc<Streams>,
}

/// The HTTP front of the gateway: routes, sessions, and their limits.
pub struct HttpServer {
    gateway: Arc<Gateway>,
    routes: HashMap<String, Arc<UpstreamConfig>>,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
}

impl HttpServer {
    /// Serves every configured upstream at `/mcp/<name>`.
    pub fn new(gateway: Arc<Gateway>) -> Arc<HttpServer> {
        let routes =
            gateway.config.upstreams.iter().map(|u| (format!("/mcp/{}", u.name), Arc::new(u.clone()))).collect();
        Self::with_routes(gateway, routes)
    }

    /// Serves the given paths (the demo server uses `/mcp`).
    pub fn with_routes(gateway: Arc<Gateway>, routes: HashMap<String, Arc<UpstreamConfig>>) -> Arc<HttpServer> {
        Arc::new(HttpServer { gateway, routes, sessions: Mutex::new(HashMap::new()) })
    }

    /// Accepts connections until the listener fails; sweeps idle sessions meanwhile.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let _sweeper = tokio::spawn(self.clone().sweep_idle());
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(self.clone().serve_connection(tcp, peer));
        }
    }

    /// Serves one accepted connection until it closes.
    pub async fn serve_connection<I>(self: Arc<Self>, io: I, peer: std::net::SocketAddr)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let server = self;
        let service = hyper::service::service_fn(move |req| {
            let server = server.clone();
            async move { Ok::<_, Infallible>(server.handle(req).await) }
        });
        let io = hyper_util::rt::TokioIo::new(io);
        if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
            tracing::debug!(%peer, "connection ended: {e}");
        }
    }

    /// Ends every session (children stopped, upstream sessions deleted).
    pub async fn shutdown(&self) {
        let all: Vec<_> = self.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
        for s in all {
            s.streams.close();
            s.session.close().await;
        }
    }

    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }

    async fn sweep_idle(self: Arc<Self>) {
        let idle = self.gateway.limits().session_idle_timeout;
        let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        loop {
            tokio::time::sleep(every).await;
            let expired: Vec<(String, Arc<HttpSession>)> = {
                let mut map = self.sessions.lock().unwrap();
                let ids: Vec<String> =
                    map.iter().filter(|(_, s)| s.streams.idle_for(idle)).map(|(k, _)| k.clone()).collect();
                ids.into_iter().filter_map(|k| map.remove(&k).map(|s| (k, s))).collect()
            };
            for (id, s) in expired {
                tracing::info!(upstream = s.session.upstream_name(), "session {} idled out", short(&id));
                s.streams.close();
                s.session.close().await;
            }
        }
    }

    async fn handle(self: &Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().trim_end_matches('/');
        let Some(upstream) = self.routes.get(path).cloned() else {
            return plain(StatusCode::NOT_FOUND, "not found: upstreams are served at /mcp/<name>\n");
        };
        if let Err(resp) = self.check_host_and_origin(req.headers()) {
            return resp;
        }
        match *req.method() {
            Method::POST => self.post(req, upstream).await,
            Method::GET => self.get(req),
            Method::DELETE => self.delete(req).await,
            _ => {
                let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
                r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    fn check_host_and_origin(&self, headers: &HeaderMap) -> Result<(), Response<Body>> {
        let limits = self.gateway.limits();
        if !limits.allowed_hosts.iter().any(|h| h == "*") {
            let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
            if !limits.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host_name(host))) {
                return Err(rpc_error(
                    StatusCode::FORBIDDEN,
                    &RpcError::new(INVALID_REQUEST, format!("forbidden: Host {host:?} is not allowed")),
                    None,
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !limits.allowed_origins.iter().any(|pat| origin_matches(pat, origin)) {
                return Err(rpc_error(
                    StatusCode::FORBIDDEN,
                    &RpcError::new(INVALID_REQUEST, format!("forbidden: Origin {origin:?} is not allowed")),
                    None,
                ));
            }
        }
        Ok(())
    }

    fn lookup(&self, headers: &HeaderMap) -> Result<(String, Arc<HttpSession>), Response<Body>> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(rpc_error(
                StatusCode::BAD_REQUEST,
                &RpcError::new(INVALID_REQUEST, "bad request: missing Mcp-Session-Id header"),
                None,
            ));
        };
        match self.sessions.lock().unwrap().get(id) {
            Some(s) => Ok((id.to_string(), s.clone())),
            None => Err(rpc_error(
                StatusCode::NOT_FOUND,
                &RpcError::new(INVALID_REQUEST, "session not found (it ended or never existed); initialize a new one"),
                None,
            )),
        }
    }

    async fn post(self: &Arc<Self>, req: Request<Incoming>, upstream: Arc<UpstreamConfig>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let headers = &parts.headers;
        if let Some(ct) = headers.get(header::CONTENT_TYPE)
            && !ct.to_str().unwrap_or("").to_ascii_lowercase().contains("application/json")
        {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                &RpcError::new(INVALID_REQUEST, "unsupported media type: send application/json"),
                None,
            );
        }
        if let Some(accept) = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()) {
            let a = accept.to_ascii_lowercase();
            if !(a.contains("application/json") || a.contains("text/event-stream") || a.contains("*/*")) {
                return rpc_error(
                    StatusCode::NOT_ACCEPTABLE,
                    &RpcError::new(INVALID_REQUEST, "not acceptable: accept application/json and text/event-stream"),
                    None,
                );
            }
        }
        let body = match read_body(body, self.gateway.limits().max_body_bytes).await {
            Ok(b) => b,
            Err(resp) => return resp,
        };
        let parsed = match jsonrpc::parse_body(&body) {
            Ok(p) => p,
            Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &e, None),
        };

        // An existing session, or a new one for an `initialize`.
        let existing = headers.contains_key(SESSION_HEADER);
        let (sid, hs, created) = if existing {
            match self.lookup(headers) {
                Ok((id, s)) => (id, s, false),
                Err(resp) => return resp,
            }
        } else {
            let single_request = match &parsed {
                jsonrpc::Body::Single(m) if m.get("id").is_some() => m.get("method").and_then(|x| x.as_str()),
                _ => None,
            };
            if single_request == Some("server/discover") {
                // A 2026-07-28 client probing: refuse like a legacy server, without a session.
                tracing::info!(upstream = %upstream.name, "answered the client's server/discover probe with -32601 (it falls back to initialize)");
                let id = match &parsed {
                    jsonrpc::Body::Single(m) => m.get("id").and_then(Id::from_value),
                    _ => None,
                };
                return rpc_error(StatusCode::OK, &crate::mcp::version::refuse_discover(), id.as_ref());
            }
            let is_init = single_request == Some("initialize");
            if !is_init {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &RpcError::new(
                        INVALID_REQUEST,
                        "bad request: missing Mcp-Session-Id header (only initialize may be sent without one)",
                    ),
                    None,
                );
            }
            match self.create_session(upstream) {
                Ok((id, s)) => (id, s, true),
                Err(resp) => return resp,
            }
        };
        hs.streams.touch();
        if !created && let Some(v) = headers.get(VERSION_HEADER) {
            let v = v.to_str().unwrap_or("");
            if ProtocolVersion::parse(v).is_none() {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &RpcError::new(INVALID_REQUEST, format!("bad request: unsupported MCP-Protocol-Version {v:?}")),
                    None,
                );
            }
        }

        let (messages, batch) = match parsed {
            jsonrpc::Body::Single(m) => (vec![m], false),
            jsonrpc::Body::Batch(items) => {
                let version = hs.session.version();
                if version != Some(ProtocolVersion::V2025_03_26) {
                    let v = version.map(|v| v.as_str()).unwrap_or("an uninitialized session");
                    return rpc_error(
                        StatusCode::BAD_REQUEST,
                        &RpcError::new(
                            INVALID_REQUEST,
                            format!(
                                "invalid request: JSON-RPC batches are only accepted in 2025-03-26 sessions, not {v}"
                            ),
                        ),
                        None,
                    );
                }
                (items, true)
            }
        };
        let mut frames: Vec<Frame> = Vec::with_capacity(messages.len());
        let mut errors: Vec<serde_json::Value> = Vec::new();
        for m in messages {
            match jsonrpc::classify(m) {
                Ok(f) if batch && f.method() == "initialize" => errors.push(
                    RpcError::new(INVALID_REQUEST, "invalid request: initialize must not be batched")
                        .response(f.id.as_ref()),
                ),
                Ok(f) => frames.push(f),
                Err((id, e)) if !batch => return rpc_error(StatusCode::BAD_REQUEST, &e, id.as_ref()),
                Err((id, e)) => errors.push(e.response(id.as_ref())),
            }
        }
        let request_ids: Vec<Id> =
            frames.iter().filter(|f| f.kind == Kind::Request).filter_map(|f| f.id.clone()).collect();
        if request_ids.is_empty() && errors.is_empty() {
            for f in frames {
                hs.session.handle(f).await;
            }
            return empty(StatusCode::ACCEPTED);
        }
        let (_stream, mut rx) = match hs.streams.open_post(&request_ids) {
            Ok(x) => x,
            Err(dup) => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &RpcError::new(
                        INVALID_REQUEST,
                        format!("invalid request: id {dup} is already in use by a request in flight"),
                    ),
                    Some(&dup),
                );
            }
        };
        for f in frames {
            hs.session.handle(f).await;
        }

        let keepalive = self.gateway.limits().sse_keepalive;
        if batch {
            // Batches always stream: one event per response, the errors first.
            let prefix =
                errors.into_iter().map(|e| sse::encode_event(None, &serde_json::to_vec(&e).unwrap())).collect();
            return sse_response(SseBody::new(prefix, VecDeque::new(), Some(rx), keepalive), None);
        }
        // One request: plain JSON when its response is ready within the window and nothing
        // else came first; otherwise an event stream, so that progress, server requests and
        // keep-alives flow while the call runs.
        let window = self.gateway.limits().json_response_window;
        let first = tokio::time::timeout(window, rx.recv()).await;
        let session_header = created.then(|| sid.clone());
        match first {
            Ok(Some(ev)) if ev.is_response => {
                hs.streams.unbuffer(&ev);
                if created && !self.keep_new_session(&sid, &hs).await {
                    return json_response(ev.json, None);
                }
                json_response(ev.json, session_header)
            }
            Ok(Some(ev)) => {
                sse_response(SseBody::new(VecDeque::new(), VecDeque::from([ev]), Some(rx), keepalive), session_header)
            }
            Ok(None) => empty(StatusCode::ACCEPTED),
            Err(_) => sse_response(SseBody::new(VecDeque::new(), VecDeque::new(), Some(rx), keepalive), session_header),
        }
    }

    /// Keeps a session created by `initialize` only if the upstream accepted it.
    async fn keep_new_session(&self, sid: &str, hs: &Arc<HttpSession>) -> bool {
        if hs.session.version().is_some() {
            tracing::info!(upstream = hs.session.upstream_name(), "session {} started", short(sid));
            return true;
        }
        self.sessions.lock().unwrap().remove(sid);
        hs.streams.close();
        hs.session.close().await;
        false
    }

    fn create_session(&self, upstream: Arc<UpstreamConfig>) -> Result<(String, Arc<HttpSession>), Response<Body>> {
        let mut map = self.sessions.lock().unwrap();
        if map.len() >= self.gateway.limits().max_sessions {
            return Err(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &RpcError::new(
                    jsonrpc::GATEWAY_BUSY,
                    format!("too many sessions (limit {})", self.gateway.limits().max_sessions),
                ),
                None,
            ));
        }
        let streams = Arc::new(Streams::new(self.gateway.limits().event_buffer));
        let session = Session::new(self.gateway.clone(), upstream, streams.clone());
        let id = new_session_id();
        let hs = Arc::new(HttpSession { session, streams });
        map.insert(id.clone(), hs.clone());
        Ok((id, hs))
    }

    fn get(&self, req: Request<Incoming>) -> Response<Body> {
        let accept = req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("");
        if !accept.to_ascii_lowercase().contains("text/event-stream") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &RpcError::new(INVALID_REQUEST, "not acceptable: the GET stream is text/event-stream"),
                None,
            );
        }
        let (_, hs) = match self.lookup(req.headers()) {
            Ok(x) => x,
            Err(resp) => return resp,
        };
        let keepalive = self.gateway.limits().sse_keepalive;
        let last = req.headers().get("last-event-id").and_then(|v| v.to_str().ok());
        let attached = match last.and_then(|l| hs.streams.resume(l)) {
            Some(a) => a,
            None => hs.streams.open_get(),
        };
        sse_response(SseBody::new(VecDeque::new(), attached.replay.into(), attached.rx, keepalive), None)
    }

    async fn delete(&self, req: Request<Incoming>) -> Response<Body> {
        let (id, _) = match self.lookup(req.headers()) {
            Ok(x) => x,
            Err(resp) => return resp,
        };
        let removed = self.sessions.lock().unwrap().remove(&id);
        if let Some(hs) = removed {
            tracing::info!(upstream = hs.session.upstream_name(), "session {} deleted by the client", short(&id));
            hs.streams.close();
            hs.session.close().await;
        }
        empty(StatusCode::OK)
    }
}

/// Binds `listen` and serves in the background; returns the bound address.
pub async fn bind(
    server: Arc<HttpServer>,
    listen: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    Ok((addr, tokio::spawn(server.serve(listener))))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// 128 random bits as hex: the session id is a bearer capability.
fn new_session_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

/// `pattern` is an origin, optionally ending in `:*` for any port.
fn origin_matches(pattern: &str, origin: &str) -> bool {
    match pattern.strip_suffix(":*") {
        Some(base) => {
            origin == base
                || origin.strip_prefix(base).is_some_and(|rest| {
                    rest.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
                })
        }
        None => pattern == "*" || pattern == origin,
    }
}

async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, Response<Body>> {
    use hyper::body::Body as _;
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &RpcError::new(INVALID_REQUEST, format!("payload too large: the limit is {limit} bytes")),
            None,
        )
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => {
            Err(rpc_error(StatusCode::BAD_REQUEST, &RpcError::new(INVALID_REQUEST, format!("bad request: {e}")), None))
        }
    }
}

// ---- responses ----

/// Every response body the server sends: a whole body, or an event stream.
pub enum Body {
    Full(Option<Bytes>),
    Sse(SseBody),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(BodyFrame::data(b)))),
            Body::Sse(s) => s.poll_next(cx).map(|o| o.map(|b| Ok(BodyFrame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }
}

/// An SSE body: ready-made frames, then replayed events, then the live channel, with
/// keep-alive comments while idle. Ends when the channel's sender is dropped.
pub struct SseBody {
    frames: VecDeque<Bytes>,
    events: VecDeque<Outgoing>,
    rx: Option<mpsc::Receiver<Outgoing>>,
    keepalive: tokio::time::Interval,
}

impl SseBody {
    fn new(
        frames: VecDeque<Bytes>,
        events: VecDeque<Outgoing>,
        rx: Option<mpsc::Receiver<Outgoing>>,
        every: Duration,
    ) -> SseBody {
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        SseBody { frames, events, rx, keepalive }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(f) = self.frames.pop_front() {
            return Poll::Ready(Some(f));
        }
        if let Some(ev) = self.events.pop_front() {
            return Poll::Ready(Some(sse::encode_event(Some(&ev.event_id()), &ev.json)));
        }
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(None) };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(ev)) => Poll::Ready(Some(sse::encode_event(Some(&ev.event_id()), &ev.json))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => match self.keepalive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Bytes::from_static(sse::KEEPALIVE))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::Full(None));
    *r.status_mut() = status;
    r
}

/// An HTTP error whose body is a JSON-RPC error response.
fn rpc_error(status: StatusCode, e: &RpcError, id: Option<&Id>) -> Response<Body> {
    let mut r = json_response(Bytes::from(serde_json::to_vec(&e.response(id)).unwrap()), None);
    *r.status_mut() = status;
    r
}

fn json_response(json: Bytes, session: Option<String>) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(json)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(s) = session {
        r.headers_mut().insert(SESSION_HEADER, HeaderValue::from_str(&s).expect("hex is a valid header"));
    }
    r
}

fn sse_response(body: SseBody, session: Option<String>) -> Response<Body> {
    let mut r = Response::new(Body::Sse(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(s) = session {
        h.insert(SESSION_HEADER, HeaderValue::from_str(&s).expect("hex is a valid header"));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_hosts() {
        assert!(origin_matches("http://localhost:*", "http://localhost:3000"));
        assert!(origin_matches("http://localhost:*", "http://localhost"));
        assert!(!origin_matches("http://localhost:*", "http://localhost.evil.com"));
        assert!(!origin_matches("http://localhost:*", "http://localhost:80x"));
        assert!(origin_matches("https://app.example", "https://app.example"));
        assert_eq!(host_name("127.0.0.1:8700"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8700"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
        assert_eq!(new_session_id().len(), 32);
    }
}
