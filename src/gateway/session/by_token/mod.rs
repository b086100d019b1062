//! The by-token dialects of a legacy session, for upstreams that enable them
//! (`[upstream.dialects]`): the progress-state proposal (`progress/get`, `_meta.progress`;
//! `progress_get`) and SEP-1391 operations (`tools/call` with `operation`, `tools/async/*`;
//! `operations`).
//!
//! A strategy of the session's: [`Dialects`] (`state`) owns what the dialects keep, is
//! built once with the session from what its upstream enables, and is called where the
//! session's messages pass anyway, with the session. It lends each dialect only what that
//! one needs of it: operations an `operations::Host`, the progress-state dialect a
//! `progress_get::Cx`. Its entry points are [`Dialects::request`] as a
//! request is dispatched, [`Dialects::outgoing`] as a message leaves for the client, and the
//! hooks for a cancel, a server request's answer or withdrawal, a listing and the session's
//! end.
//!
//! - Progress state: every request the client sends with a `progressToken` (but a task's
//!   or an operation's, which have their own state) is followed in the gateway's
//!   [`ProgressStates`](crate::tasks::progress_state): its progress, the questions the
//!   upstream asks for it, and its response, which carries `_meta.progress`.
//! - Operations: an opted-in client's call with `operation` runs as a task of the
//!   gateway's, hosted (a plain call upstream) or, for a tool the upstream runs as a task, a
//!   bridge that follows the upstream's task; the client knows it by its token alone
//!   ([`Operations`](operation_table)). What is sent for it carries
//!   `_operation.token`; a cancel of the original request cancels it; the session's end
//!   cancels what still runs (its tokens were the session's).
//!
//! Locks: where a dialect's lock and the session's `state` are both held, the session's is
//! taken first; neither is held across an `.await`.
//!
//! Modern (2026-07-28) clients have no session to scope either by, so they get neither.

use super::Session;
use crate::jsonrpc::{Id, Kind, Message, Method, RpcError};
use crate::upstream::client::Route;
use serde_json::Value;
use state::Dialects;

mod operation_table;
pub(super) mod operations;
mod progress_get;
pub(super) mod state;

impl Dialects {
    /// A request of an initialized legacy session, before it is dispatched: answered here
    /// (`Some`) when it is one of the dialects', else followed if it carries a progress token.
    pub(super) async fn request(&self, s: &Session, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        if let Some(ops) = &self.sep1391
            && let Some(answered) = ops.request(s, id, frame).await
        {
            return Some(answered);
        }
        let answered = self.progress_get.as_ref()?.request(&progress_cx(s), id, frame)?;
        Some(answered.map(|result| {
            s.to_client(Message::made(crate::jsonrpc::result_response(id, result)), Route::Response(id.clone()));
        }))
    }

    /// A message on its way to the client (after translation and shaping): the states it
    /// changes are noted, a followed request's result gets `_meta.progress`, and what is
    /// sent for an operation gets its token.
    pub(super) fn outgoing(&self, s: &Session, msg: Message, route: &Route) -> Message {
        let msg = match &self.progress_get {
            Some(p) => p.note(&progress_cx(s), msg, route),
            None => msg,
        };
        match &self.sep1391 {
            Some(ops) if msg.kind() != Kind::Response => ops.tag(s, msg, route),
            _ => msg,
        }
    }

    /// A `notifications/cancelled` of the client: the operation it started is cancelled,
    /// and the request's state fails.
    pub(super) async fn cancelled(&self, s: &Session, frame: &Message) {
        if frame.method() != Method::Cancelled {
            return;
        }
        if let Some(ops) = &self.sep1391 {
            Box::pin(ops.cancelled(s, frame)).await;
        }
        if let (Some(p), Some(id)) = (&self.progress_get, frame.request_id_param()) {
            p.cancelled(&progress_cx(s), &id);
        }
    }

    /// The client answered server request `id`: the state it was asked for goes on. The
    /// answer to an operation's question loses the operation's tag (the upstream never saw
    /// it).
    pub(super) fn answered(&self, s: &Session, id: &Id, frame: Message) -> Message {
        if let Some(p) = &self.progress_get {
            p.input_answered(&progress_cx(s), id);
        }
        match &self.sep1391 {
            Some(ops) => ops.answered(s, id, frame),
            None => frame,
        }
    }

    /// The server withdrew its question `id` (the client's id for it): as if answered.
    pub(super) fn withdrawn(&self, s: &Session, id: &Id) {
        if let Some(p) = &self.progress_get {
            p.input_answered(&progress_cx(s), id);
        }
        if let Some(ops) = &self.sep1391 {
            ops.withdrawn(s, id);
        }
    }

    /// A question the upstream asks for hosted task `task`, before it is translated for the
    /// client (whose version may not carry the related-task tag): an operation's carries
    /// its token.
    pub(super) fn question(&self, msg: Message, task: Option<&str>) -> Message {
        match (&self.sep1391, task) {
            (Some(ops), Some(task)) => ops.tag_question(msg, task),
            _ => msg,
        }
    }

    /// A `tools/list` result for the client: an opted-in client's tools are marked with how
    /// each can be called.
    pub(super) fn listing(&self, s: &Session, result: &mut Value) {
        if let Some(ops) = &self.sep1391
            && ops.client_opted_in(s)
        {
            ops.mark_invocation_modes(s, result);
        }
    }

    /// The session ends: its states go, and its operations that still run are cancelled.
    pub(super) async fn end(&self, s: &Session) {
        if let Some(p) = &self.progress_get {
            p.end(&progress_cx(s));
        }
        if let Some(ops) = &self.sep1391 {
            ops.end(s).await;
        }
    }
}

/// What the progress-state dialect needs of session `s`.
fn progress_cx(s: &Session) -> progress_get::Cx<'_> {
    progress_get::Cx {
        states: &s.gateway.progress_states,
        owner: &s.owner_key,
        max_in_flight: s.gateway.limits().max_in_flight,
        max_per_owner: s.upstream.tasks.max_tasks_per_owner,
        retention: s.upstream.dialects.retention,
    }
}
