//! A modern client's `Mcp-Param-*` headers (2026-07-28 "Custom Headers", SEP-2243): the
//! front that reads them gives the session those of the request it serves
//! (`Session::present_param_headers`), which keeps them in its [`ModernClient`].
//!
//! In front of a legacy upstream the gateway is the server that processes the body: a
//! `tools/call`'s headers are checked against its arguments as the tool's `x-mcp-header`
//! declarations say (a missing, mismatching or badly encoded one is 400 with -32020),
//! declarations the link learns from the listings it carries, or from one it fetches for the
//! purpose when it has seen none. In front of a modern upstream the gateway is an
//! intermediary: what it knows of the tool is checked the same way (the link sends the
//! headers again, made from the body), it fetches no listing for it, and the headers it does
//! not recognise go on as the client sent them (the link's `transmit_modern_with`), for the
//! upstream to check.

use super::super::MAX_LISTING_PAGES;
use super::ModernClient;
use super::host::Host;
use crate::gateway::session::plan::UpstreamSide;
use crate::jsonrpc::{Message, Method, RpcError};
use crate::mcp::modern::ModernError;
use crate::upstream::link::Link;
use serde_json::{Value, json};
use std::sync::Arc;

impl ModernClient {
    /// The request carried these `Mcp-Param-*` headers (name, value).
    pub(in super::super) fn present_param_headers(&self, headers: Vec<(String, Vec<u8>)>) {
        *self.param_headers.lock().unwrap() = Some(headers);
    }

    /// The `Mcp-Param-*` headers of the request being served (none over stdio).
    pub(in super::super) fn received_param_headers(&self) -> Vec<(String, Vec<u8>)> {
        self.param_headers.lock().unwrap().clone().unwrap_or_default()
    }

    /// Checks a `tools/call`'s headers against its body, where the gateway knows the tool's
    /// declarations (see the module doc): -32020 when they disagree.
    pub(super) async fn check_param_headers(
        &self,
        s: &impl Host,
        link: &Arc<Link>,
        upstream: UpstreamSide,
        frame: &Message,
    ) -> Result<(), RpcError> {
        let Some(received) = self.param_headers.lock().unwrap().clone() else {
            return Ok(());
        };
        let Some(name) = frame.tool_name() else { return Ok(()) };
        let declared = match link.param_declarations(&name) {
            Some(d) => d,
            None if upstream.is_modern() => None,
            None => {
                Box::pin(learn_declarations(s, link)).await;
                link.param_declarations(&name).flatten()
            }
        };
        let Some(declared) = declared else { return Ok(()) };
        let arguments = frame.value().pointer("/params/arguments").unwrap_or(&Value::Null);
        declared.check(arguments, &received).map_err(|p| ModernError::HeaderMismatch(p).to_rpc())
    }
}

/// Reads the upstream's whole listing (each page within `request_timeout`, at most
/// `MAX_LISTING_PAGES`) for the link to learn its tools' declarations. A listing that cannot
/// be had is logged, and the call goes on unchecked, as before the gateway knew.
async fn learn_declarations(s: &impl Host, link: &Arc<Link>) {
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_LISTING_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let resp = match link.request(Method::ToolsList, params).await {
            Ok(resp) => resp,
            Err(e) => {
                tracing::warn!(upstream = %s.upstream().name, "cannot read the tools' x-mcp-header declarations: {e}");
                return;
            }
        };
        let Some(result) = resp.get("result") else {
            tracing::warn!(upstream = %s.upstream().name, "cannot read the tools' x-mcp-header declarations: {resp}");
            return;
        };
        link.learn_param_headers(result);
        cursor = result.get("nextCursor").cloned().filter(|c| !c.is_null());
        if cursor.is_none() {
            return;
        }
    }
}
