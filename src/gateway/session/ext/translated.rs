//! A 2025-11-25 client with core tasks in front of a 2026-07-28 upstream of the tasks
//! extension: the two dialects translated both ways (`mcp::task_dialects`), with the state
//! the extension lacks kept in the strategy's table ([`ExtTasks`], its
//! [`ExtTable`](ext_table::ExtTable)).
//!
//! - `tools/call` with `params.task` goes up without it, declaring the extension for that
//!   request; a `resultType: "task"` answer becomes core's `CreateTaskResult {task}`; a plain
//!   result (the server chose not to make a task) becomes a gateway-hosted task already
//!   completed (or failed, by `isError`) with that result, since the client "MUST" get a
//!   `CreateTaskResult`; an `InputRequiredResult` (it asks for input first) becomes a hosted
//!   task whose call goes on in input rounds (`tasks::hosted::rounds`); an error is the
//!   answer.
//! - Each task is followed in the background until it ends for the client (`follow`):
//!   `notifications/tasks/status` on each change, though no `tasks/result` waits.
//! - `tasks/get` is the upstream's `tasks/get`, translated, kept as the task's snapshot (and
//!   its inline outcome, once terminal).
//! - `tasks/result` blocks: the waiter polls (`tasks/get` at the task's `pollInterval`,
//!   clamped as the bridges clamp it; polls of one task take turns, and the follower rests
//!   while a waiter polls), relays input requests on its own stream (tagged with
//!   related-task, each key once) and sends their answers up as `tasks/update`, sends
//!   `notifications/tasks/status` on its stream when the status changes, and answers with
//!   the outcome tagged with related-task. Bounded by `max_request_time`; the client's
//!   `notifications/cancelled` for it, and the session's end, stop it and its polling (it
//!   holds a slot among the session's bridged calls).
//! - `tasks/cancel`: -32602 for a task seen terminal; else the upstream's `tasks/cancel` (an
//!   ack) and, at once, the task as last seen, `cancelled`, which it stays for this client.
//! - `tasks/list`: the session's hosted tasks, then the extension tasks it has seen.
//! - An unknown id is -32602; a task is its session's (on a shared link too: each session
//!   has its own table).

use super::table::{self as ext_table, Outcome};
use super::{ExtTasks, Host};
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, Message, Method, RpcError};
use crate::mcp::modern::ResultType;
use crate::mcp::paging;
use crate::mcp::task_dialects::{CORE_NOTIFICATION, TASKS_UPDATE, caps, flow, task as dialect_task};
use crate::mcp::task_messages;
use crate::mcp::task_messages::TaskView;
use crate::tasks::hosted;
use crate::upstream::client::Route;
use crate::upstream::link::Link;
use serde_json::Map;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

impl ExtTasks {
    /// A core client's task-augmented `tools/call` (see the module doc).
    pub(in crate::gateway::session) async fn call(
        &self,
        s: &impl Host,
        id: Id,
        frame: Message,
    ) -> Result<(), RpcError> {
        let mut call = frame.into_value();
        let requested_ttl = task_messages::requested_ttl(call.pointer("/params/task"))?;
        caps::core_call_to_ext(&mut call);
        if !self.lock().table.has_room() {
            return Err(RpcError::new(
                GATEWAY_BUSY,
                format!(
                    "too many tasks running for this session (max_tasks_per_owner = {})",
                    s.upstream().tasks.max_tasks_per_owner
                ),
            ));
        }
        let link = s.link().await?;
        let me = s.weak();
        let client = s.client_ref(id.clone());
        // The call's own deadline: the server may run it plainly before it answers.
        let within = s.upstream().max_request_time;
        let caps = Some(self.capabilities(s));
        // Kept for the retries, should the server ask for input instead of making a task.
        let kept = call.clone();
        tokio::spawn(async move {
            let resp = tokio::time::timeout(within, link.request_for_declaring(call, Some(client), caps)).await;
            let Some(s) = me.upgrade() else { return };
            let answer = match resp {
                Ok(Ok(resp)) => s.ext().created(&*s, &id, resp, requested_ttl, (&link, kept)).await,
                Ok(Err(e)) => e.response(Some(&id)),
                Err(_) => RpcError::new(
                    jsonrpc::REQUEST_TIMEOUT,
                    "request timed out: the upstream did not answer the task-augmented call",
                )
                .response(Some(&id)),
            };
            s.answer(id, answer, Some(crate::jsonrpc::Method::ToolsCall));
        });
        Ok(())
    }

