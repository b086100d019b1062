//! The operator's policy over a session's requests (`[upstream.tools]`, and the limits of
//! `[server.limits]` and `[upstream.limits]`): checked before any strategy sees a request.
//!
//! - Tool policy, its principal's rule as the live config has it at each request (a reload
//!   applies at once), and applied to what the upstream lists too. A tool the client is not offered does not exist
//!   for it: absent from every listing page, in every era's shape, and a call of it, plain,
//!   as a task, bridged, hosted, deferred or as an operation, is refused as a call of a
//!   tool no server has.
//! - Rate limits: a call (`tools/call`, `prompts/get`, `resources/read`) past its client's
//!   bucket is refused with -32004 and `data.retryAfterMs` (HTTP fronts answer it with 429
//!   and `Retry-After`), and nothing of it goes upstream. A hosted task's call upstream is
//!   the call that created it, counted once.

use super::Session;
use crate::gateway::rate_limits::{RETRY_AFTER_MS, Scope};
use crate::jsonrpc::{GATEWAY_BUSY, INVALID_PARAMS, Message, Method, RpcError};
use serde_json::{Value, json};

impl Session {
    /// A call of a tool the client is not offered: refused (`Some`), as an unknown tool.
    /// The gateway's own long-call tools are not the upstream's to offer.
    pub(super) fn refused_by_policy(&self, frame: &Message) -> Option<RpcError> {
        if frame.method() != Method::ToolsCall {
            return None;
        }
        let live = self.gateway.live();
        let rule = live.tool_rule(&self.upstream.name, self.principal.as_deref())?;
        let name = frame.tool_name()?;
        if rule.permits(&name) || self.long_calls.as_ref().is_some_and(|c| c.serves(self, &name)) {
            return None;
        }
        crate::metrics::global().policy_refused(&self.upstream.name, "tool_denied");
        if let Some(suppressed) = self.gateway.denials.hit((self.rate_key.clone(), name.as_ref().into())) {
            tracing::warn!(upstream = %self.upstream.name, client = %self.client, tool = %name, suppressed, "refused a call of a tool the tool policy does not offer this client");
        }
        Some(RpcError::new(INVALID_PARAMS, format!("unknown tool {:?}", name.as_ref())))
    }

    /// Whether the tool policy offers its client fewer than every tool, now.
    pub(super) fn has_tool_rule(&self) -> bool {
        self.gateway.live().tool_rule(&self.upstream.name, self.principal.as_deref()).is_some()
    }

    /// A call past its client's bucket: refused (`Some`), saying when to retry.
    pub(super) fn refused_by_rate(&self, frame: &Message) -> Option<RpcError> {
        if !matches!(frame.method(), Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead) {
            return None;
        }
        let live = self.gateway.live();
        let limits = &live.rate_limits;
        if !limits.limits(&self.upstream.name) {
            return None;
        }
        // The gateway's own long-call tools send nothing upstream.
        if frame.method() == Method::ToolsCall
            && let (Some(calls), Some(name)) = (&self.long_calls, frame.tool_name())
            && calls.serves(self, &name)
        {
            return None;
        }
        let (scope, wait) = limits.take(&self.upstream.name, &self.rate_key).err()?;
        let (reason, table) = match scope {
            Scope::Upstream => ("rate_limited", "upstream.limits"),
            Scope::Server => ("rate_limited_server", "server.limits"),
        };
        crate::metrics::global().policy_refused(&self.upstream.name, reason);
        let ms = wait.as_millis().max(1) as u64;
        let mut e = RpcError::new(
            GATEWAY_BUSY,
            format!("rate limit: too many calls from this client ({table}); retry after {ms} ms"),
        );
        e.data = Some(Box::new(json!({RETRY_AFTER_MS: ms})));
        Some(e)
    }

    /// A `tools/list` page as the client may see it: without the tools it is not offered.
    pub(super) fn offered_tools(&self, result: &mut Value) {
        let live = self.gateway.live();
        let Some(rule) = live.tool_rule(&self.upstream.name, self.principal.as_deref()) else { return };
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            tools.retain(|t| t.get("name").and_then(Value::as_str).is_some_and(|n| rule.permits(n)));
        }
    }
}
