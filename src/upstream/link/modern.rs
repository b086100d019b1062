//! A link to a modern (2026-07-28) upstream: stateless. Every request it sends carries the
//! per-request `_meta` (protocol version, the capabilities the gateway declares (the link's,
//! or those a forward declares for its own request), its
//! `clientInfo`, and the log level the client set, if any), spliced into `params._meta`
//! without touching the rest; over HTTP every message is POSTed with the headers that mirror
//! its body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, and for a `tools/call` the
//! `Mcp-Param-*` its tool's `x-mcp-header` declarations ask for, learned from the listings
//! the link carried, and those of the client's it does not recognise) and without a session
//! id. The declarations are learned on a legacy link too: a modern client's headers are
//! checked against them where the gateway is the server ([`Link::param_declarations`]).
//! What those are is `mcp::modern`'s; this module only applies them. A modern server sends
//! no requests, so the link sends it no responses: the one the gateway makes (answering an
//! input request of a hosted task's round, see `tasks::hosted`) goes to
//! [`super::TaskCalls::input_answer`]. A legacy link pays one
//! atomic load per message for it, and its bytes pass as they are.

use super::types::Link;
use crate::jsonrpc::{Kind, Message, Method};
use crate::mcp::modern::headers::{self, ParamHeaders};
use crate::mcp::modern::meta::{LogLevel, RequestMeta};
use crate::transport;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::sync::atomic::Ordering;

impl Link {
    /// Whether the link speaks the modern era.
    pub fn is_modern(&self) -> bool {
        self.modern.on.load(Ordering::Acquire)
    }

    /// From now on every message is sent the modern way, with `meta`.
    pub(super) fn speak_modern(&self, meta: RequestMeta) {
        *self.modern.meta.lock().unwrap() = Some(meta);
        self.modern.on.store(true, Ordering::Release);
    }

    /// Back to the legacy era (the probe found a legacy server).
    pub(super) fn speak_legacy(&self) {
        self.modern.on.store(false, Ordering::Release);
        *self.modern.meta.lock().unwrap() = None;
    }

    /// The log level the client set with `logging/setLevel`, sent as `_meta` `logLevel` on
    /// every request from now on (`None`: no log messages).
    pub fn set_log_level(&self, level: Option<LogLevel>) {
        if let Some(meta) = self.modern.meta.lock().unwrap().as_mut() {
            meta.log_level = level;
        }
    }

    /// Sends one message on the link's transport, the modern way if the link is modern.
    pub(super) async fn transmit(&self, msg: Message) -> Result<(), transport::Error> {
        if !self.is_modern() {
            return self.conn.send(msg).await;
        }
        // Boxed: a legacy link's every request future would otherwise carry this path's state.
        Box::pin(self.transmit_modern(msg, None)).await
    }

    /// [`Link::transmit`] on a modern link, a request declaring `capabilities` as its
    /// client's (`None`: the link's own), and carrying the `Mcp-Param-*` headers of the
    /// client's request that the link does not recognise (`client_params`). Boxed by its
    /// callers, like `transmit`'s modern path.
    pub(super) async fn transmit_declaring(
        &self,
        msg: Message,
        capabilities: Option<Map<String, Value>>,
        client_params: &[(String, Vec<u8>)],
    ) -> Result<(), transport::Error> {
        if !self.is_modern() {
            return self.conn.send(msg).await;
        }
        self.transmit_modern_with(msg, capabilities, client_params).await
    }

    /// [`Link::transmit`] on a modern link: the `_meta` spliced in, the headers mirrored.
    async fn transmit_modern(
        &self,
        msg: Message,
        capabilities: Option<Map<String, Value>>,
    ) -> Result<(), transport::Error> {
        self.transmit_modern_with(msg, capabilities, &[]).await
    }

