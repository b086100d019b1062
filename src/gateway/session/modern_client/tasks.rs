//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) for a modern client in
//! front of an upstream without it (legacy, or 2026-07-28 without the extension): the
//! gateway hosts the tasks, as it does for 2025-11-25 clients (`tasks::hosted`), and speaks
//! the extension's dialect to the client (`mcp::task_dialects`).
//!
//! - A `tools/call` of a tool the gateway hosts (per `[upstream.tasks]`), from a request that
//!   declared the extension, runs upstream as a hosted task and is answered as the
//!   extension's servers decide, within `plain_within`: its result if it ends in time, its
//!   questions as an input round if it asks first (the retry's `requestState` names the task,
//!   and its answers go to it), else the flat `CreateTaskResult` (`resultType: "task"`). A
//!   request that did not declare it gets the blocking call.
//! - `tasks/get` answers the `DetailedTask`: its outcome inline once it has ended (a tool
//!   result with `isError` is `completed`, as the extension says), and while the upstream
//!   waits for the client, the questions it asked as `inputRequests`.
//! - `tasks/update` answers those questions (keys not outstanding are ignored); `tasks/cancel`
//!   cancels the call upstream and acknowledges, also for a task that had already ended.
//! - Task ids are 128-bit random: the extension makes them bearer tokens. Tasks of modern
//!   clients belong to one owner per upstream (no session names them apart).
//!
//! In front of a 2025-11-25 upstream with tasks, a tool it runs as a task (listed `optional`
//! or `required`) is called task-augmented and the task is the upstream's, translated both
//! ways: the core `CreateTaskResult` made flat, `tasks/get` answered from the upstream's
//! `tasks/get` (and, once the task has ended, its `tasks/result`, inline), `tasks/cancel`
//! passed on and acknowledged. The client knows each such task by an id of the gateway's
//! (`tasks::relayed`); only those are asked about, on the link they were created on. The
//! upstream's questions during such a task (tagged with related-task) are held there:
//! `tasks/get` of an `input_required` task keeps a `tasks/result` pending upstream (their
//! stream) and shows those held as `inputRequests`; `tasks/update` answers them upstream
//! (keys not outstanding are ignored). Questions the creating request's capabilities do not
//! cover are refused upstream (-32601).

use super::host::Host;
use super::state::ModernClient;
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Message, Method, RpcError};
use crate::mcp::ProtocolVersion;
use crate::mcp::modern::client as modern;
use crate::mcp::modern::meta;
use crate::mcp::task_dialects::task::{self as ext_task, Inline};
use crate::mcp::task_dialects::{EXTENSION, flow};
use crate::mcp::task_messages::{TaskStatus, TaskView};
use crate::upstream::client::Route;
use crate::upstream::link::Link;
use serde_json::{Value, json};
use std::sync::Arc;

/// An upstream's response to a request of the gateway's, as the answer to client request `id`.
fn with_id(mut resp: Value, id: &Id) -> Value {
    jsonrpc::set_id(&mut resp, id);
    resp
}

impl ModernClient {
    /// Whether this request declared the tasks extension.
    pub(in crate::gateway::session) fn declared_extension(&self) -> bool {
        self.meta.has_extension(EXTENSION)
    }

    /// A hosted `tools/call` of a modern client that declared the extension: the call starts
    /// upstream as a hosted task, and the client is answered as a server of the extension
    /// decides ([`ModernClient::answer_hosted`]).
    pub(super) async fn start_hosted_ext(&self, s: &impl Host, id: Id, frame: Message) -> Result<(), RpcError> {
        let within = s.upstream().tasks.plain_within_for(&frame.tool_name().unwrap_or_default());
        let mut msg = frame.into_value();
        meta::strip(&mut msg);
        modern::strip_task_param(&mut msg);
        let (task_id, created, link, msg) = s.create_hosted(msg).await?;
        s.hosted().declare_client_capabilities(&task_id, Value::Object(self.meta.capabilities.clone()));
        s.run_hosted(task_id.clone(), link, msg).await;
        self.answer_hosted(s, id, &task_id, created, within).await
    }

