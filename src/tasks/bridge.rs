//! Bridged tasks: a plain `tools/call` of a tool the upstream requires as a task goes
//! upstream task-augmented; the gateway follows the task to its end (status notifications,
//! a blocking `tasks/result` that carries the server's input requests, `tasks/get` at the
//! server's poll interval as the fallback) and answers the client's original request with
//! exactly the final result or error.
//!
//! A call's times are kept by the one mechanism ([`Deadlines`]): a clock of the call's own,
//! keyed by what it times ([`Timer`]), awaited in the call's own `select!`, so that what is
//! due is handled where the call's state is and the link, which only routes, knows nothing
//! of bridges. `request_timeout` (reset by the task's progress and status changes) and
//! `max_request_time` end the call as any request's; the next `tasks/get` at the poll
//! interval, and the moment a status message becomes progress, are its schedules.

use crate::clock::{Deadlines, Expiry};
use crate::jsonrpc::{self, Id, ProgressToken, REQUEST_TIMEOUT, RpcError};
use crate::mcp::tasks::{RELATED_TASK, TaskView};
use crate::upstream::link::{ClientRef, Link, TaskFollower};
use futures_util::future::OptionFuture;
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// One bridged call, over its link (a [`Link`]; see [`BridgeLink`]).
pub struct Bridge<L: BridgeLink = Link> {
    pub link: Arc<L>,
    /// The client's plain call, by its session and id.
    pub client: ClientRef,
    /// The client's plain `tools/call`.
    pub call: Value,
    /// Retention asked of the upstream for the task.
    pub ttl: Duration,
    pub request_timeout: Duration,
    pub max_request_time: Duration,
    /// Fired when the client cancels or its session ends.
    pub cancel: CancellationToken,
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

/// A `tasks/get` poll in flight.
type Polling<'a> = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + 'a>>;

/// What a bridged call hears about its upstream task, from the link.
#[derive(Debug)]
enum BridgeEvent {
    /// A `notifications/tasks/status` for the task.
    Status(Value),
    /// Progress arrived under the call's token.
    Progress,
}

/// The bridged call's subscription to its link: events queue for the call's own task (a full
/// queue drops them; the call polls anyway). The queue closes when the link lets go.
struct Follower(mpsc::Sender<BridgeEvent>);

impl TaskFollower for Follower {
    fn status(&self, note: Value) {
        let _ = self.0.try_send(BridgeEvent::Status(note));
    }

