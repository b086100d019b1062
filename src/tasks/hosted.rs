//! Hosted tasks: the gateway answers a task-augmented `tools/call` at once, runs the ordinary
//! blocking call upstream in the background, and serves `tasks/get|result|list|cancel` from
//! its store. It routes what the background call produces: progress to the client's token,
//! input requests (elicitation, sampling) to a waiting `tasks/result` or the creating session,
//! and the outcome into the store. On a modern (2026-07-28) upstream the call's input
//! requests come as rounds of its answer, and become the task's input the same way
//! (`rounds`). Which tools are hosted at all is the hosting decision ([`hosts`], `decision`).
//!
//! The store is asynchronous ([`TaskStore`]); what this module keeps itself is the hot state
//! of the tasks this process runs (`running`: the link, the waiters, held questions, the
//! latest progress message), under a `std::sync::Mutex` never held across an `.await`. The
//! link's calls into [`TaskCalls`] are synchronous: an outcome is written by a spawned task
//! (the only thing after it that depends on it, the announcement and the waiters' wake-up,
//! runs in that task too), an input request's status change likewise before its question
//! is relayed (so an answer cannot overtake it), and progress never reaches the store: its
//! message is laid over the stored record while the task runs ([`Hosted::live`]).

use crate::clock::{Deadlines, Schedule};
use crate::config::{TasksConfig, UpstreamTasks};
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, RpcError};
use crate::mcp::task_messages::{self, TaskStatus};
use crate::tasks::held_inputs::HeldInputs;
use crate::upstream::client::{ClientSession, Route};
use crate::upstream::link::{CloseReason, Link};

mod calls;
mod decision;
mod deferred;
mod held;
mod listing;
pub mod overview;
mod plain_answers;
mod remote;
mod status;
use crate::locks::Mutex;
use crate::tasks::store::{StoreError, TaskRecord, TaskStore};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

mod kept_ends;
mod round_state;
mod rounds;
#[cfg(test)]
mod store_failures;
mod unstored;
pub use decision::hosts;
use kept_ends::{EndState, Unstored};
pub use round_state::RoundPolicy;

/// A hosted task whose background call is still running.
struct Running {
    /// Held so the link outlives the session that started the task.
    link: Arc<Link>,
    /// Known once the call is on its way.
    upstream_id: Option<i64>,
    creator: Weak<dyn ClientSession>,
    /// The creator's owner (the link asks, as it places the server's questions).
    owner: Option<Arc<str>>,
    /// Sessions blocked in `tasks/result` on this task, with that request's id.
    result_waiters: Vec<(Weak<dyn ClientSession>, Id)>,
    /// Input requests that found no client to ask yet: the next `tasks/result` gets them,
    /// or an extension client's `tasks/get` shows them and its `tasks/update` answers them.
    held_inputs: HeldInputs,
    /// The client capabilities the creating request declared, where they were its own
    /// (a 2026-07-28 request's `_meta`): the upstream may ask only for those.
    declared: Option<Value>,
    /// The client's progress token for the call: its progress stops at the terminal status.
    token: Option<crate::jsonrpc::ProgressToken>,
    /// Input requests held at most (`held_inputs`).
    max_held: usize,
    /// On a modern link: what the call needs to go on with input rounds.
    rounds: Option<round_state::Rounds>,
    /// Questions go to the creator even when it cannot be reached now (its sink keeps them
    /// for its next stream): a SEP-1391 operation, whose client calls no `tasks/result`.
    to_creator_later: bool,
    /// The latest progress message and when it came: the task's status message while it
    /// runs, kept here rather than written to the store.
    progress: Option<(String, SystemTime)>,
    /// The latest progress numbers (`progress`, and `total` if given), for the task page
    /// (`overview`).
    progress_numbers: Option<(f64, Option<f64>)>,
    /// When the upstream last sent progress (or the call started): a long call's keep-alive
    /// speaks only into its silence.
    heard: tokio::time::Instant,
    /// The last progress value sent to the client under its token (the upstream's, or a
    /// keep-alive's): what is sent next rises above it.
    sent: Option<f64>,
    /// Whether its end is stored (`unstored`): its waiting `tasks/result`s wait for that, as
    /// a store that failed to take it tells them of no change.
    end: tokio::sync::watch::Sender<EndState>,
    /// The status its questions leave it in (`working`, `input_required`), set before a
    /// question goes out or its answer goes up: reads show it at once, although the store
    /// hears of it in a task of its own, and store writes landing out of order are put
    /// right to it.
    shown: Option<TaskStatus>,
    /// Its end is decided and being stored: a call that starts now (a round's retry) is not
    /// its call, and is cancelled by whoever started it (see [`Hosted::started`]).
    ending: bool,
}

