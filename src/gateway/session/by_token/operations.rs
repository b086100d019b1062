//! SEP-1391 operations for one session: an opted-in client's `tools/call` with `operation`
//! runs as a task of the gateway's, hosted (a plain call upstream) or, for a tool the
//! upstream runs as a task, a bridge that follows the upstream's task; `tools/async/status`
//! and `tools/async/result` read it by its token, what is sent for it carries
//! `_operation.token`, a cancel of the original request cancels it, and the session's end
//! cancels what still runs.
//!
//! The strategy names no session type: it is handed a [`Host`], what it needs of its
//! session (`session/contexts.rs`).

use super::super::bridged_calls;
use super::super::reach::Hosting;
use super::operation_table::{Operation, Refusal};
use super::state::Sep1391;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, Kind, Message, Method, ProgressToken, RpcError};
use crate::mcp::sep1391::{self, OperationParam};
use crate::mcp::task_messages::{self, TaskSupport};
use crate::tasks::bridge::Ending;
use crate::tasks::bridge::extension::ExtBridge;
use crate::tasks::hosted::{Hosted, hosts};
use crate::upstream::client::Route;
use crate::upstream::link::Link;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What operations need of their session beyond what a strategy that hosts tasks and
/// bridges calls reaches: its narrow context.
pub(in crate::gateway::session) trait Host: Hosting + bridged_calls::Host {
    /// Whether the upstream runs tools as 2025-11-25 tasks.
    fn upstream_runs_tasks(&self) -> bool;
    /// The tools as listed so far, read together with what the upstream declared.
    fn listed(&self) -> Listed;
    /// The bridge of client call `id` (`call`) through an extension task on `link`.
    fn ext_bridge(&self, link: &Arc<Link>, id: &Id, call: Value, cancel: CancellationToken) -> ExtBridge;
    /// Response `msg` to a request of method `answers`, as the client's version reads it
    /// (`None`: it cannot).
    fn for_client_version(&self, msg: Message, answers: Option<Method>) -> Option<Message>;
}

/// The tools as listed so far: each one's task support, whether the upstream declared
/// task-augmented tool calls, and whether a listing marked any tool for tasks.
pub(in crate::gateway::session) struct Listed {
    pub(in crate::gateway::session) support: HashMap<String, TaskSupport>,
    pub(in crate::gateway::session) declares: bool,
    pub(in crate::gateway::session) marks_tasks: bool,
}

impl Sep1391 {
    /// Whether the client opted in (its `initialize` declared the extension).
    pub(super) fn client_opted_in(&self, s: &impl Host) -> bool {
        sep1391::declared(s.client_init().as_deref())
    }

    /// A call with `operation`, or `tools/async/*`: answered here (`Some`).
    pub(super) async fn request(&self, s: &impl Host, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        match frame.method() {
            // A client that did not opt in is outdated, however it wrote the parameter.
            Method::ToolsCall if frame.value().pointer("/params/operation").is_some() && !self.client_opted_in(s) => {
                Some(Err(sep1391::outdated("tools/call with operation")))
            }
            Method::ToolsCall => match sep1391::operation_param(frame.value()) {
                Err(e) => Some(Err(e)),
                Ok(Some(op)) => Some(self.start(s, id.clone(), frame.clone(), op).await),
                Ok(None) => None,
            },
            m @ (Method::ToolsAsyncStatus | Method::ToolsAsyncResult) => {
                Some(Box::pin(self.serve(s, id.clone(), m, frame.value())).await)
            }
            _ => None,
        }
    }

    /// The client answered question `id`: an operation waiting on it goes on, and the
    /// answer loses the operation's tag.
    pub(super) fn answered(&self, s: &impl Host, id: &Id, frame: Message) -> Message {
        self.withdrawn(s, id);
        if frame.value().pointer("/result/_operation").is_some() {
            return frame.edit(sep1391::untag_answer);
        }
        frame
    }

    /// Question `id` is answered or withdrawn: the operation it was asked for goes on.
    pub(super) fn withdrawn(&self, s: &impl Host, id: &Id) {
        let task = self.kept.lock().unwrap().inputs.remove(id);
        if let Some(task) = task {
            s.hosted().input_answered_soon(&task);
        }
    }

