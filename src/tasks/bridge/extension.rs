//! Bridged extension tasks: a legacy client's blocking `tools/call`, in front of a 2026-07-28
//! upstream of the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) that will
//! serve the call only as a task.
//!
//! The gateway sends the call without the extension (the link's own capabilities); an
//! upstream that answers -32021 naming the extension gets the same call once more, this one
//! request declaring it ([`ExtBridge::capabilities`], per request: `Link::request_for_declaring`). A `resultType: "task"` answer is then
//! followed by `tasks/get` (declaring the extension too: the server answers -32021 otherwise)
//! every `pollIntervalMs`, clamped as the core bridge's poll interval is and re-read from
//! every answer (it may change), until the task is terminal. The client's original request
//! is answered with the inline `result`, or the inline `error` as its JSON-RPC error (as a
//! blocking call would have been); a cancelled task answers the error of
//! [`flow::cancelled_error`].
//!
//! Around that: a new `statusMessage` becomes `notifications/progress` under the client's
//! token, as in the core bridge (the extension has no progress for tasks); each of the
//! task's `inputRequests` reaches the client once, as an ordinary server→client request of
//! the original call (no related-task: the task is the gateway's), through [`AskClient`], and
//! its answer goes back as `tasks/update {taskId, inputResponses: {key: result}}`; an error
//! answer has no counterpart there, so the task is cancelled and the call answered with that
//! error (the module doc of `task_dialects`). The client's `notifications/cancelled`, and the
//! end of its session, cancel the task upstream (`tasks/cancel`). `request_timeout` (reset
//! by status changes and input answers) and `max_request_time` are one [`Deadlines`] entry,
//! as for the core bridge; each upstream request is bounded by `request_timeout`.

use super::{StatusTracker, Timer, follow_subscribed};
use crate::clock::{Deadlines, Expiry};
use crate::jsonrpc::{self, INTERNAL_ERROR, Id, ProgressToken, REQUEST_TIMEOUT, RpcError};
use crate::mcp::modern::ResultType;
use crate::mcp::task_dialects::{TASKS_UPDATE, caps, flow};
use crate::mcp::tasks::{self as mcp_tasks, TaskView};
use crate::upstream::link::{ClientRef, Link};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Ending;

/// How a bridged extension task asks the client for input: the session, which sends the
/// client a request of its own and routes the answer back here.
pub trait AskClient: Send + Sync + 'static {
    /// Sends `request` (a JSON-RPC request without an id) to the client as a request made
    /// while serving client request `client_id`. The client's whole response comes back on
    /// `answers` with `key`. `Err`: it cannot be asked (the client lacks the capability, its
    /// version has no such request, too many requests wait for it).
    fn ask(
        &self,
        client_id: &Id,
        request: Value,
        key: String,
        answers: mpsc::Sender<(String, Value)>,
    ) -> Result<(), RpcError>;
}

/// A bridged task's input request, waiting for the client's answer (kept by the session,
/// by the id it gave the request).
pub struct InputWait {
    /// The task's key for it (`inputRequests`).
    pub key: String,
    /// Where the answer goes: the bridge that asked.
    pub answers: mpsc::Sender<(String, Value)>,
}

/// One bridged call of an extension upstream.
pub struct ExtBridge {
    pub link: Arc<Link>,
    /// The client's plain call, by its session and id.
    pub client: ClientRef,
    /// The client's plain `tools/call`.
    pub call: Value,
    /// The upstream's response to the call so far, if it already made a task of it (a server
    /// that sent one undeclared); `None`: the call is sent declaring the extension.
    pub created: Option<Value>,
    pub request_timeout: Duration,
    pub max_request_time: Duration,
    /// Input requests relayed per task, at most (keys are unique over a task's life).
    pub max_input: usize,
    /// Fired when the client cancels or its session ends.
    pub cancel: CancellationToken,
    pub asker: Arc<dyn AskClient>,
    /// What every request of the bridge declares to the upstream: the client's capabilities
    /// as the link declares them, and the tasks extension.
    pub capabilities: Map<String, Value>,
}

/// What one look at the task decided.
enum Step {
    /// Not over: poll again.
    Pending,
    /// The client's answer (result or error, with the client's id).
    Done(Value),
}