pub struct Hosted {
    me: Weak<Hosted>,
    store: Arc<dyn TaskStore>,
    running: Mutex<HashMap<Arc<str>, Running>>,
    /// Tasks per `tasks/list` page.
    page_size: usize,
    max_result_bytes: usize,
    max_store_bytes: usize,
    /// The longest tool name a task may be made for (`max_tool_name_bytes`).
    max_tool_name_bytes: usize,
    /// The longest status message kept (`max_status_message_bytes`).
    max_message_bytes: usize,
    /// The most bytes of tasks on a `tasks/list` page (`max_list_page_bytes`).
    max_page_bytes: usize,
    /// How long a `tasks/result` waits for an end the store did not take (`[tasks]
    /// store_outage_wait`).
    store_outage_wait: Duration,
    /// The ends the store did not take, written again until it does.
    unstored: Mutex<Unstored>,
    /// When each finished task's retention ends.
    expiry: Arc<Deadlines<Arc<str>>>,
    /// When the input rounds of the tasks' calls on modern links time out (`rounds`): one
    /// waiter, started with the first, ended with the host.
    round_timers: Schedule<round_state::RoundTimer>,
    /// The store writes the link's synchronous calls started (outcomes, status changes):
    /// shutdown waits for them, so that a task cut by it is stored as it ended.
    writes: tokio_util::task::TaskTracker,
    /// With a shared store, the sessions this replica holds, by owner, so that it can tell
    /// them of status changes other replicas make (`remote`).
    held_sessions: Mutex<HashMap<String, Vec<Weak<dyn ClientSession>>>>,
    /// The bytes of the questions held for clients (`max_held_input_bytes`), shared with the
    /// relayed tasks.
    held_bytes: Arc<crate::tasks::held_inputs::HeldBytes>,
}

/// The prefix of the gateway's own `tasks/list` cursors.
pub const CURSOR_PREFIX: &str = "tg:";

/// How long shutdown waits for the store writes of the tasks it ended.
const SHUTDOWN_WRITES: Duration = Duration::from_secs(5);

/// Input requests held per task while no client can be asked.
const MAX_HELD_INPUTS: usize = 16;

pub fn not_found(task_id: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("task not found or expired: {task_id}"))
}

impl Hosted {
    /// Hosted tasks kept in `store` (see `tasks::file_store::open_configured`).
    pub fn new(cfg: &TasksConfig, store: Arc<dyn TaskStore>) -> Arc<Hosted> {
        Arc::new_cyclic(|me| Hosted {
            me: me.clone(),
            store,
            running: Mutex::new(HashMap::new()),
            page_size: cfg.list_page_size,
            max_result_bytes: cfg.max_result_bytes,
            max_store_bytes: cfg.max_store_bytes,
            max_tool_name_bytes: cfg.max_tool_name_bytes,
            max_message_bytes: cfg.max_status_message_bytes,
            max_page_bytes: cfg.max_list_page_bytes,
            store_outage_wait: cfg.store_outage_wait,
            unstored: Mutex::new(Unstored::default()),
            expiry: Arc::new(Deadlines::new(Duration::MAX, Duration::MAX)),
            round_timers: Schedule::default(),
            writes: tokio_util::task::TaskTracker::new(),
            held_sessions: Mutex::new(HashMap::new()),
            held_bytes: crate::tasks::held_inputs::HeldBytes::new(cfg.max_held_input_bytes),
        })
    }

