//! The plan's `tasks/*` requests and resource subscriptions: served from the gateway's own
//! store, translated for an extension upstream, kept to the session's own tasks on a shared
//! link, or passed up.

use super::{Planned, Step};
use crate::gateway::session::plan::{ClientSide, TaskPolicy};
use crate::jsonrpc::{INVALID_PARAMS, Id, Message, RpcError};
use crate::tasks::hosted;
use crate::upstream::link::Shape;

impl Planned<'_> {
    /// `tasks/get`, `tasks/result` or `tasks/cancel` of a legacy client.
    pub(in crate::gateway::session) async fn task_request(&self, id: Id, frame: Message) -> Result<Step, RpcError> {
        let s = self.s;
        let method = frame.method();
        if !self.plan.client.has_core_tasks() {
            if self.plan.shared && self.plan.client != ClientSide::Modern {
                // A client without tasks made none upstream.
                let task_id = frame.task_id_param();
                return Err(hosted::not_found(task_id.as_ref().map_or("", |t| t.as_str())));
            }
            return Ok(Step::Up(frame, Shape::AsIs));
        }
        let Some(task_id) = frame.task_id_param() else {
            return Err(RpcError::new(INVALID_PARAMS, format!("{}: params.taskId must be a string", method.as_str())));
        };
        if Box::pin(s.hosted().visible_or_failed(task_id.as_str(), &s.owner)).await? {
            return Box::pin(s.serve_task_request(id, method, task_id.as_str())).await.map(|()| Step::Done);
        }
        if self.plan.tasks == TaskPolicy::ExtTranslated {
            return Box::pin(s.ext.task_request(s, id, method, task_id.as_str())).await.map(|()| Step::Done);
        }
        // On a shared link, only the session's own upstream tasks exist for it.
        if !self.plan.upstream_tasks || !s.may_ask_about(task_id.as_str()).await? {
            return Err(hosted::not_found(task_id.as_str()));
        }
        Ok(Step::Up(frame, Shape::AsIs))
    }

    /// `tasks/list`: the extension tasks translated, or the gateway's own listing (passed
    /// upstream, a shared link's listing would show every session's tasks).
    pub(in crate::gateway::session) async fn tasks_list(&self, id: Id, frame: Message) -> Result<Step, RpcError> {
        let s = self.s;
        if self.plan.tasks == TaskPolicy::ExtTranslated {
            return Box::pin(s.ext.list(s, id, &frame)).await.map(|()| Step::Done);
        }
        if self.plan.shared || (self.plan.client.has_core_tasks() && self.plan.hosts) {
            return Box::pin(s.list_tasks(id, frame.into_value())).await.map(|()| Step::Done);
        }
        Ok(Step::Up(frame, Shape::AsIs))
    }

    /// `resources/subscribe` or `resources/unsubscribe`: on a shared link, counted per uri.
    pub(in crate::gateway::session) async fn subscription(&self, id: Id, frame: Message) -> Result<Step, RpcError> {
        if self.plan.shared {
            return Box::pin(self.s.shared_subscription(id, frame)).await.map(|()| Step::Done);
        }
        Ok(Step::Up(frame, Shape::AsIs))
    }
}
