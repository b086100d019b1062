//! Long calls for a legacy client without tasks (`[upstream.long_calls]`; docs/tasks.md,
//! "Long calls"): the mirror of hosted tasks, in a form any client and any model can use.
//!
//! - A plain `tools/call` of a tool the gateway hosts and `tools` covers runs upstream as
//!   a hosted task from the start. Ended within `defer_after`, it is answered with its
//!   result, exactly, and the task is forgotten; still running then, it is answered with an
//!   ordinary tool result naming the task (`mcp::long_calls::still_running`), and goes on.
//!   Meanwhile the upstream's questions and progress go on the call's own stream, a client
//!   that sent a progress token hears keep-alive progress while the upstream is silent, and
//!   a cancel of the call cancels the task.
//! - The gateway's tools, `<prefix>wait|status|cancel`, listed on the last page of
//!   `tools/list` unless the upstream lists one of those names itself (the upstream's tool
//!   is never shadowed): `wait` answers with the call's result, exactly, once it has one
//!   (at most `wait_max` later), `status` with where it stands, `cancel` stops it. A task
//!   the client may not see is answered as an unknown one.
//!
//! Clients that speak tasks (2025-11-25 with the `tasks` capability declared) get real
//! tasks instead, and see none of this. The strategy is built with the session when the
//! upstream turns it on, and is asked as a request is dispatched (after the by-token
//! dialects), as a listing passes, and as a cancel arrives.
//!
//! The strategy names no session type: it is handed a [`Host`], what it needs of its
//! session (`session/contexts.rs`).

use super::reach::Hosting;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_REQUEST, Id, Message, Method, RpcError};
use crate::mcp::long_calls::{self as shapes, Snapshot};
use crate::mcp::task_messages::TaskStatus;
use crate::upstream::client::Route;
use serde_json::Value;
use state::{InFlight, LongCalls, Waiting};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use tokio_util::sync::CancellationToken;

pub(super) mod state;

/// What long calls need of their session beyond what a strategy that hosts tasks reaches:
/// its narrow context.
pub(super) trait Host: Hosting {
    /// The session's long calls, if its upstream turned them on.
    fn long_calls(&self) -> Option<&LongCalls>;
    /// Whether the client speaks tasks: 2025-11-25 or later with the `tasks` capability
    /// declared, or a 2026-07-28 request that declared the tasks extension.
    fn client_has_tasks(&self) -> bool;
    /// Whether the upstream lists tool `name`, its listing read first if the session has not
    /// seen it whole (one that cannot be read says no).
    fn lists_tool_read(&self, name: &str) -> impl Future<Output = bool> + Send;
    /// Whether the upstream lists tool `name`, as far as the session knows.
    fn lists_tool(&self, name: &str) -> bool;
    /// Whether tool `name` declares an output schema.
    fn has_output_schema(&self, name: &str) -> bool;
    /// The tool policy's refusal of a call, if it refuses it.
    fn refused_by_policy(&self, frame: &Message) -> Option<RpcError>;
}

/// Removes a request from the window however its wait ends (a dropped task too), if the
/// entry is still its own (not a cancel's removal, nor a later request's of the same id).
struct InWindow<H: Host> {
    session: Weak<H>,
    id: Id,
    generation: u64,
}

impl<H: Host> Drop for InWindow<H> {
    fn drop(&mut self) {
        if let Some(s) = self.session.upgrade()
            && let Some(calls) = s.long_calls()
        {
            let mut window = calls.window.lock().unwrap();
            if window.get(&self.id).is_some_and(|w| w.generation == self.generation) {
                window.remove(&self.id);
            }
        }
    }
}

