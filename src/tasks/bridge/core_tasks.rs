//! The core dialect of a bridged call: a 2025-11-25 task. The call goes upstream
//! task-augmented; a blocking `tasks/result` (which carries the server's input requests to
//! the client) is the dialect's event, and `tasks/get` at the task's `pollInterval` (re-read
//! from each answer) is the fallback for a server that does not block in `tasks/result`:
//! once the task has ended, its result is fetched.

use super::{BridgeLink, CANCEL_WAIT, Dialect, Ending, PlainCall, Step};
use crate::jsonrpc::{self, Id, Method, RpcError};
use crate::mcp::task_messages::{RELATED_TASK, TaskView};
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// One bridged call through a 2025-11-25 task, over its link (a [`crate::upstream::link::Link`]).
pub struct Bridge<L: BridgeLink = crate::upstream::link::Link> {
    pub plain: PlainCall<L>,
    /// Retention asked of the upstream for the task.
    pub ttl: Duration,
}

/// A blocking `tasks/result` in flight.
type Waiting = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send>>;

/// The blocking `tasks/result` of the task followed while it is in flight; `None` once the
/// server answered it early with an error while the task went on: then the polls fetch the
/// result when the task ends. (Any other answer ends the call.)
pub struct Following(Option<Waiting>);

impl<L: BridgeLink> Bridge<L> {
    pub async fn run(self) -> Ending {
        super::follow::run(self).await
    }

    /// `tasks/result` for the task, on behalf of the client (its input requests reach it).
    fn result_request(&self, task_id: &str) -> impl Future<Output = Result<Value, RpcError>> + Send + 'static {
        let req = jsonrpc::request(&Id::Num(0), Method::TasksResult, json!({"taskId": task_id}));
        let (link, client) = (self.plain.link.clone(), self.plain.client.clone());
        async move { link.request_for(req, Some(client)).await }
    }

    /// The answer for the client to a `tasks/result`.
    fn answer(&self, result: Result<Value, RpcError>) -> Step {
        match result {
            Ok(resp) => Step::Answer(self.for_client(resp)),
            Err(e) => Step::Answer(e.response(Some(&self.plain.client.id))),
        }
    }
}

impl<L: BridgeLink> Dialect for Bridge<L> {
    type Link = L;
    type Following = Following;
    type Event = Result<Value, RpcError>;
    const TASKS: &'static str = "an upstream task";

    fn plain(&self) -> &PlainCall<L> {
        &self.plain
    }

    fn create(&self) -> impl Future<Output = Result<Value, RpcError>> + Send {
        let mut call = self.plain.request.clone();
        call["params"]["task"] = json!({"ttl": self.ttl.as_millis() as u64});
        self.plain.link.request_for(call, Some(self.plain.client.clone()))
    }

    fn task_in(resp: &Value) -> Option<&Value> {
        resp.pointer("/result/task")
    }

    fn poll_interval(task: TaskView<'_>) -> Option<Duration> {
        task.named_poll_interval()
    }

    async fn get(&self, task_id: &str) -> Result<Value, RpcError> {
        super::task_of(self.plain.link.request(Method::TasksGet, json!({"taskId": task_id})).await?)
    }

    fn start(&self, task_id: &str) -> Following {
        Following(Some(Box::pin(self.result_request(task_id))))
    }

    async fn event(following: &mut Following) -> Result<Value, RpcError> {
        match following.0.as_mut() {
            Some(waiting) => {
                let r = waiting.await;
                following.0 = None;
                r
            }
            None => std::future::pending().await,
        }
    }

    async fn on_event(&self, _: &mut Following, task_id: &str, answered: Result<Value, RpcError>) -> Step {
        match answered {
            Ok(resp) if resp.get("result").is_none() => {
                // The task's own outcome if it has ended, else a server that does not block
                // in tasks/result: then the polls go on, and fetch the result at the end.
                match self.get(task_id).await {
                    Ok(task) if !TaskView::of(&task).is_terminal() => Step::Pending,
                    _ => Step::Answer(self.for_client(resp)),
                }
            }
            answered => self.answer(answered),
        }
    }

    async fn look(&self, following: &mut Following, task_id: &str, task: &Value) -> Step {
        if following.0.is_some() || !TaskView::of(task).is_terminal() {
            return Step::Pending;
        }
        // The fallback: the task ended, fetch its result now.
        let result = self.plain.within_request_timeout(Method::TasksResult, self.result_request(task_id));
        self.answer(result.await)
    }

    async fn cancel_task(&self, task_id: &str) {
        let req = jsonrpc::request(&Id::Num(0), Method::TasksCancel, json!({"taskId": task_id}));
        let _ = tokio::time::timeout(CANCEL_WAIT, self.plain.link.request_for(req, None)).await;
    }

    /// Its id, and no task `_meta` (the client made a plain call).
    fn for_client(&self, mut resp: Value) -> Value {
        jsonrpc::set_id(&mut resp, &self.plain.client.id);
        if let Some(meta) = resp.pointer_mut("/result/_meta").and_then(Value::as_object_mut) {
            meta.remove(RELATED_TASK);
            if meta.is_empty() {
                resp["result"].as_object_mut().expect("result is an object").remove("_meta");
            }
        }
        resp
    }
}