    fn progress(&self) {
        let _ = self.0.try_send(BridgeEvent::Progress);
    }
}

/// How a bridged call ended.
pub enum Ending {
    /// The response for the client (result or error, carrying the client's id).
    Answer(Value),
    /// The client cancelled: no response is due.
    Cancelled,
}

/// A status message waits this long before it becomes progress: an upstream that reports
/// progress of its own does so by then, and its real values are passed on instead.
const STATUS_AS_PROGRESS_DELAY: Duration = Duration::from_millis(200);

impl<L: BridgeLink> Bridge<L> {
    pub async fn run(self) -> Ending {
        let token = ProgressToken::of_request(&self.call);
        let mut call = self.call.clone();
        call["params"]["task"] = json!({"ttl": self.ttl.as_millis() as u64});
        let started = Instant::now();
        // One entry, the call: while its task is created only max_request_time applies (a
        // server may run the call plainly after all, its progress unseen by the bridge);
        // request_timeout too once the task is followed.
        let deadline = Deadlines::new(self.request_timeout, self.max_request_time);
        deadline.insert_until(Timer::Call, started + self.max_request_time);

        let create = self.link.request_for(call, Some(self.client.clone()));
        tokio::pin!(create);
        let created = tokio::select! {
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
        let created = match created {
            Ok(resp) => resp,
            Err(e) => return Ending::Answer(e.response(Some(&self.client.id))),
        };
        let Some(task) = created.pointer("/result/task").cloned() else {
            // An error, or a server that ran the call plainly after all: that is the answer.
            return Ending::Answer(self.for_client(created));
        };
        let Some(task_id) = TaskView::of(&task).id().map(str::to_string) else {
            let e = RpcError::new(jsonrpc::INTERNAL_ERROR, "the upstream's CreateTaskResult has no taskId");
            return Ending::Answer(e.response(Some(&self.client.id)));
        };
        let poll = TaskView::of(&task).poll_interval();
        tracing::debug!(upstream = self.link.upstream_name(), task = %task_id, "bridging a plain call through an upstream task");

        let mut statuses = StatusTracker::default();
        // The task's first status message is already in the CreateTaskResult.
        statuses.observe(&task);
        deadline.insert_since(Timer::Call, started);
        let token = token.as_ref();
        let ending =
            follow_subscribed(&*self.link, &self.client, &task_id, token, statuses, async |events, statuses| {
                self.follow(&task_id, events, poll, token, &deadline, statuses).await
            })
            .await;
        if matches!(ending, Ending::Cancelled) || self.cancel.is_cancelled() {
            self.cancel_task(&task_id).await;
        }
        ending
    }

    /// Cancelled before the task was created: the upstream may create it all the same, so
    /// its answer is awaited (within `request_timeout`) and the task cancelled. A call that
    /// is not answered by then is cancelled as a request.
    async fn cancel_while_creating(
        &self,
        create: std::pin::Pin<&mut impl std::future::Future<Output = Result<Value, RpcError>>>,
    ) {
        if let Ok(Ok(resp)) = tokio::time::timeout(self.request_timeout, create).await
            && let Some(task_id) = resp.pointer("/result/task/taskId").and_then(Value::as_str)
        {
            self.cancel_task(task_id).await;
        }
    }

    async fn cancel_task(&self, task_id: &str) {
        let req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id}));
        let _ = tokio::time::timeout(Duration::from_secs(5), self.link.request_for(req, None)).await;
    }

    async fn follow(
        &self,
        task_id: &str,
        events: &mut mpsc::Receiver<BridgeEvent>,
        poll: Duration,
        token: Option<&ProgressToken>,
        deadline: &Deadlines<Timer>,
        statuses: &mut StatusTracker,
    ) -> Ending {
        let result_req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksResult, json!({"taskId": task_id}));
        let result = self.link.request_for(result_req, Some(self.client.clone()));
        tokio::pin!(result);
        let mut result_done = false;
        deadline.insert_until(Timer::Poll, Instant::now() + poll);
        // The poll in flight: it runs beside the rest, so that status and progress while it
        // waits reset `request_timeout` as they come, and the deadlines still apply.
        let mut polling: Option<Polling<'_>> = None;
        // Closed when the link dies; then only the poll (which fails) and the timers remain.
        let mut events_open = true;
        loop {
            statuses.arm(deadline);
            tokio::select! {
                r = &mut result, if !result_done => {
                    match r {
                        Ok(resp) if resp.get("result").is_some() => return Ending::Answer(self.for_client(resp)),
                        Ok(resp) => {
                            // An error: the task's own outcome if it has ended, else a server
                            // that does not block in tasks/result; then polling goes on.
                            match self.status(task_id).await {
                                Ok(t) if !is_terminal(&t) => result_done = true,
                                _ => return Ending::Answer(self.for_client(resp)),
                            }
                        }
                        Err(e) => return Ending::Answer(e.response(Some(&self.client.id))),
                    }
                }
                ev = events.recv(), if events_open => {
                    deadline.touch(&Timer::Call);
                    match ev {
                        Some(BridgeEvent::Status(note)) => {
                            statuses.observe(note.get("params").unwrap_or(&Value::Null));
                        }
                        // The upstream reports progress itself: its values are the truth.
                        Some(BridgeEvent::Progress) => statuses.upstream_reports_progress(),
                        None => events_open = false,
                    }
                }
                Some(polled) = OptionFuture::from(polling.as_mut()) => {
                    polling = None;
                    deadline.insert_until(Timer::Poll, Instant::now() + poll);
                    match polled {
                        Ok(t) => {
                            // Notifications that arrived with the poll's answer are older
                            // than it: they go first.
                            while let Ok(ev) = events.try_recv() {
                                deadline.touch(&Timer::Call);
                                match ev {
                                    BridgeEvent::Status(note) => {
                                        statuses.observe(note.get("params").unwrap_or(&Value::Null));
                                    }
                                    BridgeEvent::Progress => statuses.upstream_reports_progress(),
                                }
                            }
                            let changed = statuses.observe(&t);
                            if changed {
                                deadline.touch(&Timer::Call);
                            }
                            if is_terminal(&t) && result_done {
                                // The fallback: the task ended, fetch its result now.
                                let req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksResult, json!({"taskId": task_id}));
                                return match self.link.request_for(req, Some(self.client.clone())).await {
                                    Ok(resp) => Ending::Answer(self.for_client(resp)),
                                    Err(e) => Ending::Answer(e.response(Some(&self.client.id))),
                                };
                            }
                        }
                        Err(e) => return Ending::Answer(e.response(Some(&self.client.id))),
                    }
                }
                _ = self.cancel.cancelled() => return Ending::Cancelled,
                Some((timer, expiry)) = deadline.expired() => match timer {
                    Timer::Poll => polling = Some(Box::pin(self.status(task_id))),
                    Timer::Status => statuses.send_due(&*self.link, task_id, token),
                    Timer::Call => {
                        self.cancel.cancel();
                        return self.timed_out(match expiry {
                            Expiry::Idle => "no progress or status change within request_timeout",
                            Expiry::Lifetime => "no result within max_request_time",
                        });
                    }
                },
            }
        }
    }

    /// The task's current state, by `tasks/get`.
    async fn status(&self, task_id: &str) -> Result<Value, RpcError> {
        let resp = self.link.request(crate::jsonrpc::Method::TasksGet, json!({"taskId": task_id})).await?;
        jsonrpc::into_outcome(resp, "")
            .map_err(|e| RpcError::new(e.code, format!("the upstream lost the bridged task: {}", e.message)))
    }

    /// The upstream's response as the answer to the client's own request: its id, and no
    /// task `_meta` (the client made a plain call).
    fn for_client(&self, mut resp: Value) -> Value {
        jsonrpc::set_id(&mut resp, &self.client.id);
        if let Some(meta) = resp.pointer_mut("/result/_meta").and_then(Value::as_object_mut) {
            meta.remove(RELATED_TASK);
            if meta.is_empty() {
                resp["result"].as_object_mut().expect("result is an object").remove("_meta");
            }
        }
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

/// Follows task `task_id` for the client's call as both bridges do: subscribed on the link to
/// the task's status notifications and progress (they reach `follow` as events), the status
/// messages `follow` observed and the client was not told yet sent before the answer, and the
/// subscription ended. Cancelling the task is the caller's, in its own dialect.
async fn follow_subscribed<L: BridgeLink>(
    link: &L,
    client: &ClientRef,
    task_id: &str,
    token: Option<&ProgressToken>,
    mut statuses: StatusTracker,
    follow: impl AsyncFnOnce(&mut mpsc::Receiver<BridgeEvent>, &mut StatusTracker) -> Ending,
) -> Ending {
    let (tx, mut events) = mpsc::channel(64);
    link.start_bridge(task_id, client, token, Arc::new(Follower(tx)));
    let ending = follow(&mut events, &mut statuses).await;
    if let (Some(_), Ending::Answer(_)) = (token, &ending) {
        for msg in statuses.take_unsent() {
            link.synthesize_progress(task_id, &msg);
        }
    }
    link.end_bridge(task_id);
    ending
}

/// What the bridge has seen of its task's statuses. Statuses arrive by two paths (the
/// server's notifications and the bridge's own polls) and can overtake each other: a status
/// older than one already applied is ignored, and each message is news once. A message
/// becomes progress for the client after [`STATUS_AS_PROGRESS_DELAY`], and never once the
/// upstream reports progress of its own.
#[derive(Default)]
struct StatusTracker {
    last_updated: Option<String>,
    announced: Vec<String>,
    /// Messages waiting to become progress, with when.
    unsent: std::collections::VecDeque<(Instant, String)>,
    upstream_progress: bool,
}

/// Messages remembered per bridged call, against repeats.
const MAX_ANNOUNCED: usize = 64;

impl StatusTracker {
    /// Takes in a `Task` as seen; returns whether it was news.
    fn observe(&mut self, task: &Value) -> bool {
        let Some(msg) = self.fresh_message(task) else { return false };
        if !self.upstream_progress {
            if self.unsent.len() == MAX_ANNOUNCED {
                self.unsent.pop_front();
            }
            self.unsent.push_back((Instant::now() + STATUS_AS_PROGRESS_DELAY, msg));
        }
        true
    }

    fn upstream_reports_progress(&mut self) {
        self.upstream_progress = true;
        self.unsent.clear();
    }

    fn next_due(&self) -> Option<Instant> {
        self.unsent.front().map(|(at, _)| *at)
    }

    /// Sets the call's [`Timer::Status`] to when the first message is due (unset: none is).
    fn arm(&self, clock: &Deadlines<Timer>) {
        match self.next_due() {
            Some(at) => clock.insert_until(Timer::Status, at),
            None => clock.remove(&Timer::Status),
        }
    }

    fn take_due(&mut self, now: Instant) -> Vec<String> {
        let mut out = vec![];
        while self.unsent.front().is_some_and(|(at, _)| *at <= now) {
            out.extend(self.unsent.pop_front().map(|(_, m)| m));
        }
        out
    }

    /// The messages due now become progress under the call's token; without one they are
    /// dropped all the same (else their timer would stay due, and the bridge spin).
    fn send_due<L: BridgeLink>(&mut self, link: &L, task_id: &str, token: Option<&ProgressToken>) {
        for msg in self.take_due(Instant::now()) {
            if token.is_some() {
                link.synthesize_progress(task_id, &msg);
            }
        }
    }

    fn take_unsent(&mut self) -> Vec<String> {
        self.unsent.drain(..).map(|(_, m)| m).collect()
    }

    /// The task's status message if it is news.
    fn fresh_message(&mut self, task: &Value) -> Option<String> {
        let task = TaskView::of(task);
        if let Some(at) = task.last_updated_at() {
            // RFC 3339 timestamps of one server share a format, so they order as text.
            if let Some(last) = &self.last_updated
                && at.len() == last.len()
                && at < last.as_str()
            {
                return None;
            }
            self.last_updated = Some(at.to_string());
        }
        let msg = task.status_message()?;
        if self.announced.iter().any(|m| m == msg) {
            return None;
        }
        if self.announced.len() == MAX_ANNOUNCED {
            self.announced.remove(0);
        }
        self.announced.push(msg.to_string());
        Some(msg.to_string())
    }
}

fn is_terminal(task: &Value) -> bool {
    TaskView::of(task).is_terminal()
}

pub mod extension;

#[cfg(test)]
mod timeouts;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_announced_once_and_never_backwards() {
        let mut t = StatusTracker::default();
        let st = |at: &str, m: &str| json!({"lastUpdatedAt": at, "statusMessage": m});
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:01.000Z", "a")).as_deref(), Some("a"));
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:03.000Z", "c")).as_deref(), Some("c"));
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:02.000Z", "b")), None, "older than what was applied");
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:04.000Z", "a")), None, "already announced");
        assert_eq!(t.fresh_message(&json!({"statusMessage": "d"})).as_deref(), Some("d"));
    }

    #[test]
    fn statuses_become_progress_only_while_the_upstream_reports_none() {
        let mut t = StatusTracker::default();
        assert!(t.observe(&json!({"statusMessage": "a"})));
        assert!(t.take_due(Instant::now()).is_empty(), "not before the delay");
        assert_eq!(t.take_due(Instant::now() + STATUS_AS_PROGRESS_DELAY), vec!["a".to_string()]);
        t.observe(&json!({"statusMessage": "b"}));
        t.upstream_reports_progress();
        t.observe(&json!({"statusMessage": "c"}));
        assert!(t.take_unsent().is_empty(), "the upstream's own progress replaces them");
    }
}