    /// The store the tasks are kept in.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// Whether `owner` may see task `task_id` (get, fetch, cancel): its creator only. To
    /// anyone else the task does not exist.
    /// A store failure is taken as "not visible" (and logged); a request that would tell
    /// its client a task is unknown uses [`Hosted::visible_or_failed`].
    pub async fn visible(&self, task_id: &str, owner: &str) -> bool {
        self.visible_or_failed(task_id, owner).await.unwrap_or(false)
    }

    /// [`Hosted::visible`], or the store's failure as the client should hear it (-32603
    /// naming the store), so that a task is not said to be unknown when the store could
    /// not be asked.
    pub async fn visible_or_failed(&self, task_id: &str, owner: &str) -> Result<bool, RpcError> {
        let rec = self.store.get(task_id).await.map_err(|e| self.store_failed(e))?;
        Ok(rec.is_some_and(|r| r.owner == owner))
    }

    /// The stored record with what only memory knows laid over it: the latest progress
    /// message of a task this process runs.
    fn live(&self, mut rec: TaskRecord) -> TaskRecord {
        if !rec.status.is_terminal()
            && let Some(r) = self.running.lock().unwrap().get(rec.id.as_str())
        {
            if let Some((msg, at)) = &r.progress {
                rec.status_message = Some(msg.clone());
                rec.last_updated_at = rec.last_updated_at.max(*at);
            }
            if let Some(shown) = r.shown {
                rec.status = shown;
            }
        }
        rec
    }

