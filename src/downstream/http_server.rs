//! Downstream Streamable HTTP (protocol 2025-03-26 … 2025-11-25): POST with JSON or SSE
//! responses, the GET stream, DELETE, session ids, Origin/Host checks, body limits, and
//! `Last-Event-ID` resumption. Each upstream is served at `/mcp/<name>`; the legacy HTTP+SSE
//! transport's `/sse/<name>` is routed to [`legacy_sse`](crate::downstream::legacy_sse), with
//! the same guards and one `max_sessions` for both; the operator's routes (`/healthz`,
//! `/readyz`, `/metrics`) to [`ops`](crate::downstream::ops), before either, and the task
//! page's (`/tasks`) to `task_page`.

use crate::clock::Deadlines;
use crate::config::UpstreamConfig;
use crate::downstream::auth::{Auth, Principal, authorization};
use crate::downstream::http_body::{
    Body, Refusal, SseBody, accepts_event_stream, check_json_content_type, empty, json_or_limited, plain, read_body,
    rpc_error, sse_response,
};
use crate::downstream::http_guard::{self, SessionSlots, Slot};
use crate::downstream::{
    http_batch, http_modern,
    legacy_sse::Legacy,
    routes::Routes,
    streams::{ParkedStream, Streams},
};
use crate::gateway::Gateway;
use crate::gateway::session::{ParkedRequests, Session};
use crate::jsonrpc::{self, INVALID_REQUEST, Kind, Message, RpcError};
use crate::locks::Mutex;
use crate::mcp::ProtocolVersion;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::transport::mcp_http::SESSION_HEADER;

mod accept;
mod authn;
mod drain;
mod fds;
mod hangup;
pub use fds::raise_open_file_limit;
mod layers;
mod lifecycle;
mod retire;
mod revive;

/// One downstream HTTP session.
struct HttpSession {
    session: Arc<Session>,
    streams: Arc<Streams>,
    /// The path it was created on: it is not found on any other.
    path: String,
    /// Who created it (with authentication on): it is not found for anyone else.
    principal: Option<Principal>,
    _slot: Slot,
    _counted: crate::metrics::SessionCount,
}

/// The HTTP front of the gateway: routes, sessions, and their limits.
pub struct HttpServer {
    gateway: Arc<Gateway>,
    routes: crate::downstream::routes::Routes,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    /// When each session may next have idled out (`session_idle_timeout`).
    idle: Deadlines<String>,
    /// One permit per open connection (`max_connections`).
    connections: Arc<tokio::sync::Semaphore>,
    /// Cancelled when shutdown begins: no new connections, and open ones close once their
    /// current request is answered.
    stopping: CancellationToken,
    /// Places for sessions, shared with the legacy transport (`max_sessions`).
    slots: Arc<SessionSlots>,
    /// The legacy HTTP+SSE transport at `/sse/<name>`.
    legacy: Arc<Legacy>,
    /// Modern clients' requests waiting for their input (multi round-trip).
    parked: Arc<ParkedRequests>,
    /// Modern clients' `subscriptions/listen` streams, which shutdown ends at once.
    listens: Arc<crate::downstream::listens::OpenListens>,
    /// Who a request comes from (`[server.auth]`).
    auth: crate::downstream::auth::LiveAuth,
    /// The exchanges in flight, which shutdown drains.
    busy: Arc<crate::downstream::exchanges::Exchanges>,
    /// CORS for `cors_origins`, if any (made by the first connection).
    cors: std::sync::OnceLock<Option<tower_http::cors::CorsLayer>>,
    /// The live task page at `/tasks` (`[server.task_page]`).
    task_page: Arc<crate::downstream::task_page::TaskPage>,
    /// What new connections are served over TLS with (`[server.tls]`; a reload replaces it).
    tls: arc_swap::ArcSwapOption<crate::downstream::tls::TlsAcceptor>,
}

impl HttpServer {
    /// Serves every upstream of the live config (a reload changes them) at `/mcp/<name>`, and
    /// over the legacy HTTP+SSE transport at `/sse/<name>`.
    pub fn new(gateway: Arc<Gateway>) -> Arc<HttpServer> {
        Self::build(gateway, Routes::Live("/mcp/"), Routes::Live("/sse/"))
    }

