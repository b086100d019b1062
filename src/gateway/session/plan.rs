//! The session's plan: what kind of session it is, decided once both sides have negotiated
//! and kept until its link is replaced (a restarted upstream may speak another version).
//!
//! - [`ClientSide`]: the client's era, legacy at the version its `initialize` negotiated, or
//!   2026-07-28 (a session per request, whose state is `modern_client::state::ModernClient`).
//! - [`UpstreamSide`]: the era the link negotiated, and for a modern upstream whether it
//!   declared the tasks extension.
//! - [`TaskPolicy`]: what the gateway does with tasks between the two: plain calls only,
//!   core tasks hosted or passed through, extension tasks bridged or translated.
//! - [`ByToken`]: the by-token dialects the upstream enables, for a legacy client.
//!
//! The plan is built by [`Plan::new`] when a link is adopted or a session is revived (both
//! in `relink`), and read once per request: `Session::dispatch` (in `dispatch`) is one
//! `match` on the method that hands the request to the plan's strategy for it.

use crate::config::{HostedMode, UpstreamConfig};
use crate::mcp::ProtocolVersion;
use crate::upstream::link::Shape;

/// The client's era.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ClientSide {
    /// A client that initialized (or is initializing) at this version.
    Legacy(ProtocolVersion),
    /// A 2026-07-28 client: each request carries its own `_meta`.
    Modern,
}

impl ClientSide {
    /// A legacy client whose version has core tasks (2025-11-25 on).
    pub(super) fn has_core_tasks(self) -> bool {
        matches!(self, ClientSide::Legacy(v) if v.has_tasks())
    }
}

/// The upstream's era, as the current link negotiated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UpstreamSide {
    Legacy(ProtocolVersion),
    /// A 2026-07-28 upstream; `ext_tasks`: it declared the tasks extension.
    Modern {
        ext_tasks: bool,
    },
}

impl UpstreamSide {
    pub(super) fn is_modern(self) -> bool {
        matches!(self, UpstreamSide::Modern { .. })
    }
}

/// What the gateway does with tasks for this client in front of this upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TaskPolicy {
    /// The client has no core tasks (a legacy version before 2025-11-25, or a modern client,
    /// whose extension tasks its own strategy serves): a task it asks for goes up plain, and
    /// a tool the upstream runs only as a task is bridged or hidden.
    Plain,
    /// A core-task client in front of an upstream without the extension: its tasks hosted by
    /// the gateway or passed through to the upstream.
    Core,
    /// A client without core tasks in front of an extension upstream (a legacy one, or a
    /// 2026-07-28 one that did not declare the extension): a blocking call the upstream wants
    /// as a task is bridged through the extension (`ext::bridged`).
    ExtBridged,
    /// A core-task client in front of an extension upstream: the two dialects translated
    /// (`ext::translated`).
    ExtTranslated,
}

impl TaskPolicy {
    /// A legacy client in front of an upstream of the tasks extension.
    pub(super) fn extension(self) -> bool {
        matches!(self, TaskPolicy::ExtBridged | TaskPolicy::ExtTranslated)
    }
}

/// The by-token dialects the upstream enables (done by `by_token::Dialects`); off for a
/// modern client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ByToken {
    pub(super) progress_get: bool,
    pub(super) sep1391: bool,
}

impl ByToken {
    /// The dialects of `upstream` for a client of era `modern` or not (decided when the
    /// session is made).
    pub(super) fn of(upstream: &UpstreamConfig, modern: bool) -> ByToken {
        if modern {
            return ByToken::default();
        }
        ByToken { progress_get: upstream.dialects.progress_get, sep1391: upstream.dialects.sep1391 }
    }

    pub(super) fn on(self) -> bool {
        self.progress_get || self.sep1391
    }
}

/// The session's plan (see the module doc).
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) client: ClientSide,
    pub(super) upstream: UpstreamSide,
    pub(super) tasks: TaskPolicy,
    /// The session rides its upstream's shared link.
    pub(super) shared: bool,
    /// The gateway may host tasks for this upstream (`hosted` is not `never`).
    pub(super) hosts: bool,
    /// The upstream declared `tasks` (at a version that has them).
    pub(super) upstream_tasks: bool,
    /// The upstream declared tasks for tool calls.
    pub(super) upstream_tool_tasks: bool,
}

impl Plan {
    /// The plan for a client of `client` in front of `upstream`, whose capabilities (as the
    /// session reads them) are `caps`; `modern_declares_ext`: a modern client's request
    /// declared the tasks extension.
    pub(super) fn new(
        client: ClientSide,
        upstream: UpstreamSide,
        caps: &serde_json::Value,
        config: &UpstreamConfig,
        (shared, modern_declares_ext): (bool, bool),
    ) -> Plan {
        let ext_upstream = matches!(upstream, UpstreamSide::Modern { ext_tasks: true });
        // A modern client that declared the extension speaks it to the upstream itself.
        let ext = ext_upstream && !(client == ClientSide::Modern && modern_declares_ext);
        let tasks = match (client.has_core_tasks(), ext) {
            (true, true) => TaskPolicy::ExtTranslated,
            (true, false) => TaskPolicy::Core,
            (false, true) => TaskPolicy::ExtBridged,
            (false, false) => TaskPolicy::Plain,
        };
        Plan {
            client,
            upstream,
            tasks,
            shared,
            hosts: config.tasks.hosted != HostedMode::Never,
            upstream_tasks: caps.get("tasks").is_some(),
            upstream_tool_tasks: crate::mcp::task_messages::server_has_tool_tasks(caps),
        }
    }
}

/// What a request of this session meets before the plan, decided when the session is made
/// (a client's era and its upstream's settings do not change while it lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FirstStep {
    /// A legacy client whose upstream enables no by-token dialect and no long calls:
    /// straight to the plan.
    None,
    /// A modern client's request: checked, and may be served, by its own strategy
    /// (`modern_client`).
    Modern,
    /// A legacy client's request may be one of the by-token dialects' (`by_token`) or a
    /// long call (`long_calls`).
    Legacy,
}

impl FirstStep {
    /// `legacy_strategies`: the upstream enables a by-token dialect or long calls.
    pub(super) fn of(modern: bool, legacy_strategies: bool) -> FirstStep {
        match (modern, legacy_strategies) {
            (true, _) => FirstStep::Modern,
            (false, true) => FirstStep::Legacy,
            (false, false) => FirstStep::None,
        }
    }
}

/// Where a `tools/call` goes under the plan's task policy.
pub(super) enum CallRoute {
    /// Up the link as it is, its answer shaped so.
    Up(Shape),
    /// The tool's `taskSupport` decides (the upstream runs tasks): `Dispatch::listed_call`.
    ByListing,
    /// A core client's task: hosted, or passed to an upstream that runs it.
    CoreTask,
    /// A core task asked of an extension upstream: translated (`ext::translated`).
    Translated,
}
