//! What a session's long calls keep (see the folder's doc): the gateway's tool names, and
//! the calls within their deferral window.

use crate::config::UpstreamConfig;
use crate::jsonrpc::Id;
use crate::mcp::long_calls::ToolNames;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// A session's long calls (see the folder's doc). (`pub(crate)`: the session's `long_calls`
/// module is private, so only the session reaches it.)
pub(crate) struct LongCalls {
    pub(super) names: ToolNames,
    /// Calls within their deferral window, by request id: the task each runs as, so that a
    /// cancel of the request cancels it. One per hosted task of the session's still
    /// running, which `max_tasks_per_owner` bounds.
    pub(super) window: Mutex<HashMap<Id, Arc<str>>>,
    /// The upstream lists a tool of one of the gateway's names: said once.
    pub(super) clash_told: AtomicBool,
}

impl LongCalls {
    pub(crate) fn of(upstream: &UpstreamConfig) -> Option<LongCalls> {
        upstream.long_calls.on().then(|| LongCalls {
            names: ToolNames::with_prefix(&upstream.long_calls.tool_prefix),
            window: Mutex::new(HashMap::new()),
            clash_told: AtomicBool::new(false),
        })
    }
}
