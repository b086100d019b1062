//! Downstream Streamable HTTP for modern (2026-07-28) clients, beside the legacy sessions of
//! `http_server` on the same `/mcp/<name>` endpoints: a POST whose `MCP-Protocol-Version`
//! names a modern version, or that carries no session id and a request with modern `_meta`
//! (or a `server/discover`), is served here, statelessly.
//!
//! Each POST is one request or notification, checked before anything is served: its
//! mirrored headers against its body (-32020), its `_meta` (-32602, -32022); a `tools/call`'s
//! `Mcp-Param-*` headers go to its session, which checks them where it knows the tool. A request is
//! served on a session of its own (`Session::for_modern_request`) that ends with the POST:
//! when the answer has been sent, or when the client closed the response, which for a modern
//! client cancels the request. No session id is minted or read, and a GET or DELETE that
//! names a modern version gets 405. Refusals travel with HTTP 400, a method the server does
//! not implement with 404, as the era's transport says; nothing else gets 404 ([`status_of`]).

use crate::config::UpstreamConfig;
use crate::downstream::auth::authorization;
use crate::downstream::http_body::{Body, SseBody, empty, json_response, rpc_error};
use crate::downstream::listens::{Held, OpenListens};
use crate::downstream::streams::Streams;
use crate::gateway::Gateway;
use crate::gateway::session::ParkedRequests;
use crate::gateway::session::Session;
use crate::jsonrpc::{self, INVALID_REQUEST, Id, Kind, METHOD_NOT_FOUND, Message, RpcError};
use crate::mcp::modern::headers::{self, RequestHeaders};
use crate::mcp::modern::meta::{self, RequestMeta};
use crate::mcp::modern::{self, ModernError};
use crate::upstream::client::Requester;
use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Whether a POST is a modern client's (see the module doc). `parsed`: its one message, if
/// it was one.
pub(crate) fn is_modern_post(h: &HeaderMap, parsed: Option<&Message>, has_session: bool) -> bool {
    if names_modern_version(h) {
        return true;
    }
    if has_session {
        return false;
    }
    // An `initialize` selects the legacy era, whatever `_meta` it carries.
    parsed.is_some_and(|m| {
        m.kind() == Kind::Request
            && m.method() != jsonrpc::Method::Initialize
            && (m.method() == jsonrpc::Method::ServerDiscover || meta::is_modern(m.value().get("params")))
    })
}

/// Whether the request's `MCP-Protocol-Version` names a modern version.
pub(crate) fn names_modern_version(h: &HeaderMap) -> bool {
    let v = h.get(headers::PROTOCOL_VERSION).and_then(|v| v.to_str().ok());
    v.is_some_and(|v| modern::MODERN_VERSIONS.contains(&v))
}

/// Serves one modern POST: `parsed` is its message, or `None` for a batch (which the era
/// does not have).
pub(crate) async fn serve(
    gateway: &Arc<Gateway>,
    (parked, open_listens): (&Arc<ParkedRequests>, &Arc<OpenListens>),
    h: &HeaderMap,
    parsed: Option<Message>,
    upstream: Arc<UpstreamConfig>,
    (peer, principal, until): (SocketAddr, Option<&str>, Option<tokio::time::Instant>),
    json_only: bool,
) -> Response<Body> {
    let Some(frame) = parsed else {
        let e = RpcError::new(INVALID_REQUEST, "invalid request: 2026-07-28 has no JSON-RPC batches");
        return rpc_error(StatusCode::BAD_REQUEST, &e, None);
    };
    if frame.kind() == Kind::Response {
        let e = RpcError::new(INVALID_REQUEST, "invalid request: a 2026-07-28 client sends no responses");
        return rpc_error(StatusCode::BAD_REQUEST, &e, frame.id());
    }
    let mirrored = RequestHeaders {
        protocol_version: h.get(headers::PROTOCOL_VERSION).map(|v| v.as_bytes()),
        method: h.get(headers::METHOD).map(|v| v.as_bytes()),
        name: h.get(headers::NAME).map(|v| v.as_bytes()),
    };
    if let Err(p) = headers::check(&mirrored, frame.value()) {
        return rpc_error(StatusCode::BAD_REQUEST, &ModernError::HeaderMismatch(p).to_rpc(), frame.id());
    }
    let Some(id) = frame.id().cloned().filter(|_| frame.kind() == Kind::Request) else {
        // The era defines no notification from a client over HTTP (closing a response is
        // how one cancels): accepted, and nothing to do.
        return empty(StatusCode::ACCEPTED);
    };
    let request_meta = match RequestMeta::read(frame.value().get("params")) {
        Ok(m) => m,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &e.to_rpc(), Some(&id)),
    };
    let method = frame.method_name().to_string();
    let listens = jsonrpc::Method::parse(&method) == jsonrpc::Method::SubscriptionsListen;
    // A listen holds its connection as long as its client wants: one client holds at most
    // its share of them.
    let listen_slot = match listens {
        true => {
            let client = match principal {
                Some(p) => Session::principal_client(p),
                None => crate::downstream::http_guard::address_of(peer.ip()),
            };
            match open_listens.reserve(&client) {
                Ok(slot) => Some(slot),
                Err(e) => {
                    let mut answer = e.response(Some(&id));
                    crate::mcp::modern::client::error_for_modern(&mut answer);
                    let body = Bytes::from(serde_json::to_vec(&answer).expect("values serialize"));
                    let mut r = json_response(body, None);
                    *r.status_mut() = StatusCode::TOO_MANY_REQUESTS;
                    return r;
                }
            }
        }
        false => None,
    };
    let limits = gateway.limits();
    let streams = Arc::new(Streams::with_limits(limits.event_buffer, limits.event_buffer_bytes));
    // A retry of a request waiting for this client's input goes on in that request's session.
    let state = frame.value().pointer("/params/requestState").and_then(|s| s.as_str());
    let resumed = state.and_then(|token| Session::take_parked(parked, token, &upstream.name, principal));
    let session = match &resumed {
        Some(s) => s.clone(),
        None => {
            let who = match principal {
                Some(p) => Requester::Principal(p),
                None => Requester::Anonymous(Some(crate::downstream::http_guard::address_of(peer.ip()))),
            };
            let (sink, parked) = (streams.clone(), parked.clone());
            Session::for_modern_request(gateway.clone(), upstream, sink, who, request_meta, id.clone(), parked)
        }
    };
    session.present_authorization(authorization(h));
    session.present_param_headers(param_headers(h));
    let session_limits = gateway.live().rate_limits.limits(session.upstream_name());
    let stream = match streams.open_single(&id, json_only) {
        Ok(s) => s,
        Err(_) => unreachable!("a new stream set has no request in flight"),
    };
    // This round ends with this POST, however it ends (and the session with it, unless the
    // request waits for the client's input).
    let mut ends = EndsWithPost(Some(session.clone()), id.clone(), None, listen_slot);
    match resumed {
        Some(s) => s.resume(streams.clone(), frame).await,
        None => session.handle(frame).await,
    }
    // A listen stream (acknowledged by now) is ended by shutdown: at once if it has begun.
    if listens {
        ends.2 = open_listens.hold(&session);
    }
    let (held, rx) = streams.attach(stream);
    let mut held = VecDeque::from(held);
    let window = if json_only { Duration::MAX } else { limits.json_response_window };
    let first = crate::downstream::streams::first_event(&mut held, rx, window).await;
    let keepalive = limits.sse_keepalive;
    // A listen stream lasts as long as its client wants: it ends when the credential that
    // opened it expires (or at shutdown). A request's own stream ends with its answer.
    match first {
        Ok((Some(ev), _)) if ev.is_response => {
            let status = status_of(&ev.json, &method);
            let limited = session_limits.then(|| crate::downstream::http_body::retry_after_ms(&ev.json)).flatten();
            let mut r = json_response(ev.json, None);
            *r.status_mut() = status;
            if let Some(ms) = limited {
                crate::downstream::http_body::too_many_requests(&mut r, ms);
            }
            r
        }
        Ok((Some(ev), rx)) => {
            held.push_front(ev);
            sse(SseBody::new(VecDeque::new(), held, rx, keepalive).until(listens.then_some(until).flatten()), ends)
        }
        Ok((None, _)) => empty(StatusCode::ACCEPTED),
        Err(rx) => sse(
            SseBody::new(VecDeque::new(), held, Some(rx), keepalive).until(listens.then_some(until).flatten()),
            ends,
        ),
    }
}