    /// A store failure as the client sees it.
    fn store_failed(&self, e: StoreError) -> RpcError {
        tracing::error!(store = self.store.name(), error = %e, "task store");
        RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string())
    }

    /// Removes each finished task when its ttl has passed (one task, woken by the earliest
    /// retention to end). Running tasks are not reaped: their call ends by its own limits
    /// (`request_timeout`, `max_request_time`).
    pub fn start_sweeper(self: &Arc<Self>) {
        // Finished tasks from before a restart expire as they would have.
        for rec in self.store.finished_at_open() {
            self.expire_when_due(&rec);
        }
        self.follow_remote_changes();
        let me = Arc::downgrade(self);
        let expiry = self.expiry.clone();
        tokio::spawn(async move {
            while let Some((id, _)) = expiry.expired().await {
                let Some(h) = me.upgrade() else { return };
                match h.store.remove_if_expired(&id, crate::clock::wall_now()).await {
                    Some(rec) => tracing::debug!(task = %rec.id, "task expired"),
                    None => {
                        match h.store.get(&id).await {
                            Ok(Some(rec)) => h.expire_when_due(&rec),
                            Ok(None) => {}
                            // Tried again later (a shared store also sweeps by itself).
                            Err(e) => {
                                h.store_failed(e);
                                let again = tokio::time::Instant::now() + Duration::from_secs(5);
                                h.expiry.insert_until(id, again);
                            }
                        }
                    }
                }
            }
        });
    }

    /// A finished task is removed when its retention ends.
    fn expire_when_due(&self, rec: &TaskRecord) {
        if !rec.status.is_terminal() {
            return;
        }
        let left = rec.expires_at().duration_since(crate::clock::wall_now()).unwrap_or_default();
        let now = tokio::time::Instant::now();
        self.expiry.insert_until(rec.id.as_str().into(), now.checked_add(left).unwrap_or(now));
    }

    /// Creates a task for a call about to start. The ttl is the client's (or the default),
    /// kept between the configured minimum and maximum. `client` is whose limit it counts
    /// against; `call` the `tools/call` it runs (its tool is kept with the task).
    pub async fn create(
        &self,
        (owner, client): (&str, &str),
        upstream: &str,
        policy: &UpstreamTasks,
        requested_ttl: Option<Duration>,
        call: &Value,
    ) -> Result<TaskRecord, RpcError> {
        let tool = call.pointer("/params/name").and_then(Value::as_str);
        if let Some(tool) = tool.filter(|t| t.len() > self.max_tool_name_bytes) {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "params.name is {} bytes, more than max_tool_name_bytes ({}): no such tool",
                    tool.len(),
                    self.max_tool_name_bytes
                ),
            ));
        }
        let ttl = requested_ttl.unwrap_or(policy.ttl).clamp(policy.min_ttl, policy.max_ttl);
        let mut rec = TaskRecord::new(
            crate::random::id128(),
            owner.into(),
            client.into(),
            upstream.into(),
            ttl,
            policy.poll_interval,
        );
        rec.tool = tool.map(str::to_string);
        let inserted = self.store.insert(rec, policy.max_tasks_per_owner).await;
        if inserted.is_ok() {
            crate::metrics::global().task_entered(TaskStatus::Working.as_str());
        }
        inserted.map_err(|e| {
            let code = match e {
                StoreError::ClientFull { .. } => GATEWAY_BUSY,
                StoreError::Full { .. } | StoreError::BytesFull { .. } | StoreError::Backend { .. } => {
                    jsonrpc::INTERNAL_ERROR
                }
            };
            RpcError::new(code, format!("cannot create a task: {e}"))
        })
    }

    /// The background call is about to start on `link`, for the session `creator`, with the
    /// client's progress token.
    pub fn track(
        &self,
        task_id: &str,
        link: Arc<Link>,
        creator: Weak<dyn ClientSession>,
        token: Option<crate::jsonrpc::ProgressToken>,
    ) {
        self.running.lock().unwrap().insert(
            task_id.into(),
            Running {
                link,
                upstream_id: None,
                owner: creator.upgrade().map(|c| Arc::from(c.owner())),
                creator,
                result_waiters: Vec::new(),
                held_inputs: HeldInputs::default(),
                declared: None,
                token,
                max_held: MAX_HELD_INPUTS,
                rounds: None,
                to_creator_later: false,
                progress: None,
                progress_numbers: None,
                heard: tokio::time::Instant::now(),
                sent: None,
                end: tokio::sync::watch::channel(EndState::Running).0,
                shown: None,
                ending: false,
            },
        );
    }

    /// The gateway is shutting down: the links that hosted tasks still run on are closed
    /// (their children stopped gently), and those tasks fail saying so.
    pub async fn shut_down(&self) {
        let mut links: Vec<Arc<Link>> = Vec::new();
        for r in self.running.lock().unwrap().values() {
            if !links.iter().any(|l| Arc::ptr_eq(l, &r.link)) {
                links.push(r.link.clone());
            }
        }
        for link in links {
            link.close_because(CloseReason::ShuttingDown).await;
        }
        // The tasks those links ran have ended: their ends are written before the process exits.
        self.writes.close();
        if tokio::time::timeout(SHUTDOWN_WRITES, self.writes.wait()).await.is_err() {
            tracing::warn!("task store writes still pending at shutdown");
        }
        let unstored = self.unstored.lock().unwrap().len();
        if unstored > 0 {
            tracing::error!(tasks = unstored, "task store: ends the store did not take are lost with this process");
        }
        match tokio::time::timeout(SHUTDOWN_WRITES, self.store.flush()).await {
            Ok(Ok(())) => tracing::debug!("task store: every write committed"),
            Ok(Err(e)) => tracing::error!("task store: the last writes could not be committed: {e}"),
            Err(_) => tracing::warn!("task store: the last writes were not committed within {SHUTDOWN_WRITES:?}"),
        }
    }

    /// The background call is on its way as upstream request `upstream_id`: `false` if the
    /// task no longer runs, or its end is being stored (the caller cancels the call: nothing
    /// else would, as the task's end does not wait for it).
    pub fn started(&self, task_id: &str, upstream_id: i64) -> bool {
        let mut running = self.running.lock().unwrap();
        let Some(r) = running.get_mut(task_id).filter(|r| !r.ending) else { return false };
        r.upstream_id = Some(upstream_id);
        true
    }

    /// The task's end is decided: from now on a call that starts for it is refused (see
    /// [`Hosted::started`]).
    fn ending(&self, task_id: &str) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.ending = true;
        }
    }

    /// The background call could not start: the task fails with that error.
    pub async fn start_failed(&self, task_id: &str, err: &RpcError) {
        self.finish(task_id, err.response(None)).await;
    }

    /// The task ended: its progress that still waits for the client is dropped, as progress
    /// stops at the terminal status.
    fn stop_progress(r: &Running) {
        if let (Some(token), Some(s)) = (&r.token, r.creator.upgrade()) {
            s.discard_progress(token);
        }
    }

    /// The task's retention counts from its end (a SEP-1391 operation's `keepAlive`).
    pub async fn retain_after_end(&self, task_id: &str) {
        if let Err(e) = self.store.update(task_id, &mut |r| r.ttl_from_end = true).await {
            self.store_failed(e);
        }
    }

    /// The task's questions go to its creator, reachable now or not (see `Running`).
    pub fn ask_creator_later(&self, task_id: &str) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.to_creator_later = true;
        }
    }

    /// The task's status and status message, while it is kept.
    /// Whether the task's call runs in this process (its status is not terminal): answered
    /// from the hot state alone, so callable under a session's lock.
    pub fn runs(&self, task_id: &str) -> bool {
        self.running.lock().unwrap().contains_key(task_id)
    }

    pub async fn status(&self, task_id: &str) -> Option<(TaskStatus, Option<String>)> {
        let rec = self.store.get(task_id).await.map_err(|e| self.store_failed(e)).ok()??;
        let rec = self.live(rec);
        Some((rec.status, rec.status_message))
    }

    /// The task's creating request declared these client capabilities (a 2026-07-28
    /// request, whose session ends with it): the upstream's questions are held only for what
    /// they declare.
    pub fn declare_client_capabilities(&self, task_id: &str, capabilities: Value) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.declared = Some(capabilities);
        }
    }

    /// Task `task_id`'s status from now on (a `subscriptions/listen` stream watching it);
    /// the sender goes once the task has ended.
    /// A store failure finds nothing (logged).
    pub async fn watch(&self, task_id: &str) -> Option<tokio::sync::watch::Receiver<TaskStatus>> {
        self.store.watch(task_id).await.map_err(|e| self.store_failed(e)).ok()?
    }

    /// What a finished task's call ended with (its whole response), if it has ended so.
    pub async fn stored_outcome(&self, task_id: &str) -> Option<Value> {
        let rec = self.store.get(task_id).await.map_err(|e| self.store_failed(e)).ok()??;
        rec.outcome.as_deref().and_then(|text| serde_json::from_str(text).ok())
    }

    pub async fn get(&self, task_id: &str) -> Result<Value, RpcError> {
        let rec = self.store.get(task_id).await.map_err(|e| self.store_failed(e))?.ok_or_else(|| not_found(task_id))?;
        Ok(Value::Object(self.live(rec).to_json()))
    }

    /// Moves the task to `cancelled` (before answering, as the spec requires) and cancels
    /// the background call upstream.
    pub async fn cancel(&self, task_id: &str) -> Result<Value, RpcError> {
        self.cancel_saying(task_id, "cancelled by the client").await
    }

    /// [`Hosted::cancel`], with `message` as the task's status message.
    pub async fn cancel_saying(&self, task_id: &str, message: &str) -> Result<Value, RpcError> {
        let message = crate::tasks::text_bounds::bounded(message, self.max_message_bytes);
        let message: &str = &message;
        let mut was: Option<TaskStatus> = None;
        let rec = self
            .store
            .update(task_id, &mut |r| {
                was = Some(r.status);
                if !r.status.is_terminal() {
                    r.status = TaskStatus::Cancelled;
                    r.status_message = Some(message.into());
                    r.last_updated_at = crate::clock::wall_now();
                }
            })
            .await;
        let rec = match rec {
            Ok(rec) => rec.ok_or_else(|| not_found(task_id))?,
            Err(e) => {
                let err = self.store_failed(e);
                // The store may hold the cancel all the same (a file store's hot copy when
                // its commit fails): then the task is cancelled, and its call goes too.
                if was.is_some_and(|s| !s.is_terminal())
                    && let Some(rec) =
                        self.store.get(task_id).await.ok().flatten().filter(|r| r.status == TaskStatus::Cancelled)
                {
                    self.cancelled(&rec).await;
                }
                return Err(err);
            }
        };
        if was.is_some_and(|s| !s.is_terminal()) {
            crate::metrics::global().task_entered(TaskStatus::Cancelled.as_str());
        }
        if let Some(s) = was.filter(|s| s.is_terminal()) {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("task {task_id} is already {} and cannot be cancelled", s.as_str()),
            ));
        }
        self.cancelled(&rec).await;
        Ok(Value::Object(rec.to_json()))
    }

    /// The task is cancelled in the store: it is retained as any finished task, its hot
    /// state goes, and its call upstream is cancelled.
    async fn cancelled(&self, rec: &TaskRecord) {
        self.expire_when_due(rec);
        let running = self.running.lock().unwrap().remove(rec.id.as_str());
        if let Some(r) = running {
            Self::stop_progress(&r);
            self.announce(rec, &r);
            if let Some(up) = r.upstream_id {
                r.link.cancel(up, "the task was cancelled").await;
            }
        }
    }

    /// Blocks until the task is terminal, then returns exactly what the upstream returned
    /// (as a result or error response for `client_id`), tagged with the related task.
    pub async fn result(&self, task_id: &str, waiter: Weak<dyn ClientSession>, client_id: &Id) -> Value {
        let mut watch = match self.store.watch(task_id).await {
            Ok(Some(w)) => w,
            Ok(None) => return not_found(task_id).response(Some(client_id)),
            Err(e) => return self.store_failed(e).response(Some(client_id)),
        };
        let (held, end) = match self.running.lock().unwrap().get_mut(task_id) {
            Some(r) => {
                r.result_waiters.push((waiter.clone(), client_id.clone()));
                (r.held_inputs.take_all(), Some(r.end.subscribe()))
            }
            None => (Vec::new(), self.unstored.lock().unwrap().subscribe(task_id)),
        };
        if let Some(s) = waiter.upgrade() {
            for h in held {
                s.relay_server_request(
                    &h.link,
                    h.upstream_id,
                    h.msg,
                    Route::Related(client_id.clone()),
                    Some(task_id.into()),
                );
            }
        }
        if let Some(mut end) = end {
            tokio::select! {
                _ = watch.wait_for(|s| s.is_terminal()) => {}
                // Also when the hot state goes without an end (a cancel): the store then says how it ended.
                _ = end.wait_for(|e| *e != EndState::Running) => {}
            }
            // The end is written (a store's hot copy may show it sooner), or the store did not
            // take it and it is written again: waited for, within the bound.
            let wait = end.wait_for(|e| *e == EndState::Stored);
            let timed_out = tokio::time::timeout(self.store_outage_wait, wait).await.is_err();
            if timed_out {
                let why = match &*end.borrow() {
                    EndState::Unstored(why) => why.clone(),
                    _ => format!("the {} task store did not take the task's end", self.store.name()),
                };
                let why = format!("{why} (waited {:?}, store_outage_wait)", self.store_outage_wait);
                return RpcError::new(jsonrpc::INTERNAL_ERROR, why).response(Some(client_id));
            }
        }
        let ended = watch.wait_for(|s| s.is_terminal()).await.is_ok();
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.result_waiters.retain(|(s, id)| !(s.ptr_eq(&waiter) && id == client_id));
        }
        let rec = match (ended, self.store.get(task_id).await) {
            (true, Ok(Some(rec))) => rec,
            (_, Err(e)) => return self.store_failed(e).response(Some(client_id)),
            _ => return not_found(task_id).response(Some(client_id)),
        };
        let outcome: Option<Value> = rec.outcome.as_deref().and_then(|text| serde_json::from_str(text).ok());
        match outcome {
            Some(mut out) if out.get("result").is_some() => {
                let mut resp = jsonrpc::result_response(client_id, out["result"].take());
                task_messages::tag_related(&mut resp, "result", task_id);
                resp
            }
            Some(mut resp) => {
                jsonrpc::set_id(&mut resp, client_id);
                resp
            }
            None => RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                format!("task {task_id} was {} before it finished", rec.status.as_str()),
            )
            .response(Some(client_id)),
        }
    }

    /// The `CreateTaskResult` for a new task.
    pub fn create_result(rec: &TaskRecord) -> Value {
        jsonrpc::object([("task", Value::Object(rec.to_json()))])
    }
}
