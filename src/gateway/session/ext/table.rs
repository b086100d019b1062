//! The extension tasks a 2025-11-25 (core tasks) client has made through the gateway, in
//! front of a 2026-07-28 upstream of the tasks extension: what the session must keep because
//! the extension does not (`mcp::task_dialects`, "State the session must keep").
//!
//! Per task, by the id the upstream gave it (ids pass unchanged): the **last snapshot**, a
//! core `Task` (for `tasks/list`, which the extension has not; for the answer to a core
//! `tasks/cancel`, whose extension ack carries no task; for refusing to cancel a terminal
//! task); the **payload** once terminal (the inline `result` or `error`: a core
//! `tasks/result` is answered from it, again if asked twice); a **sticky cancelled** (a
//! core cancel answers a cancelled task at once, and the task stays so for that client,
//! whatever the server ends with); the input keys already relayed (a key is relayed once,
//! though every poll repeats it); the **poll gate**, held by whoever polls the task (its
//! background follower, a `tasks/result` waiter, the client's `tasks/get`), so that polls of
//! one task never overlap and their answers are applied in order; the **status announced**
//! to the client last (a `notifications/tasks/status` goes out once per change, whoever saw
//! it); and how many `tasks/result` wait on it (while one does, it polls, and the follower
//! does not).
//!
//! Bounded: at most `limit` tasks (the upstream's `max_tasks_per_owner`, a session being
//! one owner); when full, the oldest terminal task goes, and with none terminal a new task
//! is refused. Each in bytes ([`Bytes`], from `[tasks]`): an id longer than
//! `max_task_id_bytes` is refused; the snapshot's status message is cut to
//! `max_status_message_bytes` (for the client as for what is kept), and a snapshot whose
//! other members would still make it larger keeps the core `Task` members only; a result
//! larger than `max_result_bytes` fails the task, saying so, and an error that large keeps
//! its code and cut message.

use crate::jsonrpc::{GATEWAY_BUSY, RpcError};
use crate::mcp::paging;
use crate::mcp::task_dialects::task::{Inline, status_of};
use crate::mcp::task_messages::{TaskStatus, TaskView};
use crate::tasks::file_store::RESTARTED;
use crate::tasks::store::FollowedTask;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

fn now_ms() -> u64 {
    crate::clock::wall_now().duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

/// The cursor prefix of this table's `tasks/list` pages.
pub const CURSOR_PREFIX: &str = "ext:";
/// Tasks per `tasks/list` page.
const PAGE: usize = 50;

/// How a terminal task ended, as a core `tasks/result` answers it.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The inline result (a `CallToolResult`, untagged).
    Result(Value),
    /// The inline error (a JSON-RPC error object).
    Error(Value),
    /// Cancelled: no outcome of its own.
    Cancelled,
}

struct Entry {
    snapshot: Map<String, Value>,
    outcome: Option<Outcome>,
    /// Cancelled by the client: stays so.
    sticky_cancelled: bool,
    relayed: HashSet<String>,
    poll: Arc<tokio::sync::Mutex<()>>,
    /// The status the client was last shown (created, polled, notified).
    announced: Option<String>,
    /// `tasks/result` requests waiting on it.
    waiters: usize,
    /// When its ttl ends (none: unlimited), for what the store keeps of it.
    expires_ms: Option<u64>,
    /// Brought back after a restart, and not yet seen by the upstream since.
    revived: bool,
}

/// What a session keeps for an upstream of the tasks extension.
#[derive(Default)]
pub struct ExtState {
    /// Input requests of extension tasks waiting for the client, by the id the session gave
    /// each request.
    pub inputs: HashMap<crate::jsonrpc::Id, crate::tasks::bridge::extension::InputWait>,
    /// The extension tasks a core-tasks client made.
    pub table: ExtTable,
    /// Fired when the session ends: its tasks' background followers stop.
    pub ended: tokio_util::sync::CancellationToken,
}

pub struct ExtTable {
    tasks: HashMap<String, Entry>,
    /// Ids, oldest first.
    order: VecDeque<String>,
    limit: usize,
    bytes: Bytes,
}

/// What one task of the table may hold, in bytes (`[tasks]`).
#[derive(Clone, Copy, Debug)]
pub struct Bytes {
    pub id: usize,
    pub message: usize,
    pub result: usize,
}

impl Default for Bytes {
    fn default() -> Bytes {
        Bytes::of(&crate::config::TasksConfig::default())
    }
}