/// The request's `Mcp-Param-*` headers, as (name, value): checked against the body where the
/// gateway is the server, passed on where it is not and does not recognise them.
fn param_headers(h: &HeaderMap) -> Vec<(String, Vec<u8>)> {
    h.iter()
        .filter(|(name, _)| headers::is_param_header(name.as_str()))
        .take(crate::gateway::session::MAX_PARAM_HEADERS)
        .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
        .collect()
}

/// An event stream that holds the request's session until the stream is done with.
fn sse(mut body: SseBody, ends: EndsWithPost) -> Response<Body> {
    let stream = futures_util::stream::poll_fn(move |cx| {
        let _held = &ends;
        body.poll_next(cx)
    });
    crate::downstream::http_body::event_stream_response(Body::Frames(Box::pin(stream)), None)
}

/// The HTTP status a JSON answer to a request of `method` travels with: 400 for the era's
/// refusals, 404 for a method the server does not implement, else 200.
///
/// The transport ties 404 to one case only ("If the server does not implement the requested
/// RPC method, it MUST respond with 404 Not Found and a JSON-RPC error with code -32601"):
/// a 404 without a modern error body is how a legacy HTTP+SSE server looks, so a false one
/// may send a client back to the legacy transport. A -32601 answering `tools/call`,
/// `prompts/get` or `resources/read` is about the tool, prompt or resource the request names
/// (a tool hidden from old clients, an upstream that reports an unknown tool so), methods the
/// gateway serves for every client: it travels with 200, as any other error result.
fn status_of(json: &Bytes, method: &str) -> StatusCode {
    if !json.windows(7).any(|w| w == b"\"error\"") {
        return StatusCode::OK;
    }
    let code =
        Message::parse(json.clone()).ok().and_then(|m| m.value().pointer("/error/code").and_then(|c| c.as_i64()));
    match code {
        // The methods it serves are those that may ask for input.
        Some(METHOD_NOT_FOUND) if !modern::input::may_ask(method) => StatusCode::NOT_FOUND,
        Some(
            modern::HEADER_MISMATCH | modern::MISSING_REQUIRED_CLIENT_CAPABILITY | modern::UNSUPPORTED_PROTOCOL_VERSION,
        ) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// Ends a modern request's round when dropped: after its answer, or when its client hung
/// up (its request is then cancelled upstream, unless it waits for the client's input).
/// A listen's place among the open ones, and its client's, go with it.
struct EndsWithPost(Option<Arc<Session>>, Id, Option<Held>, #[allow(dead_code)] Option<crate::client_slots::Slot>);

impl Drop for EndsWithPost {
    fn drop(&mut self) {
        let Some(session) = self.0.take() else { return };
        let id = self.1.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { session.end_round(&id).await });
        }
    }
}
