//! The gateway's own handshake with an upstream: the link's era and version are fixed here,
//! apart from any client's.
//!
//! Under `era = "auto"` (the default) it first probes with `server/discover`, carrying the
//! modern `_meta`. A result that reads as a discover result naming 2026-07-28 makes the link
//! modern: no `initialize`, and what the server said of itself is kept as the `initialize`
//! result the gateway synthesizes for legacy clients. Anything else falls back to today's
//! `initialize`: an error that is not one only a modern server sends, an HTTP refusal, a
//! broken stream, or no answer within half of `connect_timeout` (the rest is the
//! `initialize`'s). A modern error (-32020, -32021, or -32022 naming no legacy version the
//! gateway speaks) fails the handshake instead: the server is modern and refused us.
//! `era = "legacy"` skips the probe; `era = "modern"` makes its failure final.
//!
//! The `initialize` offers the newest protocol version the gateway speaks, accepts the one
//! the server answers with, and keeps what the server said about itself.

use super::error::LinkError;
use super::types::Link;
use crate::config::Era;
use crate::jsonrpc::{self, Message, RpcError};
use crate::mcp::ProtocolVersion;
use crate::mcp::modern::{self, legacy, meta::RequestMeta};
use serde_json::{Value, json};
use std::time::Duration;

/// What the upstream answered to the gateway's `initialize`.
#[derive(Clone, Debug)]
pub struct Negotiated {
    /// The version messages are translated from. For a modern upstream, the newest legacy
    /// version (2025-11-25), which its messages otherwise have, past what the era adds.
    pub version: ProtocolVersion,
    /// The upstream speaks 2026-07-28: `result` is synthesized from its discover result.
    pub modern: bool,
    /// A 2026-07-28 upstream answers `initialize` as well, as far as this handshake found:
    /// `Some(true)`, it did (this link, for a legacy client, is then a legacy one: `modern`
    /// false); `Some(false)`, it refused; `None`, not asked.
    pub legacy_too: Option<bool>,
    /// A modern upstream whose `server/discover` declares the tasks extension
    /// (`io.modelcontextprotocol/tasks`): `result` has no trace of it (a legacy client cannot
    /// read `extensions`), so this says it.
    pub ext_tasks: bool,
    /// The whole `initialize` result (capabilities, serverInfo, instructions, and whatever
    /// else the server put there).
    pub result: Value,
    /// What the `server/discover` probe showed, when one was sent: why the upstream was
    /// taken for the era it speaks (for the log and `taskgate check`).
    pub probed: Option<String>,
}

/// Why a handshake did not negotiate.
#[derive(Debug)]
pub enum HandshakeError {
    /// The upstream could not be initialized: the error its clients get.
    Failed(RpcError),
    /// Under `era = "auto"`, the connection closed after the `server/discover` probe (a
    /// server that exits when its first message is not `initialize`): a new connection,
    /// initialized without the probe, will serve. Why, for the log.
    ProbeClosed(String),
    /// The upstream speaks both eras, the link serves a legacy client, and the link is a
    /// process that may have settled into 2026-07-28 on answering the probe: a new one,
    /// initialized without the probe, will serve. Why, for the log.
    Dual(String),
}

impl From<RpcError> for HandshakeError {
    fn from(e: RpcError) -> Self {
        HandshakeError::Failed(e)
    }
}

