//! Hosted tasks: the gateway answers a task-augmented `tools/call` at once, runs the ordinary
//! blocking call upstream in the background, and serves `tasks/get|result|list|cancel` from
//! its store. It routes what the background call produces: progress to the client's token,
//! input requests (elicitation, sampling) to a waiting `tasks/result` or the creating session,
//! and the outcome into the store. On a modern (2026-07-28) upstream the call's input
//! requests come as rounds of its answer, and become the task's input the same way
//! (`rounds`).

use crate::config::{TasksConfig, UpstreamTasks};
use crate::gateway::client::{ClientSession, Route};
use crate::gateway::deadline::Deadlines;
use crate::gateway::link::{CloseReason, Link, TaskCalls};
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, RpcError};
use crate::mcp::tasks::{self as mcp_tasks, TaskStatus};
use crate::tasks::held_inputs::{HeldInputs, declares, undeclared};
pub use crate::tasks::hosting::hosts;
use crate::tasks::store::{MemoryStore, StoreError, TaskRecord, TaskStore};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

mod round_state;
mod rounds;
pub use round_state::RoundPolicy;

/// A hosted task whose background call is still running.
struct Running {
    /// Held so the link outlives the session that started the task.
    link: Arc<Link>,
    /// Known once the call is on its way.
    upstream_id: Option<i64>,
    creator: Weak<dyn ClientSession>,
    /// Sessions blocked in `tasks/result` on this task, with that request's id.
    result_waiters: Vec<(Weak<dyn ClientSession>, Id)>,
    /// Input requests that found no client to ask yet: the next `tasks/result` gets them,
    /// or an extension client's `tasks/get` shows them and its `tasks/update` answers them.
    held_inputs: HeldInputs,
    /// The client capabilities the creating request declared, where they were its own
    /// (a 2026-07-28 request's `_meta`): the upstream may ask only for those.
    declared: Option<Value>,
    /// The client's progress token for the call: its progress stops at the terminal status.
    token: Option<Value>,
    /// Input requests held at most (`held_inputs`).
    max_held: usize,
    /// On a modern link: what the call needs to go on with input rounds.
    rounds: Option<round_state::Rounds>,
    /// Questions go to the creator even when it cannot be reached now (its sink keeps them
    /// for its next stream): a SEP-1391 operation, whose client calls no `tasks/result`.
    to_creator_later: bool,
}

pub struct Hosted {
    me: Weak<Hosted>,
    store: Arc<dyn TaskStore>,
    running: Mutex<HashMap<Arc<str>, Running>>,
    /// Tasks per `tasks/list` page.
    page_size: usize,
    max_result_bytes: usize,
    max_store_bytes: usize,
    /// Keys the `tasks/list` cursors, so that only cursors the gateway issued are accepted.
    cursor_key: std::hash::RandomState,
    /// When each finished task's retention ends.
    expiry: Arc<Deadlines<Arc<str>>>,
}

/// The prefix of the gateway's own `tasks/list` cursors.
pub const CURSOR_PREFIX: &str = "tg:";

/// Input requests held per task while no client can be asked.
const MAX_HELD_INPUTS: usize = 16;

pub fn not_found(task_id: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("task not found or expired: {task_id}"))
}

impl Hosted {
    pub fn new(cfg: &TasksConfig) -> Arc<Hosted> {
        Arc::new_cyclic(|me| Hosted {
            me: me.clone(),
            store: Arc::new(MemoryStore::new(cfg.max_tasks, cfg.max_store_bytes)),
            running: Mutex::new(HashMap::new()),
            page_size: cfg.list_page_size,
            max_result_bytes: cfg.max_result_bytes,
            max_store_bytes: cfg.max_store_bytes,
            cursor_key: std::hash::RandomState::new(),
            expiry: Arc::new(Deadlines::new(Duration::MAX, Duration::MAX)),
        })
    }

    /// Whether `owner` may see task `task_id` (get, fetch, cancel): its creator only. To
    /// anyone else the task does not exist.
    pub fn visible(&self, task_id: &str, owner: &str) -> bool {
        self.store.get(task_id).is_some_and(|r| r.owner == owner)
    }