/// The core `Task` members: what a snapshot too large with the upstream's others keeps.
const CORE_MEMBERS: [&str; 7] =
    ["taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"];

fn json_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(usize::MAX, |t| t.len())
}

impl Bytes {
    pub fn of(tasks: &crate::config::TasksConfig) -> Bytes {
        Bytes { id: tasks.max_task_id_bytes, message: tasks.max_status_message_bytes, result: tasks.max_result_bytes }
    }

    /// `task` (the table's task `id`) as the table keeps and shows it: its id the table's
    /// (an answer naming another is not believed), its times numbers or nothing, its status
    /// message cut; if its members still make it larger than a cut message and some room,
    /// the core members only.
    fn snapshot(&self, id: &str, mut task: Map<String, Value>) -> Map<String, Value> {
        task.insert("taskId".into(), id.into());
        for k in ["ttl", "pollInterval"] {
            if task.get(k).is_some_and(|v| !v.is_number() && !v.is_null()) {
                task.remove(k);
            }
        }
        if let Some(Value::String(m)) = task.get_mut("statusMessage")
            && m.len() > self.message
        {
            *m = crate::tasks::text_bounds::bounded(m, self.message).into_owned();
        }
        let members: usize = task.iter().map(|(k, v)| k.len() + json_len(v)).sum();
        if members > self.message + self.id + 1024 {
            task.retain(|k, _| CORE_MEMBERS.contains(&k.as_str()));
            for k in ["createdAt", "lastUpdatedAt"] {
                if task.get(k).is_some_and(|v| json_len(v) > 64) {
                    task.remove(k);
                }
            }
        }
        task
    }

    /// An outcome as the table keeps it: a result too large fails the task, an error too
    /// large keeps its code and cut message.
    fn outcome(&self, outcome: Outcome) -> Outcome {
        let too_large = |v: &Value| json_len(v) > self.result;
        match outcome {
            Outcome::Result(r) if too_large(&r) => Outcome::Error(
                RpcError::new(
                    crate::jsonrpc::INTERNAL_ERROR,
                    format!(
                        "the task's result ({} bytes) is larger than this gateway keeps ([tasks] max_result_bytes = {})",
                        json_len(&r),
                        self.result
                    ),
                )
                .to_value(),
            ),
            Outcome::Error(e) if too_large(&e) || e.get("message").and_then(Value::as_str).is_some_and(|m| m.len() > self.message) => {
                let mut kept = Map::new();
                if let Some(code) = e.get("code") {
                    kept.insert("code".into(), code.clone());
                }
                let message = e.get("message").and_then(Value::as_str).unwrap_or_default();
                kept.insert("message".into(), crate::tasks::text_bounds::bounded(message, self.message).into_owned().into());
                Outcome::Error(Value::Object(kept))
            }
            other => other,
        }
    }
}

impl Default for ExtTable {
    fn default() -> ExtTable {
        ExtTable::new(100)
    }
}

impl ExtTable {
    pub fn new(limit: usize) -> ExtTable {
        ExtTable { tasks: HashMap::new(), order: VecDeque::new(), limit: limit.max(1), bytes: Bytes::default() }
    }

    /// The bounds, from the configuration: tasks (the upstream's), and bytes.
    pub fn set_limit(&mut self, limit: usize, bytes: Bytes) {
        self.limit = limit.max(1);
        self.bytes = bytes;
    }

    pub fn contains(&self, id: &str) -> bool {
        self.tasks.contains_key(id)
    }

    /// Whether a task can be added now (the table has room, or a terminal task to evict).
    pub fn has_room(&self) -> bool {
        self.tasks.len() < self.limit || self.tasks.values().any(|e| e.outcome.is_some())
    }

