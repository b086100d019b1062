//! What one session keeps between messages under its lock: what it learned of the upstream,
//! and the requests, tasks and operations in flight on either side (the handshakes, the
//! negotiated versions and the plan are `sides`, read without it).

use crate::jsonrpc::{Id, Message};
use crate::upstream::link::Link;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// A request the server sent the client, waiting for the client's answer.
pub(super) struct ServerRequest {
    pub(super) link: Weak<Link>,
    pub(super) upstream_id: Id,
    /// The hosted task it was asked for, if any.
    pub(super) task: Option<Arc<str>>,
    /// Its method, if the version table rewrites its result (the client's answer).
    pub(super) answers: Option<crate::jsonrpc::Method>,
}

#[derive(Default)]
pub(super) struct SessionState {
    /// The `Mcp-Session-Id` and path the store remembers the session by, if it does (see
    /// `relink`).
    pub(super) remembered: Option<(String, String)>,
    /// The level the client set with `logging/setLevel`, kept for a modern upstream (which
    /// gets it in each request's `_meta`, links that replace this one too).
    pub(super) log_level: Option<crate::mcp::modern::meta::LogLevel>,
    pub(super) server_requests: HashMap<Id, ServerRequest>,
    /// Plain calls that may need a retry as a task, by client id (see [`Shape::MayNeedTask`]).
    pub(super) retry: HashMap<Id, Message>,
    /// Ids of upstream tasks this client created (its task-augmented calls passed through):
    /// the only upstream task status notifications it gets.
    pub(super) known_tasks: std::collections::VecDeque<String>,
    pub(super) generation: u64,
    /// When the last link died, and the delay before the next may start.
    pub(super) restart_backoff: Option<(Instant, Duration)>,
    pub(super) closed: bool,
}
