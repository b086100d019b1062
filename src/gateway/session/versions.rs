//! The crossing between the client's version and the upstream's: every message one side
//! sends is translated for the other by the table in [`crate::mcp::translate`]. When both
//! speak one version (or the receiver is newer) a message passes untouched, its bytes as
//! they came.
//!
//! A modern (2026-07-28) upstream is the one exception: its link speaks the era (stateless
//! requests, see `upstream::link`), its messages are translated as from 2025-11-25 once every
//! response has lost what the era added ([`translate::cross_from_modern`]), and what the era
//! removed is answered here ([`Session::removed_by_modern`]).

use super::*;
use crate::mcp::modern::legacy::{self, Removed};
use crate::mcp::modern::meta::LogLevel;
use crate::mcp::translate::{self, Stopped};

impl Session {
    /// (client, upstream) versions, from the moment the client's `initialize` arrives. While
    /// a link's handshake runs, its upstream may speak anything up to the newest version the
    /// gateway offered it: what it sends meanwhile is translated from that.
    pub(super) fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)> {
        let st = self.state.lock().unwrap();
        Some((st.version.or(st.asked)?, st.upstream_version.unwrap_or(ProtocolVersion::LATEST)))
    }

    /// A request or notification from the client, for the upstream. `Err` for a request the
    /// upstream's version lacks: the client's answer. A notification it lacks is dropped
    /// (`Ok(None)`).
    pub(super) fn upward_request(&self, msg: Message) -> Result<Option<Message>, RpcError> {
        let Some((client, upstream)) = self.versions() else { return Ok(Some(msg)) };
        match translate::cross(msg, None, client, upstream) {
            Ok(m) => Ok(Some(m)),
            Err(Stopped::Refuse(e) | Stopped::Fail(e)) => Err(e),
            Err(Stopped::Drop(why)) => {
                tracing::debug!(upstream = %self.upstream.name, "not sent upstream: {why}");
                Ok(None)
            }
        }
    }

    /// A notification from the client, for the upstream (`None`: dropped).
    pub(super) fn upward_notification(&self, msg: Message) -> Option<Message> {
        self.upward_request(msg).unwrap_or(None)
    }

    /// The client's answer to server request `upstream_id` (of method `answers`), for the
    /// upstream: an answer the upstream's version cannot take becomes an error response.
    pub(super) fn upward_answer(
        &self,
        msg: Message,
        answers: Option<crate::jsonrpc::Method>,
        upstream_id: &Id,
    ) -> Option<Message> {
        let Some((client, upstream)) = self.versions() else { return Some(msg) };
        match translate::cross(msg, answers, client, upstream) {
            Ok(m) => Some(m),
            Err(Stopped::Fail(e) | Stopped::Refuse(e)) => Some(Message::made(e.response(Some(upstream_id)))),
            Err(Stopped::Drop(_)) => None,
        }
    }

    /// A request from the upstream, for the client: `Err` (the upstream's answer) if the
    /// client's version lacks it or cannot express this form of it.
    pub(super) fn downward_request(&self, msg: Message) -> Result<Message, RpcError> {
        let Some((client, upstream)) = self.versions() else { return Ok(msg) };
        match translate::cross(msg, None, upstream, client) {
            Ok(m) => Ok(m),
            Err(Stopped::Refuse(e) | Stopped::Fail(e)) => Err(e),
            Err(Stopped::Drop(why)) => Err(RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)),
        }
    }

    /// A notification or response on its way to the client (`answers`: the method of the
    /// request it answers), given the session's (client, upstream) versions. `None`: a
    /// notification the client's version lacks, dropped. A response it cannot take becomes
    /// the error for its request.
    pub(super) fn downward(
        &self,
        msg: Message,
        answers: Option<crate::jsonrpc::Method>,
        versions: Option<(ProtocolVersion, ProtocolVersion)>,
    ) -> Option<Message> {
        let Some((client, upstream)) = versions else { return Some(msg) };
        if msg.kind() == Kind::Request {
            // Translated by relay_server_request, where a refusal can still be answered.
            return Some(msg);
        }
        let id = msg.id().cloned();
        let plan = self.plan();
        let crossed = match (plan.upstream.is_modern(), plan.client) {
            // A modern client reads the modern server's messages as they are.
            (true, plan::ClientSide::Modern) => return Some(msg),
            (true, plan::ClientSide::Legacy(_)) => translate::cross_from_modern(msg, answers, client),
            (false, _) => translate::cross(msg, answers, upstream, client),
        };
        match crossed {
            Ok(m) => Some(m),
            Err(Stopped::Fail(e) | Stopped::Refuse(e)) => Some(Message::made(e.response(id.as_ref()))),
            Err(Stopped::Drop(why)) => {
                tracing::debug!(upstream = %self.upstream.name, "not sent to the client: {why}");
                None
            }
        }
    }

    /// A client request the 2026-07-28 era removed, answered here when the link is modern
    /// (`None`: forward it). `ping` is answered at once; `logging/setLevel` is kept and sent
    /// as `_meta` `logLevel` with every request from now on (on a shared link, the last level
    /// set applies to all its sessions); resource subscriptions are refused with -32601.
    pub(super) fn removed_by_modern(&self, link: &Arc<Link>, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        if !link.is_modern() {
            return None;
        }
        let answer = match legacy::removed(frame.method(), frame.method_name()) {
            Removed::Forward | Removed::Drop => return None,
            Removed::Refuse(e) => return Some(Err(e)),
            Removed::Answer(result) => result,
            Removed::KeepLogLevel => {
                let level = frame.value().pointer("/params/level").and_then(Value::as_str).and_then(LogLevel::parse);
                let Some(level) = level else {
                    return Some(Err(RpcError::new(
                        INVALID_PARAMS,
                        "logging/setLevel: params.level must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    )));
                };
                self.state.lock().unwrap().log_level = Some(level);
                link.set_log_level(Some(level));
                json!({})
            }
        };
        self.to_client(Message::made(jsonrpc::result_response(id, answer)), Route::Response(id.clone()));
        Some(Ok(()))
    }

    /// Whether a client notification is one the 2026-07-28 era removed (dropped for a modern
    /// upstream).
    pub(super) fn dropped_by_modern(&self, msg: &Message) -> bool {
        let drop = legacy::removed(msg.method(), msg.method_name()) == Removed::Drop;
        if drop {
            tracing::debug!(upstream = %self.upstream.name, method = msg.method_name(), "not sent to the 2026-07-28 upstream, whose era has no such notification");
        }
        drop
    }
}