impl HandshakeError {
    /// The error a client gets when no further attempt is made.
    pub fn into_rpc(self, upstream: &str) -> RpcError {
        match self {
            HandshakeError::Failed(e) => e,
            HandshakeError::ProbeClosed(why) | HandshakeError::Dual(why) => {
                LinkError::InitRefused { upstream: upstream.into(), error: why }.into()
            }
        }
    }
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
    /// (`error.data.supported`) is asked once more with the newest of those the gateway
    /// speaks, translated for that version as every message to it is.
    ///
    /// Under `era = "auto"` the probe waits at most `probe_within`; a connection that closes
    /// after it, before the `initialize` is answered, is [`HandshakeError::ProbeClosed`].
    ///
    /// `legacy_client`: the link serves one client of a legacy version. An upstream whose
    /// discover lists a legacy version too is then initialized, so that the client keeps
    /// what its generation has and the modern era lacks (a server's own sampling and
    /// elicitation requests, resource subscriptions); one that then refuses `initialize`
    /// is used in the modern era after all.
    pub async fn handshake(
        &self,
        capabilities: Value,
        client_info: Value,
        era: Era,
        legacy_client: bool,
        within: Duration,
        probe_within: Duration,
    ) -> Result<Negotiated, HandshakeError> {
        let upstream = self.core.upstream.clone();
        let started = tokio::time::Instant::now();
        let mut probed = None;
        // A dual-era upstream's modern view, kept while its `initialize` is tried.
        let mut modern_after_all = None;
        if era != Era::Legacy {
            let probe_within = if era == Era::Modern { within } else { probe_within.min(within / 2) };
            match self.probe(&capabilities, &client_info, probe_within).await {
                // Servers of both eras often list only 2026-07-28 in discover (the Python SDK's),
                // so only `initialize` tells. An extension server's tasks exist only in
                // 2026-07-28, where the gateway bridges them for legacy clients: it stays modern.
                Probed::Modern(n) if legacy_client && !n.ext_tasks && era == Era::Auto => {
                    let why = format!(
                        "it answered server/discover as a {} server and may speak legacy versions too: a legacy client's link is initialized",
                        modern::VERSION
                    );
                    if matches!(self.conn, crate::upstream::connect::Upstream::Stdio(_)) {
                        return Err(HandshakeError::Dual(why));
                    }
                    tracing::info!(upstream = %upstream, "{why}");
                    self.speak_legacy();
                    probed = Some(why);
                    modern_after_all = Some(n);
                }
                Probed::Modern(n) => return Ok(n),
                Probed::Refused(e) => return Err(e.into()),
                Probed::Legacy(why) | Probed::Silent(why) if era == Era::Modern => {
                    return Err(RpcError::from(LinkError::InitRefused {
                        upstream,
                        error: format!("not a 2026-07-28 server (era = \"modern\"): {why}"),
                    })
                    .into());
                }
                Probed::Legacy(_) if self.is_closed() => return Err(self.probe_closed()),
                // A slow process may still answer the probe and settle into 2026-07-28, then
                // refuse `initialize` on the same pipe: start it again without the probe.
                Probed::Silent(why) if matches!(self.conn, crate::upstream::connect::Upstream::Stdio(_)) => {
                    return Err(HandshakeError::ProbeClosed(format!(
                        "the server gave server/discover {why}, and a process that answers it late may refuse initialize"
                    )));
                }
                Probed::Silent(why) => {
                    tracing::info!(upstream = %upstream, "server/discover probe: {why}; initializing as a legacy server");
                    probed = Some(why);
                }
                Probed::Legacy(why) => {
                    tracing::info!(upstream = %upstream, "server/discover probe: {why}; initializing as a legacy server");
                    probed = Some(why);
                }
            }
        }
        let within = within.saturating_sub(started.elapsed());
        let run = async {
            let Some(modern) = modern_after_all.clone() else {
                return self.initialize(&capabilities, &client_info, &probed).await;
            };
            match self.initialize(&capabilities, &client_info, &probed).await {
                Ok(mut n) => {
                    n.legacy_too = Some(true);
                    Ok(n)
                }
                Err(HandshakeError::Failed(e)) if !self.is_closed() => {
                    tracing::info!(upstream = %upstream, "the upstream refused initialize ({}); using {} for this link", e.message, modern::VERSION);
                    self.speak_modern(modern_meta(&capabilities, &client_info));
                    Ok(Negotiated {
                        legacy_too: Some(false),
                        probed: Some(format!("it speaks 2026-07-28, and refused initialize: {}", e.message)),
                        ..modern
                    })
                }
                Err(e) => Err(e),
            }
        };
        match tokio::time::timeout(within, run).await {
            Ok(r) => r,
            Err(_) => Err(RpcError::from(LinkError::InitTimedOut { upstream, after: within }).into()),
        }
    }

