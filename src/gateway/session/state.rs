//! What one session keeps between messages: the negotiated versions, what it learned of the
//! upstream, and the requests, tasks and operations in flight on either side.

use crate::jsonrpc::{Id, Message};
use crate::mcp::ProtocolVersion;
use crate::upstream::link::Link;
use serde_json::Value;
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
    /// The client's version, once its `initialize` has been answered.
    pub(super) version: Option<ProtocolVersion>,
    /// The version the client's `initialize` is to be answered at, from the moment it
    /// arrives: what the upstream sends while the handshake runs is translated for it.
    pub(super) asked: Option<ProtocolVersion>,
    /// The client's `initialize` params (its capabilities are declared to every link).
    pub(super) init_params: Option<Value>,
    /// The `Mcp-Session-Id` and path the store remembers the session by, if it does (see
    /// `relink`).
    pub(super) remembered: Option<(String, String)>,
    /// The version the current link negotiated.
    pub(super) upstream_version: Option<ProtocolVersion>,
    /// What the session decided when its current link negotiated (see `plan`).
    pub(super) plan: Option<super::plan::Plan>,
    /// The level the client set with `logging/setLevel`, kept for a modern upstream (which
    /// gets it in each request's `_meta`, links that replace this one too).
    pub(super) log_level: Option<crate::mcp::modern::meta::LogLevel>,
    /// The upstream's `initialize` result as the link negotiated it (what `server/discover`
    /// tells a modern client).
    pub(super) upstream_init: Value,
    /// The upstream's capabilities, from its `initialize` result (without `tasks` when its
    /// version has none: a server that leaks them is not run as a task server).
    pub(super) upstream_caps: Value,
    pub(super) next_client_side_id: i64,
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
