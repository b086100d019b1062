//! Bridged tasks: a plain `tools/call` of a tool the upstream runs only as a task goes
//! upstream as a task; the gateway follows the task to its end and answers the client's
//! original request with exactly the final result or error, as a blocking call would have
//! been answered.
//!
//! One loop follows every bridged task ([`follow`]); what differs between the two task dialects
//! is a [`Dialect`]: how the call is made a task, what one look at the task decides, and the
//! dialect's own event beside the clock.
//! - [`core_tasks`]: a 2025-11-25 task. A blocking `tasks/result` carries the server's input
//!   requests; `tasks/get` at the task's poll interval is the fallback.
//! - [`extension`]: a task of the tasks extension. `tasks/get` at its poll interval; its
//!   input requests are asked of the client and answered by `tasks/update`.
//!
//! Both: the task's status notifications and progress reach the call through the link
//! ([`TaskFollower`]); a new status message becomes progress under the client's token
//! ([`statuses`]). A call's times are kept by the one mechanism ([`Deadlines`]): a clock
//! of the call's own, keyed by what it times ([`Timer`]), awaited in the loop's `select!`,
//! so that what is due is handled where the call's state is and the link, which only routes,
//! knows nothing of bridges. `request_timeout` (reset by the task's progress, status changes
//! and the dialect's events) and `max_request_time` end the call as any request's; the next
//! `tasks/get` at the poll interval, and the moment a status message becomes progress, are
//! its schedules. The client's cancel, and the end of its session, cancel the task upstream.

use crate::jsonrpc::{self, ProgressToken, RpcError};
use crate::mcp::task_messages::TaskView;
use crate::upstream::link::{ClientRef, Link, TaskFollower};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub mod core_tasks;
pub mod extension;
mod follow;
mod statuses;

/// What a bridged call's clock (`Deadlines<Timer>`, one per call) times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Timer {
    /// The call: `request_timeout` of silence, `max_request_time` in all.
    Call,
    /// The next `tasks/get`.
    Poll,
    /// The first status message due to become progress.
    Status,
}

/// The client's plain call being bridged, and its bounds: what a bridge of either dialect has.
pub struct PlainCall<L: BridgeLink = Link> {
    pub link: Arc<L>,
    /// The client's plain call, by its session and id.
    pub client: ClientRef,
    /// The client's plain `tools/call`.
    pub request: Value,
    pub request_timeout: Duration,
    pub max_request_time: Duration,
    /// Fired when the client cancels or its session ends.
    pub cancel: CancellationToken,
}

impl<L: BridgeLink> PlainCall<L> {
    /// `request` within `request_timeout` (-32001 naming `method` when it is not answered).
    async fn within_request_timeout(
        &self,
        method: jsonrpc::Method,
        request: impl Future<Output = Result<Value, RpcError>>,
    ) -> Result<Value, RpcError> {
        tokio::time::timeout(self.request_timeout, request).await.unwrap_or_else(|_| {
            Err(RpcError::new(
                jsonrpc::REQUEST_TIMEOUT,
                format!("request timed out: upstream '{}' did not answer {method}", self.link.upstream_name()),
            ))
        })
    }
}

/// How long cancelling a bridged call's task waits for the upstream's ack.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// A `tasks/get` response as the task it shows; an error, as the bridged task lost.
fn task_of(resp: Value) -> Result<Value, RpcError> {
    jsonrpc::into_outcome(resp, "")
        .map_err(|e| RpcError::new(e.code, format!("the upstream lost the bridged task: {}", e.message)))
}