    /// A request or notification for an operation carries its token; a question the
    /// upstream asks for a bridged operation makes it `input_required` until answered.
    pub(super) fn tag(&self, s: &impl Host, msg: Message, route: &Route) -> Message {
        let mut kept = self.kept.lock().unwrap();
        if kept.ops.is_empty() {
            return msg;
        }
        // Its questions name its task in `_meta`, a status notification in `params`.
        let task = crate::mcp::task_messages::related_task(&msg)
            .or_else(|| (msg.method() == Method::TaskStatus).then(|| msg.task_id_param()).flatten());
        let ops = &kept.ops;
        let by_task = task.and_then(|t| ops.token_of_task(t.as_str()));
        let by_progress = || msg.progress_token().and_then(|t| ops.token_of_progress(&t));
        let by_request = || match route {
            // A bridged operation's request: the only one under its id while its bridge runs.
            Route::Related(id) => ops.by_request(id).into_iter().find(|(_, op)| op.bridge.is_some()).map(|(t, _)| t),
            _ => None,
        };
        let Some(token) = by_task.or_else(by_progress).or_else(by_request).map(str::to_string) else { return msg };
        let bridged = ops.get(&token).filter(|op| op.bridge.is_some()).map(|op| op.task_id.clone());
        let mut asked_for = None;
        let cap = s.max_in_flight();
        if kept.inputs.len() >= cap {
            // Questions of operations that have ended wait for nothing.
            let hosted = s.hosted();
            kept.inputs.retain(|_, t| hosted.runs(t));
        }
        if let (Kind::Request, Some(task), Some(asked)) = (msg.kind(), bridged, msg.id().cloned())
            && kept.inputs.len() < cap
        {
            kept.inputs.insert(asked, task.clone());
            asked_for = Some(task);
        }
        // Not under the lock: the status change is announced to this session.
        drop(kept);
        if let Some(task) = asked_for {
            s.hosted().input_asked_soon(&task);
        }
        msg.edit(|m| sep1391::tag(m, &token))
    }

    /// A question the upstream asks for hosted task `task`: an operation's carries its token.
    pub(super) fn tag_question(&self, msg: Message, task: &str) -> Message {
        let token = self.kept.lock().unwrap().ops.token_of_task(task).map(str::to_string);
        match token {
            Some(token) => msg.edit(|m| sep1391::tag(m, &token)),
            None => msg,
        }
    }

    /// A `notifications/cancelled` for the call that started an operation cancels it (the
    /// one still running), unless the client reused the id for a request now in flight: the
    /// cancel is that request's. It goes on its way in any case.
    pub(super) async fn cancelled(&self, s: &impl Host, frame: &Message) {
        let Some(request) = frame.request_id_param() else { return };
        let link = s.current_link();
        if link.is_some_and(|l| l.has_client_request(&s.client_ref(request.clone()))) {
            return;
        }
        let found = {
            let kept = self.kept.lock().unwrap();
            let hosted = s.hosted();
            kept.ops
                .by_request(&request)
                .into_iter()
                .find(|(_, op)| hosted.runs(&op.task_id))
                .map(|(_, op)| (op.task_id.clone(), op.bridge.clone()))
        };
        if let Some((task, bridge)) = found {
            stop(s.hosted(), &task, bridge.as_ref()).await;
        }
    }

    /// The session ends: its operations that still run are cancelled.
    pub(super) async fn end(&self, s: &impl Host) {
        let ops = self.kept.lock().unwrap().ops.drain();
        for op in ops {
            stop(s.hosted(), &op.task_id, op.bridge.as_ref()).await;
        }
    }

    /// A call with `operation`: checked, answered at once, and run as a task.
    async fn start(&self, s: &impl Host, id: Id, frame: Message, op: OperationParam) -> Result<(), RpcError> {
        if !self.client_opted_in(s) {
            return Err(sep1391::outdated("tools/call with operation"));
        }
        let policy = &s.upstream().tasks;
        {
            // Which of the kept operations' tasks still exist, asked of the store before the
            // lock is taken (only when the table is full and may be pruned).
            let snapshot = {
                let kept = self.kept.lock().unwrap();
                if kept.ops.len() >= policy.max_tasks_per_owner { kept.ops.task_ids() } else { Vec::new() }
            };
            let mut live = std::collections::HashSet::new();
            for t in &snapshot {
                if s.hosted().visible(t, s.owner()).await {
                    live.insert(t.clone());
                }
            }
            let mut kept = self.kept.lock().unwrap();
            let live = |t: &str| live.contains(t) || !snapshot.iter().any(|s| &**s == t);
            kept.ops.reserve(&op.token, policy.max_tasks_per_owner, &live).map_err(|r| match r {
                Refusal::Reused => sep1391::reused(&op.token),
                Refusal::Full => RpcError::new(
                    GATEWAY_BUSY,
                    format!(
                        "too many operations kept for this session (max_tasks_per_owner = {})",
                        policy.max_tasks_per_owner
                    ),
                ),
            })?;
        }
        let token = op.token.clone();
        let started = self.launch(s, id, frame, op).await;
        if started.is_err() {
            self.kept.lock().unwrap().ops.release(&token);
        }
        started
    }

