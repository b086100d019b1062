//! Hosted tasks: the gateway answers a task-augmented `tools/call` at once, runs the ordinary
//! blocking call upstream in the background, and serves `tasks/get|result|list|cancel` from
//! its store. It routes what the background call produces: progress to the client's token,
//! input requests (elicitation, sampling) to a waiting `tasks/result` or the creating session,
//! and the outcome into the store.

use crate::config::UpstreamTasks;
use crate::gateway::link::Link;
use crate::gateway::session::{Route, Session};
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, RpcError};
use crate::mcp::tasks::{self as mcp_tasks, TaskStatus};
use crate::tasks::store::{MemoryStore, TaskRecord, TaskStore};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

/// A hosted task whose background call is still running.
struct Running {
    /// Held so the link outlives the session that started the task.
    link: Arc<Link>,
    /// Known once the call is on its way.
    upstream_id: Option<i64>,
    creator: Weak<Session>,
    /// Sessions blocked in `tasks/result` on this task, with that request's id.
    result_waiters: Vec<(Weak<Session>, Id)>,
    /// Input requests that found no client to ask yet; the next `tasks/result` gets them.
    held_inputs: Vec<(Arc<Link>, Id, Value)>,
}

pub struct Hosted {
    store: Arc<dyn TaskStore>,
    running: Mutex<HashMap<Arc<str>, Running>>,
    /// Tasks per `tasks/list` page.
    page_size: usize,
}

/// Input requests held per task while no client can be asked.
const MAX_HELD_INPUTS: usize = 16;

pub fn not_found(task_id: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("task not found or expired: {task_id}"))
}