    /// A task the upstream created (its `CreateTaskResult`, translated): refused when the
    /// table is full of running tasks, or its id is too long. Returns the task as the client
    /// is to be shown it.
    pub fn insert(&mut self, task: Map<String, Value>, inline: Inline) -> Result<Map<String, Value>, RpcError> {
        let view = TaskView::of_map(&task);
        let Some(id) = view.id().map(str::to_string) else {
            return Err(RpcError::new(crate::jsonrpc::INTERNAL_ERROR, "the upstream's task has no taskId"));
        };
        crate::tasks::text_bounds::task_id_within(&id, self.bytes.id)?;
        if self.tasks.len() >= self.limit && !self.tasks.contains_key(&id) {
            let Some(pos) = self.order.iter().position(|k| self.tasks.get(k).is_some_and(|e| e.outcome.is_some()))
            else {
                return Err(RpcError::new(
                    GATEWAY_BUSY,
                    format!("too many tasks running for this session (max_tasks_per_owner = {})", self.limit),
                ));
            };
            if let Some(old) = self.order.remove(pos) {
                self.tasks.remove(&old);
            }
        }
        if !self.tasks.contains_key(&id) {
            self.order.push_back(id.clone());
        }
        let entry = Entry {
            snapshot: Map::new(),
            outcome: None,
            sticky_cancelled: false,
            relayed: HashSet::new(),
            poll: Arc::new(tokio::sync::Mutex::new(())),
            announced: view.status_text().map(str::to_string),
            waiters: 0,
            expires_ms: view.ttl_ms().map(|ttl| now_ms().saturating_add(ttl)),
            revived: false,
        };
        self.tasks.insert(id.clone(), entry);
        Ok(self.observe(&id, task, inline).unwrap_or_default())
    }

    /// The task's snapshot if its status is not the one the client was last shown (which it
    /// is from now on); `None` if it is, or the task is not here.
    pub fn status_news(&mut self, id: &str) -> Option<Map<String, Value>> {
        let e = self.tasks.get_mut(id)?;
        let status = TaskView::of_map(&e.snapshot).status_text()?;
        if e.announced.as_deref() == Some(status) {
            return None;
        }
        e.announced = Some(status.to_string());
        Some(e.snapshot.clone())
    }

    /// Whether the task is here and has not ended for the client (someone should follow it).
    pub fn is_open(&self, id: &str) -> bool {
        self.tasks.get(id).is_some_and(|e| e.outcome.is_none())
    }

    /// The tasks that have not ended for the client: what its session's end cancels.
    pub fn open_tasks(&self) -> Vec<String> {
        self.order.iter().filter(|id| self.is_open(id)).cloned().collect()
    }

    /// A `tasks/result` starts (`true`) or stops (`false`) waiting on the task.
    pub fn set_waiting(&mut self, id: &str, waiting: bool) {
        if let Some(e) = self.tasks.get_mut(id) {
            e.waiters = if waiting { e.waiters + 1 } else { e.waiters.saturating_sub(1) };
        }
    }

    /// Whether a `tasks/result` waits on the task (and so polls it).
    pub fn waited_on(&self, id: &str) -> bool {
        self.tasks.get(id).is_some_and(|e| e.waiters > 0)
    }

    /// A fresh look at the task (a `tasks/get` answer, translated): the snapshot as the
    /// client sees it now (cancelled if the client cancelled it), or `None` for a task not
    /// here. A terminal task's payload is kept; a task already terminal stays as it ended.
    pub fn observe(&mut self, id: &str, mut task: Map<String, Value>, inline: Inline) -> Option<Map<String, Value>> {
        let e = self.tasks.get_mut(id)?;
        if e.sticky_cancelled || e.outcome.is_some() {
            return Some(e.snapshot.clone());
        }
        e.revived = false;
        let status = status_of(&task).ok();
        let outcome = match (status, inline) {
            (_, Inline::Result(mut r)) => {
                if let Some(r) = r.as_object_mut() {
                    r.remove("resultType");
                }
                Some(Outcome::Result(r))
            }
            (_, Inline::Error(e)) => Some(Outcome::Error(e)),
            (Some(TaskStatus::Cancelled), _) => Some(Outcome::Cancelled),
            (Some(s), _) if s.is_terminal() => {
                // Terminal without what its status needs inline: an error of the upstream's.
                task.insert("status".into(), TaskStatus::Failed.as_str().into());
                Some(Outcome::Error(
                    RpcError::new(crate::jsonrpc::INTERNAL_ERROR, "the upstream's task ended without its outcome")
                        .to_value(),
                ))
            }
            _ => None,
        };
        let mut task = self.bytes.snapshot(id, task);
        let outcome = outcome.map(|o| self.bytes.outcome(o));
        if matches!(&outcome, Some(Outcome::Error(_)))
            && task.get("status").and_then(Value::as_str) == Some("completed")
        {
            // A result too large to keep: the task failed, for the client.
            task.insert("status".into(), TaskStatus::Failed.as_str().into());
        }
        e.outcome = outcome;
        e.snapshot = task;
        Some(e.snapshot.clone())
    }

