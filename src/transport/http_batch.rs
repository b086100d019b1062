//! JSON-RPC batches on the downstream HTTP server (2025-03-26 sessions only).
//!
//! A batch is bounded by `max_batch` and answered with exactly one message per request:
//! the session's response, or an error for an entry that is malformed, an `initialize`, or
//! reuses an id (earlier in the batch, or in flight on another POST). Errors come first; the
//! answer ends once every accepted request has its response. A batch that holds no
//! accepted request is answered at once, as a JSON array of its errors (202 if it holds
//! only notifications and responses).

use crate::gateway::session::Session;
use crate::jsonrpc::{self, Frame, INVALID_REQUEST, Id, Kind, RpcError};
use crate::transport::http_body::{Body, SseBody, empty, json_response, rpc_error, sse_response};
use crate::transport::sse;
use crate::transport::streams::Streams;
use bytes::Bytes;
use hyper::{Response, StatusCode};
use serde_json::Value;
use std::collections::VecDeque;
use std::time::Duration;

/// Serves one batch of a session.
pub(crate) async fn serve(
    session: &Session,
    streams: &Streams,
    items: Vec<Value>,
    max_batch: usize,
    keepalive: Duration,
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
    let mut frames: Vec<Frame> = Vec::with_capacity(items.len());
    let mut errors: Vec<Value> = Vec::new();
    for m in items {
        match jsonrpc::classify(m) {
            Ok(f) if f.method() == "initialize" => errors.push(
                RpcError::new(INVALID_REQUEST, "invalid request: initialize must not be batched")
                    .response(f.id.as_ref()),
            ),
            Ok(f) => frames.push(f),
            Err((id, e)) => errors.push(e.response(id.as_ref())),
        }
    }
    let request_ids: Vec<Id> = frames.iter().filter(|f| f.kind == Kind::Request).filter_map(|f| f.id.clone()).collect();
    let (opened, accepted) = streams.open_batch(&request_ids);
    let mut accepted = accepted.into_iter();
    for f in frames {
        if f.kind == Kind::Request && !accepted.next().unwrap_or(false) {
            let id = f.id.clone().expect("requests have ids");
            errors.push(
                RpcError::new(
                    INVALID_REQUEST,
                    format!("invalid request: id {id} is already in use (in this batch or by a request in flight)"),
                )
                .response(Some(&id)),
            );
            continue;
        }
        session.handle(f).await;
    }
    let Some((_stream, rx)) = opened else {
        if errors.is_empty() {
            return empty(StatusCode::ACCEPTED);
        }
        return json_response(Bytes::from(serde_json::to_vec(&errors).expect("values serialize")), None);
    };
    let prefix = errors.iter().map(|e| sse::encode_event(None, &serde_json::to_vec(e).unwrap())).collect();
    sse_response(SseBody::new(prefix, VecDeque::new(), Some(rx), keepalive), None)
}