impl ExtBridge {
    pub async fn run(mut self) -> Ending {
        let token = ProgressToken::of_request(&self.call);
        let started = Instant::now();
        let deadline = Deadlines::new(self.request_timeout, self.max_request_time);
        deadline.insert_until(Timer::Call, started + self.max_request_time);

        let created = match self.created.take() {
            Some(resp) => resp,
            None => {
                let create = self.link.request_for_declaring(
                    self.call.clone(),
                    Some(self.client.clone()),
                    Some(self.capabilities.clone()),
                );
                tokio::pin!(create);
                let r = tokio::select! {
                    r = &mut create => r,
                    _ = self.cancel.cancelled() => {
                        self.cancel_while_creating(create).await;
                        return Ending::Cancelled;
                    }
                    Some(_) = deadline.expired() => {
                        self.cancel_while_creating(create).await;
                        return self.timed_out("creating the task");
                    }
                };
                match r {
                    Ok(resp) => resp,
                    Err(e) => return Ending::Answer(e.response(Some(&self.client.id))),
                }
            }
        };
        let Some(task) = created.get("result").filter(|r| ResultType::of(r) == Ok(ResultType::Task)).cloned() else {
            // An error, or a server that ran the call plainly after all: that is the answer.
            return Ending::Answer(self.for_client(created));
        };
        let Some(task_id) = TaskView::of(&task).id().map(str::to_string) else {
            let e = RpcError::new(INTERNAL_ERROR, "the upstream's CreateTaskResult has no taskId");
            return Ending::Answer(e.response(Some(&self.client.id)));
        };
        tracing::debug!(upstream = self.link.upstream_name(), task = %task_id, "bridging a plain call through an upstream extension task");

        deadline.insert_since(Timer::Call, started);
        let token = token.as_ref();
        let statuses = StatusTracker::default();
        let ending =
            follow_subscribed(&*self.link, &self.client, &task_id, token, statuses, async |events, statuses| {
                self.follow(&task_id, task, events, token, &deadline, statuses).await
            })
            .await;
        if matches!(ending, Ending::Cancelled) || self.cancel.is_cancelled() {
            self.cancel_task(&task_id).await;
        }
        ending
    }

    async fn follow(
        &self,
        task_id: &str,
        mut task: Value,
        events: &mut mpsc::Receiver<super::BridgeEvent>,
        token: Option<&ProgressToken>,
        deadline: &Deadlines<Timer>,
        statuses: &mut StatusTracker,
    ) -> Ending {
        let (answers_tx, mut answers) = mpsc::channel::<(String, Value)>(16);
        let mut relayed: HashSet<String> = HashSet::new();
        let mut events_open = true;
        loop {
            if statuses.observe(&task) {
                deadline.touch(&Timer::Call);
            }
            match self.look(task_id, &task, &mut relayed, &answers_tx) {
                Step::Done(answer) => return Ending::Answer(answer),
                Step::Pending => {}
            }
            deadline.insert_until(Timer::Poll, Instant::now() + TaskView::of(&task).ext_poll_interval());
            // Until the poll is due, what else happens is handled here.
            loop {
                statuses.arm(deadline);
                tokio::select! {
                    Some((key, resp)) = answers.recv() => {
                        deadline.touch(&Timer::Call);
                        if let Some(answer) = self.input_answered(task_id, &key, &resp).await {
                            self.cancel.cancel();
                            return Ending::Answer(answer);
                        }
                        // The task moves on at once: look now rather than a poll later.
                        break;
                    }
                    ev = events.recv(), if events_open => match ev {
                        // The upstream reports progress itself: its values are the truth.
                        Some(super::BridgeEvent::Progress) => {
                            deadline.touch(&Timer::Call);
                            statuses.upstream_reports_progress();
                        }
                        Some(super::BridgeEvent::Status(_)) => deadline.touch(&Timer::Call),
                        None => events_open = false,
                    },
                    _ = self.cancel.cancelled() => return Ending::Cancelled,
                    Some((timer, expiry)) = deadline.expired() => match timer {
                        Timer::Poll => break,
                        Timer::Status => statuses.send_due(&*self.link, task_id, token),
                        Timer::Call => {
                            self.cancel.cancel();
                            return self.timed_out(match expiry {
                                Expiry::Idle => "no status change within request_timeout",
                                Expiry::Lifetime => "no result within max_request_time",
                            });
                        }
                    },
                }
            }
            let get = self.upstream(crate::jsonrpc::Method::TasksGet, json!({"taskId": task_id}));
            tokio::pin!(get);
            let polled = tokio::select! {
                r = &mut get => r,
                _ = self.cancel.cancelled() => return Ending::Cancelled,
            };
            let lost =
                |e: RpcError| RpcError::new(e.code, format!("the upstream lost the bridged task: {}", e.message));
            task = match polled.and_then(|resp| crate::jsonrpc::into_outcome(resp, "").map_err(lost)) {
                Ok(task) => task,
                Err(e) => return Ending::Answer(e.response(Some(&self.client.id))),
            };
        }
    }