/// What a bridged call uses of its link: a [`Link`], or in the unit tests an upstream
/// scripted in memory, so that its timeouts are tested on tokio's paused clock (which does
/// not wait for real I/O: a gateway over sockets cannot be timed on it).
pub trait BridgeLink: Send + Sync + 'static {
    fn upstream_name(&self) -> &str;
    /// As [`Link::request_for`].
    fn request_for(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;
    /// As [`Link::request_for_declaring`].
    fn request_for_declaring(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
        capabilities: Option<serde_json::Map<String, Value>>,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;
    /// As [`Link::request`].
    fn request(
        &self,
        method: crate::jsonrpc::Method,
        params: Value,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send;
    /// As [`Link::start_bridge`].
    fn start_bridge(
        &self,
        task_id: &str,
        client: &ClientRef,
        token: Option<&ProgressToken>,
        follower: Arc<dyn TaskFollower>,
    );
    /// As [`Link::end_bridge`].
    fn end_bridge(&self, task_id: &str);
    /// As [`Link::synthesize_progress`].
    fn synthesize_progress(&self, task_id: &str, message: &str);
}

impl BridgeLink for Link {
    fn upstream_name(&self) -> &str {
        Link::upstream_name(self)
    }

    fn request_for(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send {
        Link::request_for(self, msg, on_behalf_of)
    }

    fn request_for_declaring(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
        capabilities: Option<serde_json::Map<String, Value>>,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send {
        Link::request_for_declaring(self, msg, on_behalf_of, capabilities)
    }

    fn request(
        &self,
        method: crate::jsonrpc::Method,
        params: Value,
    ) -> impl Future<Output = Result<Value, RpcError>> + Send {
        Link::request(self, method, params)
    }

    fn start_bridge(
        &self,
        task_id: &str,
        client: &ClientRef,
        token: Option<&ProgressToken>,
        follower: Arc<dyn TaskFollower>,
    ) {
        Link::start_bridge(self, task_id, client, token, follower)
    }

    fn end_bridge(&self, task_id: &str) {
        Link::end_bridge(self, task_id)
    }

    fn synthesize_progress(&self, task_id: &str, message: &str) {
        Link::synthesize_progress(self, task_id, message)
    }
}

/// How a bridged call ended.
pub enum Ending {
    /// The response for the client (result or error, carrying the client's id).
    Answer(Value),
    /// The client cancelled: no response is due.
    Cancelled,
}

/// What a look at the task, or the dialect's own event, decided.
enum Step {
    /// The task goes on: the next `tasks/get` at its interval.
    Pending,
    /// The task has moved on: look again now rather than at the next poll.
    LookNow,
    /// The client's answer (result or error, with the client's id).
    Answer(Value),
    /// The client's answer; the task cannot go on and is cancelled upstream.
    Abandon(Value),
}

/// What the one follow loop ([`follow`]) asks of a bridged call's task dialect.
trait Dialect: Send + Sync {
    type Link: BridgeLink;
    /// What the dialect keeps while it follows one task.
    type Following: Send;
    /// The dialect's own event, awaited beside the task's notifications and the clock.
    type Event: Send;
    /// For the logs: which kind of task the call is bridged through.
    const TASKS: &'static str;

    fn plain(&self) -> &PlainCall<Self::Link>;
    /// The upstream's answer to the call if the gateway already has it (a task the server
    /// made unasked); else the call is sent by [`Dialect::create`].
    fn created(&mut self) -> Option<Value> {
        None
    }
    /// Sends the call so that the upstream makes a task of it.
    fn create(&self) -> impl Future<Output = Result<Value, RpcError>> + Send;
    /// The task in the upstream's answer to the call; `None`: that answer is the client's.
    fn task_in(resp: &Value) -> Option<&Value>;
    /// How long between two `tasks/get`, if a snapshot of the task names it.
    fn poll_interval(task: TaskView<'_>) -> Option<Duration>;
    /// The task's current state, by `tasks/get` as the dialect sends it.
    fn get(&self, task_id: &str) -> impl Future<Output = Result<Value, RpcError>> + Send;
    fn start(&self, task_id: &str) -> Self::Following;
    /// The dialect's next event: cancel-safe, and pending for ever once none can come.
    fn event(following: &mut Self::Following) -> impl Future<Output = Self::Event> + Send;
    fn on_event(
        &self,
        following: &mut Self::Following,
        task_id: &str,
        event: Self::Event,
    ) -> impl Future<Output = Step> + Send;
    /// Reads one snapshot of the task: at its creation, or a `tasks/get` answer.
    fn look(&self, following: &mut Self::Following, task_id: &str, task: &Value) -> impl Future<Output = Step> + Send;
    /// Cancels the task upstream (bounded in time; its answer does not matter).
    fn cancel_task(&self, task_id: &str) -> impl Future<Output = ()> + Send;
    /// The upstream's response as the answer to the client's own request.
    fn for_client(&self, resp: Value) -> Value;
}

#[cfg(test)]
mod extension_timing;
#[cfg(test)]
mod timeouts;