    /// [`Link::transmit_modern`], with the client's `Mcp-Param-*` headers. A `tools/call`
    /// carries those its tool's declarations ask for, made from its body; and, as an
    /// intermediary must ("Intermediate servers that do not recognize an `Mcp-Param-{Name}`
    /// header MUST forward it"), each of the client's that no declaration the link knows
    /// names (all of them for a tool not listed yet).
    async fn transmit_modern_with(
        &self,
        msg: Message,
        capabilities: Option<Map<String, Value>>,
        client_params: &[(String, Vec<u8>)],
    ) -> Result<(), transport::Error> {
        if msg.kind() == Kind::Response {
            // A modern server asks nothing of its client: a response is a hosted task's
            // answer to its call's input round, which its next round carries.
            self.core.tasks.input_answer(msg.into_value());
            return Ok(());
        }
        let Some(mut meta) = self.modern.meta.lock().unwrap().clone() else { return self.conn.send(msg).await };
        if let Some(c) = capabilities {
            meta.capabilities = c;
        }
        let msg = if msg.kind() == Kind::Request { msg.edit(|v| meta.write_into(v)) } else { msg };
        let mut mirrored = headers::for_body(msg.value());
        // Every POST carries the version, a notification (no `_meta` of its own) too.
        if !mirrored.iter().any(|(k, _)| *k == headers::PROTOCOL_VERSION) {
            mirrored.insert(0, (headers::PROTOCOL_VERSION.into(), meta.version.to_string()));
        }
        if msg.method() == Method::ToolsCall {
            let declared = msg.value().pointer("/params/name").and_then(Value::as_str).and_then(|n| self.declared(n));
            let arguments = msg.value().pointer("/params/arguments").unwrap_or(&Value::Null);
            if let Some(d) = &declared {
                mirrored.extend(d.for_arguments(arguments));
            }
            for (name, value) in client_params {
                let recognised = declared.as_ref().is_some_and(|d| d.names(name));
                // A value that is not text is no header value the client may send (dropped).
                if let (false, Ok(value)) = (recognised, std::str::from_utf8(value)) {
                    mirrored.push((name.clone().into(), value.to_string()));
                }
            }
        }
        self.conn.send_headed(msg, &mirrored).await
    }

    /// Tool `name`'s `x-mcp-header` declarations, as the last listing showed them.
    fn declared(&self, name: &str) -> Option<Arc<ParamHeaders>> {
        self.modern.param_headers.lock().unwrap().get(name).cloned()
    }

    /// What the link knows of tool `name`'s `x-mcp-header` declarations: `None` before a
    /// listing was learned whole (see [`Link::learn_param_headers`]); then the tool's, if
    /// it declares any.
    pub fn param_declarations(&self, name: &str) -> Option<Option<Arc<ParamHeaders>>> {
        let declared = self.declared(name);
        match declared {
            Some(d) => Some(Some(d)),
            None if self.modern.listed.load(Ordering::Acquire) => Some(None),
            None => None,
        }
    }

    /// Learns the tools' `x-mcp-header` declarations from a page of a `tools/list` result
    /// (at most [`MAX_DECLARING_TOOLS`] tools that declare any are kept); a page without a
    /// `nextCursor` completes the listing. A tool whose declarations break the rules is
    /// called without `Mcp-Param-*` headers (and checked for none).
    pub fn learn_param_headers(&self, result: &Value) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        if result.get("nextCursor").is_none_or(Value::is_null) {
            self.modern.listed.store(true, Ordering::Release);
        }
        let mut table = self.modern.param_headers.lock().unwrap();
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else { continue };
            match t.get("inputSchema").map(ParamHeaders::of_schema) {
                Some(Ok(d)) if !d.is_empty() => {
                    if table.len() < MAX_DECLARING_TOOLS || table.contains_key(name) {
                        table.insert(name.to_string(), Arc::new(d));
                    }
                }
                Some(Err(why)) => {
                    tracing::warn!(upstream = %self.core.upstream, tool = name, "the tool's x-mcp-header is invalid: {why}");
                    table.remove(name);
                }
                _ => {
                    table.remove(name);
                }
            }
        }
    }
}

/// Tools with `x-mcp-header` declarations one link keeps (as many as a session keeps the
/// `taskSupport` of).
const MAX_DECLARING_TOOLS: usize = 10_000;