    /// Serves the given paths over Streamable HTTP only (the demo server uses `/mcp`).
    pub fn with_routes(gateway: Arc<Gateway>, routes: HashMap<String, Arc<UpstreamConfig>>) -> Arc<HttpServer> {
        Self::build(gateway, Routes::Fixed(routes), Routes::Fixed(HashMap::new()))
    }

    fn build(gateway: Arc<Gateway>, routes: Routes, legacy: Routes) -> Arc<HttpServer> {
        let l = gateway.limits();
        let connections = Arc::new(tokio::sync::Semaphore::new(l.max_connections));
        let stopping = CancellationToken::new();
        let idle = Deadlines::new(l.session_idle_timeout, Duration::MAX);
        let slots = SessionSlots::new(l.max_sessions, l.max_sessions_per_client);
        let listens = crate::downstream::listens::OpenListens::new(l.max_connections, l.max_listens_per_client);
        let legacy = Legacy::new(gateway.clone(), legacy, slots.clone());
        let sessions = Mutex::new(HashMap::new());
        let parked = ParkedRequests::new();
        let cors = std::sync::OnceLock::new();
        let auth = Arc::new(arc_swap::ArcSwap::new(Auth::new(
            &gateway.config.server.auth,
            gateway.config.server.tls.is_some(),
        )));
        let busy = Arc::default();
        let task_page = crate::downstream::task_page::TaskPage::new(&gateway, auth.clone(), stopping.clone());
        Arc::new(HttpServer {
            gateway,
            routes,
            sessions,
            idle,
            connections,
            stopping,
            slots,
            legacy,
            parked,
            listens,
            auth,
            busy,
            cors,
            task_page,
            tls: arc_swap::ArcSwapOption::empty(),
        })
    }