    /// Reads one snapshot of the task (a `CreateTaskResult` or a `tasks/get` result): the
    /// answer if it is terminal, else its input requests not relayed yet go to the client.
    fn look(
        &self,
        task_id: &str,
        task: &Value,
        relayed: &mut HashSet<String>,
        answers: &mpsc::Sender<(String, Value)>,
    ) -> Step {
        let id = &self.client.id;
        match TaskView::of(task).status_text() {
            Some("completed") => match task.get("result") {
                Some(r) if r.is_object() => Step::Done(jsonrpc::result_response(id, r.clone())),
                _ => Step::Done(
                    RpcError::new(INTERNAL_ERROR, "the upstream's completed task has no result").response(Some(id)),
                ),
            },
            Some("failed") => match task.get("error") {
                Some(e) if e.is_object() => Step::Done(json!({"jsonrpc": "2.0", "id": id.to_value(), "error": e})),
                _ => Step::Done(
                    RpcError::new(INTERNAL_ERROR, "the upstream's failed task has no error").response(Some(id)),
                ),
            },
            Some("cancelled") => Step::Done(flow::cancelled_error(task_id).response(Some(id))),
            Some("working") => Step::Pending,
            Some("input_required") => {
                let Some(requests) = task.get("inputRequests").and_then(Value::as_object) else { return Step::Pending };
                for (key, req) in requests {
                    if relayed.contains(key) {
                        continue;
                    }
                    if relayed.len() >= self.max_input {
                        let e = RpcError::new(
                            INTERNAL_ERROR,
                            format!("the upstream task asked for more than {} inputs", self.max_input),
                        );
                        self.cancel.cancel();
                        return Step::Done(e.response(Some(id)));
                    }
                    relayed.insert(key.clone());
                    let asked = flow::input_request_to_core(task_id, req)
                        .map_err(|e| {
                            RpcError::new(INTERNAL_ERROR, format!("the upstream task's input request {key:?}: {e}"))
                        })
                        .and_then(|mut msg| {
                            // The task is the gateway's, not the client's.
                            mcp_tasks::untag_related(&mut msg, "params");
                            self.asker.ask(id, msg, key.clone(), answers.clone())
                        });
                    if let Err(e) = asked {
                        // The task cannot proceed without it.
                        self.cancel.cancel();
                        return Step::Done(e.response(Some(id)));
                    }
                }
                Step::Pending
            }
            other => Step::Done(
                RpcError::new(INTERNAL_ERROR, format!("the upstream's task has an unknown status {other:?}"))
                    .response(Some(id)),
            ),
        }
    }

    /// The client answered input request `key`: a result goes up as `tasks/update`; an
    /// error (none can go up) is the call's answer, and the task is cancelled.
    async fn input_answered(&self, task_id: &str, key: &str, resp: &Value) -> Option<Value> {
        match flow::input_answer_to_ext(resp) {
            Ok(result) => {
                let mut responses = Map::new();
                responses.insert(key.to_string(), result);
                let params = flow::tasks_update_params(task_id, responses);
                match self.upstream(TASKS_UPDATE, params).await {
                    Ok(r) if r.get("error").is_none() => None,
                    Ok(r) => {
                        tracing::info!(upstream = self.link.upstream_name(), task = %task_id, "tasks/update refused: {}", r["error"]);
                        None
                    }
                    Err(e) => Some(e.response(Some(&self.client.id))),
                }
            }
            Err(_) => {
                let answered = RpcError::from_object(resp.get("error"), "an error");
                let (code, why) = (answered.code, answered.message);
                let e = RpcError::new(
                    code,
                    format!(
                        "the client answered the task's input request with an error ({why}); the task was cancelled"
                    ),
                );
                Some(e.response(Some(&self.client.id)))
            }
        }
    }

    /// A request about the task, declaring the extension, within `request_timeout`.
    async fn upstream(&self, method: crate::jsonrpc::Method, params: Value) -> Result<Value, RpcError> {
        let req = jsonrpc::request(&Id::Num(0), method, params);
        match tokio::time::timeout(
            self.request_timeout,
            self.link.request_for_declaring(req, None, Some(self.capabilities.clone())),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(RpcError::new(
                REQUEST_TIMEOUT,
                format!("request timed out: upstream '{}' did not answer {method}", self.link.upstream_name()),
            )),
        }
    }

    /// Cancelled before the task was created: the upstream may create it all the same, so
    /// its answer is awaited (within `request_timeout`) and the task cancelled.
    async fn cancel_while_creating(&self, create: std::pin::Pin<&mut impl Future<Output = Result<Value, RpcError>>>) {
        if let Ok(Ok(resp)) = tokio::time::timeout(self.request_timeout, create).await
            && let Some(r) = resp.get("result").filter(|r| ResultType::of(r) == Ok(ResultType::Task))
            && let Some(task_id) = TaskView::of(r).id()
        {
            self.cancel_task(task_id).await;
        }
    }

    async fn cancel_task(&self, task_id: &str) {
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            self.upstream(crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id})),
        )
        .await;
    }

    /// The upstream's response as the answer to the client's own request: its id.
    fn for_client(&self, mut resp: Value) -> Value {
        jsonrpc::set_id(&mut resp, &self.client.id);
        resp
    }

    fn timed_out(&self, why: &str) -> Ending {
        let e = RpcError::new(
            REQUEST_TIMEOUT,
            format!("request timed out: upstream '{}' task: {why}", self.link.upstream_name()),
        );
        Ending::Answer(e.response(Some(&self.client.id)))
    }
}

/// Whether a response refuses a plain call because the client did not declare the tasks
/// extension (then it is retried declaring it, and bridged).
pub fn wants_extension(resp: &Value) -> bool {
    resp.get("error").is_some_and(caps::requires_extension)
}

/// Whether a response is an extension task (`resultType: "task"`).
pub fn is_task(resp: &Value) -> bool {
    resp.get("result").is_some_and(|r| ResultType::of(r) == Ok(ResultType::Task))
}
