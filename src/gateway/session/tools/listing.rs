//! Asking what the session knows of a tool, or the upstream's listing when it does not
//! know yet (`ToolSupport`'s part that needs the session: its link and what it negotiated,
//! lent as a [`Host`]).

use super::super::reach::Reach;
use super::super::{MAX_CACHED_TOOLS, MAX_LISTING_PAGES};
use super::ToolSupport;
use crate::config::HostedMode;
use crate::jsonrpc::{self, Method, RpcError};
use crate::mcp::ProtocolVersion;
use crate::mcp::task_messages::TaskSupport;
use crate::tasks::hosted::hosts;
use serde_json::{Value, json};

/// What the tools' listing needs of its session beyond what every strategy may reach: its
/// narrow context.
pub(in super::super) trait Host: Reach {
    /// Whether the upstream declared task-augmented tool calls.
    fn upstream_declares_tool_tasks(&self) -> bool;
    /// `f`'s value, given the upstream's negotiated version, under the session's lock: a new
    /// link's `adopt` changes the version and forgets the tools under the same lock.
    fn with_upstream_version<R>(&self, f: impl FnOnce(Option<ProtocolVersion>) -> R) -> R;
}

impl ToolSupport {
    /// Whether the gateway hosts tasks for `tool` (per `[upstream.tasks]`).
    pub(in super::super) async fn hosts(&self, s: &impl Host, tool: &str) -> Result<bool, RpcError> {
        let policy = &s.upstream().tasks;
        if policy.hosted == HostedMode::Never || !policy.offers_tool(tool) {
            return Ok(false);
        }
        // The listing decides, whatever order the client asks in: a server may mark tools
        // without declaring tasks.
        let support = self.support(s, tool).await?;
        let declares = s.upstream_declares_tool_tasks();
        Ok(hosts(policy.hosted, declares, support))
    }

    /// A tool's `taskSupport`, from what is known or, failing that, a fresh listing (the
    /// fetch is boxed: it is rare, and large). A listing that cannot be had fails the call.
    pub(in super::super) async fn support(&self, s: &impl Host, tool: &str) -> Result<TaskSupport, RpcError> {
        match self.known(tool) {
            Some(support) => Ok(support),
            None => Box::pin(self.fetch(s, tool)).await,
        }
    }

    /// Reads the upstream's listing (each page within `request_timeout`) until `tool`'s
    /// support is known.
    async fn fetch(&self, s: &impl Host, tool: &str) -> Result<TaskSupport, RpcError> {
        // Not in the whole listing: an unknown tool, which has no task support.
        if let Some(support) = self.known(tool) {
            return Ok(support);
        }
        let link = s.link().await?;
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_LISTING_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let resp = link.request(Method::ToolsList, params).await?;
            match resp.get("result") {
                Some(result) => self.remember(s, result),
                None => {
                    return Err(RpcError::new(
                        jsonrpc::INTERNAL_ERROR,
                        format!(
                            "cannot tell whether tool {tool:?} runs as a task: upstream '{}' answered tools/list with {}",
                            s.upstream().name,
                            resp.get("error").map(Value::to_string).unwrap_or_default()
                        ),
                    ));
                }
            }
            cursor = resp.pointer("/result/nextCursor").cloned().filter(|c| !c.is_null());
            if cursor.is_none() {
                self.learned_whole();
                break;
            }
        }
        Ok(self.listed(tool))
    }

    /// Learns each tool's `taskSupport` from a listing, the client's or the gateway's own. An
    /// upstream whose version has no tasks has none to declare: its tools count as forbidden,
    /// whatever they are marked.
    pub(in super::super) fn remember(&self, s: &impl Host, result: &Value) {
        // Under the session's lock, then this one's: a new link's `adopt` changes the version
        // and forgets the tools under it, so it cannot come between reading the version and
        // learning under it.
        s.with_upstream_version(|v| self.learn(result, v.is_some_and(|v| v.has_tasks()), MAX_CACHED_TOOLS));
    }
}