    /// The upstream's answer to a task-augmented call (`call`, sent on `link`), as the core
    /// client's.
    async fn created(
        &self,
        s: &impl Host,
        id: &Id,
        mut resp: Value,
        requested_ttl: Option<Duration>,
        call: (&Arc<Link>, Value),
    ) -> Value {
        jsonrpc::set_id(&mut resp, id);
        let Some(result) = resp.get("result").cloned() else { return resp };
        if ResultType::of(&result) == Ok(ResultType::InputRequired) {
            return self.host_input_rounds(s, id, resp, requested_ttl, call).await;
        }
        if ResultType::of(&result) != Ok(ResultType::Task) {
            return self.host_plain_result(s, id, resp, requested_ttl, &call.1).await;
        }
        let (created, inline) = match dialect_task::create_to_core(result) {
            Ok(c) => c,
            Err(e) => return e.to_rpc().response(Some(id)),
        };
        let Some(task) = created.get("task").and_then(Value::as_object).cloned() else {
            return RpcError::new(jsonrpc::INTERNAL_ERROR, "the upstream's task is not an object").response(Some(id));
        };
        let task_id = TaskView::of_map(&task).id().unwrap_or_default().to_string();
        // Under the strategy's lock, which the session's end takes to cancel what the table
        // holds: a task is recorded before the end (and cancelled by it), or refused after.
        // The guard is dropped before `cancel_upstream`, which calls the session.
        let recorded = {
            let mut st = self.lock();
            match st.ended.is_cancelled() {
                true => Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "the session ended")),
                false => st.table.insert(task, inline),
            }
        };
        let shown = match recorded {
            Ok(shown) => shown,
            Err(e) => {
                // Nobody would follow it: the upstream is told to drop it.
                if !task_id.is_empty() {
                    self.cancel_upstream(s, task_id);
                }
                return e.response(Some(id));
            }
        };
        // As the table keeps it (its message cut): what the client sees of it from now on.
        let mut created = created;
        created["task"] = Value::Object(shown);
        tracing::debug!(upstream = %s.upstream().name, task = %task_id, "an extension task for a core client");
        s.remember_followed().await;
        self.follow(s, task_id);
        jsonrpc::result_response(id, created)
    }

    /// The server ran a task-augmented call plainly: a hosted task, already ended with it.
    async fn host_plain_result(
        &self,
        s: &impl Host,
        id: &Id,
        resp: Value,
        requested_ttl: Option<Duration>,
        call: &Value,
    ) -> Value {
        let rec = match s
            .hosted()
            .create((s.owner(), s.client()), &s.upstream().name, &s.upstream().tasks, requested_ttl, call)
            .await
        {
            Ok(r) => r,
            Err(e) => return e.response(Some(id)),
        };
        // What a legacy receiver lacks goes (resultType and the like), as for any result.
        let mut outcome = resp;
        let _ = crate::mcp::modern::legacy::for_legacy(&mut outcome);
        s.hosted().finish(&rec.id, outcome).await;
        let task = s.hosted().get(&rec.id).await.unwrap_or_else(|_| Value::Object(rec.to_json()));
        jsonrpc::result_response(id, json!({"task": task}))
    }

    /// The server asked for input instead of making a task: a hosted task, whose call goes
    /// on in input rounds (`tasks::hosted::rounds`) from this first answer.
    async fn host_input_rounds(
        &self,
        s: &impl Host,
        id: &Id,
        resp: Value,
        requested_ttl: Option<Duration>,
        (link, call): (&Arc<Link>, Value),
    ) -> Value {
        let hosted = s.hosted();
        let rec = match hosted
            .create((s.owner(), s.client()), &s.upstream().name, &s.upstream().tasks, requested_ttl, &call)
            .await
        {
            Ok(r) => r,
            Err(e) => return e.response(Some(id)),
        };
        hosted.track(&rec.id, link.clone(), s.waiter(), crate::jsonrpc::ProgressToken::of_request(&call));
        hosted.keep_for_rounds(&rec.id, call, s.round_policy());
        crate::upstream::link::TaskCalls::outcome(&**hosted, &rec.id, resp);
        let task = hosted.get(&rec.id).await.unwrap_or_else(|_| Value::Object(rec.to_json()));
        jsonrpc::result_response(id, json!({"task": task}))
    }

    fn cancel_upstream(&self, s: &impl Host, task_id: String) {
        let Some(link) = s.current_link() else { return };
        let timeout = s.upstream().request_timeout;
        let caps = Some(self.capabilities(s));
        tokio::spawn(async move {
            let req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id}));
            let _ = tokio::time::timeout(timeout, link.request_for_declaring(req, None, caps)).await;
        });
    }

    /// `tasks/get|result|cancel` of a core client for an extension upstream: -32602 if
    /// `task_id` is not one of the session's extension tasks.
    pub(in crate::gateway::session) async fn task_request(
        &self,
        s: &impl Host,
        id: Id,
        method: Method,
        task_id: &str,
    ) -> Result<(), RpcError> {
        if !self.lock().table.contains(task_id) {
            return Err(hosted::not_found(task_id));
        }
        match method {
            Method::TasksGet => {
                let task = self.poll(s, task_id).await?;
                s.to_client(Message::made(jsonrpc::result_response(&id, Value::Object(task))), Route::Response(id));
            }
            Method::TasksCancel => {
                let last = self.lock().table.snapshot(task_id).cloned();
                if let Some(e) = flow::refuse_core_cancel(task_id, last.as_ref()) {
                    return Err(e);
                }
                let resp =
                    self.ask_upstream(s, crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id})).await?;
                let now = crate::tasks::store::rfc3339(crate::clock::wall_now());
                let cancelled = flow::cancel_to_core(&resp, &last.unwrap_or_default(), &now)
                    .map_err(|e| RpcError::from_object(Some(&e), "tasks/cancel failed"))?;
                if let Value::Object(t) = &cancelled {
                    self.lock().table.cancel(task_id, t.clone());
                    s.remember_followed().await;
                }
                s.to_client(Message::made(jsonrpc::result_response(&id, cancelled)), Route::Response(id));
            }
            _ => {
                // Blocks until the task ends: never inside the client's read loop.
                let cancel = s.bridged_calls().claim_open(s, &id)?;
                let me = s.weak();
                let task_id = task_id.to_string();
                let max = s.upstream().max_request_time;
                tokio::spawn(async move {
                    let Some(s) = me.upgrade() else { return };
                    let resp = tokio::select! {
                        r = tokio::time::timeout(max, s.ext().result(&*s, &id, &task_id)) => Some(r.unwrap_or_else(|_| {
                            RpcError::new(
                                jsonrpc::REQUEST_TIMEOUT,
                                format!("request timed out: task {task_id} did not end within max_request_time"),
                            )
                            .response(Some(&id))
                        })),
                        // Cancelled by the client, or its session ended: no answer is due.
                        _ = cancel.cancelled() => None,
                    };
                    s.bridged_calls().release(&id);
                    if let Some(resp) = resp {
                        s.answer(id, resp, Some(crate::jsonrpc::Method::ToolsCall));
                    }
                });
            }
        }
        Ok(())
    }

    /// A request about an extension task, declaring the extension, within `request_timeout`:
    /// the whole response.
    async fn ask_upstream(
        &self,
        s: &impl Host,
        method: crate::jsonrpc::Method,
        params: Value,
    ) -> Result<Value, RpcError> {
        let link = s.link().await?;
        let req = jsonrpc::request(&Id::Num(0), method, params);
        match tokio::time::timeout(
            s.upstream().request_timeout,
            link.request_for_declaring(req, None, Some(self.capabilities(s))),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(RpcError::new(
                jsonrpc::REQUEST_TIMEOUT,
                format!("request timed out: upstream '{}' did not answer {method}", s.upstream().name),
            )),
        }
    }

    /// The task now, for the client's `tasks/get`: what [`ExtTasks::look`] found, or the
    /// snapshot of a task that has ended. The client sees its status here: no notification
    /// repeats it.
    async fn poll(&self, s: &impl Host, task_id: &str) -> Result<Map<String, Value>, RpcError> {
        let looked = self.look(s, task_id).await;
        let mut st = self.lock();
        st.table.status_news(task_id);
        match looked {
            Some(Ok((task, _))) => Ok(task),
            Some(Err(e)) => Err(e),
            None => st.table.snapshot(task_id).cloned().ok_or_else(|| hosted::not_found(task_id)),
        }
    }

    /// One look at the task, taking turns with whoever else polls it: the upstream's
    /// `tasks/get`, translated and kept, with the input requests the task holds. `None`: the
    /// task has ended for the client (or is gone), and nothing was asked.
    pub(super) async fn look(&self, s: &impl Host, task_id: &str) -> Option<LookResult> {
        let gate = self.lock().table.poll_gate(task_id)?;
        let _turn = gate.lock().await;
        if !self.lock().table.is_open(task_id) {
            return None;
        }
        Some(self.poll_detailed(s, task_id).await)
    }

    /// The upstream's `tasks/get`, translated and kept, with the task's input requests.
    async fn poll_detailed(&self, s: &impl Host, task_id: &str) -> LookResult {
        let resp = self.ask_upstream(s, crate::jsonrpc::Method::TasksGet, json!({"taskId": task_id})).await?;
        let result = match crate::jsonrpc::into_outcome(resp, "tasks/get failed") {
            Ok(result) => result,
            Err(e) => {
                if e.code == INVALID_PARAMS
                    && let Some(lost) = self.lock().table.lost_in_restart(task_id)
                {
                    return Ok((lost, Map::new()));
                }
                return Err(e);
            }
        };
        let (task, inline) = dialect_task::get_to_core(result).map_err(|e| e.to_rpc())?;
        let input = match &inline {
            dialect_task::Inline::InputRequests(m) => m.clone(),
            _ => Map::new(),
        };
        let Value::Object(task) = task else { return Err(hosted::not_found(task_id)) };
        let seen = self.lock().table.observe(task_id, task, inline);
        seen.map(|t| (t, input)).ok_or_else(|| hosted::not_found(task_id))
    }

    /// A core `tasks/result` of an extension task: the whole response, once it has ended.
    async fn result(&self, s: &impl Host, id: &Id, task_id: &str) -> Value {
        let (answers_tx, mut answers) = mpsc::channel::<(String, Value)>(16);
        let _waiting = Waiting::start(self, task_id);
        loop {
            let (task, input) = match self.look(s, task_id).await {
                None => (Map::new(), Map::new()),
                Some(Ok(t)) => t,
                Some(Err(e)) => return e.response(Some(id)),
            };
            self.announce_status(s, task_id, Route::Related(id.clone()));
            match self.lock().table.outcome(task_id) {
                Some(outcome) => return ext_answer(id, task_id, outcome),
                None if task.is_empty() => return hosted::not_found(task_id).response(Some(id)),
                None => {}
            }
            for (key, req) in &input {
                let fresh = self.lock().table.relay(task_id, key, s.max_in_flight());
                if !fresh {
                    continue;
                }
                if let Err(e) = self.ask_core_client(s, id, task_id, key, req, &answers_tx) {
                    tracing::info!(upstream = %s.upstream().name, task = %task_id, "input request not relayed: {}", e.message);
                }
            }
            // The loop's pace, not a deadline (see `clock`): the wait is this request's alone,
            // an answer ends it early, and it goes with the request.
            tokio::select! {
                _ = tokio::time::sleep(TaskView::of_map(&task).poll_interval()) => {}
                Some((key, resp)) = answers.recv() => self.input_to_upstream(s, task_id, &key, &resp).await,
            }
        }
    }

    /// A `notifications/tasks/status` by `route` if the task's status is news to the client.
    pub(super) fn announce_status(&self, s: &impl Host, task_id: &str, route: Route) {
        let news = self.lock().table.status_news(task_id);
        if let Some(task) = news {
            let note = jsonrpc::notification(CORE_NOTIFICATION, Value::Object(task));
            s.to_client(Message::made(note), route);
        }
    }

    /// Relays one of an extension task's input requests to the core client waiting on
    /// `waiter`, tagged with the task.
    fn ask_core_client(
        &self,
        s: &impl Host,
        waiter: &Id,
        task_id: &str,
        key: &str,
        req: &Value,
        answers: &mpsc::Sender<(String, Value)>,
    ) -> Result<(), RpcError> {
        let msg = flow::input_request_to_core(task_id, req).map_err(|e| e.to_rpc())?;
        self.ask_client(s, waiter, msg, key.to_string(), answers.clone())
    }

    /// The core client answered input `key`: a result goes up as `tasks/update`; an error
    /// (which `inputResponses` cannot carry) cancels the task, sticky, with its message.
    async fn input_to_upstream(&self, s: &impl Host, task_id: &str, key: &str, resp: &Value) {
        match flow::input_answer_to_ext(resp) {
            Ok(result) => {
                let mut responses = Map::new();
                responses.insert(key.to_string(), result);
                if let Err(e) = self.ask_upstream(s, TASKS_UPDATE, flow::tasks_update_params(task_id, responses)).await
                {
                    tracing::info!(upstream = %s.upstream().name, task = %task_id, "tasks/update failed: {}", e.message);
                }
            }
            Err(_) => {
                let why = RpcError::from_object(resp.get("error"), "an error").message;
                let _ = self.ask_upstream(s, crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id})).await;
                let now = crate::tasks::store::rfc3339(crate::clock::wall_now());
                let mut st = self.lock();
                let mut t = st.table.snapshot(task_id).cloned().unwrap_or_default();
                t.insert("status".into(), "cancelled".into());
                t.insert(
                    "statusMessage".into(),
                    format!("the client answered an input request with an error: {why}").into(),
                );
                t.insert("lastUpdatedAt".into(), now.into());
                st.table.cancel(task_id, t);
            }
        }
    }

    /// The session's hosted tasks from `cursor`, and once they are all listed, the first
    /// page of its extension tasks (under the extension table's cursor).
    async fn hosted_then_ext(
        &self,
        s: &impl Host,
        cursor: Option<&str>,
    ) -> Result<(Vec<Value>, Option<String>), RpcError> {
        let (mut tasks, next) = s.hosted().list(s.owner(), cursor).await?;
        if next.is_some() {
            return Ok((tasks, next));
        }
        let (ext, next) = self.lock().table.list(None)?;
        tasks.extend(ext);
        Ok((tasks, next))
    }

    /// `tasks/list` for a core client in front of an extension upstream: its hosted tasks
    /// (a plain result hosted as a task), then the extension tasks it made, under one cursor.
    pub(in crate::gateway::session) async fn list(&self, s: &impl Host, id: Id, msg: &Message) -> Result<(), RpcError> {
        let (tasks, next) = match paging::cursor(msg.value())? {
            Some(c) if c.starts_with(ext_table::CURSOR_PREFIX) => self.lock().table.list(Some(c))?,
            None => self.hosted_then_ext(s, None).await?,
            Some(c) if c.starts_with(hosted::CURSOR_PREFIX) => self.hosted_then_ext(s, Some(c)).await?,
            Some(_) => return Err(paging::invalid_cursor()),
        };
        let mut result = jsonrpc::object([("tasks", Value::Array(tasks))]);
        if let Some(c) = next {
            result["nextCursor"] = c.into();
        }
        s.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }
}

