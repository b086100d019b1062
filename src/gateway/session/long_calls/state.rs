//! What a session's long calls keep (see the folder's doc): the gateway's tool names, and
//! the calls within their deferral window.

use crate::config::UpstreamConfig;
use crate::jsonrpc::Id;
use crate::locks::Mutex;
use crate::mcp::long_calls::ToolNames;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// A session's long calls (see the folder's doc). (`pub(crate)`: the session's `long_calls`
/// module is private, so only the session reaches it.)
pub(crate) struct LongCalls {
    pub(super) names: ToolNames,
    /// Calls within their deferral window, and calls of the wait tool, by request id, so
    /// that a cancel of the request finds what it cancels. One per hosted task of the
    /// session's still running (`max_tasks_per_owner` bounds those) and one per wait call
    /// in flight (`max_in_flight` bounds those, as any request's).
    pub(super) window: Mutex<HashMap<Id, InFlight>>,
    /// Tells the window's entries apart across reuses of an id.
    pub(super) generations: AtomicU64,
    /// The upstream lists a tool of one of the gateway's names: said once.
    pub(super) clash_told: AtomicBool,
}

/// A request of the session in the window.
pub(super) struct InFlight {
    pub(super) generation: u64,
    pub(super) what: Waiting,
}

/// What a request of the session waits on.
pub(super) enum Waiting {
    /// A call within its deferral window, running as this task: a cancel cancels it.
    Call(Arc<str>),
    /// A wait tool's call on this task: a cancel ends the wait, and the task goes on.
    Wait(Arc<str>, tokio_util::sync::CancellationToken),
}

impl LongCalls {
    pub(crate) fn of(upstream: &UpstreamConfig) -> Option<LongCalls> {
        upstream.long_calls.on().then(|| LongCalls {
            names: ToolNames::with_prefix(&upstream.long_calls.tool_prefix),
            window: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(0),
            clash_told: AtomicBool::new(false),
        })
    }
}
