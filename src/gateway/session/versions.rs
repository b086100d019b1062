//! The crossing between the client's version and the upstream's: every message one side
//! sends is translated for the other by the table in [`crate::mcp::translate`]. When both
//! speak one version (or the receiver is newer) a message passes untouched, its bytes as
//! they came.
//!
//! A modern (2026-07-28) upstream is the one exception: its link speaks the era (stateless
//! requests, see `upstream::link`), its messages are translated as from 2025-11-25 once every
//! response has lost what the era added ([`translate::cross_from_modern`]), and what the era
//! removed is answered by the session before a request goes up (`dispatch`).
//!
//! A [`Crossing`] is taken from the session (`Session::crossing`) at one moment, under one
//! lock: the two versions and the plan's sides, read together.

use super::plan::{ClientSide, Plan};
use crate::jsonrpc::{self, Id, Kind, Message, Method, RpcError};
use crate::mcp::ProtocolVersion;
use crate::mcp::translate::{self, Stopped};

/// The session's two versions and eras at one moment (see the module doc).
pub(super) struct Crossing<'a> {
    /// (client, upstream); `None` until the client's `initialize` arrives: nothing is
    /// translated. While a link's handshake runs, its upstream may speak anything up to the
    /// newest version the gateway offered it: what it sends meanwhile is translated from that.
    versions: Option<(ProtocolVersion, ProtocolVersion)>,
    plan: Plan,
    /// The upstream's name, for the log.
    upstream: &'a str,
}

impl<'a> Crossing<'a> {
    pub(super) fn new(versions: Option<(ProtocolVersion, ProtocolVersion)>, plan: Plan, upstream: &'a str) -> Self {
        Crossing { versions, plan, upstream }
    }

    /// The client's version, once its `initialize` has arrived.
    pub(super) fn client(&self) -> Option<ProtocolVersion> {
        self.versions.map(|(client, _)| client)
    }

    /// A request or notification from the client, for the upstream. `Err` for a request the
    /// upstream's version lacks: the client's answer. A notification it lacks is dropped
    /// (`Ok(None)`).
    pub(super) fn up(&self, msg: Message) -> Result<Option<Message>, RpcError> {
        let Some((client, upstream)) = self.versions else { return Ok(Some(msg)) };
        match translate::cross(msg, None, client, upstream) {
            Ok(m) => Ok(Some(m)),
            Err(Stopped::Refuse(e) | Stopped::Fail(e)) => Err(e),
            Err(Stopped::Drop(why)) => {
                tracing::debug!(upstream = %self.upstream, "not sent upstream: {why}");
                Ok(None)
            }
        }
    }

    /// A notification from the client, for the upstream (`None`: dropped).
    pub(super) fn up_notification(&self, msg: Message) -> Option<Message> {
        self.up(msg).unwrap_or(None)
    }

    /// The client's answer to server request `upstream_id` (of method `answers`), for the
    /// upstream: an answer the upstream's version cannot take becomes an error response.
    pub(super) fn up_answer(&self, msg: Message, answers: Option<Method>, upstream_id: &Id) -> Option<Message> {
        let Some((client, upstream)) = self.versions else { return Some(msg) };
        match translate::cross(msg, answers, client, upstream) {
            Ok(m) => Some(m),
            Err(Stopped::Fail(e) | Stopped::Refuse(e)) => Some(Message::made(e.response(Some(upstream_id)))),
            Err(Stopped::Drop(_)) => None,
        }
    }

    /// A request from the upstream, for the client: `Err` (the upstream's answer) if the
    /// client's version lacks it or cannot express this form of it.
    pub(super) fn down_request(&self, msg: Message) -> Result<Message, RpcError> {
        let Some((client, upstream)) = self.versions else { return Ok(msg) };
        match translate::cross(msg, None, upstream, client) {
            Ok(m) => Ok(m),
            Err(Stopped::Refuse(e) | Stopped::Fail(e)) => Err(e),
            Err(Stopped::Drop(why)) => Err(RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)),
        }
    }

    /// A notification or response on its way to the client (`answers`: the method of the
    /// request it answers). `None`: a notification the client's version lacks, dropped. A
    /// response it cannot take becomes the error for its request.
    pub(super) fn down(&self, msg: Message, answers: Option<Method>) -> Option<Message> {
        let Some((client, upstream)) = self.versions else { return Some(msg) };
        if msg.kind() == Kind::Request {
            // Translated by relay_server_request, where a refusal can still be answered.
            return Some(msg);
        }
        let id = msg.id().cloned();
        let crossed = match (self.plan.upstream.is_modern(), self.plan.client) {
            // A modern client reads the modern server's messages as they are.
            (true, ClientSide::Modern) => return Some(msg),
            (true, ClientSide::Legacy(_)) => translate::cross_from_modern(msg, answers, client),
            (false, _) => translate::cross(msg, answers, upstream, client),
        };
        match crossed {
            Ok(m) => Some(m),
            Err(Stopped::Fail(e) | Stopped::Refuse(e)) => Some(Message::made(e.response(id.as_ref()))),
            Err(Stopped::Drop(why)) => {
                tracing::debug!(upstream = %self.upstream, "not sent to the client: {why}");
                None
            }
        }
    }
}
