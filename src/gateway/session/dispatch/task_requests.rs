//! The plan's `tasks/*` requests: served from the gateway's own
//! store, translated for an extension upstream, kept to the session's own tasks on a shared
//! link, or passed up.

use super::{Dispatch, Step};
use crate::gateway::session::CURSOR_UPSTREAM;
use crate::gateway::session::plan::{ClientSide, TaskPolicy};
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Message, Method, RpcError};
use crate::mcp::paging;
use crate::tasks::hosted;
use crate::upstream::client::Route;
use crate::upstream::link::Shape;
use serde_json::Value;

impl Dispatch<'_> {
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
            return Box::pin(self.serve_task_request(id, method, task_id.as_str())).await.map(|()| Step::Done);
        }
        if self.plan.tasks == TaskPolicy::ExtTranslated {
            return Box::pin(s.ext.task_request(s, id, method, task_id.as_str())).await.map(|()| Step::Done);
        }
        // On a shared link, only the session's own upstream tasks exist for it.
        if !self.plan.upstream_tasks || !self.may_ask_about(task_id.as_str()).await? {
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
            return Box::pin(self.list_tasks(id, frame.into_value())).await.map(|()| Step::Done);
        }
        Ok(Step::Up(frame, Shape::AsIs))
    }

    /// `tasks/get`, `tasks/result` or `tasks/cancel` of a task the gateway hosts.
    async fn serve_task_request(&self, id: Id, method: Method, task_id: &str) -> Result<(), RpcError> {
        let s = self.s;
        let hosted = s.hosted().clone();
        match method {
            Method::TasksGet => {
                let task = hosted.get(task_id).await?;
                s.to_client(Message::made(jsonrpc::result_response(&id, task)), Route::Response(id));
            }
            Method::TasksCancel => {
                let task = hosted.cancel(task_id).await?;
                s.to_client(Message::made(jsonrpc::result_response(&id, task)), Route::Response(id));
            }
            _ => {
                // Blocks until the task ends: never inside the client's read loop.
                let me = s.me.clone();
                let task_id = task_id.to_string();
                tokio::spawn(async move {
                    let resp = hosted.result(&task_id, me.clone(), &id).await;
                    if let Some(s) = me.upgrade() {
                        s.answer(id, resp, Some(crate::jsonrpc::Method::ToolsCall));
                    }
                });
            }
        }
        Ok(())
    }

    /// `tasks/list`: the tasks this session created, then (if the upstream lists tasks of
    /// its own) the upstream's pages, behind one opaque cursor. On a shared link the
    /// upstream's pages are the upstream tasks this session created (see `dispatch::shared`).
    async fn list_tasks(&self, id: Id, mut msg: Value) -> Result<(), RpcError> {
        let s = self.s;
        let cursor = paging::cursor(&msg)?.map(str::to_string);
        let upstream_lists = {
            let caps = s.sides.now().caps.clone();
            match s.shared {
                true => caps.get("tasks").is_some() && !s.state.lock().unwrap().known_tasks.is_empty(),
                false => caps.pointer("/tasks/list").is_some(),
            }
        };
        match cursor.as_deref() {
            None => {}
            Some(c) if c.starts_with(hosted::CURSOR_PREFIX) => {}
            Some(c) if c.starts_with(CURSOR_UPSTREAM) && upstream_lists => {
                let rest = &c[CURSOR_UPSTREAM.len()..];
                if s.shared {
                    return self.own_upstream_tasks(id, rest).await;
                }
                let params = msg.as_object_mut().and_then(|m| m.get_mut("params")).and_then(Value::as_object_mut);
                if let Some(p) = params {
                    if rest.is_empty() {
                        p.remove("cursor");
                    } else {
                        p.insert("cursor".into(), rest.into());
                    }
                }
                let msg = Message::from_value(msg).map_err(|r| r.error)?;
                return s.link().await?.forward(s.client_ref(id), msg, Shape::UpstreamTaskPage).await;
            }
            Some(_) => return Err(paging::invalid_cursor()),
        };
        let (tasks, next) = s.hosted().list(&s.owner, cursor.as_deref()).await?;
        if tasks.is_empty() && cursor.is_none() && upstream_lists {
            if s.shared {
                return self.own_upstream_tasks(id, "").await;
            }
            if let Some(p) = msg.get_mut("params").and_then(Value::as_object_mut) {
                p.remove("cursor");
            }
            let msg = Message::from_value(msg).map_err(|r| r.error)?;
            return s.link().await?.forward(s.client_ref(id), msg, Shape::UpstreamTaskPage).await;
        }
        let mut result = jsonrpc::object([("tasks", Value::Array(tasks))]);
        match next {
            Some(c) => result["nextCursor"] = c.into(),
            None if upstream_lists => result["nextCursor"] = CURSOR_UPSTREAM.into(),
            None => {}
        }
        s.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }
}