    /// The retry of a hosted call's input round (its `requestState` names the task, which the
    /// requester may see): the answers go to the task's questions, and the client is answered
    /// as at the call's start. A retry of another tool, or without the extension declared, is
    /// refused.
    pub(super) async fn continue_hosted(
        &self,
        s: &impl Host,
        id: Id,
        frame: &Message,
        task_id: &str,
    ) -> Result<(), RpcError> {
        let hosted = s.hosted().clone();
        // The retry repeats the call of its round: the same tool, by a client that declared
        // the extension.
        let tool = hosted.tool_of(task_id).await;
        if !self.declared_extension() || tool.as_ref().is_some_and(|t| Some(t.as_str()) != frame.tool_name().as_deref())
        {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "params.requestState belongs to another call: a retry repeats its round's tools/call",
            ));
        }
        if let Some(Value::Object(responses)) = frame.value().pointer("/params/inputResponses") {
            for (key, answer) in responses {
                // A key that is not outstanding is ignored, as for `tasks/update`.
                hosted.answer_held_input(task_id, key, answer.clone()).await;
            }
        }
        let core = hosted.get(task_id).await?;
        let within = s.upstream().tasks.plain_within_for(&tool.unwrap_or_default());
        self.answer_hosted(s, id, task_id, json!({"task": core}), within).await
    }

    /// Answers a hosted call (`created`: its core `CreateTaskResult`) as the extension's
    /// servers decide: the call's result (or error) if it ends `within` (its tool's
    /// `plain_within`, zero for `task_tools`); its
    /// questions as an `InputRequiredResult` if it asks first, with a `requestState` that
    /// names the task (a retry goes on in it, [`ModernClient::continue_hosted`]); else the
    /// task. The task is kept whichever way, as any hosted task is.
    async fn answer_hosted(
        &self,
        s: &impl Host,
        id: Id,
        task_id: &str,
        created: Value,
        within: std::time::Duration,
    ) -> Result<(), RpcError> {
        *self.deciding.lock().unwrap() = Some(task_id.into());
        let decided = if within.is_zero() { None } else { settles_within(s, task_id, within).await };
        let mut ended = false;
        let plain = match decided {
            Some(TaskStatus::Completed | TaskStatus::Failed | TaskStatus::InputRequired) => {
                match ext_inline(s, task_id).await?.1 {
                    Inline::Result(mut result) => {
                        ended = true;
                        result["resultType"] = json!("complete");
                        Some(jsonrpc::result_response(&id, result))
                    }
                    Inline::Error(error) => {
                        ended = true;
                        Some(json!({"jsonrpc": "2.0", "id": id.to_value(), "error": error}))
                    }
                    Inline::InputRequests(asked) if !asked.is_empty() => Some(jsonrpc::result_response(
                        &id,
                        json!({"resultType": "input_required", "inputRequests": asked,
                            "requestState": format!("{HOSTED_ROUND}{task_id}")}),
                    )),
                    _ => None,
                }
            }
            _ => None,
        };
        let answer = match plain {
            Some(answer) => answer,
            None => jsonrpc::result_response(&id, ext_task::create_to_ext(created).map_err(|e| e.to_rpc())?),
        };
        s.deliver(Message::made(answer), Route::Response(id));
        *self.deciding.lock().unwrap() = None;
        if ended {
            // Answered plainly: no one knows the task by its id.
            s.hosted().discard_answered(task_id).await;
        }
        Ok(())
    }

    /// A modern client's `tools/call` (that declared the extension) of a tool the 2025-11-25
    /// upstream runs as a task: called task-augmented, its task relayed.
    pub(super) async fn call_upstream_task_ext(&self, s: &impl Host, id: Id, frame: Message) -> Result<(), RpcError> {
        let mut msg = frame.into_value();
        meta::strip(&mut msg);
        let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) else {
            return Err(RpcError::new(INVALID_PARAMS, "tools/call: params must be an object"));
        };
        params.insert("task".into(), json!({"ttl": s.upstream().tasks.ttl.as_millis() as u64}));
        let link = s.link().await?;
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let resp = link.request(Method::ToolsCall, params).await?;
        let answer = match resp.get("result") {
            Some(result) if result.get("task").is_some() => {
                let mut ext = ext_task::create_to_ext(result.clone()).map_err(|e| e.to_rpc())?;
                if let Some(t) = TaskView::of(&ext).id() {
                    let declared = Value::Object(self.meta.capabilities.clone());
                    let relayed = s.relayed();
                    let (up, generation) = (&s.upstream().name, link.generation());
                    let ours = relayed.mint(up, generation, t, declared, s.owner());
                    ext["taskId"] = ours.into();
                }
                jsonrpc::result_response(&id, ext)
            }
            // The server answered plainly after all: the result as it is.
            Some(result) => {
                let mut r = jsonrpc::result_response(&id, result.clone());
                modern::for_modern(&mut r, Some(Method::ToolsCall));
                r
            }
            None => {
                let mut r = resp.clone();
                jsonrpc::set_id(&mut r, &id);
                r
            }
        };
        s.deliver(Message::made(answer), Route::Response(id));
        Ok(())
    }

    /// The upstream's id of the 2025-11-25 task this gateway handed a modern client as
    /// `task_id`, if it is one of the live link's.
    pub(super) async fn relayed_upstream_task(&self, s: &impl Host, task_id: &str) -> Result<Option<String>, RpcError> {
        let generation = s.link().await?.generation();
        Ok(s.relayed().resolve(task_id, &s.upstream().name, generation, s.owner()))
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` of an upstream task relayed to modern
    /// clients, in the extension's dialect.
    pub(super) async fn serve_relayed_task(
        &self,
        s: &impl Host,
        id: Id,
        frame: &Message,
        ours: &str,
        task_id: &str,
    ) -> Result<(), RpcError> {
        let link = s.link().await?;
        let ask = |method: crate::jsonrpc::Method| link.request(method, json!({"taskId": task_id}));
        let answer = match frame.method() {
            Method::TasksGet => {
                let got = ask(Method::TasksGet).await?;
                match got.get("result").cloned() {
                    None => with_id(got, &id),
                    Some(core) => {
                        s.relayed().observe(ours, &core);
                        let inline = relayed_inline(s, &link, ours, task_id, &core).await?;
                        let mut ext = ext_task::get_to_ext(core, inline).map_err(|e| e.to_rpc())?;
                        ext["taskId"] = ours.into();
                        jsonrpc::result_response(&id, ext)
                    }
                }
            }
            Method::TasksCancel => {
                let got = ask(Method::TasksCancel).await?;
                // Cooperative in the extension: a task that had already ended is acknowledged.
                let ended = got.pointer("/error/code").and_then(Value::as_i64) == Some(INVALID_PARAMS)
                    && ask(Method::TasksGet).await.ok().is_some_and(|g| g.get("result").is_some());
                match got.get("error") {
                    Some(_) if !ended => with_id(got, &id),
                    _ => jsonrpc::result_response(&id, flow::ack()),
                }
            }
            _ => {
                let (_, responses) = flow::read_tasks_update(frame.value().get("params"))?;
                for (key, answer) in responses {
                    // A key that is not outstanding is ignored, as the extension says.
                    s.relayed().answer_held_input(ours, &key, answer).await;
                }
                jsonrpc::result_response(&id, flow::ack())
            }
        };
        s.deliver(Message::made(answer), Route::Response(id));
        Ok(())
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` of a task the gateway hosts for modern
    /// clients (`task_id`).
    pub(super) async fn serve_ext_task(
        &self,
        s: &impl Host,
        id: Id,
        frame: &Message,
        task_id: &str,
    ) -> Result<(), RpcError> {
        let hosted = s.hosted().clone();
        let result = match frame.method() {
            Method::TasksGet => ext_snapshot(s, task_id).await?,
            Method::TasksUpdate => {
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
        s.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }
}

/// What the extension inlines for relayed task `ours` (upstream `upstream_id` of `link`)
/// as the upstream has it now (`core`): its outcome once it has ended, the questions held
/// for it while it waits for input (a `tasks/result` kept pending upstream meanwhile, the
/// stream they come on).
pub(super) async fn relayed_inline(
    s: &impl Host,
    link: &Arc<Link>,
    ours: &str,
    upstream_id: &str,
    core: &Value,
) -> Result<Inline, RpcError> {
    let status = TaskView::of(core).status();
    Ok(match status {
        Some(TaskStatus::Completed | TaskStatus::Failed) => {
            let mut payload = link.request(Method::TasksResult, json!({"taskId": upstream_id})).await?;
            modern::for_modern(&mut payload, Some(Method::ToolsCall));
            flow::inline_from_core_payload(&payload).map_err(|e| e.to_rpc())?
        }
        Some(TaskStatus::InputRequired) => {
            s.relayed().follow(link, ours);
            Inline::InputRequests(s.relayed().held_input_requests(ours))
        }
        _ => Inline::None,
    })
}

/// A hosted task as the extension's `tasks/get` has it.
async fn ext_snapshot(s: &impl Host, task_id: &str) -> Result<Value, RpcError> {
    let (core, inline) = ext_inline(s, task_id).await?;
    ext_task::get_to_ext(core, inline).map_err(|e| e.to_rpc())
}

/// A hosted task (core `Task`) and what the extension inlines for it now.
pub(super) async fn ext_inline(s: &impl Host, task_id: &str) -> Result<(Value, Inline), RpcError> {
    let hosted = s.hosted();
    let core = hosted.get(task_id).await?;
    let status = TaskView::of(&core).status();
    let inline = match status {
        Some(TaskStatus::Completed | TaskStatus::Failed) => {
            match hosted.stored_outcome(task_id).await {
                Some(mut resp) => {
                    let from = s.sides().upstream_version();
                    let _ = crate::mcp::translate::translate(
                        &mut resp,
                        Some(Method::ToolsCall),
                        from,
                        ProtocolVersion::LATEST,
                    );
                    modern::for_modern(&mut resp, Some(Method::ToolsCall));
                    // The error inline is a modern client's too: in the era's codes.
                    modern::error_for_modern(&mut resp);
                    flow::inline_from_core_payload(&resp).map_err(|e| e.to_rpc())?
                }
                // Failed without an outcome (the gateway shut down, or expired): say so.
                None => Inline::Error(
                    json!({"code": jsonrpc::INTERNAL_ERROR, "message": core.get("statusMessage").cloned().unwrap_or(json!("the task failed"))}),
                ),
            }
        }
        Some(TaskStatus::InputRequired) => Inline::InputRequests(hosted.held_input_requests(task_id)),
        _ => Inline::None,
    };
    Ok((core, inline))
}

/// What a hosted call's input round puts before the task id in its `requestState`.
const HOSTED_ROUND: &str = "taskgate-hosted-task:";

/// The hosted task a retry's `requestState` names, if it names one.
pub(super) fn hosted_round(frame: &Message) -> Option<&str> {
    // (`visible_or_failed` is asked by the caller: a token of another gateway's passes on.)
    frame.value().pointer("/params/requestState")?.as_str()?.strip_prefix(HOSTED_ROUND)
}

pub(super) fn unknown_request_state() -> RpcError {
    RpcError::new(INVALID_PARAMS, "params.requestState is unknown or expired: send the request again without it")
}

/// The status task `task_id` settles in within `within`: ended, or waiting for input;
/// `None` if it is still working then (or cannot be watched).
async fn settles_within(s: &impl Host, task_id: &str, within: std::time::Duration) -> Option<TaskStatus> {
    let settled = |st: TaskStatus| st.is_terminal() || st == TaskStatus::InputRequired;
    let deadline = tokio::time::Instant::now() + within;
    let Some(mut watch) = s.hosted().watch(task_id).await else {
        // Nothing to watch: it may have ended already.
        return s.hosted().status(task_id).await.map(|(st, _)| st).filter(|st| settled(*st));
    };
    loop {
        let now = *watch.borrow_and_update();
        if settled(now) {
            return Some(now);
        }
        match tokio::time::timeout_at(deadline, watch.changed()).await {
            Ok(Ok(())) => continue,
            // The task ended and its watch went with it: what the store says now.
            Ok(Err(_)) => return s.hosted().status(task_id).await.map(|(st, _)| st).filter(|st| settled(*st)),
            Err(_) => return None,
        }
    }
}
