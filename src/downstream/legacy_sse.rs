//! Downstream legacy HTTP+SSE, the 2024-11-05 transport, for every upstream: `GET /sse/<name>`
//! opens a session and its one event stream, whose first event (`endpoint`) names the URI to
//! POST its messages to, `/sse/<name>/messages?sessionId=<id>`. A POST is answered `202
//! Accepted`; everything for the client (responses, notifications, the server's requests)
//! comes as `message` events on the stream.
//!
//! This module owns the two endpoints, the sessions opened on them and their streams
//! ([`outbox`]). A session is the same [`Session`] as over Streamable HTTP (same upstreams,
//! same features); the Streamable HTTP server routes `/sse/…` here after its `Host`/`Origin`
//! checks, and both count against one `max_sessions`. The transport has no resumption: the
//! stream's end is the session's end, whether the client closed it, the client stopped
//! reading it, or the gateway shut down.

mod outbox;

use crate::config::UpstreamConfig;
use crate::downstream::auth::Principal;
use crate::downstream::auth::authorization;
use crate::downstream::http_body::{
    Body, Refusal, accepts_event_stream, check_json_content_type, empty, event_stream_response, plain, read_body,
    rpc_error,
};
use crate::downstream::http_guard::{self, SessionSlots, Slot};
use crate::downstream::routes::Routes;
use crate::gateway::Gateway;
use crate::gateway::session::Session;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_REQUEST, Id, Kind, Message, RpcError};
use crate::locks::Mutex;
use crate::transport::sse;
use crate::upstream::client::{ClientSink, Route};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use outbox::{NotTaken, Outbox};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

/// The query parameter of the POST endpoint that names the session.
const SESSION_PARAM: &str = "sessionId";

/// One session of the legacy transport.
struct LegacySession {
    session: Arc<Session>,
    outbox: Arc<Outbox>,
    /// The stream path it was opened on (`/sse/<name>`): its messages are not taken on
    /// another upstream's endpoint.
    path: String,
    /// Who opened it (with authentication on): its messages are not taken from anyone else.
    principal: Option<Principal>,
    _slot: Slot,
    _counted: crate::metrics::SessionCount,
}

/// Which of the two endpoints a path is.
pub(crate) enum Endpoint {
    /// `/sse/<name>`: GET opens a session.
    Stream(Arc<UpstreamConfig>, String),
    /// `/sse/<name>/messages`: POST sends a session a message.
    Messages(String),
}

pub(crate) struct Legacy {
    gateway: Arc<Gateway>,
    /// `/sse/<name>` → its upstream.
    routes: Routes,
    sessions: Mutex<HashMap<String, Arc<LegacySession>>>,
    slots: Arc<SessionSlots>,
    me: Weak<Legacy>,
}

impl Legacy {
    /// Serves the upstreams of `routes` (`/sse/<name>`); sessions take their places from `slots`.
    pub(crate) fn new(gateway: Arc<Gateway>, routes: Routes, slots: Arc<SessionSlots>) -> Arc<Legacy> {
        Arc::new_cyclic(|me| Legacy { gateway, routes, sessions: Mutex::new(HashMap::new()), slots, me: me.clone() })
    }

    /// The endpoint `path` (without a trailing `/`) names, if it is one of ours.
    pub(crate) fn route(&self, path: &str) -> Option<Endpoint> {
        if let Some(u) = self.routes.get(&self.gateway, path) {
            return Some(Endpoint::Stream(u, path.to_string()));
        }
        let stream = path.strip_suffix("/messages")?;
        let routed = self.routes.get(&self.gateway, stream).is_some()
            // A removed upstream's sessions still take their clients' answers while they drain.
            || self.sessions.lock().unwrap().values().any(|s| s.path == stream && s.session.is_draining());
        routed.then(|| Endpoint::Messages(stream.to_string()))
    }