impl LongCalls {
    /// A request of the session: a plain call that may be deferred, or a call of one of the
    /// gateway's tools, is answered here (`Some`).
    pub(super) async fn request(&self, s: &impl Host, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        // Long calls are for a client without tasks (see `Host::client_has_tasks`).
        if frame.method() != Method::ToolsCall || s.client_has_tasks() {
            return None;
        }
        let name = frame.tool_name()?.into_owned();
        let cfg = &s.upstream().long_calls;
        let gateway_tool = cfg.gateway_tool(&name);
        // A legacy client that asks for a task of an upstream tool gets one; a 2026-07-28
        // client's `params.task` means nothing in its era.
        if gateway_tool.is_none() && frame.task_param().is_some() && !s.client_is_modern() {
            return None;
        }
        if gateway_tool.is_none() && !cfg.covers(&name) {
            return None;
        }
        // Where the upstream has a tool of one of the gateway's names, the gateway's tools
        // are not there (the upstream's is never shadowed), and neither is deferral (its
        // answers would name a tool that is the upstream's).
        if self.clashes(s).await {
            // A call of the upstream's own tool of that name is the tool policy's to judge,
            // now that its listing is known.
            return s.refused_by_policy(frame).map(Err);
        }
        if let Some(which) = gateway_tool {
            return Some(Box::pin(self.serve_tool(s, id.clone(), which, frame)).await);
        }
        // A listing that cannot be read, or a call no task can be made for (the client's
        // share of tasks is full, or the store is), goes up plain, as without long calls.
        match s.hosts_tool(&name).await {
            Ok(true) => match Box::pin(self.defer(s, id.clone(), frame.clone(), name)).await {
                Err(e) if e.code == INVALID_REQUEST => Some(Err(e)),
                Err(e) => {
                    tracing::debug!(upstream = %s.upstream().name, "call not deferrable, passed on plain: {}", e.message);
                    None
                }
                Ok(()) => Some(Ok(())),
            },
            Ok(false) => None,
            Err(e) => {
                tracing::debug!(upstream = %s.upstream().name, "call not deferrable, passed on plain: {}", e.message);
                None
            }
        }
    }

    /// Whether the upstream lists a tool of one of the gateway's names (its listing read
    /// first if the session has not seen it whole; one that cannot be read says no).
    async fn clashes(&self, s: &impl Host) -> bool {
        for name in self.names.all() {
            if s.lists_tool_read(name).await {
                return true;
            }
        }
        false
    }

    /// Whether `name` is one of the gateway's tools as this session's client sees them (the
    /// upstream lists none of that name, as far as the session knows).
    pub(super) fn serves(&self, s: &impl Host, name: &str) -> bool {
        s.upstream().long_calls.gateway_tool(name).is_some() && !self.names.all().into_iter().any(|n| s.lists_tool(n))
    }

    /// A new request in the window: `false` if its id is already one's there.
    fn enter(&self, id: &Id, what: Waiting) -> Option<u64> {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let mut window = self.window.lock().unwrap();
        if window.contains_key(id) {
            return None;
        }
        window.insert(id.clone(), InFlight { generation, what });
        Some(generation)
    }

    /// Whether request `id` of `generation` still waits (a cancel took it out).
    fn still_waits(&self, id: &Id, generation: u64) -> bool {
        self.window.lock().unwrap().get(id).is_some_and(|w| w.generation == generation)
    }

    /// The session ends: its calls within their window are cancelled (their tasks were
    /// never handed to the client), and its waits end.
    pub(super) async fn end(&self, s: &impl Host) {
        let waiting: Vec<InFlight> = self.window.lock().unwrap().drain().map(|(_, w)| w).collect();
        for w in waiting {
            match w.what {
                Waiting::Call(task) => {
                    let _ = s.hosted().cancel_saying(&task, "the client's session ended").await;
                }
                Waiting::Wait(_, wait) => wait.cancel(),
            }
        }
    }

    /// A `notifications/cancelled` of a call within its window: its task is cancelled, and
    /// the call gets no answer.
    pub(super) async fn cancelled(&self, s: &impl Host, frame: &Message) {
        if frame.method() != Method::Cancelled {
            return;
        }
        let Some(request) = frame.request_id_param() else { return };
        let waiting = self.window.lock().unwrap().remove(&request);
        match waiting.map(|w| w.what) {
            Some(Waiting::Call(task)) => {
                s.abandon(&request);
                let _ = s.hosted().cancel(&task).await;
            }
            // A wait cancelled: it ends, and the task goes on.
            Some(Waiting::Wait(task, wait)) => {
                wait.cancel();
                s.abandon(&request);
                let waiter = s.waiter();
                s.hosted().stop_waiting(&task, &waiter, &request);
            }
            None => {}
        }
    }