    /// Runs a call with `operation` whose token is reserved.
    async fn launch(&self, s: &impl Host, id: Id, frame: Message, op: OperationParam) -> Result<(), RpcError> {
        let policy = &s.upstream().tasks;
        let keep_alive = match op.keep_alive {
            None => policy.ttl,
            Some(None) => policy.max_ttl,
            Some(Some(d)) => d,
        }
        .clamp(policy.min_ttl, policy.max_ttl);
        let name = frame.tool_name().unwrap_or_default().into_owned();
        let mut call = frame.into_value();
        if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
            p.remove("operation");
            p.insert("task".into(), json!({"ttl": keep_alive.as_millis() as u64}));
        }
        let token = ProgressToken::of_request(&call);
        if s.upstream_tasks_are_extension() {
            // The extension server decides per call whether it makes a task.
            if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
                p.remove("task");
            }
            return self.start_bridged(s, id, op.token, call, token, keep_alive, true).await;
        }
        if s.hosts_tool(&name).await? {
            let (task_id, _, link, call) = s.create_hosted(call).await?;
            s.hosted().retain_after_end(&task_id).await;
            s.hosted().ask_creator_later(&task_id);
            if self.record(s, &id, op.token, task_id.clone(), token, None, keep_alive) {
                s.run_hosted(task_id, link, call).await;
            } else {
                let _ = s.hosted().cancel(&task_id).await;
            }
            return Ok(());
        }
        let support = if s.upstream_runs_tasks() { s.tool_support(&name).await? } else { TaskSupport::Forbidden };
        if support == TaskSupport::Forbidden {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "tool {name:?} cannot run as a long-running operation here: the gateway does not host it and the upstream does not run it as a task"
                ),
            ));
        }
        if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
            p.remove("task");
        }
        self.start_bridged(s, id, op.token, call, token, keep_alive, false).await
    }

    /// Notes the operation and answers its call: `false` if the session has ended
    /// meanwhile (nothing is noted; the caller stops what it started).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        s: &impl Host,
        id: &Id,
        token: String,
        task_id: Arc<str>,
        progress_token: Option<ProgressToken>,
        bridge: Option<CancellationToken>,
        keep_alive: Duration,
    ) -> bool {
        let op = Operation { task_id, request_id: id.clone(), progress_token, bridge };
        // Under the session's lock: its end, once it is marked so, finds every operation
        // recorded before.
        let recorded = s.while_open(|| self.kept.lock().unwrap().ops.insert(token.clone(), op)).is_some();
        if !recorded {
            self.kept.lock().unwrap().ops.release(&token);
            return false;
        }
        let accepted =
            sep1391::accepted(keep_alive, s.upstream().tasks.poll_interval, task_messages::TaskStatus::Working);
        s.to_client(Message::made(jsonrpc::result_response(id, accepted)), Route::Response(id.clone()));
        true
    }

    /// An operation of a tool the upstream runs as a task (a 2025-11-25 task, or with
    /// `extension` one of the tasks extension): a task of the gateway's stands for it, and a
    /// bridge follows the upstream's task into it.
    #[allow(clippy::too_many_arguments)]
    async fn start_bridged<H: Host>(
        &self,
        s: &H,
        id: Id,
        token: String,
        call: Value,
        progress_token: Option<ProgressToken>,
        keep_alive: Duration,
        extension: bool,
    ) -> Result<(), RpcError> {
        let link = s.link().await?;
        // Counted with the session's bridged calls (their limit, their questions' handling,
        // their cancellation at the session's end).
        let cancel = s.bridged_calls().claim_open(s, &id)?;
        let free_slot = |s: &H| {
            s.bridged_calls().release(&id);
        };
        let rec = match s
            .hosted()
            .create((s.owner(), s.client()), &s.upstream().name, &s.upstream().tasks, Some(keep_alive), &call)
            .await
        {
            Ok(rec) => rec,
            Err(e) => {
                free_slot(s);
                return Err(e);
            }
        };
        let task_id: Arc<str> = rec.id.as_str().into();
        s.hosted().retain_after_end(&task_id).await;
        s.hosted().track(&task_id, link.clone(), s.waiter(), progress_token.clone());
        if !self.record(s, &id, token, task_id.clone(), progress_token, Some(cancel.clone()), keep_alive) {
            free_slot(s);
            let _ = s.hosted().cancel(&task_id).await;
            return Ok(());
        }
        let bridge: std::pin::Pin<Box<dyn std::future::Future<Output = Ending> + Send>> = if extension {
            Box::pin(s.ext_bridge(&link, &id, call, cancel).run())
        } else {
            Box::pin(s.bridged_calls().core(s, &link, &id, call, cancel).run())
        };
        link.retain();
        let hosted = s.hosted().clone();
        let me = s.weak();
        tokio::spawn(async move {
            let ending = bridge.await;
            link.release();
            match ending {
                Ending::Answer(resp) => crate::upstream::link::TaskCalls::outcome(&*hosted, &task_id, resp),
                // Cancelled by whoever fired the bridge (the session's end too): so is the task.
                Ending::Cancelled => {
                    let _ = hosted.cancel(&task_id).await;
                }
            }
            if let Some(s) = me.upgrade() {
                s.bridged_calls().ended(&*s, &id);
            }
        });
        Ok(())
    }

    /// `tools/async/status` and `tools/async/result`.
    async fn serve(&self, s: &impl Host, id: Id, method: Method, msg: &Value) -> Result<(), RpcError> {
        if !self.client_opted_in(s) {
            return Err(sep1391::outdated(method.as_str()));
        }
        let token = sep1391::token_param(msg, method.as_str())?;
        let task = self.kept.lock().unwrap().ops.get(&token).map(|op| op.task_id.clone());
        let task = task.ok_or_else(|| sep1391::not_found(&token))?;
        let hosted = s.hosted();
        let (status, message) = hosted.status(&task).await.ok_or_else(|| sep1391::expired(&token))?;
        let result = match method {
            Method::ToolsAsyncStatus => sep1391::status_result(status, message.as_deref()),
            _ => {
                // A tool's own error (`isError`) is a result too; a call that never produced
                // one has none to fetch.
                let outcome = hosted.stored_outcome(&task).await;
                match outcome.and_then(|mut o| o.get_mut("result").map(Value::take)) {
                    Some(r) if status.is_terminal() => {
                        // The upstream's result, as `tools/call` results reach this client.
                        let resp = Message::made(jsonrpc::result_response(&id, r));
                        let Some(resp) = s.for_client_version(resp, Some(Method::ToolsCall)) else {
                            return Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "the result cannot be sent"));
                        };
                        let mut resp = resp.into_value();
                        match resp.get_mut("result").map(Value::take) {
                            Some(r) => jsonrpc::object([("result", r)]),
                            // The client's version cannot take it: the error says why.
                            None => {
                                s.to_client(Message::made(resp), Route::Response(id));
                                return Ok(());
                            }
                        }
                    }
                    _ => {
                        return Err(RpcError::new(
                            INVALID_PARAMS,
                            format!(
                                "operation {token:?} is {}: it has no result{}",
                                sep1391::status_of(status),
                                message.map(|m| format!(" ({m})")).unwrap_or_default()
                            ),
                        ));
                    }
                }
            }
        };
        s.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// Each tool of a listing for an opted-in client marked with how it can be called.
    pub(super) fn mark_invocation_modes(&self, s: &impl Host, result: &mut Value) {
        let Listed { support, declares, marks_tasks } = s.listed();
        let runs_tasks = declares || marks_tasks;
        let policy = &s.upstream().tasks;
        let ext = s.upstream_tasks_are_extension();
        let is_async = |t: &Value| {
            let Some(name) = t.get("name").and_then(Value::as_str) else { return false };
            let support = support.get(name).copied().unwrap_or(TaskSupport::Forbidden);
            // As `launch` decides: hosted, else bridged to the upstream's task.
            let hosted = policy.offers_tool(name) && hosts(policy.hosted, declares, support);
            hosted || (!ext && runs_tasks && support != TaskSupport::Forbidden)
        };
        sep1391::mark_tools(result, &is_async);
    }
}

/// Stops an operation's task, and the bridge that follows the upstream's for it.
async fn stop(hosted: &Hosted, task: &str, bridge: Option<&CancellationToken>) {
    // Cancelled first, so that the bridge's end finds it ended and records nothing.
    let _ = hosted.cancel(task).await;
    if let Some(b) = bridge {
        b.cancel();
    }
}