/// 128 random bits as hex: until authentication exists, the task id is the capability.
fn new_task_id() -> String {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b).expect("the OS random source works");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Hosted {
    pub fn new(max_tasks: usize, page_size: usize) -> Arc<Hosted> {
        Arc::new(Hosted {
            store: Arc::new(MemoryStore::new(max_tasks)),
            running: Mutex::new(HashMap::new()),
            page_size,
        })
    }

    pub fn owns(&self, task_id: &str) -> bool {
        self.store.get(task_id).is_some()
    }

    /// Removes expired tasks every `every`, cancelling the background call of running ones.
    pub fn start_sweeper(self: &Arc<Self>, every: Duration) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(h) = me.upgrade() else { return };
                for rec in h.store.remove_expired(SystemTime::now()) {
                    let running = h.running.lock().unwrap().remove(rec.id.as_str());
                    if let Some(Running { link, upstream_id: Some(up), .. }) = running {
                        tracing::info!(task = %rec.id, "task expired while running; cancelling its call");
                        link.cancel(up, "the task's ttl expired").await;
                    }
                }
            }
        });
    }

    /// Creates a task for a call about to start. The ttl is the client's (or the default),
    /// capped at the configured maximum.
    pub fn create(
        &self,
        owner: &str,
        upstream: &str,
        policy: &UpstreamTasks,
        requested_ttl: Option<u64>,
    ) -> Result<TaskRecord, RpcError> {
        let ttl = requested_ttl.map(Duration::from_millis).unwrap_or(policy.ttl).min(policy.max_ttl);
        let rec = TaskRecord::new(new_task_id(), owner.into(), upstream.into(), ttl, policy.poll_interval);
        self.store
            .insert(rec.clone(), policy.max_tasks_per_owner)
            .map_err(|e| RpcError::new(GATEWAY_BUSY, format!("cannot create a task: {e}")))?;
        Ok(self.store.get(&rec.id).unwrap_or(rec))
    }

    /// The background call is about to start on `link`, for the session `creator`.
    pub fn track(&self, task_id: &str, link: Arc<Link>, creator: Weak<Session>) {
        self.running.lock().unwrap().insert(
            task_id.into(),
            Running { link, upstream_id: None, creator, result_waiters: Vec::new(), held_inputs: Vec::new() },
        );
    }

    /// The background call is on its way as upstream request `upstream_id`.
    pub fn started(&self, task_id: &str, upstream_id: i64) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.upstream_id = Some(upstream_id);
        }
    }

    /// The background call could not start: the task fails with that error.
    pub fn start_failed(&self, task_id: &str, err: &RpcError) {
        self.outcome(task_id, err.response(None));
    }

    /// The upstream answered the background call (or the link died).
    pub fn outcome(&self, task_id: &str, msg: Value) {
        let (status, message) = match msg.get("error") {
            Some(e) => (TaskStatus::Failed, e.get("message").and_then(Value::as_str).map(str::to_string)),
            None if msg.pointer("/result/isError") == Some(&Value::Bool(true)) => {
                (TaskStatus::Failed, Some("the tool reported an error".to_string()))
            }
            None => (TaskStatus::Completed, None),
        };
        let outcome: Arc<str> = serde_json::to_string(&msg).expect("values serialize").into();
        let rec = self.store.update(task_id, &mut |r| {
            if !r.status.is_terminal() {
                r.status = status;
                // A progress message describes work in progress, not the outcome.
                r.status_message.clone_from(&message);
                r.outcome = Some(outcome.clone());
                r.last_updated_at = SystemTime::now();
            }
        });
        let running = self.running.lock().unwrap().remove(task_id);
        if let (Some(rec), Some(r)) = (rec, running) {
            self.announce(&rec, &r);
        }
    }

    /// Progress of the background call: forwarded under the client's token while the task
    /// runs; its message becomes the task's status message.
    pub fn progress(&self, task_id: &str, msg: Value) {
        let Some(creator) = self.running.lock().unwrap().get(task_id).map(|r| r.creator.clone()) else { return };
        if let Some(text) = msg.pointer("/params/message").and_then(Value::as_str) {
            let text = text.to_string();
            self.store.update(task_id, &mut |r| {
                if !r.status.is_terminal() {
                    r.status_message = Some(text.clone());
                    r.last_updated_at = SystemTime::now();
                }
            });
        }
        if let Some(s) = creator.upgrade() {
            s.to_client(msg, Route::Unrelated);
        }
    }

    /// The upstream asks the client something while serving the task's call. It goes on the
    /// stream of a pending `tasks/result`, else to the creating session if that can be
    /// reached now, else it waits for the next `tasks/result`.
    pub fn input_request(&self, task_id: &str, link: &Arc<Link>, upstream_id: Id, mut msg: Value) {
        mcp_tasks::tag_related(&mut msg, "params", task_id);
        enum Target {
            To(Arc<Session>, Route),
            Hold,
            Nobody,
        }
        let target = {
            let mut running = self.running.lock().unwrap();
            match running.get_mut(task_id) {
                None => Target::Nobody,
                Some(r) => {
                    let waiter = r.result_waiters.iter().find_map(|(s, id)| s.upgrade().map(|s| (s, id.clone())));
                    match (waiter, r.creator.upgrade()) {
                        (Some((s, id)), _) => Target::To(s, Route::Related(id)),
                        (None, Some(c)) if c.reaches_client_now() => Target::To(c, Route::Unrelated),
                        // Held, also when the creator is gone: a client may come back with
                        // the task id in a new session and call tasks/result.
                        _ if r.held_inputs.len() < MAX_HELD_INPUTS => {
                            r.held_inputs.push((link.clone(), upstream_id.clone(), msg.clone()));
                            Target::Hold
                        }
                        _ => Target::Nobody,
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
                let err = RpcError::new(jsonrpc::INTERNAL_ERROR, "no client can answer for this task");
                let link = link.clone();
                tokio::spawn(async move {
                    let _ = link.send(err.response(Some(&upstream_id))).await;
                });
            }
        }
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
        let mut told: Vec<*const Session> = Vec::new();
        let sessions = std::iter::once(&r.creator).chain(r.result_waiters.iter().map(|(s, _)| s));
        for s in sessions.filter_map(Weak::upgrade) {
            if !told.contains(&Arc::as_ptr(&s)) {
                told.push(Arc::as_ptr(&s));
                s.to_client(note.clone(), Route::Unrelated);
            }
        }
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
        let running = self.running.lock().unwrap().remove(task_id);
        if let Some(r) = running {
            self.announce(&rec, &r);
            if let Some(up) = r.upstream_id {
                r.link.cancel(up, "the task was cancelled").await;
            }
        }
        Ok(Value::Object(rec.to_json()))
    }

    /// Blocks until the task is terminal, then returns exactly what the upstream returned
    /// (as a result or error response for `client_id`), tagged with the related task.
    pub async fn result(&self, task_id: &str, waiter: Weak<Session>, client_id: &Id) -> Value {
        let Some(mut watch) = self.store.watch(task_id) else {
            return not_found(task_id).response(Some(client_id));
        };
        let held = match self.running.lock().unwrap().get_mut(task_id) {
            Some(r) => {
                r.result_waiters.push((waiter.clone(), client_id.clone()));
                std::mem::take(&mut r.held_inputs)
            }
            None => Vec::new(),
        };
        if let Some(s) = waiter.upgrade() {
            for (link, upstream_id, msg) in held {
                s.relay_server_request(
                    &link,
                    upstream_id,
                    msg,
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

    /// One page of the owner's tasks. `cursor` is `None` for the first page.
    pub fn list(&self, owner: &str, after: u64) -> (Vec<Value>, Option<u64>) {
        let (page, more) = self.store.list(owner, after, self.page_size);
        let next = if more { page.last().map(|r| r.seq) } else { None };
        (page.into_iter().map(|r| Value::Object(r.to_json())).collect(), next)
    }

    /// The `CreateTaskResult` for a new task.
    pub fn create_result(rec: &TaskRecord) -> Value {
        json!({"task": Value::Object(rec.to_json())})
    }
}