    /// The `initialize` exchange, `notifications/initialized` after it.
    async fn initialize(
        &self,
        capabilities: &Value,
        client_info: &Value,
        probed: &Option<String>,
    ) -> Result<Negotiated, HandshakeError> {
        let upstream = self.core.upstream.clone();
        let mut offer = ProtocolVersion::LATEST;
        let mut retried = false;
        let resp = loop {
            let mut init = jsonrpc::request(
                &jsonrpc::Id::Num(0),
                crate::jsonrpc::Method::Initialize,
                json!({"protocolVersion": offer.as_str(), "capabilities": capabilities, "clientInfo": client_info}),
            );
            // What the offered version lacks (a retry at an older one) is not sent.
            crate::mcp::translate::translate(&mut init, None, ProtocolVersion::LATEST, offer);
            let resp = match self.request_for(init, None).await {
                Err(_) if probed.is_some() && self.is_closed() => return Err(self.probe_closed()),
                r => r?,
            };
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
                    return Err(RpcError::from(LinkError::InitRefused { upstream: upstream.clone(), error }).into());
                }
            }
        };
        let got = resp.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or("");
        let Some(version) = ProtocolVersion::parse(got) else {
            return Err(
                RpcError::from(LinkError::UnknownVersion { upstream: upstream.clone(), version: got.into() }).into()
            );
        };
        // A server that loses this notification is initialized all the same as far as the
        // gateway can tell; its next answer will say otherwise.
        let initialized = Message::made(jsonrpc::notification(crate::jsonrpc::Method::Initialized, json!({})));
        if let Err(e) = self.send(initialized).await {
            tracing::warn!(upstream = %upstream, "notifications/initialized not delivered: {}", e.message);
        }
        // By now `auto` has decided (a second message waits for the decision).
        if let Some(tells) = self.conn.tells_related_now() {
            self.core.infer_related.store(!tells, std::sync::atomic::Ordering::Relaxed);
        }
        let result = resp.get("result").cloned().unwrap_or(json!({}));
        Ok(Negotiated { version, modern: false, legacy_too: None, ext_tasks: false, result, probed: probed.clone() })
    }

    /// The connection closed after the probe: why, as the log and `taskgate check` say it.
    fn probe_closed(&self) -> HandshakeError {
        let how = match self.close_reason() {
            Some(reason) => format!(" ({reason})"),
            None => String::new(),
        };
        HandshakeError::ProbeClosed(format!(
            "the server closed the connection when its first message was server/discover{how}"
        ))
    }
}

/// What the `server/discover` probe found.
enum Probed {
    Modern(Negotiated),
    /// Not a modern server (why, for the log): initialize it.
    Legacy(String),
    /// No answer within the bound (why, for the log): initialize it, on a fresh process
    /// where the upstream is one.
    Silent(String),
    /// A modern server that refused the gateway.
    Refused(RpcError),
}