/// What one look at an extension task found: the task as the core client sees it, and the
/// input requests it holds.
pub(super) type LookResult = Result<(Map<String, Value>, Map<String, Value>), RpcError>;

/// Held while a `tasks/result` waits on a task (its follower rests meanwhile), however the
/// wait ends.
struct Waiting<'a> {
    ext: &'a ExtTasks,
    task_id: &'a str,
}

impl<'a> Waiting<'a> {
    fn start(ext: &'a ExtTasks, task_id: &'a str) -> Waiting<'a> {
        ext.lock().table.set_waiting(task_id, true);
        Waiting { ext, task_id }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.ext.lock().table.set_waiting(self.task_id, false);
    }
}

/// A terminal extension task's outcome as a core `tasks/result` answers it.
fn ext_answer(id: &Id, task_id: &str, outcome: Outcome) -> Value {
    match outcome {
        Outcome::Result(Value::Object(mut r)) => {
            let meta = r.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert(task_messages::RELATED_TASK.into(), json!({"taskId": task_id}));
            }
            jsonrpc::result_response(id, Value::Object(r))
        }
        Outcome::Result(_) => {
            RpcError::new(jsonrpc::INTERNAL_ERROR, "the upstream's task result is not an object").response(Some(id))
        }
        Outcome::Error(e) => json!({"jsonrpc": "2.0", "id": id.to_value(), "error": e}),
        Outcome::Cancelled => flow::cancelled_error(task_id).response(Some(id)),
    }
}