    pub fn snapshot(&self, id: &str) -> Option<&Map<String, Value>> {
        self.tasks.get(id).map(|e| &e.snapshot)
    }

    pub fn outcome(&self, id: &str) -> Option<Outcome> {
        self.tasks.get(id).and_then(|e| e.outcome.clone())
    }

    /// The client cancelled the task: `cancelled` (the snapshot given) from now on.
    pub fn cancel(&mut self, id: &str, cancelled: Map<String, Value>) {
        let cancelled = self.bytes.snapshot(id, cancelled);
        if let Some(e) = self.tasks.get_mut(id) {
            // The client is answered with it: no notification repeats it.
            e.announced = TaskView::of_map(&cancelled).status_text().map(str::to_string);
            e.snapshot = cancelled;
            e.sticky_cancelled = true;
            e.outcome = Some(Outcome::Cancelled);
        }
    }

    /// Marks input key `key` of task `id` relayed; `false` if it was already (or the task is
    /// gone, or it holds `max` keys).
    pub fn relay(&mut self, id: &str, key: &str, max: usize) -> bool {
        match self.tasks.get_mut(id) {
            Some(e) if !e.relayed.contains(key) && e.relayed.len() < max => e.relayed.insert(key.to_string()),
            _ => false,
        }
    }

    /// The gate whoever polls the task holds.
    pub fn poll_gate(&self, id: &str) -> Option<Arc<tokio::sync::Mutex<()>>> {
        self.tasks.get(id).map(|e| e.poll.clone())
    }

    /// What the store keeps of the tasks, oldest first, so that a session revived after a
    /// restart follows them again ([`ExtTable::revive`]).
    pub fn followed(&self) -> Vec<FollowedTask> {
        self.order
            .iter()
            .filter_map(|id| {
                let e = self.tasks.get(id)?;
                Some(FollowedTask { id: id.clone(), task: Value::Object(e.snapshot.clone()), expires_ms: e.expires_ms })
            })
            .collect()
    }

    /// The tasks of a session from before a restart: each as the client was last shown it,
    /// to be asked of the upstream again. One the client cancelled stays cancelled; one that
    /// had ended otherwise is open again, since its outcome was not kept and the upstream
    /// still has it; past the limit, the newest are kept.
    pub fn revive(&mut self, tasks: &[FollowedTask]) {
        let from = tasks.len().saturating_sub(self.limit);
        for t in &tasks[from..] {
            let Value::Object(mut snapshot) = t.task.clone() else { continue };
            snapshot.insert("taskId".into(), t.id.clone().into());
            let cancelled = status_of(&snapshot).ok() == Some(TaskStatus::Cancelled);
            if !cancelled && status_of(&snapshot).is_ok_and(|s| s.is_terminal()) {
                snapshot.insert("status".into(), TaskStatus::Working.as_str().into());
            }
            if self.insert(snapshot.clone(), Inline::None).is_err() {
                continue;
            }
            let Some(e) = self.tasks.get_mut(&t.id) else { continue };
            e.expires_ms = t.expires_ms;
            if cancelled {
                e.sticky_cancelled = true;
                e.outcome = Some(Outcome::Cancelled);
            } else {
                e.revived = true;
            }
        }
    }

    /// The upstream does not know task `id`: if the task was revived after a restart and
    /// not seen since, it is `failed` from now on, saying so (its snapshot returned); else
    /// `None` (the upstream's answer stands).
    pub fn lost_in_restart(&mut self, id: &str) -> Option<Map<String, Value>> {
        let e = self.tasks.get_mut(id).filter(|e| e.revived)?;
        e.revived = false;
        let message = format!("{RESTARTED}, and the upstream no longer knows it");
        e.snapshot.insert("status".into(), TaskStatus::Failed.as_str().into());
        e.snapshot.insert("statusMessage".into(), message.clone().into());
        e.outcome = Some(Outcome::Error(RpcError::new(crate::jsonrpc::INTERNAL_ERROR, message).to_value()));
        Some(e.snapshot.clone())
    }

