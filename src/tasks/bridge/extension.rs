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
//! error (the module doc of `task_dialects`). An answered input request is the dialect's
//! event: it resets `request_timeout`, and the task is looked at again at once. Each upstream
//! request is bounded by `request_timeout`; the rest is the one follow loop's (`super`).

use super::{BridgeLink, CANCEL_WAIT, Dialect, PlainCall, Step};
use crate::jsonrpc::{self, INTERNAL_ERROR, Id, Method, RpcError};
use crate::mcp::modern::ResultType;
use crate::mcp::task_dialects::{TASKS_UPDATE, caps, flow};
use crate::mcp::task_messages::{self, TaskView};
use crate::upstream::link::Link;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

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

    /// What one look at the task asked of the client (each by [`AskClient::ask`]) is all
    /// asked: a client asked in its request's answer gets those questions in one round.
    fn asked_all(&self) {}
}

/// A bridged task's input request, waiting for the client's answer (kept by the session,
/// by the id it gave the request).
pub struct InputWait {
    /// The task's key for it (`inputRequests`).
    pub key: String,
    /// Where the answer goes: the bridge that asked.
    pub answers: mpsc::Sender<(String, Value)>,
}

/// The most input requests one bridged task may make, whatever `max_in_flight` allows: each
/// has a place in the bridge's queue of answers.
pub const MAX_INPUTS_PER_TASK: usize = 1024;

/// One bridged call of an extension upstream.
pub struct ExtBridge<L: BridgeLink = Link> {
    pub plain: PlainCall<L>,
    /// The upstream's response to the call so far, if it already made a task of it (a server
    /// that sent one undeclared); `None`: the call is sent declaring the extension.
    pub created: Option<Value>,
    /// Input requests relayed per task, at most (keys are unique over a task's life); above
    /// [`MAX_INPUTS_PER_TASK`], that is the bound.
    pub max_input: usize,
    pub asker: Arc<dyn AskClient>,
    /// What every request of the bridge declares to the upstream: the client's capabilities
    /// as the link declares them, and the tasks extension.
    pub capabilities: Map<String, Value>,
}

/// The input requests of the task followed: the keys relayed to the client, and where its
/// answers come back.
pub struct Following {
    relayed: HashSet<String>,
    answers_tx: mpsc::Sender<(String, Value)>,
    answers: mpsc::Receiver<(String, Value)>,
}

impl<L: BridgeLink> ExtBridge<L> {
    pub async fn run(self) -> Ending {
        super::follow::run(self).await
    }

    fn max_inputs(&self) -> usize {
        self.max_input.clamp(1, MAX_INPUTS_PER_TASK)
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
                        tracing::info!(upstream = self.plain.link.upstream_name(), task = %task_id, "tasks/update refused: {}", r["error"]);
                        None
                    }
                    Err(e) => Some(e.response(Some(&self.plain.client.id))),
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
                Some(e.response(Some(&self.plain.client.id)))
            }
        }
    }

    /// A request about the task, declaring the extension, within `request_timeout`.
    async fn upstream(&self, method: Method, params: Value) -> Result<Value, RpcError> {
        let req = jsonrpc::request(&Id::Num(0), method, params);
        let request = self.plain.link.request_for_declaring(req, None, Some(self.capabilities.clone()));
        self.plain.within_request_timeout(method, request).await
    }
}

impl<L: BridgeLink> Dialect for ExtBridge<L> {
    type Link = L;
    type Following = Following;
    /// The client's answer to input request `key`.
    type Event = (String, Value);
    const TASKS: &'static str = "an upstream extension task";

    fn plain(&self) -> &PlainCall<L> {
        &self.plain
    }

    fn created(&mut self) -> Option<Value> {
        self.created.take()
    }

    fn create(&self) -> impl Future<Output = Result<Value, RpcError>> + Send {
        let plain = &self.plain;
        plain.link.request_for_declaring(
            plain.request.clone(),
            Some(plain.client.clone()),
            Some(self.capabilities.clone()),
        )
    }

    fn task_in(resp: &Value) -> Option<&Value> {
        task_result(resp)
    }

    fn poll_interval(task: TaskView<'_>) -> Option<Duration> {
        task.named_ext_poll_interval()
    }

    async fn get(&self, task_id: &str) -> Result<Value, RpcError> {
        super::task_of(self.upstream(Method::TasksGet, json!({"taskId": task_id})).await?)
    }

