//! The client's side of a session, as seen from below it: somewhere to deliver messages
//! ([`ClientSink`], implemented by the downstream fronts), where each message belongs
//! ([`Route`]), and the session as the hosted tasks it started reach it ([`ClientSession`]).
//!
//! It sits below the session so that the fronts above and the hosted tasks beside it can
//! name these without importing the session.

use crate::jsonrpc::{Id, Message};
use crate::upstream::link::Link;
use serde_json::Value;
use std::sync::Arc;

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

impl Route {
    /// `msg` as it is sent on this route: a response to a request whose id is an integer
    /// beyond `i64` carries that id as the client sent it (a response the gateway made as a
    /// tree holds it as a string). Each [`ClientSink`] applies it to what it sends.
    pub fn stamp(&self, msg: Message) -> Message {
        match self {
            Route::Response(id) if id.is_big() => msg.with_id(id),
            _ => msg,
        }
    }
}

/// The downstream side of a session: a stdio client or an HTTP session's streams.
pub trait ClientSink: Send + Sync + 'static {
    fn deliver(&self, msg: Message, route: Route);
    /// Whether a message not tied to a request would reach the client now (stdio: always;
    /// HTTP: while a GET stream is open).
    fn reaches_client_now(&self) -> bool {
        true
    }
    /// The client cancelled request `id`: nothing more is due for it (its stream may end).
    fn abandon(&self, _id: &Id) {}
    /// Progress under `token` that still waits for the client is stale: the operation ended.
    fn discard_progress(&self, _token: &crate::jsonrpc::ProgressToken) {}
}

/// A session as the tasks it started (or waits on) reach its client: implemented by
/// the session, called by hosted tasks, which hold it weakly.
pub trait ClientSession: Send + Sync + 'static {
    /// Sends a message to the client, shaped to its version.
    fn to_client(&self, msg: Message, route: Route);
    /// Passes a request from the server to the client under an id of the session's, and
    /// remembers where the answer goes (`task`: the hosted task it was asked for).
    fn relay_server_request(&self, link: &Arc<Link>, upstream_id: Id, msg: Value, route: Route, task: Option<Arc<str>>);
    /// Whether an unrelated message would reach the client now.
    fn reaches_client_now(&self) -> bool;
    /// Progress under `token` still waiting for the client is stale (its task ended).
    fn discard_progress(&self, token: &crate::jsonrpc::ProgressToken);
    /// Whose tasks the session makes (see `LinkEvents::owner`).
    fn owner(&self) -> &str;
}

/// Who a modern request comes from.
pub enum Requester<'a> {
    /// An authenticated principal.
    Principal(&'a str),
    /// Without authentication: the client's identity for per-client limits, if known.
    Anonymous(Option<String>),
}