    pub(crate) fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }

    /// Serves a request to one of the endpoints (its `Host` and `Origin` already checked).
    pub(crate) async fn handle(
        &self,
        req: Request<Incoming>,
        to: Endpoint,
        peer: SocketAddr,
        principal: Option<Principal>,
    ) -> Response<Body> {
        let allow = |allow: &'static str, text: &'static str| {
            let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, text);
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            r
        };
        match (to, req.method()) {
            (Endpoint::Stream(upstream, path), &Method::GET) => self.open(&req, upstream, path, peer, principal),
            (Endpoint::Messages(path), &Method::POST) => self.post(req, &path, principal.as_ref()).await,
            (Endpoint::Stream(..), _) => {
                allow("GET", "method not allowed: GET opens the stream; POST to the endpoint it names\n")
            }
            (Endpoint::Messages(_), _) => allow("POST", "method not allowed: messages are POSTed here\n"),
        }
    }

    /// `GET /sse/<name>`: a new session, and its stream.
    fn open(
        &self,
        req: &Request<Incoming>,
        upstream: Arc<UpstreamConfig>,
        path: String,
        peer: SocketAddr,
        principal: Option<Principal>,
    ) -> Response<Body> {
        if !accepts_event_stream(req.headers()) {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                &RpcError::new(INVALID_REQUEST, "not acceptable: the SSE stream is text/event-stream"),
                None,
            );
        }
        // No version is negotiated yet; one that is named must still be one the gateway speaks.
        if let Err(refused) = http_guard::check_protocol_version(req.headers()) {
            return refused.into_response();
        }
        let slot = match self.slots.take(&http_guard::client_of(principal.as_ref(), peer.ip())) {
            Ok(s) => s,
            Err(refused) => return refused.into_response(),
        };
        let limits = self.gateway.limits();
        let outbox = Arc::new(Outbox::new(limits.event_buffer, limits.event_buffer_bytes, limits.max_in_flight));
        let (gateway, sink) = (self.gateway.clone(), outbox.clone());
        let until = principal.as_ref().and_then(Principal::stream_deadline);
        let session = match &principal {
            Some(p) => Session::for_principal(gateway, upstream, sink, &p.name),
            // A client is its remote address (as over Streamable HTTP).
            None => {
                Session::for_client(gateway, upstream, sink, Some(crate::downstream::http_guard::address_of(peer.ip())))
            }
        };
        let id = crate::random::id128();
        tracing::info!(upstream = session.upstream_name(), "legacy SSE session {} opened", short(&id));
        let endpoint = format!("event: endpoint\ndata: {path}/messages?{SESSION_PARAM}={id}\n\n");
        let ls = Arc::new(LegacySession {
            session,
            outbox: outbox.clone(),
            path,
            principal,
            _slot: slot,
            _counted: crate::metrics::global().session_opened(crate::metrics::Transport::LegacySse),
        });
        self.sessions.lock().unwrap().insert(id.clone(), ls);
        let mut keepalive =
            tokio::time::interval_at(tokio::time::Instant::now() + limits.sse_keepalive, limits.sse_keepalive);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stream = Stream {
            first: Some(Bytes::from(endpoint)),
            outbox,
            keepalive,
            _end: EndOnDrop { legacy: self.me.clone(), id },
        };
        // The session is its stream: it ends when the credential that opened it expires.
        let frames: Pin<Box<dyn futures_util::Stream<Item = Bytes> + Send>> = match until {
            Some(d) => Box::pin(futures_util::StreamExt::take_until(stream, tokio::time::sleep_until(d))),
            None => Box::pin(stream),
        };
        event_stream_response(Body::Frames(frames), None)
    }

    /// `POST /sse/<name>/messages?sessionId=<id>`: one message (or, in a 2025-03-26 session, a
    /// batch) for the session; 202 once it is on its way, and what it causes comes on the
    /// stream. Whatever is refused is refused here, with the HTTP status and a JSON-RPC error
    /// body (as SDK servers do, nothing goes on the stream for it), and changes nothing.
    async fn post(&self, req: Request<Incoming>, path: &str, principal: Option<&Principal>) -> Response<Body> {
        let ls = match self.lookup(req.uri().query(), path, principal) {
            Ok(ls) => ls,
            Err(refused) => return refused.into_response(),
        };
        let (parts, body) = req.into_parts();
        if let Err(refused) = check_json_content_type(&parts.headers) {
            return refused.into_response();
        }
        if let Err(refused) = http_guard::check_protocol_version(&parts.headers) {
            return refused.into_response();
        }
        let limits = self.gateway.limits();
        let body = match read_body(body, limits.max_body_bytes, limits.body_read_timeout).await {
            Ok(b) => b,
            Err(resp) => return resp,
        };
        if !jsonrpc::within_values(&body, limits.max_body_values) {
            let e = crate::downstream::http_body::too_many_values(limits.max_body_values);
            return rpc_error(StatusCode::BAD_REQUEST, &e, None);
        }
        ls.session.present_authorization(authorization(&parts.headers));
        let frame = match jsonrpc::parse_body(body) {
            Ok(jsonrpc::Body::Single(m)) => match Message::parse(m) {
                Ok(m) => m,
                Err(r) => return rpc_error(StatusCode::BAD_REQUEST, &r.error, r.id.as_ref()),
            },
            Ok(jsonrpc::Body::Batch(items)) => return self.post_batch(&ls, items).await,
            Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &e, None),
        };
        if let Err((status, e, id)) = self.hand_on(&ls, frame).await {
            return rpc_error(status, &e, id.as_ref());
        }
        empty(StatusCode::ACCEPTED)
    }

    /// A batch of a 2025-03-26 session, taken entry by entry: the responses come on the
    /// stream one by one, and so do the errors for entries that cannot be taken.
    async fn post_batch(&self, ls: &LegacySession, items: Vec<Bytes>) -> Response<Body> {
        let version = ls.session.version();
        if !version.is_some_and(|v| v.allows_batches()) {
            let v = version.map(|v| v.as_str()).unwrap_or("an uninitialized session");
            let why = format!("invalid request: JSON-RPC batches are only accepted in 2025-03-26 sessions, not {v}");
            return rpc_error(StatusCode::BAD_REQUEST, &RpcError::new(INVALID_REQUEST, why), None);
        }
        let max = self.gateway.limits().max_batch;
        if items.len() > max {
            let why = format!("invalid request: a batch may hold at most {max} messages; this one has {}", items.len());
            return rpc_error(StatusCode::BAD_REQUEST, &RpcError::new(INVALID_REQUEST, why), None);
        }
        let refuse = |e: &RpcError, id: Option<&Id>| ls.outbox.deliver(Message::made(e.response(id)), Route::Unrelated);
        for item in items {
            match Message::parse(item) {
                Ok(f) if f.method() == jsonrpc::Method::Initialize => {
                    refuse(&RpcError::new(INVALID_REQUEST, "invalid request: initialize must not be batched"), f.id())
                }
                Ok(f) => {
                    // Each entry is sent on its way without waiting for it.
                    if let Err((_, e, id)) = crate::transport::inline::serially(self.hand_on(ls, f)).await {
                        refuse(&e, id.as_ref());
                    }
                }
                Err(r) => refuse(&r.error, r.id.as_ref()),
            }
        }
        empty(StatusCode::ACCEPTED)
    }

    /// Hands one message to the session; a request first becomes owed its response.
    async fn hand_on(&self, ls: &LegacySession, frame: Message) -> Result<(), (StatusCode, RpcError, Option<Id>)> {
        let request = frame.id().cloned().filter(|_| frame.kind() == Kind::Request);
        if request.is_some() && ls.session.is_draining() {
            let e = RpcError::new(INVALID_REQUEST, "not found: the upstream was removed from the config");
            return Err((StatusCode::NOT_FOUND, e, request));
        }
        if let Some(id) = &request
            && let Err(not) = ls.outbox.expect(id)
        {
            let max = self.gateway.limits().max_in_flight;
            let (status, code, why) = match not {
                NotTaken::InUse => (
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    format!("invalid request: id {id} is already in use by a request in flight"),
                ),
                NotTaken::Busy => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    GATEWAY_BUSY,
                    format!("too many requests in flight in this session (limit {max}, server.max_in_flight)"),
                ),
                NotTaken::Closed => {
                    (StatusCode::NOT_FOUND, INVALID_REQUEST, "session not found: its stream ended".to_string())
                }
            };
            return Err((status, RpcError::new(code, why), Some(id.clone())));
        }
        // A POST that goes away while its message is being handed on was not accepted:
        // nothing is owed for it.
        let mut owed = Owed { outbox: &ls.outbox, id: request };
        ls.session.handle(frame).await;
        owed.id = None;
        Ok(())
    }

    /// The session the POST's `sessionId` names, if it was opened on `path` (by `principal`).
    fn lookup(
        &self,
        query: Option<&str>,
        path: &str,
        principal: Option<&Principal>,
    ) -> Result<Arc<LegacySession>, Refusal> {
        let id = query
            .unwrap_or("")
            .split('&')
            .find_map(|kv| kv.strip_prefix(SESSION_PARAM).and_then(|v| v.strip_prefix('=')))
            .filter(|id| !id.is_empty());
        let Some(id) = id else {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                format!(
                    "bad request: missing the {SESSION_PARAM} query parameter (POST to the endpoint the stream announced)"
                ),
            ));
        };
        match self.sessions.lock().unwrap().get(id).filter(|s| s.path == path && s.principal.as_ref() == principal) {
            Some(s) => Ok(s.clone()),
            None => Err(Refusal::new(
                StatusCode::NOT_FOUND,
                INVALID_REQUEST,
                "session not found (its stream ended, or it never existed); open a new stream",
            )),
        }
    }

    /// Ends session `id`, if it is still open.
    fn remove(&self, id: &str) -> Option<Arc<LegacySession>> {
        let ls = self.sessions.lock().unwrap().remove(id)?;
        ls.outbox.close();
        Some(ls)
    }

    /// The sessions of upstreams `names`.
    pub(crate) fn sessions_of(&self, names: &[String]) -> Vec<Arc<Session>> {
        let sessions = self.sessions.lock().unwrap();
        sessions
            .values()
            .filter(|s| names.iter().any(|n| n == s.session.upstream_name()))
            .map(|s| s.session.clone())
            .collect()
    }

    /// Ends the sessions of upstreams `removed` (a reload): each once its requests in flight
    /// are answered, or at `deadline`, or when shutdown begins. Meanwhile they take their
    /// clients' answers and notifications, not new requests.
    pub(crate) async fn end_sessions_of(
        &self,
        removed: &[String],
        deadline: tokio::time::Instant,
        stopping: tokio_util::sync::CancellationToken,
    ) {
        let ending: Vec<_> = self
            .sessions
            .lock()
            .unwrap()
            .values()
            .filter(|s| removed.iter().any(|r| r == s.session.upstream_name()))
            .cloned()
            .collect();
        for s in &ending {
            s.session.drain();
        }
        let answered = futures_util::future::join_all(ending.iter().map(|s| s.outbox.all_answered()));
        tokio::select! {
            _ = tokio::time::timeout_at(deadline, answered) => {}
            _ = stopping.cancelled() => {}
        }
        self.sessions.lock().unwrap().retain(|_, s| !ending.iter().any(|e| Arc::ptr_eq(e, s)));
        let gone = RpcError::new(jsonrpc::UPSTREAM_UNAVAILABLE, "the upstream was removed from the config");
        for s in &ending {
            s.outbox.answer_pending(|id| gone.response(Some(id)));
            s.outbox.close();
        }
        for s in ending {
            s.session.close().await;
        }
    }

    pub(crate) async fn shut_down(&self, deadline: tokio::time::Instant, error: &RpcError) {
        let open: Vec<_> = self.sessions.lock().unwrap().values().cloned().collect();
        let drained = futures_util::future::join_all(open.iter().map(|s| s.outbox.all_answered()));
        if tokio::time::timeout_at(deadline, drained).await.is_err() {
            let left: usize = open.iter().map(|s| s.outbox.awaiting_responses()).sum();
            tracing::info!("{left} legacy SSE requests still in flight at shutdown: answering them with an error");
        }
        let all: Vec<_> = self.sessions.lock().unwrap().drain().map(|(_, s)| s).collect();
        for s in &all {
            s.outbox.answer_pending(|id| error.response(Some(id)));
            s.outbox.close();
        }
        for s in all {
            s.session.close().await;
        }
    }
}