    fn start(&self, _task_id: &str) -> Following {
        // Room for every answer the task may have: the session hands them over without waiting.
        let (answers_tx, answers) = mpsc::channel(self.max_inputs());
        Following { relayed: HashSet::new(), answers_tx, answers }
    }

    async fn event(following: &mut Following) -> (String, Value) {
        // The sender is kept in `following`: the queue never closes while it is awaited.
        match following.answers.recv().await {
            Some(answer) => answer,
            None => std::future::pending().await,
        }
    }

    async fn on_event(&self, _: &mut Following, task_id: &str, (key, resp): (String, Value)) -> Step {
        match self.input_answered(task_id, &key, &resp).await {
            Some(answer) => Step::Abandon(answer),
            // The task moves on at once: look now rather than a poll later.
            None => Step::LookNow,
        }
    }

    /// Reads one snapshot of the task (a `CreateTaskResult` or a `tasks/get` result): the
    /// answer if it is terminal, else its input requests not relayed yet go to the client.
    async fn look(&self, following: &mut Following, task_id: &str, task: &Value) -> Step {
        let id = &self.plain.client.id;
        match TaskView::of(task).status_text() {
            Some("completed") => match task.get("result") {
                Some(r) if r.is_object() => Step::Answer(jsonrpc::result_response(id, r.clone())),
                _ => Step::Answer(
                    RpcError::new(INTERNAL_ERROR, "the upstream's completed task has no result").response(Some(id)),
                ),
            },
            Some("failed") => match task.get("error") {
                Some(e) if e.is_object() => Step::Answer(json!({"jsonrpc": "2.0", "id": id.to_value(), "error": e})),
                _ => Step::Answer(
                    RpcError::new(INTERNAL_ERROR, "the upstream's failed task has no error").response(Some(id)),
                ),
            },
            Some("cancelled") => Step::Answer(flow::cancelled_error(task_id).response(Some(id))),
            Some("working") => Step::Pending,
            Some("input_required") => {
                let Some(requests) = task.get("inputRequests").and_then(Value::as_object) else { return Step::Pending };
                for (key, req) in requests {
                    if following.relayed.contains(key) {
                        continue;
                    }
                    if following.relayed.len() >= self.max_inputs() {
                        let e = RpcError::new(
                            INTERNAL_ERROR,
                            format!("the upstream task asked for more than {} inputs", self.max_inputs()),
                        );
                        return Step::Abandon(e.response(Some(id)));
                    }
                    following.relayed.insert(key.clone());
                    let asked = flow::input_request_to_core(task_id, req)
                        .map_err(|e| {
                            RpcError::new(INTERNAL_ERROR, format!("the upstream task's input request {key:?}: {e}"))
                        })
                        .and_then(|mut msg| {
                            // The task is the gateway's, not the client's.
                            task_messages::untag_related(&mut msg, "params");
                            self.asker.ask(id, msg, key.clone(), following.answers_tx.clone())
                        });
                    if let Err(e) = asked {
                        // The task cannot proceed without it.
                        return Step::Abandon(e.response(Some(id)));
                    }
                }
                self.asker.asked_all();
                Step::Pending
            }
            other => Step::Answer(
                RpcError::new(INTERNAL_ERROR, format!("the upstream's task has an unknown status {other:?}"))
                    .response(Some(id)),
            ),
        }
    }

    async fn cancel_task(&self, task_id: &str) {
        let cancel = self.upstream(Method::TasksCancel, json!({"taskId": task_id}));
        let _ = tokio::time::timeout(CANCEL_WAIT, cancel).await;
    }

    /// Its id.
    fn for_client(&self, mut resp: Value) -> Value {
        jsonrpc::set_id(&mut resp, &self.plain.client.id);
        resp
    }
}

/// Whether a response refuses a plain call because the client did not declare the tasks
/// extension (then it is retried declaring it, and bridged).
pub fn wants_extension(resp: &Value) -> bool {
    resp.get("error").is_some_and(caps::requires_extension)
}

/// Whether a response is an extension task (`resultType: "task"`).
pub fn is_task(resp: &Value) -> bool {
    task_result(resp).is_some()
}

/// The result of a response that is an extension task.
fn task_result(resp: &Value) -> Option<&Value> {
    resp.get("result").filter(|r| ResultType::of(r) == Ok(ResultType::Task))
}