    /// Serves one accepted connection until it closes.
    ///
    /// The request headers must arrive within `header_read_timeout` of the connection being
    /// ready for them (which also ends idle keep-alive connections), and a POST body within
    /// `body_read_timeout` of its headers.
    pub async fn serve_connection<I>(self: Arc<Self>, io: I, peer: SocketAddr)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(self.gateway.limits().header_read_timeout);
        let stopping = self.stopping.clone();
        let service = self.front(peer);
        let (io, hang_up) = hangup::watch(io);
        let io = hyper_util::rt::TokioIo::new(io);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        // The connection, its handlers and the upstream requests they make run in this task;
        // waking it from within is not a reason to wake another thread. A client that hangs
        // up ends the connection at once, its responses with it (`hangup`): `biased`, so that
        // hyper reads first what it wants.
        let ended = crate::transport::inline::quietly(async {
            tokio::select! {
                biased;
                r = conn.as_mut() => r.map_err(|e| e.to_string()),
                _ = hang_up.hung_up() => Err("the client hung up".to_string()),
                _ = stopping.cancelled() => tokio::select! {
                    biased;
                    r = async {
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    } => r.map_err(|e| e.to_string()),
                    _ = hang_up.hung_up() => Err("the client hung up".to_string()),
                },
            }
        })
        .await;
        if let Err(e) = ended {
            tracing::debug!(%peer, "connection ended: {e}");
        }
    }

    /// Shuts down gracefully: stops accepting connections, ends every `subscriptions/listen`
    /// stream with its answer (`downstream::listens`), gives the requests in flight
    /// `drain_timeout` to finish (`drain`), answers the rest with JSON-RPC -32000, ends every
    /// session (stdio children stopped, upstream HTTP sessions deleted), and waits briefly
    /// for the connections to send what they have.
    pub async fn shutdown(&self) {
        self.stopping.cancel();
        // A listen stream lasts as long as its client wants: it ends now, with its answer.
        let ended = self.listens.end_all();
        if ended > 0 {
            tracing::info!("ended {ended} subscriptions/listen streams");
        }
        let limits = self.gateway.limits();
        let deadline = tokio::time::Instant::now() + limits.drain_timeout;
        self.drain(deadline).await;
        let shutting_down = RpcError::new(jsonrpc::UPSTREAM_UNAVAILABLE, "the gateway is shutting down");
        self.legacy.shut_down(deadline, &shutting_down).await;
        self.idle.close();
        let all: Vec<_> = self.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
        for s in &all {
            s.streams.answer_pending(|id| shutting_down.response(Some(id)));
            s.streams.close();
        }
        for s in all {
            s.session.close().await;
        }
        // Shared links, and links that outlive their sessions while hosted tasks run, close too.
        self.gateway.close_links().await;
        let max = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(Duration::from_secs(2), self.connections.acquire_many(max)).await;
    }

    fn all_sessions(&self) -> Vec<Arc<HttpSession>> {
        self.sessions.lock().unwrap().values().cloned().collect()
    }

    /// Sessions open now, of both transports.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len() + self.legacy.session_count()
    }

    async fn route(self: &Arc<Self>, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = req.uri().path().trim_end_matches('/').to_string();
        let stopping = self.stopping.is_cancelled();
        if let Some(r) = crate::downstream::ops::route(&self.gateway, req.method(), &path, stopping).await {
            return r;
        }
        if self.task_page.owns(&path) {
            // Branches off a call's way are boxed: a future is as large as its largest branch.
            return Box::pin(self.task_page.serve(req, &path)).await;
        }
        let upstream = self.routes.get(&self.gateway, &path).or_else(|| self.draining_route(req.headers(), &path));
        let legacy = if upstream.is_none() { self.legacy.route(&path) } else { None };
        if upstream.is_none() && legacy.is_none() {
            return self.unrouted(&req, &path);
        }
        if let Err(refused) = http_guard::check_host_and_origin(self.gateway.limits(), req.headers()) {
            return refused.into_response();
        }
        if let Err(refused) = http_guard::check_one_version(req.headers()) {
            return refused.into_response();
        }
        let auth = self.auth.load_full();
        let principal = match auth.principal(req.headers()).await {
            Ok(p) => p,
            Err(why) => return auth.refusal(&why, req.headers()),
        };
        let Some(upstream) = upstream else {
            return Box::pin(self.legacy.handle(req, legacy.expect("routed"), peer, principal)).await;
        };
        match *req.method() {
            Method::POST => self.post(req, upstream, path, peer, principal).await,
            // The modern era has only POST.
            Method::GET | Method::DELETE if http_modern::names_modern_version(req.headers()) => {
                let mut r =
                    plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: 2026-07-28 is served over POST only\n");
                r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
                r
            }
            Method::GET => Box::pin(self.get(req, &path, &upstream, principal.as_ref())).await,
            Method::DELETE => Box::pin(self.delete(req, &path, principal.as_ref())).await,
            _ => {
                let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
                r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    /// The session named in `Mcp-Session-Id`, if it belongs to `path`; and the request's
    /// `MCP-Protocol-Version`, if given (POST, GET and DELETE alike), must be one the gateway
    /// speaks (any of them: see [`http_guard::check_protocol_version`]).
    fn lookup(
        &self,
        headers: &HeaderMap,
        path: &str,
        principal: Option<&Principal>,
    ) -> Result<(String, Arc<HttpSession>), Refusal> {
        http_guard::check_protocol_version(headers)?;
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "bad request: missing Mcp-Session-Id header",
            ));
        };
        // Another principal's session is as unknown as one that never existed.
        let found = self
            .sessions
            .lock()
            .unwrap()
            .get(id)
            .filter(|s| s.path == path && s.principal.as_ref() == principal)
            .cloned();
        let Some(s) = found else {
            return Err(Refusal::new(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "session not found (it ended or never existed); initialize a new one",
            ));
        };
        Ok((id.to_string(), s))
    }

    async fn post(
        self: &Arc<Self>,
        req: Request<Incoming>,
        upstream: Arc<UpstreamConfig>,
        path: String,
        peer: SocketAddr,
        principal: Option<Principal>,
    ) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let headers = &parts.headers;
        if let Err(refused) = check_json_content_type(headers) {
            return refused.into_response();
        }
        let json_only = !accepts_event_stream(headers);
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
        let limits = self.gateway.limits();
        let body = match read_body(body, limits.max_body_bytes, limits.body_read_timeout).await {
            Ok(b) => b,
            Err(resp) => return resp,
        };
        if !jsonrpc::within_values(&body, limits.max_body_values) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                &crate::downstream::http_body::too_many_values(limits.max_body_values),
                None,
            );
        }
        // One message is read once, here; a batch is split, each read in `http_batch`.
        let parsed = match jsonrpc::parse_body(body) {
            Ok(jsonrpc::Body::Single(m)) => match Message::parse(m) {
                Ok(m) => Ok(m),
                Err(r) => return rpc_error(StatusCode::BAD_REQUEST, &r.error, r.id.as_ref()),
            },
            Ok(jsonrpc::Body::Batch(items)) => Err(items),
            Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &e, None),
        };

        // A modern client's request, served statelessly.
        let existing = headers.contains_key(SESSION_HEADER);
        if http_modern::is_modern_post(headers, parsed.as_ref().ok(), existing) {
            let p = principal.as_ref().map(|p| &*p.name);
            let until = principal.as_ref().and_then(Principal::stream_deadline);
            return Box::pin(http_modern::serve(
                &self.gateway,
                (&self.parked, &self.listens),
                headers,
                parsed.ok(),
                upstream,
                (peer, p, until),
                json_only,
            ))
            .await;
        }
        // An existing session, or a new one for an `initialize`.
        let (sid, hs, created) = if existing {
            match self.lookup(headers, &path, principal.as_ref()) {
                Ok((id, s)) => (id, s, false),
                // Unknown here, it may be one from before a restart (boxed: rare).
                Err(refused) if refused.status == StatusCode::NOT_FOUND => {
                    match Box::pin(self.revive(headers, &path, &upstream, principal.as_ref(), refused)).await {
                        Ok((id, s)) => (id, s, false),
                        Err(refused) => return refused.into_response(),
                    }
                }
                Err(refused) => return refused.into_response(),
            }
        } else {
            let single_request = match &parsed {
                Ok(m) if m.kind() == Kind::Request => Some(m.method()),
                _ => None,
            };
            let is_init = single_request == Some(jsonrpc::Method::Initialize);
            // An `initialize` naming a version the gateway does not speak opens no session.
            if let Err(refused) = http_guard::check_protocol_version(headers) {
                return refused.into_response();
            }
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
            match self.create_session(upstream, path, peer, principal) {
                Ok((id, s)) => (id, s, true),
                Err(refused) => return refused.into_response(),
            }
        };
        // A session `initialize` created is the client's once it has its answer: if the POST
        // goes away first (the client hung up during the handshake), the session goes too.
        let mut unclaimed = created.then(|| Unclaimed { server: self, sid: &sid, hs: &hs, armed: true });
        // A sign of life; a request's stream notes it as it opens or is refused (`open_single`).
        if !parsed.as_ref().is_ok_and(|m| m.kind() == Kind::Request) {
            hs.streams.touch();
        }
        hs.session.present_authorization(authorization(headers));
        let keepalive = self.gateway.limits().sse_keepalive;
        let frame = match parsed {
            Ok(m) => m,
            Err(items) => {
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
                if hs.session.is_draining() {
                    return crate::downstream::http_body::removed_upstream();
                }
                let (max, session) = (self.gateway.limits().max_batch, &hs.session);
                return Box::pin(http_batch::serve(session, &hs.streams, items, max, keepalive, json_only)).await;
            }
        };
        if frame.kind() == Kind::Request && hs.session.is_draining() {
            hs.streams.touch();
            return crate::downstream::http_body::removed_upstream();
        }
        let Some(request_id) = frame.id().cloned().filter(|_| frame.kind() == Kind::Request) else {
            hs.session.handle(frame).await;
            return empty(StatusCode::ACCEPTED);
        };
        let stream = match hs.streams.open_single(&request_id, json_only) {
            Ok(sid) => sid,
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
        // The stream is parked while the session handles the call: an answer that comes at
        // once (an upstream that answers within the inline budget) is held, and taken below
        // with one lock, no channel made.
        let parked = ParkedStream { streams: &hs.streams, sid: stream };
        hs.session.handle(frame).await;
        if let Some(u) = &mut unclaimed {
            u.armed = false;
            Box::pin(self.remember(&sid, &hs)).await;
        }
        let (held, rx) = parked.attach();
        let mut held = VecDeque::from(held);
        // A response held already left the replay buffer as it was taken (`attach`).
        let answered_at_once = held.front().is_some_and(|ev| ev.is_response);

        // One request: plain JSON when its response is ready within the window and nothing
        // else came first; otherwise an event stream, so that progress, server requests and
        // keep-alives flow while the call runs. A client that accepts only JSON gets JSON
        // however long it takes (its stream carries nothing else).
        let window = if json_only { Duration::MAX } else { self.gateway.limits().json_response_window };
        let first = crate::downstream::streams::first_event(&mut held, rx, window).await;
        let session_header = created.then(|| sid.clone());
        match first {
            Ok((Some(ev), _)) if ev.is_response => {
                if !answered_at_once {
                    hs.streams.unbuffer(&ev);
                }
                let limited = self.gateway.live().rate_limits.limits(hs.session.upstream_name());
                if created && !Box::pin(self.keep_new_session(&sid, &hs)).await {
                    return json_or_limited(ev.json, None, limited);
                }
                json_or_limited(ev.json, session_header, limited)
            }
            Ok((Some(ev), rx)) => {
                held.push_front(ev);
                sse_response(SseBody::new(VecDeque::new(), held, rx, keepalive), session_header)
            }
            Ok((None, _)) => empty(StatusCode::ACCEPTED),
            Err(rx) => sse_response(SseBody::new(VecDeque::new(), held, Some(rx), keepalive), session_header),
        }
    }

    async fn get(
        &self,
        req: Request<Incoming>,
        path: &str,
        upstream: &Arc<UpstreamConfig>,
        principal: Option<&Principal>,
    ) -> Response<Body> {
        let accept = req.headers().get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or("");
        if !accept.to_ascii_lowercase().contains("text/event-stream") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &RpcError::new(INVALID_REQUEST, "not acceptable: the GET stream is text/event-stream"),
                None,
            );
        }
        let (_, hs) = match self.lookup(req.headers(), path, principal) {
            Ok(x) => x,
            // A client whose stream reconnects first, after a restart (boxed: rare).
            Err(refused) if refused.status == StatusCode::NOT_FOUND => {
                match Box::pin(self.revive(req.headers(), path, upstream, principal, refused)).await {
                    Ok(x) => x,
                    Err(refused) => return refused.into_response(),
                }
            }
            Err(refused) => return refused.into_response(),
        };
        // A session revived by this GET may follow tasks upstream at once: with its token.
        hs.session.present_authorization(authorization(req.headers()));
        let keepalive = self.gateway.limits().sse_keepalive;
        let last = req.headers().get("last-event-id").and_then(|v| v.to_str().ok());
        let attached = match last.and_then(|l| hs.streams.resume(l)) {
            Some(a) => a,
            None => hs.streams.open_get(),
        };
        let until = principal.and_then(Principal::stream_deadline);
        sse_response(SseBody::new(VecDeque::new(), attached.replay.into(), attached.rx, keepalive).until(until), None)
    }
}

