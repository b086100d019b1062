//! The gateway's own `initialize` with an upstream: it offers the newest protocol version it
//! speaks, accepts the one the server answers with, and keeps what the server said about
//! itself. The link's version is fixed here, apart from any client's.

use super::error::LinkError;
use super::types::Link;
use crate::jsonrpc::{self, Message, RpcError};
use crate::mcp::ProtocolVersion;
use serde_json::{Value, json};
use std::time::Duration;

/// What the upstream answered to the gateway's `initialize`.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub version: ProtocolVersion,
    /// The whole `initialize` result (capabilities, serverInfo, instructions, and whatever
    /// else the server put there).
    pub result: Value,
}

impl Negotiated {
    pub fn capabilities(&self) -> &Value {
        self.result.get("capabilities").unwrap_or(&Value::Null)
    }
}

impl Link {
    /// Initializes the upstream on the gateway's behalf, declaring `capabilities` (what the
    /// gateway can relay to its client) and `client_info`, within `within`. The upstream is
    /// offered the newest version; a server that refuses it naming the versions it supports
    /// (`error.data.supported`) is asked once more with the newest of those the gateway speaks.
    pub async fn handshake(
        &self,
        capabilities: Value,
        client_info: Value,
        within: Duration,
    ) -> Result<Negotiated, RpcError> {
        let upstream = self.core.upstream.clone();
        let run = async {
            let mut offer = ProtocolVersion::LATEST;
            let mut retried = false;
            let resp = loop {
                let params = json!({
                    "protocolVersion": offer.as_str(),
                    "capabilities": capabilities,
                    "clientInfo": client_info,
                });
                let resp = self.request_for(jsonrpc::request(&jsonrpc::Id::Num(0), "initialize", params), None).await?;
                let Some(err) = resp.get("error") else { break resp };
                match supported_instead(err).filter(|v| *v != offer) {
                    Some(v) if !retried => {
                        tracing::info!(upstream = %upstream, "upstream refused protocol version {offer}; offering {v}, which it supports");
                        offer = v;
                        retried = true;
                    }
                    _ => {
                        let error = match (err.get("code"), err.get("message").and_then(Value::as_str)) {
                            (Some(code), Some(message)) => format!("{message} ({code})"),
                            _ => err.to_string(),
                        };
                        return Err(LinkError::InitRefused { upstream: upstream.clone(), error }.into());
                    }
                }
            };
            let got = resp.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or("");
            let Some(version) = ProtocolVersion::parse(got) else {
                return Err(LinkError::UnknownVersion { upstream: upstream.clone(), version: got.into() }.into());
            };
            // A server that loses this notification is initialized all the same as far as the
            // gateway can tell; its next answer will say otherwise.
            let initialized = Message::made(jsonrpc::notification("notifications/initialized", json!({})));
            if let Err(e) = self.send(initialized).await {
                tracing::warn!(upstream = %upstream, "notifications/initialized not delivered: {}", e.message);
            }
            // By now `auto` has decided (a second message waits for the decision).
            if let Some(tells) = self.conn.tells_related_now() {
                self.core.infer_related.store(!tells, std::sync::atomic::Ordering::Relaxed);
            }
            let result = resp.get("result").cloned().unwrap_or(json!({}));
            Ok(Negotiated { version, result })
        };
        match tokio::time::timeout(within, run).await {
            Ok(r) => r,
            Err(_) => Err(LinkError::InitTimedOut { upstream, after: within }.into()),
        }
    }
}

/// The newest version the gateway speaks among those an `initialize` error says the server
/// supports (`data.supported`, as SDK servers send it).
fn supported_instead(err: &Value) -> Option<ProtocolVersion> {
    err.pointer("/data/supported")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .filter_map(ProtocolVersion::parse)
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_naming_supported_versions_is_read() {
        let err = json!({"code": -32602, "message": "Unsupported protocol version", "data": {"supported": ["2024-11-05", "2025-03-26", "1999-01-01"], "requested": "2025-11-25"}});
        assert_eq!(supported_instead(&err), Some(ProtocolVersion::V2025_03_26));
        assert_eq!(supported_instead(&json!({"code": -32602, "message": "x"})), None);
        assert_eq!(supported_instead(&json!({"data": {"supported": ["2030-01-01"]}})), None);
    }
}
