//! Byte-level I/O: moving JSON-RPC frames over pipes and HTTP. Nothing here knows what a
//! message means beyond what its transport's own rules require.

mod budget;
mod error;
pub mod http_client;
pub(crate) mod http_conn;
pub(crate) mod inline;
pub mod lines;
pub mod mcp_http;
pub mod own_stdio;
pub mod sse;
pub mod stdio;

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
/// peer may send batches, and each of their messages goes on alone. What is not a JSON-RPC
/// message is logged and skipped, but for a response to a request (see [`readable`]); `Err`
/// when the body is not JSON at all.
pub(crate) fn messages_of(upstream: &str, body: Bytes) -> Result<Vec<Inbound>, jsonrpc::RpcError> {
    let items = match jsonrpc::parse_body(body)? {
        jsonrpc::Body::Single(m) => vec![m],
        jsonrpc::Body::Batch(items) => items,
    };
    Ok(items.into_iter().filter_map(|text| readable(upstream, Message::parse(text))).collect())
}

/// The message; for a refused response with an id, that id and why (logged); `None` (logged)
/// for anything else that is not a message: a malformed request or notification from the
/// upstream has no one to be answered to.
pub(crate) fn readable(upstream: &str, m: Result<Message, jsonrpc::Refused>) -> Option<Inbound> {
    match m {
        Ok(m) => Some(Ok(m)),
        Err(r) => match r.answers() {
            Some(id) => {
                tracing::warn!(upstream = %upstream, "an unreadable response to request {id}: {}", r.error);
                Some(Err((id.clone(), Error::BadResponse(r.error.message))))
            }
            None => {
                tracing::warn!(upstream = %upstream, "dropping a malformed message from upstream: {}", r.error);
                None
            }
        },
    }
}

/// Hands what an upstream sent to `sink`: a message, or the failure of the request that a
/// response which cannot be used answered.
pub(crate) fn deliver(sink: &dyn InboundSink, m: Inbound, related: Option<Id>) {
    match m {
        Ok(m) => sink.message(m, related),
        Err((id, why)) => sink.request_failed(id, why),
    }
}