    /// Removes each finished task when its ttl has passed (one task, woken by the earliest
    /// retention to end). Running tasks are not reaped: their call ends by its own limits
    /// (`request_timeout`, `max_request_time`).
    pub fn start_sweeper(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        let expiry = self.expiry.clone();
        tokio::spawn(async move {
            while let Some((id, _)) = expiry.expired().await {
                let Some(h) = me.upgrade() else { return };
                match h.store.remove_if_expired(&id, SystemTime::now()) {
                    Some(rec) => tracing::debug!(task = %rec.id, "task expired"),
                    None => {
                        if let Some(rec) = h.store.get(&id) {
                            h.expire_when_due(&rec);
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
        let left = rec.expires_at().duration_since(SystemTime::now()).unwrap_or_default();
        let now = tokio::time::Instant::now();
        self.expiry.insert_until(rec.id.as_str().into(), now.checked_add(left).unwrap_or(now));
    }

    /// Creates a task for a call about to start. The ttl is the client's (or the default),
    /// kept between the configured minimum and maximum. `client` is whose limit it counts
    /// against.
    pub fn create(
        &self,
        owner: &str,
        client: &str,
        upstream: &str,
        policy: &UpstreamTasks,
        requested_ttl: Option<Duration>,
    ) -> Result<TaskRecord, RpcError> {
        let ttl = requested_ttl.unwrap_or(policy.ttl).clamp(policy.min_ttl, policy.max_ttl);
        let rec = TaskRecord::new(
            crate::random::id128(),
            owner.into(),
            client.into(),
            upstream.into(),
            ttl,
            policy.poll_interval,
        );
        self.store.insert(rec.clone(), policy.max_tasks_per_owner).map_err(|e| {
            let code = match e {
                StoreError::ClientFull { .. } => GATEWAY_BUSY,
                StoreError::Full { .. } | StoreError::BytesFull { .. } => jsonrpc::INTERNAL_ERROR,
            };
            RpcError::new(code, format!("cannot create a task: {e}"))
        })?;
        Ok(self.store.get(&rec.id).unwrap_or(rec))
    }

    /// The background call is about to start on `link`, for the session `creator`, with the
    /// client's progress token.
    pub fn track(&self, task_id: &str, link: Arc<Link>, creator: Weak<dyn ClientSession>, token: Option<Value>) {
        self.running.lock().unwrap().insert(
            task_id.into(),
            Running {
                link,
                upstream_id: None,
                creator,
                result_waiters: Vec::new(),
                held_inputs: HeldInputs::default(),
                declared: None,
                token,
                max_held: MAX_HELD_INPUTS,
                rounds: None,
                to_creator_later: false,
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
    }

    /// The background call is on its way as upstream request `upstream_id`: `false` if the
    /// task no longer runs (the caller cancels the call).
    pub fn started(&self, task_id: &str, upstream_id: i64) -> bool {
        let mut running = self.running.lock().unwrap();
        let Some(r) = running.get_mut(task_id) else { return false };
        r.upstream_id = Some(upstream_id);
        true
    }

    /// The background call could not start: the task fails with that error.
    pub fn start_failed(&self, task_id: &str, err: &RpcError) {
        self.outcome(task_id, err.response(None));
    }

    /// The task ended: its progress that still waits for the client is dropped, as progress
    /// stops at the terminal status.
    fn stop_progress(r: &Running) {
        if let (Some(token), Some(s)) = (&r.token, r.creator.upgrade()) {
            s.discard_progress(token);
        }
    }

    /// The task's retention counts from its end (a SEP-1391 operation's `keepAlive`).
    pub fn retain_after_end(&self, task_id: &str) {
        self.store.update(task_id, &mut |r| r.ttl_from_end = true);
    }

    /// The task's questions go to its creator, reachable now or not (see `Running`).
    pub fn ask_creator_later(&self, task_id: &str) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.to_creator_later = true;
        }
    }

    /// The task's status and status message, while it is kept.
    pub fn status(&self, task_id: &str) -> Option<(TaskStatus, Option<String>)> {
        self.store.get(task_id).map(|r| (r.status, r.status_message))
    }

    /// The upstream asked the client something for the task, outside the hosted call (a
    /// bridge that follows an upstream task for it).
    pub fn input_asked(&self, task_id: &str) {
        self.set_status(task_id, TaskStatus::InputRequired, TaskStatus::Working);
    }

    /// The client answered an input request of the task.
    pub fn input_answered(&self, task_id: &str) {
        self.set_status(task_id, TaskStatus::Working, TaskStatus::InputRequired);
    }

    fn set_status(&self, task_id: &str, to: TaskStatus, from: TaskStatus) {
        let mut changed = false;
        let rec = self.store.update(task_id, &mut |r| {
            if r.status == from {
                r.status = to;
                r.last_updated_at = SystemTime::now();
                changed = true;
            }
        });
        if changed && let Some(rec) = rec {
            let running = self.running.lock().unwrap();
            if let Some(r) = running.get(task_id) {
                self.announce(&rec, r);
            }
        }
    }

    /// `notifications/tasks/status` to the creating session and to sessions waiting on it.
    fn announce(&self, rec: &TaskRecord, r: &Running) {
        let note = jsonrpc::notification("notifications/tasks/status", Value::Object(rec.to_json()));
        let mut told: Vec<*const ()> = Vec::new();
        let sessions = std::iter::once(&r.creator).chain(r.result_waiters.iter().map(|(s, _)| s));
        for s in sessions.filter_map(Weak::upgrade) {
            let at = Arc::as_ptr(&s) as *const ();
            if !told.contains(&at) {
                told.push(at);
                s.to_client(note.clone(), Route::Unrelated);
            }
        }
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
    pub fn watch(&self, task_id: &str) -> Option<tokio::sync::watch::Receiver<TaskStatus>> {
        self.store.watch(task_id)
    }

    /// What a finished task's call ended with (its whole response), if it has ended so.
    pub fn stored_outcome(&self, task_id: &str) -> Option<Value> {
        self.store.get(task_id)?.outcome.as_deref().and_then(|text| serde_json::from_str(text).ok())
    }

    /// The input requests held for the task, by key, as the tasks extension lists them
    /// (`{method, params}`, without the related-task tag).
    pub fn held_input_requests(&self, task_id: &str) -> serde_json::Map<String, Value> {
        let running = self.running.lock().unwrap();
        running.get(task_id).map(|r| r.held_inputs.listed()).unwrap_or_default()
    }

    /// Answers the held input request `key` of the task with `result` (an extension
    /// client's `tasks/update`): `false` if none is held under that key.
    pub async fn answer_held_input(&self, task_id: &str, key: &str, result: Value) -> bool {
        if !result.is_object() {
            // No answer to any input request is anything but an object.
            return false;
        }
        let held = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(task_id) else { return false };
            let Some(held) = r.held_inputs.take(key) else { return false };
            (held, r.held_inputs.is_empty())
        };
        let (held, none_left) = held;
        held.answer(result).await;
        if none_left {
            self.input_answered(task_id);
        }
        true
    }

    pub fn get(&self, task_id: &str) -> Result<Value, RpcError> {
        self.store.get(task_id).map(|r| Value::Object(r.to_json())).ok_or_else(|| not_found(task_id))
    }

    /// Moves the task to `cancelled` (before answering, as the spec requires) and cancels
    /// the background call upstream.
    pub async fn cancel(&self, task_id: &str) -> Result<Value, RpcError> {
        let mut was: Option<TaskStatus> = None;
        let rec = self
            .store
            .update(task_id, &mut |r| {
                was = Some(r.status);
                if !r.status.is_terminal() {
                    r.status = TaskStatus::Cancelled;
                    r.status_message = Some("cancelled by the client".into());
                    r.last_updated_at = SystemTime::now();
                }
            })
            .ok_or_else(|| not_found(task_id))?;
        if let Some(s) = was.filter(|s| s.is_terminal()) {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!("task {task_id} is already {} and cannot be cancelled", s.as_str()),
            ));
        }
        self.expire_when_due(&rec);
        let running = self.running.lock().unwrap().remove(task_id);
        if let Some(r) = running {
            Self::stop_progress(&r);
            self.announce(&rec, &r);
            if let Some(up) = r.upstream_id {
                r.link.cancel(up, "the task was cancelled").await;
            }
        }
        Ok(Value::Object(rec.to_json()))
    }

    /// Blocks until the task is terminal, then returns exactly what the upstream returned
    /// (as a result or error response for `client_id`), tagged with the related task.
    pub async fn result(&self, task_id: &str, waiter: Weak<dyn ClientSession>, client_id: &Id) -> Value {
        let Some(mut watch) = self.store.watch(task_id) else {
            return not_found(task_id).response(Some(client_id));
        };
        let held = match self.running.lock().unwrap().get_mut(task_id) {
            Some(r) => {
                r.result_waiters.push((waiter.clone(), client_id.clone()));
                r.held_inputs.take_all()
            }
            None => Vec::new(),
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
        let ended = watch.wait_for(|s| s.is_terminal()).await.is_ok();
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.result_waiters.retain(|(s, id)| !(s.ptr_eq(&waiter) && id == client_id));
        }
        let rec = match (ended, self.store.get(task_id)) {
            (true, Some(rec)) => rec,
            _ => return not_found(task_id).response(Some(client_id)),
        };
        let outcome: Option<Value> = rec.outcome.as_deref().and_then(|text| serde_json::from_str(text).ok());
        match outcome {
            Some(mut out) if out.get("result").is_some() => {
                let mut resp = jsonrpc::result_response(client_id, out["result"].take());
                mcp_tasks::tag_related(&mut resp, "result", task_id);
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

    /// One page of the owner's tasks, after `cursor` (one this gateway issued to that owner;
    /// `None` for the first page), and the cursor of the next page.
    pub fn list(&self, owner: &str, cursor: Option<&str>) -> Result<(Vec<Value>, Option<String>), RpcError> {
        let after = match cursor {
            None => 0,
            Some(c) => self.parse_cursor(owner, c).ok_or_else(|| RpcError::new(INVALID_PARAMS, "invalid cursor"))?,
        };
        let (page, more) = self.store.list(owner, after, self.page_size);
        let next = if more { page.last().map(|r| self.cursor(owner, r.seq)) } else { None };
        Ok((page.into_iter().map(|r| Value::Object(r.to_json())).collect(), next))
    }

    fn cursor_mac(&self, owner: &str, seq: u64) -> u64 {
        use std::hash::BuildHasher;
        self.cursor_key.hash_one((owner, seq))
    }

    fn cursor(&self, owner: &str, seq: u64) -> String {
        format!("{CURSOR_PREFIX}{seq}.{:016x}", self.cursor_mac(owner, seq))
    }

    fn parse_cursor(&self, owner: &str, cursor: &str) -> Option<u64> {
        let (seq, mac) = cursor.strip_prefix(CURSOR_PREFIX)?.split_once('.')?;
        let seq: u64 = seq.parse().ok()?;
        (u64::from_str_radix(mac, 16).ok()? == self.cursor_mac(owner, seq) && seq <= self.store.last_seq())
            .then_some(seq)
    }

    /// The `CreateTaskResult` for a new task.
    pub fn create_result(rec: &TaskRecord) -> Value {
        json!({"task": Value::Object(rec.to_json())})
    }
}

/// What the link hears for a hosted task's background call.
impl TaskCalls for Hosted {
    /// The upstream answered the background call (or the link died, or it timed out).
    fn outcome(&self, task_id: &str, msg: Value) {
        let Some(msg) = self.next_round(task_id, msg) else { return };
        let mut text = serde_json::to_string(&msg).expect("values serialize");
        let mut msg = msg;
        let too_large = if text.len() > self.max_result_bytes {
            Some(format!("the result ({} bytes) exceeds max_result_bytes ({})", text.len(), self.max_result_bytes))
        } else if self.store.outcome_bytes() + text.len() > self.max_store_bytes {
            Some(format!(
                "task store is full: the result ({} bytes) does not fit in max_store_bytes ({})",
                text.len(),
                self.max_store_bytes
            ))
        } else {
            None
        };
        if let Some(why) = too_large {
            tracing::warn!(task = %task_id, "{why}");
            msg = RpcError::new(jsonrpc::INTERNAL_ERROR, why).response(None);
            text = serde_json::to_string(&msg).expect("values serialize");
        }
        let (status, message) = match msg.get("error") {
            Some(e) => (TaskStatus::Failed, e.get("message").and_then(Value::as_str).map(str::to_string)),
            None if msg.pointer("/result/isError") == Some(&Value::Bool(true)) => {
                (TaskStatus::Failed, Some("the tool reported an error".to_string()))
            }
            None => (TaskStatus::Completed, None),
        };
        let outcome: Arc<str> = text.into();
        let rec = self.store.update(task_id, &mut |r| {
            if !r.status.is_terminal() {
                r.status = status;
                // A progress message describes work in progress, not the outcome.
                r.status_message.clone_from(&message);
                r.outcome = Some(outcome.clone());
                r.last_updated_at = SystemTime::now();
            }
        });
        if let Some(rec) = &rec {
            self.expire_when_due(rec);
        }
        let running = self.running.lock().unwrap().remove(task_id);
        if let (Some(rec), Some(r)) = (rec, running) {
            Self::stop_progress(&r);
            self.announce(&rec, &r);
        }
    }

    /// Progress of the background call: forwarded under the client's token while the task
    /// runs; its message becomes the task's status message.
    fn progress(&self, task_id: &str, msg: Value) {
        if let Some(text) = msg.pointer("/params/message").and_then(Value::as_str) {
            let text = text.to_string();
            self.store.update(task_id, &mut |r| {
                if !r.status.is_terminal() {
                    r.status_message = Some(text.clone());
                    r.last_updated_at = SystemTime::now();
                }
            });
        }
        // Delivered while the task is known to run (the lock held), so that its end, which
        // removes it under the same lock, cannot come in between.
        let mut running = self.running.lock().unwrap();
        let Some(r) = running.get_mut(task_id) else { return };
        let value = msg.pointer("/params/progress").and_then(Value::as_f64);
        if let (Some(rounds), Some(v)) = (r.rounds.as_mut(), value)
            && !rounds.rises(v)
        {
            tracing::debug!(task = task_id, "dropping progress of a retry that does not rise past the last round's");
            return;
        }
        // On the stream of a `tasks/result` the creator has pending, else the creator's own.
        let route = r
            .result_waiters
            .iter()
            .find(|(s, _)| s.ptr_eq(&r.creator))
            .map(|(_, id)| Route::Related(id.clone()))
            .unwrap_or(Route::Unrelated);
        if let Some(s) = r.creator.upgrade() {
            s.to_client(msg, route);
        }
    }

    /// The upstream asks the client something while serving the task's call. It goes on the
    /// stream of a pending `tasks/result`, else to the creating session if that can be
    /// reached now, else it waits for the next `tasks/result`.
    fn input_request(&self, task_id: &str, link: &Arc<Link>, upstream_id: Id, mut msg: Value) {
        mcp_tasks::tag_related(&mut msg, "params", task_id);
        enum Target {
            To(Arc<dyn ClientSession>, Route),
            Hold,
            Nobody,
            Undeclared,
        }
        let target = {
            let mut running = self.running.lock().unwrap();
            match running.get_mut(task_id) {
                None => Target::Nobody,
                Some(r) if !declares(r.declared.as_ref(), &msg) => Target::Undeclared,
                Some(r) => {
                    let waiter = r.result_waiters.iter().find_map(|(s, id)| s.upgrade().map(|s| (s, id.clone())));
                    match (waiter, r.creator.upgrade()) {
                        (Some((s, id)), _) => Target::To(s, Route::Related(id)),
                        (None, Some(c)) if r.to_creator_later || c.reaches_client_now() => {
                            Target::To(c, Route::Unrelated)
                        }
                        // Held, also when the creator is gone: a client may come back with
                        // the task id in a new session and call tasks/result.
                        _ => match r.held_inputs.hold(link, upstream_id.clone(), msg.clone(), r.max_held) {
                            Some(_) => Target::Hold,
                            None => Target::Nobody,
                        },
                    }
                }
            }
        };
        match target {
            Target::To(session, route) => {
                self.set_status(task_id, TaskStatus::InputRequired, TaskStatus::Working);
                session.relay_server_request(link, upstream_id, msg, route, Some(task_id.into()));
            }
            Target::Hold => self.set_status(task_id, TaskStatus::InputRequired, TaskStatus::Working),
            Target::Nobody => {
                link.refuse(upstream_id, RpcError::new(jsonrpc::INTERNAL_ERROR, "no client can answer for this task"));
            }
            Target::Undeclared => link.refuse(upstream_id, undeclared(&msg)),
        }
    }

    /// The answer to an input request of a modern upstream's round (see `rounds`).
    fn input_answer(&self, answer: Value) {
        self.round_answer(answer);
    }
}