    /// The last page of a `tools/list` for a client without tasks gets the gateway's tools,
    /// unless the upstream lists one of their names.
    pub(super) fn listing(&self, s: &impl Host, result: &mut Value) {
        let last = result.get("nextCursor").is_none_or(Value::is_null);
        if !last || s.client_has_tasks() {
            return;
        }
        if let Some(clash) = self.names.all().into_iter().find(|n| s.lists_tool(n)) {
            if !self.clash_told.swap(true, Ordering::Relaxed) {
                tracing::error!(upstream = %s.upstream().name, tool = clash, "the upstream lists a tool named as one of the gateway's long-call tools: the gateway's are not offered (set long_calls.tool_prefix)");
            }
            return;
        }
        let wait_max = s.upstream().long_calls.wait_max.as_secs().max(1);
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            tools.extend(shapes::tool_definitions(&self.names, wait_max));
        }
    }

    /// A call that may outlast the client's patience: run as a hosted task, answered with
    /// its result if it ends within `defer_after`, else with a result naming the task. The
    /// wait is a task of its own: the request's handler returns at once, as for any call
    /// on its way upstream (its stream must carry the keep-alives, the session's other
    /// messages must go on).
    async fn defer(&self, s: &impl Host, id: Id, frame: Message, tool: String) -> Result<(), RpcError> {
        let schema_bound = s.has_output_schema(&tool);
        let mut call = frame.into_value();
        if s.client_is_modern() {
            // A 2026-07-28 client's `_meta` is not the upstream's to read, as on its plain path.
            crate::mcp::modern::meta::strip(&mut call);
        }
        let (task_id, _, link, msg) = s.create_hosted(call).await?;
        let Some(generation) = self.enter(&id, Waiting::Call(task_id.clone())) else {
            let _ = s.hosted().cancel(&task_id).await;
            return Err(id_in_use(&id));
        };
        let in_window = InWindow { session: s.weak(), id: id.clone(), generation };
        s.run_hosted(task_id.clone(), link, msg).await;
        let Some(me) = s.weak().upgrade() else { return Ok(()) };
        tokio::spawn(async move {
            let _in_window = in_window;
            if let Some(calls) = me.long_calls() {
                calls.settle(&*me, (id, generation), task_id, tool, schema_bound).await;
            }
        });
        Ok(())
    }

    /// A deferrable call's wait: its result if the task ends within `defer_after`, else a
    /// result naming the task; keep-alive progress meanwhile.
    async fn settle(
        &self,
        s: &impl Host,
        (id, generation): (Id, u64),
        task_id: Arc<str>,
        tool: String,
        schema_bound: bool,
    ) {
        let cfg = &s.upstream().long_calls;
        let hosted = s.hosted().clone();
        let waiter = s.waiter();
        let started = tokio::time::Instant::now();
        let deadline = started + cfg.defer_after.unwrap_or_default();
        // Its questions and progress go on this call's stream while it waits.
        let result = hosted.result(&task_id, waiter.clone(), &id);
        tokio::pin!(result);
        // Checked at half the interval, so that a silence is broken within 1.5 of it.
        let mut ticks = cfg.keepalive.map(|k| tokio::time::interval_at(started + k / 2, k / 2));
        let ended = loop {
            tokio::select! {
                resp = &mut result => break Some(resp),
                _ = tokio::time::sleep_until(deadline) => break None,
                _ = tick(&mut ticks) => {
                    let quiet = cfg.keepalive.unwrap_or_default();
                    let said = format!("still running after {} s", started.elapsed().as_secs());
                    hosted.keep_alive(&task_id, quiet, &said);
                }
            }
        };
        let ended = match ended {
            // Ended as the window closed: its result is at hand.
            None => hosted.result_if_ended(&task_id, waiter.clone(), &id).await,
            ended => ended,
        };
        // A call cancelled (or its session ended) is not answered.
        let answered = self.still_waits(&id, generation);
        match ended {
            Some(resp) => {
                if answered {
                    s.answer(id.clone(), untagged(resp), Some(Method::ToolsCall));
                }
                // Answered with its result: no one knows the task by its id.
                hosted.discard_answered(&task_id).await;
            }
            None if !answered => hosted.stop_waiting(&task_id, &waiter, &id),
            None => {
                hosted.stop_waiting(&task_id, &waiter, &id);
                hosted.release_token(&task_id);
                let snap = self.snapshot(s, &task_id).await;
                crate::metrics::global().long_call_deferred();
                tracing::debug!(upstream = %s.upstream().name, task = %task_id, tool, "call deferred");
                let r = shapes::still_running(&snap, &self.names, Some(&tool), schema_bound);
                self.answer(s, &id, r);
            }
        }
    }

    /// Where a task stands, for its results (a task that cannot be read now is `working`).
    async fn snapshot(&self, s: &impl Host, task_id: &str) -> Snapshot {
        s.hosted().snapshot(task_id).await.unwrap_or(Snapshot {
            task_id: task_id.into(),
            status: TaskStatus::Working,
            message: None,
            progress: None,
        })
    }

    /// A call of one of the gateway's tools (`which`: `wait`, `status` or `cancel`).
    /// What goes wrong with the call itself is a tool error the model can read.
    async fn serve_tool(&self, s: &impl Host, id: Id, which: &str, frame: &Message) -> Result<(), RpcError> {
        let result = match shapes::task_id_argument(frame.value().get("params")) {
            Err(why) => shapes::tool_error(why),
            // Another client's task is as unknown as one that never was.
            Ok(task) if !s.hosted().visible_or_failed(&task, s.owner()).await? => shapes::unknown_task(&task),
            Ok(task) => match which {
                "wait" => {
                    // A task of its own, as a deferrable call's wait (see `defer`); a cancel
                    // of the wait ends it (`cancelled`).
                    let Some(me) = s.weak().upgrade() else { return Ok(()) };
                    let limit = s.max_in_flight();
                    let waits =
                        self.window.lock().unwrap().values().filter(|w| matches!(w.what, Waiting::Wait(..))).count();
                    if waits >= limit {
                        return Err(RpcError::new(
                            GATEWAY_BUSY,
                            format!("too many waits in flight for this session (max_in_flight = {limit})"),
                        ));
                    }
                    let task: Arc<str> = task.into();
                    let stop = CancellationToken::new();
                    let Some(generation) = self.enter(&id, Waiting::Wait(task.clone(), stop.clone())) else {
                        return Err(id_in_use(&id));
                    };
                    let in_window = InWindow { session: s.weak(), id: id.clone(), generation };
                    tokio::spawn(async move {
                        let _in_window = in_window;
                        if let Some(calls) = me.long_calls() {
                            tokio::select! {
                                _ = stop.cancelled() => {}
                                _ = calls.wait(&*me, id, &task) => {}
                            }
                        }
                    });
                    return Ok(());
                }
                "status" => shapes::status(&self.snapshot(s, &task).await, &self.names),
                _ => match s.hosted().cancel_saying(&task, "cancelled by the client").await {
                    Ok(_) => shapes::cancelled(&task),
                    Err(e) => shapes::tool_error(e.message),
                },
            },
        };
        self.answer(s, &id, result);
        Ok(())
    }

    /// A result of the gateway's making as the answer to `id` (a 2026-07-28 client's names
    /// its type).
    fn answer(&self, s: &impl Host, id: &Id, mut result: Value) {
        if s.client_is_modern() {
            result["resultType"] = Value::String("complete".into());
        }
        s.to_client(Message::made(jsonrpc::result_response(id, result)), Route::Response(id.clone()));
    }

    /// The wait tool: the task's outcome as the call's response, if it ends within
    /// `wait_max`, else a result saying it still runs.
    async fn wait(&self, s: &impl Host, id: Id, task: &str) {
        let waiter = s.waiter();
        let hosted = s.hosted().clone();
        let waited =
            tokio::time::timeout(s.upstream().long_calls.wait_max, hosted.result(task, waiter.clone(), &id)).await;
        let resp = match waited {
            Ok(resp) => Some(resp),
            Err(_) => {
                hosted.stop_waiting(task, &waiter, &id);
                // Ended as the wait ran out: its result.
                hosted.result_if_ended(task, waiter, &id).await
            }
        };
        match resp {
            Some(resp) => s.answer(id, untagged(resp), Some(Method::ToolsCall)),
            None => {
                let running = shapes::still_running(&self.snapshot(s, task).await, &self.names, None, false);
                self.answer(s, &id, running);
            }
        }
    }
}

fn id_in_use(id: &Id) -> RpcError {
    RpcError::new(INVALID_REQUEST, format!("invalid request: id {id} is already in use by a request in flight"))
}

/// The next keep-alive check, or never.
async fn tick(ticks: &mut Option<tokio::time::Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// A task's outcome as the plain call's answer: without the related-task tag, which names
/// a task the client never asked for.
fn untagged(mut resp: Value) -> Value {
    crate::mcp::task_messages::untag_related(&mut resp, "result");
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_related_task_tag_goes_and_the_rest_stays() {
        let key = crate::mcp::task_messages::RELATED_TASK;
        let r = untagged(json!({"id": 1, "result": {"content": [], "_meta": {key: {"taskId": "t"}}}}));
        assert_eq!(r, json!({"id": 1, "result": {"content": []}}));
        let r = untagged(json!({"id": 1, "result": {"_meta": {key: {}, "x": 1}}}));
        assert_eq!(r, json!({"id": 1, "result": {"_meta": {"x": 1}}}));
        let e = json!({"id": 1, "error": {"code": -1, "message": "m"}});
        assert_eq!(untagged(e.clone()), e);
    }
}
