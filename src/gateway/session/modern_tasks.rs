//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for a modern client in
//! front of a legacy upstream: the gateway hosts the tasks, as it does for 2025-11-25
//! clients (`tasks::hosted`), and speaks the extension's dialect to the client
//! (`mcp::task_dialects`).
//!
//! - A `tools/call` of a tool the gateway hosts (per `[upstream.tasks]`), from a request that
//!   declared the extension, is answered at once with the extension's flat `CreateTaskResult`
//!   (`resultType: "task"`); the plain call runs upstream in the background. A request that
//!   did not declare it gets the blocking call.
//! - `tasks/get` answers the `DetailedTask`: its outcome inline once it has ended (a tool
//!   result with `isError` is `completed`, as the extension says), and while the upstream
//!   waits for the client, the questions it asked as `inputRequests`.
//! - `tasks/update` answers those questions (keys not outstanding are ignored); `tasks/cancel`
//!   cancels the call upstream and acknowledges, also for a task that had already ended.
//! - Task ids are 128-bit random: the extension makes them bearer tokens. Tasks of modern
//!   clients belong to one owner per upstream (no session names them apart).

use super::*;
use crate::mcp::modern::client as modern;
use crate::mcp::modern::meta;
use crate::mcp::task_dialects::task::{self as ext_task, Inline};
use crate::mcp::task_dialects::{EXTENSION, flow};

impl Session {
    /// Whether this modern request declared the tasks extension.
    pub(super) fn declared_extension(&self) -> bool {
        self.modern.as_ref().is_some_and(|m| m.meta.has_extension(EXTENSION))
    }

    /// A hosted `tools/call` of a modern client that declared the extension.
    pub(super) async fn start_hosted_ext(&self, id: Id, frame: Message) -> Result<(), RpcError> {
        let mut msg = frame.into_value();
        meta::strip(&mut msg);
        modern::strip_task_param(&mut msg);
        let (task_id, created, link, msg) = self.create_hosted(msg).await?;
        let created = ext_task::create_to_ext(created).map_err(|e| e.to_rpc())?;
        self.sink.deliver(Message::made(jsonrpc::result_response(&id, created)), Route::Response(id));
        self.run_hosted(task_id, link, msg).await;
        Ok(())
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` of a task the gateway hosts for modern
    /// clients (`task_id`).
    pub(super) async fn serve_ext_task(&self, id: Id, frame: &Message, task_id: &str) -> Result<(), RpcError> {
        let hosted = self.hosted().clone();
        let result = match frame.method_name() {
            "tasks/get" => self.ext_snapshot(task_id)?,
            "tasks/update" => {
                let (_, responses) = flow::read_tasks_update(frame.value().get("params"))?;
                for (key, answer) in responses {
                    // A key that is not outstanding is ignored, as the extension says.
                    hosted.answer_held_input(task_id, &key, answer).await;
                }
                flow::ack()
            }
            _ => {
                // Cooperative in the extension: a task that had already ended is acknowledged.
                let _ = hosted.cancel(task_id).await;
                flow::ack()
            }
        };
        self.sink.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// A hosted task as the extension's `tasks/get` has it.
    fn ext_snapshot(&self, task_id: &str) -> Result<Value, RpcError> {
        let hosted = self.hosted();
        let core = hosted.get(task_id)?;
        let status = core.get("status").and_then(Value::as_str).and_then(mcp_tasks::TaskStatus::parse);
        let inline = match status {
            Some(mcp_tasks::TaskStatus::Completed | mcp_tasks::TaskStatus::Failed) => match hosted
                .stored_outcome(task_id)
            {
                Some(mut resp) => {
                    let from = self.state.lock().unwrap().upstream_version.unwrap_or(ProtocolVersion::LATEST);
                    let _ =
                        crate::mcp::translate::translate(&mut resp, Some("tools/call"), from, ProtocolVersion::LATEST);
                    modern::for_modern(&mut resp, Some("tools/call"));
                    flow::inline_from_core_payload(&resp).map_err(|e| e.to_rpc())?
                }
                // Failed without an outcome (the gateway shut down, or expired): say so.
                None => Inline::Error(
                    json!({"code": jsonrpc::INTERNAL_ERROR, "message": core.get("statusMessage").cloned().unwrap_or(json!("the task failed"))}),
                ),
            },
            Some(mcp_tasks::TaskStatus::InputRequired) => Inline::InputRequests(hosted.held_input_requests(task_id)),
            _ => Inline::None,
        };
        ext_task::get_to_ext(core, inline).map_err(|e| e.to_rpc())
    }
}