/// A request handed on to the session: if its POST goes away first, it is owed nothing.
struct Owed<'a> {
    outbox: &'a Outbox,
    id: Option<Id>,
}

impl Drop for Owed<'_> {
    fn drop(&mut self) {
        if let Some(id) = &self.id {
            self.outbox.abandon(id);
        }
    }
}

/// The body of a session's stream: the `endpoint` event, then each message as a `message`
/// event (no ids: nothing can be resumed), with keep-alive comments while idle.
struct Stream {
    first: Option<Bytes>,
    outbox: Arc<Outbox>,
    keepalive: tokio::time::Interval,
    _end: EndOnDrop,
}

impl futures_util::Stream for Stream {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = self.get_mut();
        if let Some(f) = this.first.take() {
            return Poll::Ready(Some(f));
        }
        match this.outbox.poll_take(cx) {
            Poll::Ready(Some(json)) => Poll::Ready(Some(sse::encode_event(None, &json))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.keepalive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Bytes::from_static(sse::KEEPALIVE))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Ends its session when the stream's body is dropped: the client closed the connection, or
/// the stream ended and was sent.
struct EndOnDrop {
    legacy: Weak<Legacy>,
    id: String,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        let Some(ls) = self.legacy.upgrade().and_then(|l| l.remove(&self.id)) else { return };
        tracing::info!(
            upstream = ls.session.upstream_name(),
            "legacy SSE session {} ended with its stream",
            short(&self.id)
        );
        // Its link closes (a stdio child is stopped) in a task of its own.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { ls.session.close().await });
        }
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}
