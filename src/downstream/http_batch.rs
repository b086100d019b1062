//! JSON-RPC batches on the downstream HTTP server (2025-03-26 sessions only).
//!
//! A batch is bounded by `max_batch` and answered with exactly one message per request:
//! the session's response, or an error for an entry that is malformed, an `initialize`, or
//! reuses an id (earlier in the batch, or in flight on another POST). Errors come first; the
//! answer ends once every accepted request has its response. A batch that holds no
//! accepted request is answered at once, as a JSON array of its errors (202 if it holds
//! only notifications and responses). A POST that accepts only `application/json` gets the
//! whole answer as one JSON array, once the last response is in.

use crate::downstream::http_body::{Body, SseBody, empty, json_response, rpc_error, sse_response};
use crate::downstream::streams::Streams;
use crate::gateway::session::Session;
use crate::jsonrpc::{INVALID_REQUEST, Id, Kind, Message, RpcError};
use crate::transport::sse;
use bytes::Bytes;
use hyper::{Response, StatusCode};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

/// Serves one batch of a session.
pub(crate) async fn serve(
    session: &Session,
    streams: &Streams,
    items: Vec<Bytes>,
    max_batch: usize,
    keepalive: Duration,
    json_only: bool,
) -> Response<Body> {
    if items.len() > max_batch {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &RpcError::new(
                INVALID_REQUEST,
                format!("invalid request: a batch may hold at most {max_batch} messages; this one has {}", items.len()),
            ),
            None,
        );
    }
    let mut frames: Vec<Message> = Vec::with_capacity(items.len());
    let mut errors: Vec<Value> = Vec::new();
    for m in items {
        match Message::parse(m) {
            Ok(f) if f.method() == crate::jsonrpc::Method::Initialize => errors.push(
                RpcError::new(INVALID_REQUEST, "invalid request: initialize must not be batched").response(f.id()),
            ),
            Ok(f) => frames.push(f),
            Err(r) => errors.push(r.error.response(r.id.as_ref())),
        }
    }
    let request_ids: Vec<Id> =
        frames.iter().filter(|f| f.kind() == Kind::Request).filter_map(|f| f.id().cloned()).collect();
    let (opened, accepted) = streams.open_batch(&request_ids, json_only);
    let mut accepted = accepted.into_iter();
    for f in frames {
        if f.kind() == Kind::Request && !accepted.next().unwrap_or(false) {
            let id = f.id().cloned().expect("requests have ids");
            errors.push(
                RpcError::new(
                    INVALID_REQUEST,
                    format!("invalid request: id {id} is already in use (in this batch or by a request in flight)"),
                )
                .response(Some(&id)),
            );
            continue;
        }
        // Each entry is sent on its way without waiting for it: the next one waits behind it.
        crate::transport::inline::serially(session.handle(f)).await;
    }
    let Some((_stream, mut rx)) = opened else {
        if errors.is_empty() {
            return empty(StatusCode::ACCEPTED);
        }
        return json_array(&errors, vec![]);
    };
    if json_only {
        // The stream ends after its last response.
        let mut responses = Vec::new();
        while let Some(ev) = rx.recv().await {
            streams.unbuffer(&ev);
            responses.push(ev.json);
        }
        return json_array(&errors, responses);
    }
    let prefix = errors.iter().map(|e| sse::encode_event(None, &serde_json::to_vec(e).unwrap())).collect();
    sse_response(SseBody::new(prefix, VecDeque::new(), Some(rx), keepalive), None)
}

/// A JSON array of the errors, then the responses (already serialized).
fn json_array(errors: &[Value], responses: Vec<Bytes>) -> Response<Body> {
    let mut out = Vec::from(&b"["[..]);
    let items = errors.iter().map(|e| Bytes::from(serde_json::to_vec(e).expect("values serialize"))).chain(responses);
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&item);
    }
    out.push(b']');
    json_response(Bytes::from(out), None)
}
