//! Byte-level I/O: moving JSON-RPC frames over pipes and HTTP. Nothing here knows what a
//! message means beyond what its transport's own rules require.

pub mod auto;
mod budget;
pub mod credential;
mod error;
pub mod http_client;
pub(crate) mod http_conn;
pub mod http_target;
pub(crate) mod inline;
pub mod lines;
pub mod mcp_http;
pub mod own_stdio;
pub(crate) mod redact;
pub mod sse;
pub mod sse_client;
pub mod stdio;
mod up_body;

pub use error::{Error, Exit};

use crate::jsonrpc::{self, Id, Message};
use bytes::Bytes;

/// Receives what an upstream connection reads.
pub trait InboundSink: Send + Sync + 'static {
    /// One message from the upstream. `related` is the id (as sent upstream) of the request on
    /// whose response stream the message arrived, when the transport knows it.
    fn message(&self, msg: Message, related: Option<Id>);
    /// The request sent with `id` failed on its way (a refusal, a broken stream, an answer
    /// that cannot be read): no answer will come for it.
    fn request_failed(&self, id: Id, why: Error);
    /// The connection is gone for good; `reason` says why (exit status, expired session, ...).
    fn closed(&self, reason: Error);
}

/// What an upstream sent: a message, or a response that cannot be used, as the id of the
/// request it answered and why (that request fails at once, instead of at its timeout).
pub(crate) type Inbound = Result<Message, (Id, Error)>;

/// The messages of a body that holds one message or a batch (array) of them: a 2025-03-26
/// peer may send batches, and each of their messages goes on alone (see [`inbound`]). `Err`
/// when the body is not JSON at all, or is an empty batch.
pub(crate) fn messages_of(upstream: &str, body: Bytes, max_batch: usize) -> Result<Vec<Inbound>, jsonrpc::RpcError> {
    Ok(match jsonrpc::parse_body(body)? {
        jsonrpc::Body::Single(m) => inbound(upstream, vec![Message::parse(m)], false, max_batch),
        jsonrpc::Body::Batch(items) => {
            inbound(upstream, items.into_iter().map(Message::parse).collect(), true, max_batch)
        }
    })
}

/// What one frame from an upstream (a stdio line, a body, an SSE event) holds, message by
/// message: what is not a JSON-RPC message (an element of a batch that is not an object,
/// say) is logged and skipped, but for a response to a request (see [`readable`]). A batch
/// of more than `max_batch` messages is dropped whole (logged), and the requests its
/// responses answered fail at once.
pub(crate) fn inbound(
    upstream: &str,
    items: Vec<Result<Message, jsonrpc::Refused>>,
    is_batch: bool,
    max_batch: usize,
) -> Vec<Inbound> {
    if is_batch && items.len() > max_batch {
        let len = items.len();
        crate::warn_limit::warn_limited!(upstream = %upstream, "dropping a batch of {len} messages: more than max_batch ({max_batch})");
        let answered = |m: Result<Message, jsonrpc::Refused>| match m {
            Ok(m) if m.kind() == jsonrpc::Kind::Response => m.id().cloned().into_iter().collect(),
            Ok(_) => Vec::new(),
            Err(r) => r.may_answer(),
        };
        return items
            .into_iter()
            .flat_map(answered)
            .map(|id| Err((id, Error::BatchTooLarge { limit: max_batch, len })))
            .collect();
    }
    items.into_iter().flat_map(|m| readable(upstream, m)).collect()
}

/// The message; for a refused response, each request it may have answered and why (logged):
/// its id, or each of two different ids it names (neither request would get another answer);
/// nothing (logged) for anything else that is not a message: a malformed request or
/// notification from the upstream has no one to be answered to.
fn readable(upstream: &str, m: Result<Message, jsonrpc::Refused>) -> Vec<Inbound> {
    let r = match m {
        Ok(m) => return vec![Ok(m)],
        Err(r) => r,
    };
    let ids = r.may_answer();
    if ids.is_empty() {
        crate::warn_limit::warn_limited!(upstream = %upstream, "dropping a malformed message from upstream: {}", r.error);
        return Vec::new();
    }
    if r.id.is_none() {
        let named = ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        tracing::warn!(upstream = %upstream, "a response names different ids ({named}): failing each of those requests");
        let why = format!("it names different ids ({named})");
        return ids.into_iter().map(|id| Err((id, Error::BadResponse(why.clone())))).collect();
    }
    tracing::warn!(upstream = %upstream, "an unreadable response to request {}: {}", ids[0], r.error);
    ids.into_iter().map(|id| Err((id, Error::BadResponse(r.error.message.clone())))).collect()
}

/// Hands what an upstream sent to `sink`: a message, or the failure of the request that a
/// response which cannot be used answered.
pub(crate) fn deliver(sink: &dyn InboundSink, m: Inbound, related: Option<Id>) {
    match m {
        Ok(m) => sink.message(m, related),
        Err((id, why)) => sink.request_failed(id, why),
    }
}
