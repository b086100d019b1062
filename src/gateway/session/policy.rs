//! The operator's policy over a session's requests (`[upstream.tools]`): decided once, when
//! the session is made (its principal's rule), checked before any strategy sees a request,
//! and applied to what the upstream lists. A tool the client is not offered does not exist
//! for it: absent from every listing page, in every era's shape, and a call of it, plain,
//! as a task, bridged, hosted, deferred or as an operation, is refused as a call of a tool
//! no server has.

use super::Session;
use crate::jsonrpc::{INVALID_PARAMS, Message, Method, RpcError};
use serde_json::Value;

impl Session {
    /// A call of a tool the client is not offered: refused (`Some`), as an unknown tool.
    /// The gateway's own long-call tools are not the upstream's to offer.
    pub(super) fn refused_by_policy(&self, frame: &Message) -> Option<RpcError> {
        let rule = self.tool_rule.as_ref()?;
        if frame.method() != Method::ToolsCall {
            return None;
        }
        let name = frame.tool_name()?;
        if rule.permits(&name) || self.long_calls.is_some() && self.upstream.long_calls.gateway_tool(&name).is_some() {
            return None;
        }
        crate::metrics::global().policy_refused(&self.upstream.name, "tool_denied");
        crate::warn_limit::warn_limited!(upstream = %self.upstream.name, client = %self.client, tool = %name, "refused a call of a tool the tool policy does not offer this client");
        Some(RpcError::new(INVALID_PARAMS, format!("unknown tool {:?}", name.as_ref())))
    }

    /// A `tools/list` page as the client may see it: without the tools it is not offered.
    pub(super) fn offered_tools(&self, result: &mut Value) {
        let Some(rule) = &self.tool_rule else { return };
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            tools.retain(|t| t.get("name").and_then(Value::as_str).is_some_and(|n| rule.permits(n)));
        }
    }
}
