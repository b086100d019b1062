//! The one loop that follows a bridged call's task, whatever its dialect: the call made a
//! task, the link's notifications and progress for it heard, `tasks/get` at its interval,
//! the dialect's own event, and the call's clock, until the client has its answer.

use super::statuses::StatusTracker;
use super::{BridgeLink, Dialect, Ending, Step, Timer};
use crate::clock::{Deadlines, Expiry};
use crate::jsonrpc::{self, ProgressToken, REQUEST_TIMEOUT, RpcError};
use crate::mcp::task_messages::{DEFAULT_POLL, TaskView};
use crate::upstream::link::{ClientRef, TaskFollower};
use futures_util::future::OptionFuture;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A `tasks/get` in flight.
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

/// Runs a bridged call to its end: the call made a task, the task followed until the client
/// has its answer, or cancels, or the call's time is up.
pub(super) async fn run<D: Dialect>(mut d: D) -> Ending {
    let plain = d.plain();
    let (link, client, cancel) = (plain.link.clone(), plain.client.clone(), plain.cancel.clone());
    let token = ProgressToken::of_request(&plain.request);
    let started = Instant::now();
    // One entry, the call: while its task is created only max_request_time applies (a
    // server may run the call plainly after all, its progress unseen by the bridge);
    // request_timeout too once the task is followed.
    let deadline = Deadlines::new(plain.request_timeout, plain.max_request_time);
    let ends = started + plain.max_request_time;
    deadline.insert_until(Timer::Call, ends);

    let created = match d.created() {
        Some(resp) => resp,
        None => {
            let create = d.create();
            tokio::pin!(create);
            let r = tokio::select! {
                r = &mut create => r,
                _ = cancel.cancelled() => {
                    cancel_while_creating(&d, create).await;
                    return Ending::Cancelled;
                }
                Some(_) = deadline.expired() => {
                    cancel_while_creating(&d, create).await;
                    return timed_out(&*link, &client, "creating the task");
                }
            };
            match r {
                Ok(resp) => resp,
                Err(e) => return Ending::Answer(e.response(Some(&client.id))),
            }
        }
    };
    let Some(task) = D::task_in(&created).cloned() else {
        // An error, or a server that ran the call plainly after all: that is the answer.
        return Ending::Answer(d.for_client(created));
    };
    let Some(task_id) = TaskView::of(&task).id().map(str::to_string) else {
        let e = RpcError::new(jsonrpc::INTERNAL_ERROR, "the upstream's CreateTaskResult has no taskId");
        return Ending::Answer(e.response(Some(&client.id)));
    };
    tracing::debug!(upstream = link.upstream_name(), task = %task_id, "bridging a plain call through {}", D::TASKS);

    deadline.insert_since(Timer::Call, started);
    let token = token.as_ref();
    let (tx, mut events) = mpsc::channel(64);
    link.start_bridge(&task_id, &client, token, Arc::new(Follower(tx)));
    let mut statuses = StatusTracker::default();
    let ending = follow(&d, &task_id, task, &mut events, token, (&deadline, ends), &mut statuses).await;
    // Status messages the client was not told yet go before the answer.
    if let (Some(_), Ending::Answer(_)) = (token, &ending) {
        for msg in statuses.take_unsent() {
            link.synthesize_progress(&task_id, &msg);
        }
    }
    link.end_bridge(&task_id);
    if matches!(ending, Ending::Cancelled) || cancel.is_cancelled() {
        d.cancel_task(&task_id).await;
    }
    ending
}

/// Cancelled before the task was created: the upstream may create it all the same, so its
/// answer is awaited (within `request_timeout`) and the task cancelled. A call that is not
/// answered by then is cancelled as a request.
async fn cancel_while_creating<D: Dialect>(d: &D, create: Pin<&mut impl Future<Output = Result<Value, RpcError>>>) {
    if let Ok(Ok(resp)) = tokio::time::timeout(d.plain().request_timeout, create).await
        && let Some(task_id) = D::task_in(&resp).and_then(|t| TaskView::of(t).id())
    {
        d.cancel_task(task_id).await;
    }
}