    /// One `tasks/list` page from `cursor` (`ext:<n>`; `None`: the first), and the next.
    pub fn list(&self, cursor: Option<&str>) -> Result<(Vec<Value>, Option<String>), RpcError> {
        let from = match cursor {
            None => 0,
            Some(c) => c
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n <= self.order.len())
                .ok_or_else(paging::invalid_cursor)?,
        };
        let page: Vec<Value> = self
            .order
            .iter()
            .skip(from)
            .take(PAGE)
            .filter_map(|id| self.tasks.get(id))
            .map(|e| Value::Object(e.snapshot.clone()))
            .collect();
        let next = (from + PAGE < self.order.len()).then(|| format!("{CURSOR_PREFIX}{}", from + PAGE));
        Ok((page, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::INVALID_PARAMS;
    use serde_json::json;

    fn task(id: &str, status: &str) -> Map<String, Value> {
        json!({"taskId": id, "status": status, "createdAt": "t", "lastUpdatedAt": "t", "ttl": null})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn outcomes_are_kept_and_cancel_is_sticky() {
        let mut t = ExtTable::new(10);
        t.insert(task("a", "working"), Inline::None).unwrap();
        assert_eq!(t.outcome("a"), None);
        let r = json!({"content": [], "resultType": "complete"});
        t.observe("a", task("a", "completed"), Inline::Result(r));
        assert_eq!(t.outcome("a"), Some(Outcome::Result(json!({"content": []}))));
        // Terminal stays terminal.
        t.observe("a", task("a", "working"), Inline::None);
        assert_eq!(t.snapshot("a").unwrap()["status"], "completed");

        t.insert(task("b", "working"), Inline::None).unwrap();
        t.cancel("b", task("b", "cancelled"));
        let seen = t.observe("b", task("b", "completed"), Inline::Result(json!({})));
        assert_eq!(seen.unwrap()["status"], "cancelled", "sticky");
        assert_eq!(t.outcome("b"), Some(Outcome::Cancelled));
        assert!(t.observe("nope", task("nope", "working"), Inline::None).is_none());
    }

    #[test]
    fn bounded_evicting_only_terminal_tasks() {
        let mut t = ExtTable::new(2);
        t.insert(task("a", "working"), Inline::None).unwrap();
        t.insert(task("b", "working"), Inline::None).unwrap();
        assert_eq!(t.insert(task("c", "working"), Inline::None).unwrap_err().code, GATEWAY_BUSY);
        t.observe("a", task("a", "failed"), Inline::Error(json!({"code": -1, "message": "x"})));
        t.insert(task("c", "working"), Inline::None).unwrap();
        assert!(!t.contains("a") && t.contains("b") && t.contains("c"));
    }

    #[test]
    fn each_status_is_news_once_and_open_tasks_are_the_unended() {
        let mut t = ExtTable::new(10);
        t.insert(task("a", "working"), Inline::None).unwrap();
        assert_eq!(t.status_news("a"), None, "the client saw it created working");
        t.observe("a", task("a", "input_required"), Inline::None);
        assert_eq!(t.status_news("a").unwrap()["status"], "input_required");
        assert_eq!(t.status_news("a"), None, "once");
        t.insert(task("b", "working"), Inline::None).unwrap();
        t.insert(task("c", "working"), Inline::None).unwrap();
        t.cancel("b", task("b", "cancelled"));
        assert_eq!(t.status_news("b"), None, "the client's own cancel is answered, not announced");
        assert_eq!(t.open_tasks(), vec!["a".to_string(), "c".to_string()]);
        t.observe("c", task("c", "completed"), Inline::Result(json!({})));
        assert_eq!(t.open_tasks(), vec!["a".to_string()]);
        assert!(!t.waited_on("a"));
        t.set_waiting("a", true);
        t.set_waiting("a", true);
        t.set_waiting("a", false);
        assert!(t.waited_on("a"));
        t.set_waiting("a", false);
        assert!(!t.waited_on("a"));
    }

    #[test]
    fn a_revived_table_follows_again_and_fails_what_the_upstream_forgot() {
        let mut before = ExtTable::new(10);
        let mut with_ttl = task("a", "working");
        with_ttl.insert("ttl".into(), 60_000.into());
        before.insert(with_ttl, Inline::None).unwrap();
        before.insert(task("b", "working"), Inline::None).unwrap();
        before.observe("b", task("b", "completed"), Inline::Result(json!({"content": []})));
        before.insert(task("c", "working"), Inline::None).unwrap();
        before.cancel("c", task("c", "cancelled"));
        let kept = before.followed();
        assert_eq!(kept.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert!(kept[0].expires_ms.is_some_and(|e| e > now_ms()) && kept[1].expires_ms.is_none());

        let mut after = ExtTable::new(10);
        after.revive(&kept);
        assert_eq!(after.open_tasks(), ["a", "b"], "the ended one is asked again: its outcome was not kept");
        assert_eq!(after.outcome("c"), Some(Outcome::Cancelled), "the client's cancel sticks");
        assert_eq!(after.followed()[0].expires_ms, kept[0].expires_ms);
        // The upstream still knows a: seen, it is no longer a revived task.
        after.observe("a", task("a", "working"), Inline::None);
        assert!(after.lost_in_restart("a").is_none(), "seen since the restart: the upstream's answer stands");
        let lost = after.lost_in_restart("b").expect("b was not seen since");
        assert_eq!(lost["status"], "failed");
        assert!(lost["statusMessage"].as_str().unwrap().starts_with(RESTARTED));
        assert!(matches!(after.outcome("b"), Some(Outcome::Error(_))));
        assert!(after.lost_in_restart("c").is_none() && after.lost_in_restart("nope").is_none());

        let mut small = ExtTable::new(2);
        small.revive(&kept);
        assert!(!small.contains("a") && small.contains("b") && small.contains("c"), "the newest are kept");
    }

    #[test]
    fn what_an_upstream_sends_is_kept_within_its_bytes() {
        let mut t = ExtTable::new(10);
        t.set_limit(10, Bytes { id: 64, message: 100, result: 1000 });
        // An id too long is refused, naming the key.
        let e = t.insert(task(&"i".repeat(65), "working"), Inline::None).unwrap_err();
        assert!(e.message.contains("max_task_id_bytes = 64"), "{}", e.message);
        assert!(t.list(None).unwrap().0.is_empty());
        // A long status message is cut; huge unknown members leave the core ones only.
        let mut big = task("a", "working");
        big.insert("statusMessage".into(), "m".repeat(10_000).into());
        big.insert("x-pad".into(), "p".repeat(10_000).into());
        let shown = t.insert(big.clone(), Inline::None).unwrap();
        assert!(shown["statusMessage"].as_str().unwrap().len() <= 100);
        assert!(shown.get("x-pad").is_none() && shown["taskId"] == "a");
        // An answer naming another id, or with times that are not numbers, is not believed.
        let mut odd = task("a", "working");
        odd.insert("taskId".into(), "x".repeat(10_000).into());
        odd.insert("ttl".into(), "t".repeat(10_000).into());
        let seen = t.observe("a", odd, Inline::None).unwrap();
        assert_eq!(seen["taskId"], "a");
        assert!(seen.get("ttl").is_none());
        // Small unknown members pass.
        let mut small = task("b", "working");
        small.insert("x-note".into(), "kept".into());
        assert_eq!(t.insert(small, Inline::None).unwrap()["x-note"], "kept");
        // A result too large fails the task, saying so; an error too large is cut.
        let seen = t.observe("a", task("a", "completed"), Inline::Result(json!({"text": "r".repeat(2000)}))).unwrap();
        assert_eq!(seen["status"], "failed");
        let Some(Outcome::Error(e)) = t.outcome("a") else { panic!("{:?}", t.outcome("a")) };
        assert!(e["message"].as_str().unwrap().contains("max_result_bytes = 1000"), "{e}");
        let err = json!({"code": -32000, "message": "e".repeat(5000), "data": "d".repeat(5000)});
        t.observe("b", task("b", "failed"), Inline::Error(err));
        let Some(Outcome::Error(e)) = t.outcome("b") else { panic!() };
        assert!(e.get("data").is_none() && e["code"] == -32000 && e["message"].as_str().unwrap().len() <= 100);
        // What the store keeps of them is as small.
        let kept = serde_json::to_string(&t.followed()).unwrap();
        assert!(kept.len() < 1000, "{}", kept.len());
    }

    #[test]
    fn pages_and_relayed_keys() {
        let mut t = ExtTable::new(200);
        for i in 0..120 {
            t.insert(task(&format!("t{i}"), "working"), Inline::None).unwrap();
        }
        let (p1, c1) = t.list(None).unwrap();
        assert_eq!((p1.len(), c1.as_deref()), (50, Some("ext:50")));
        let (p3, c3) = t.list(Some("ext:100")).unwrap();
        assert_eq!((p3.len(), c3), (20, None));
        assert_eq!(t.list(Some("bogus")).unwrap_err().code, INVALID_PARAMS);
        assert!(t.relay("t1", "k", 4));
        assert!(!t.relay("t1", "k", 4), "once");
        assert!(!t.relay("gone", "k", 4));
    }
}
