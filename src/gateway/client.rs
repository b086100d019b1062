//! What a session needs of its client's side: somewhere to deliver messages ([`ClientSink`],
//! implemented by the downstream fronts) and where each message belongs ([`Route`]).
//!
//! It sits below the session so that the fronts above and the hosted tasks beside it can
//! name these without importing the session.

use crate::jsonrpc::Id;
use serde_json::Value;

/// Where a message for the client belongs.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The response to this client request.
    Response(Id),
    /// Sent while serving this client request (progress, a server request it caused).
    Related(Id),
    /// Not tied to a request (list changes, logs, requests the gateway cannot place).
    Unrelated,
}

/// The downstream side of a session: a stdio client or an HTTP session's streams.
pub trait ClientSink: Send + Sync + 'static {
    fn deliver(&self, msg: Value, route: Route);
    /// Whether a message not tied to a request would reach the client now (stdio: always;
    /// HTTP: while a GET stream is open).
    fn reaches_client_now(&self) -> bool {
        true
    }
    /// The client cancelled request `id`: nothing more is due for it (its stream may end).
    fn abandon(&self, _id: &Id) {}
    /// Progress under `token` that still waits for the client is stale: the operation ended.
    fn discard_progress(&self, _token: &Value) {}
}