/// Follows task `task_id` (`first`: the task at its creation) until the call has its ending.
async fn follow<D: Dialect>(
    d: &D,
    task_id: &str,
    first: Value,
    events: &mut mpsc::Receiver<BridgeEvent>,
    token: Option<&ProgressToken>,
    (deadline, ends): (&Deadlines<Timer>, Instant),
    statuses: &mut StatusTracker,
) -> Ending {
    let plain = d.plain();
    let mut following = d.start(task_id);
    if statuses.observe(&first) {
        deadline.touch(&Timer::Call);
    }
    let mut step = bounded(d.look(&mut following, task_id, &first), &plain.cancel, ends).await;
    // The interval the task last named: a snapshot that names none keeps it.
    let mut every = D::poll_interval(TaskView::of(&first)).unwrap_or(DEFAULT_POLL);
    deadline.insert_until(Timer::Poll, Instant::now() + every);
    // The poll in flight: it runs beside the rest, so that status and progress while it
    // waits reset `request_timeout` as they come, and the deadlines still apply.
    let mut polling: Option<Polling<'_>> = None;
    // A look was asked for while a poll was in flight: its answer may be older than what
    // made the task move on, so the next poll goes at once.
    let mut look_again = false;
    // Closed when the link dies; then only the poll (which fails) and the timers remain.
    let mut events_open = true;
    loop {
        // The client cancelled while a step waited on the upstream (the step gave up).
        if plain.cancel.is_cancelled() {
            return Ending::Cancelled;
        }
        match std::mem::replace(&mut step, Step::Pending) {
            Step::Pending => {}
            Step::LookNow if polling.is_some() => look_again = true,
            Step::LookNow => {
                deadline.remove(&Timer::Poll);
                polling = Some(Box::pin(d.get(task_id)));
            }
            Step::Answer(answer) => return Ending::Answer(answer),
            Step::Abandon(answer) => {
                plain.cancel.cancel();
                return Ending::Answer(answer);
            }
        }
        statuses.arm(deadline);
        // In this order when several are ready at once: the client's cancel, then what is
        // due (a timeout at the instant a poll fails ends the call the same way every time).
        tokio::select! {
            biased;
            _ = plain.cancel.cancelled() => return Ending::Cancelled,
            Some((timer, expiry)) = deadline.expired() => match timer {
                Timer::Poll => polling = Some(Box::pin(d.get(task_id))),
                Timer::Status => statuses.send_due(&*plain.link, task_id, token),
                Timer::Call => {
                    plain.cancel.cancel();
                    return timed_out(&*plain.link, &plain.client, match expiry {
                        Expiry::Idle => "no progress or status change within request_timeout",
                        Expiry::Lifetime => "no result within max_request_time",
                    });
                }
            },
            event = D::event(&mut following) => {
                // Notifications that came before the event (on the same stream, before a
                // `tasks/result`'s answer) are older than it: they go first.
                hear_queued(events, statuses, deadline);
                deadline.touch(&Timer::Call);
                step = bounded(d.on_event(&mut following, task_id, event), &plain.cancel, ends).await;
            }
            event = events.recv(), if events_open => match event {
                Some(event) => heard(event, statuses, deadline),
                None => events_open = false,
            },
            Some(polled) = OptionFuture::from(polling.as_mut()) => {
                polling = None;
                let task = match polled {
                    Ok(task) => task,
                    // The client will not have the task's result: the task is not left
                    // running for no one.
                    Err(e) => {
                        step = Step::Abandon(e.response(Some(&plain.client.id)));
                        continue;
                    }
                };
                // Notifications that arrived with the poll's answer are older than it: they
                // go first.
                hear_queued(events, statuses, deadline);
                if statuses.observe(&task) {
                    deadline.touch(&Timer::Call);
                }
                if let Some(named) = D::poll_interval(TaskView::of(&task)) {
                    every = named;
                }
                let wait = if std::mem::take(&mut look_again) { Duration::ZERO } else { every };
                deadline.insert_until(Timer::Poll, Instant::now() + wait);
                step = bounded(d.look(&mut following, task_id, &task), &plain.cancel, ends).await;
            }
        }
    }
}

/// A step that waits on the upstream (a look, the dialect's event) gives way to the client's
/// cancel and to the end of the call's lifetime: the loop then ends the call as cancelled or
/// timed out, as it would have between steps.
async fn bounded(step: impl Future<Output = Step>, cancel: &CancellationToken, ends: Instant) -> Step {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Step::Pending,
        _ = tokio::time::sleep_until(ends) => Step::Pending,
        step = step => step,
    }
}

/// What the link queued for the call so far, heard now (see [`heard`]).
fn hear_queued(events: &mut mpsc::Receiver<BridgeEvent>, statuses: &mut StatusTracker, deadline: &Deadlines<Timer>) {
    while let Ok(event) = events.try_recv() {
        heard(event, statuses, deadline);
    }
}

/// A sign of life from the link: the call's `request_timeout` starts again, and a status
/// notification is observed as a poll's answer would be.
fn heard(event: BridgeEvent, statuses: &mut StatusTracker, deadline: &Deadlines<Timer>) {
    deadline.touch(&Timer::Call);
    match event {
        BridgeEvent::Status(note) => {
            statuses.observe(note.get("params").unwrap_or(&Value::Null));
        }
        // The upstream reports progress itself: its values are the truth.
        BridgeEvent::Progress => statuses.upstream_reports_progress(),
    }
}

fn timed_out<L: BridgeLink>(link: &L, client: &ClientRef, why: &str) -> Ending {
    let e =
        RpcError::new(REQUEST_TIMEOUT, format!("request timed out: upstream '{}' task: {why}", link.upstream_name()));
    Ending::Answer(e.response(Some(&client.id)))
}
