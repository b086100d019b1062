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

/// The messages of a body that holds one message or a batch (array) of them: a 2025-03-26
/// peer may send batches, and each of their messages goes on alone. What is not a JSON-RPC
/// message is logged and skipped (`Err` when the body is not JSON at all).
pub(crate) fn messages_of(upstream: &str, body: Bytes) -> Result<Vec<Message>, jsonrpc::RpcError> {
    let items = match jsonrpc::parse_body(body)? {
        jsonrpc::Body::Single(m) => vec![m],
        jsonrpc::Body::Batch(items) => items,
    };
    Ok(items.into_iter().filter_map(|text| readable(upstream, Message::parse(text))).collect())
}

/// The message, or `None` (logged) for what is not one.
pub(crate) fn readable(upstream: &str, m: Result<Message, jsonrpc::Refused>) -> Option<Message> {
    m.map_err(|r| tracing::warn!(upstream = %upstream, "dropping a malformed message from upstream: {}", r.error)).ok()
}
