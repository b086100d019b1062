//! A 2026-07-28 client of an authenticated principal in front of a 2026-07-28 upstream of the
//! tasks extension: the upstream's tasks bound to the principal (the upstream sees one
//! client, the gateway, so it cannot tell principals apart). The client keeps the
//! upstream's own ids; the gateway remembers whose each is (`tasks::upstream_owners`):
//!
//! - a result of `resultType: "task"` from the upstream binds its `taskId` to the session's
//!   owner before the client sees it;
//! - `tasks/get`, `tasks/update` and `tasks/cancel` of an id that is not the owner's are
//!   answered by the gateway with the -32602 of an id nobody has, and never reach the
//!   upstream;
//! - a `subscriptions/listen` asks the upstream only for the owner's `taskIds` (the others
//!   are left out, as if never asked for), so `notifications/tasks` of another's task never
//!   come on its stream; they are the only task notifications of the era. One the upstream
//!   sends anyway (a careless server) of a task that is not the owner's is dropped.
//!
//! A legacy client of a principal reaches the same upstream through the same link, so what
//! it would pass through by name (`tasks/get`, `tasks/update`, `tasks/cancel`,
//! `tasks/result`, a `subscriptions/listen`) is held to the same rule: a 2025-11-25 client's
//! own tasks there are translated, and found, before this (`ext::translated`).
//!
//! Without authentication nothing is checked: ids are bearer tokens, as the extension says.

use crate::config::UpstreamConfig;
use crate::jsonrpc::{self, Message, Method, RpcError};
use crate::mcp::modern::ResultType;
use crate::tasks::hosted;
use crate::tasks::upstream_owners::UpstreamOwners;
use serde_json::Value;

/// The tasks of a principal's session on a modern upstream: who owns each (built by
/// `Session::principal_tasks` for a session bound to a principal, `None` otherwise).
pub(super) struct PrincipalTasks<'a> {
    owners: &'a UpstreamOwners,
    upstream: &'a UpstreamConfig,
    owner: &'a str,
}

impl<'a> PrincipalTasks<'a> {
    /// The tasks of `owner` (a principal's) through `upstream`.
    pub(super) fn new(owners: &'a UpstreamOwners, upstream: &'a UpstreamConfig, owner: &'a str) -> Self {
        PrincipalTasks { owners, upstream, owner }
    }
}

impl PrincipalTasks<'_> {
    /// Whether the client may ask the modern upstream about task `task_id`.
    pub(super) fn may_ask(&self, task_id: &str) -> bool {
        self.owners.owns(&self.upstream.name, task_id, self.owner)
    }

    /// A response of the modern upstream on its way to the client: a task it created is the
    /// owner's from now on.
    /// An id longer than `max_id` is not kept: the client gets the error instead (a task it
    /// could not reach).
    pub(super) fn note_task(&self, msg: &Message, max_id: usize) -> Result<(), RpcError> {
        if msg.is_error() {
            return Ok(());
        }
        let Some(task_id) = msg.result_field(jsonrpc::Key::TaskId).and_then(jsonrpc::as_str) else { return Ok(()) };
        let Some(result) = msg.value().get("result") else { return Ok(()) };
        if ResultType::of(result) != Ok(ResultType::Task) {
            return Ok(());
        }
        crate::tasks::text_bounds::task_id_within(&task_id, max_id)?;
        let per_owner = self.upstream.tasks.max_tasks_per_owner;
        self.owners.remember(&self.upstream.name, &task_id, self.owner, per_owner);
        Ok(())
    }

    /// Whether a modern upstream's notification on a request's stream may reach the client:
    /// a `notifications/tasks` only of the owner's tasks.
    pub(super) fn shows_note(&self, msg: &Message) -> bool {
        if msg.method() != Method::TasksNotification {
            return true;
        }
        msg.task_id_param().is_some_and(|t| self.may_ask(t.as_str()))
    }

    /// A legacy client's request on its way to a modern link, where it may name
    /// only the principal's tasks (as a modern client's may): another's, or one nobody has,
    /// is answered -32602 here.
    pub(super) fn legacy_upward(&self, frame: Message) -> Result<Message, RpcError> {
        match frame.method() {
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel | Method::TasksResult => {
                match frame.task_id_param() {
                    Some(t) if self.may_ask(t.as_str()) => Ok(frame),
                    t => Err(hosted::not_found(t.as_ref().map_or("", |t| t.as_str()))),
                }
            }
            Method::SubscriptionsListen => Ok(self.own_listen(frame)),
            _ => Ok(frame),
        }
    }

    /// A `subscriptions/listen` for the modern upstream: only the owner's task ids are asked
    /// for (what is not a string passes, the upstream's to refuse alike for anyone).
    pub(super) fn own_listen(&self, frame: Message) -> Message {
        if !frame.value().pointer("/params/notifications/taskIds").is_some_and(Value::is_array) {
            return frame;
        }
        frame.edit(|m| {
            let Some(ids) = m.pointer_mut("/params/notifications/taskIds").and_then(Value::as_array_mut) else {
                return;
            };
            ids.retain(|id| id.as_str().is_none_or(|t| self.may_ask(t)));
        })
    }
}