/// Binds `listen` and serves in the background; returns the bound address.
pub async fn bind(
    server: Arc<HttpServer>,
    listen: SocketAddr,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    bind_with(server, listen, None).await
}

/// [`bind`], over TLS when `tls` is given.
pub async fn bind_with(
    server: Arc<HttpServer>,
    listen: SocketAddr,
    tls: Option<crate::downstream::tls::TlsAcceptor>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    Ok((addr, tokio::spawn(server.serve_with(listener, tls))))
}

/// A session created by an `initialize` still being handled: ended if its POST goes away
/// before the session has answered (nobody holds its id).
struct Unclaimed<'a> {
    server: &'a HttpServer,
    sid: &'a str,
    hs: &'a Arc<HttpSession>,
    armed: bool,
}

impl Drop for Unclaimed<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::info!(
            upstream = self.hs.session.upstream_name(),
            "session {} ends: its client hung up during initialize",
            short(self.sid)
        );
        self.server.sessions.lock().unwrap().remove(self.sid);
        self.server.idle.remove(&self.sid.to_string());
        self.hs.streams.close();
        let session = self.hs.session.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { session.close().await });
        }
    }
}

fn counted() -> crate::metrics::SessionCount {
    crate::metrics::global().session_opened(crate::metrics::Transport::StreamableHttp)
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}