impl Link {
    /// Sends `server/discover` the modern way; the link stays modern only if the answer
    /// shows a modern server.
    /// Its requests declare, of `capabilities` (the gateway's legacy declaration, the
    /// client's or a shared link's), what the modern era asks for with input requests.
    async fn probe(&self, capabilities: &Value, client_info: &Value, within: Duration) -> Probed {
        let upstream = self.core.upstream.clone();
        self.speak_modern(modern_meta(capabilities, client_info));
        let started = tokio::time::Instant::now();
        let mut answer;
        let mut asked_again = false;
        loop {
            let discover = jsonrpc::request(&jsonrpc::Id::Num(0), crate::jsonrpc::Method::ServerDiscover, json!({}));
            answer =
                tokio::time::timeout(within.saturating_sub(started.elapsed()), self.request_for(discover, None)).await;
            // A -32022 that lists our version refused something else of the request (a server
            // may refuse the first request of a client it does not know yet): asked once more.
            let lists_ours = matches!(&answer, Ok(Ok(resp)) if refuses_listing_ours(resp));
            if !lists_ours || asked_again {
                break;
            }
            tracing::info!(upstream = %upstream, "server/discover got -32022 naming {} among its versions; asking once more", modern::VERSION);
            asked_again = true;
        }
        let probed = match answer {
            Err(_) => Probed::Silent(format!("no answer within {within:?}")),
            Ok(Err(e)) => Probed::Legacy(e.message),
            Ok(Ok(resp)) => match (resp.get("result"), resp.get("error")) {
                (Some(result), _) => match modern::read_discover_result(result) {
                    Ok(d) if d.supported_versions.iter().any(|v| v == modern::VERSION) => {
                        let result = legacy::initialize_result(&d, ProtocolVersion::LATEST.as_str(), &upstream);
                        let ext_tasks = crate::mcp::task_dialects::caps::declares(&d.capabilities);
                        self.conn.settle_streamable();
                        // A modern transport tells which request a message relates to (stdio:
                        // only requests' own notifications flow, with their tokens).
                        tracing::info!(upstream = %upstream, "the upstream speaks {}: stateless requests", modern::VERSION);
                        let probed = Some(format!("it answered server/discover listing {}", modern::VERSION));
                        Probed::Modern(Negotiated {
                            version: ProtocolVersion::LATEST,
                            modern: true,
                            legacy_too: None,
                            ext_tasks,
                            result,
                            probed,
                        })
                    }
                    Ok(d) => Probed::Legacy(format!("its server/discover lists {:?}", d.supported_versions)),
                    Err(why) => Probed::Legacy(format!("its server/discover result is not one: {why}")),
                },
                (None, Some(err)) if modern::is_modern_error(err) && !names_legacy(err) => {
                    let error = match (err.get("code"), err.get("message").and_then(Value::as_str)) {
                        (Some(code), Some(message)) => format!("server/discover: {message} ({code})"),
                        _ => err.to_string(),
                    };
                    Probed::Refused(LinkError::InitRefused { upstream: upstream.clone(), error }.into())
                }
                (None, Some(err)) => Probed::Legacy(format!("server/discover answered {err}")),
                (None, None) => Probed::Legacy("server/discover answered neither a result nor an error".into()),
            },
        };
        if !matches!(probed, Probed::Modern(_)) {
            self.speak_legacy();
        }
        probed
    }
}

/// The modern `_meta` a link sends: of `capabilities` (the gateway's legacy declaration, the
/// client's or a shared link's), what the modern era asks for with input requests.
fn modern_meta(capabilities: &Value, client_info: &Value) -> RequestMeta {
    RequestMeta {
        version: modern::VERSION,
        capabilities: legacy::client_capabilities(capabilities),
        client_info: Some(client_info.clone()),
        log_level: None,
    }
}

/// An answer that is -32022 and whose `data.supported` lists the modern version the gateway
/// sent.
fn refuses_listing_ours(resp: &Value) -> bool {
    let Some(err) = resp.get("error") else { return false };
    err.get("code").and_then(Value::as_i64) == Some(modern::UNSUPPORTED_PROTOCOL_VERSION)
        && err
            .pointer("/data/supported")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|v| v.as_str() == Some(modern::VERSION)))
}

/// A -32022 whose `data.supported` names a legacy version the gateway speaks: the server is
/// dual era without our modern version, and `initialize` may serve.
fn names_legacy(err: &Value) -> bool {
    supported_instead(err).is_some()
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
