//! The task store: bounded, owner-scoped task records with their final outcome, and waiters
//! that wake on status changes.
//!
//! [`TaskStore`] is the seam for a shared backend (several gateway replicas); [`MemoryStore`]
//! is the embedded default. No task is evicted to make room: a full store (by count, per
//! client, or by the bytes of retained outcomes) refuses new tasks. A finished task is
//! removed once its ttl, counted from creation, has passed; a running one never is.

use crate::mcp::tasks::TaskStatus;
use lru::LruCache;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub id: String,
    /// Who may see it (get, fetch, cancel, list): the creating session until
    /// authentication exists.
    pub owner: String,
    /// Whose tasks count against `max_tasks_per_owner`: the client's identity (its remote
    /// address until authentication exists).
    pub client: String,
    pub upstream: String,
    /// Creation order, for `tasks/list` cursors.
    pub seq: u64,
    pub status: TaskStatus,
    pub status_message: Option<String>,
    pub created_at: SystemTime,
    pub last_updated_at: SystemTime,
    pub ttl: Duration,
    pub poll_interval: Duration,
    /// The upstream's response message (result or error) as JSON text, once the task is
    /// terminal. Kept as text: a parsed tree costs several times its size, and it is read
    /// once or twice.
    pub outcome: Option<Arc<str>>,
    /// The ttl counts from the task's end, not its creation (a SEP-1391 `keepAlive`).
    pub ttl_from_end: bool,
}

impl TaskRecord {
    pub fn new(
        id: String,
        owner: String,
        client: String,
        upstream: String,
        ttl: Duration,
        poll_interval: Duration,
    ) -> TaskRecord {
        let now = SystemTime::now();
        TaskRecord {
            id,
            owner,
            client,
            upstream,
            seq: 0,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl,
            poll_interval,
            outcome: None,
            ttl_from_end: false,
        }
    }

    /// The 2025-11-25 `Task` object.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut t = Map::new();
        t.insert("taskId".into(), self.id.clone().into());
        t.insert("status".into(), self.status.as_str().into());
        if let Some(m) = &self.status_message {
            t.insert("statusMessage".into(), m.clone().into());
        }
        t.insert("createdAt".into(), rfc3339(self.created_at).into());
        t.insert("lastUpdatedAt".into(), rfc3339(self.last_updated_at).into());
        t.insert("ttl".into(), (self.ttl.as_millis() as u64).into());
        t.insert("pollInterval".into(), (self.poll_interval.as_millis() as u64).into());
        t
    }

    /// When a finished task may be removed: its ttl after creation, but never before a
    /// moment after it finished, so that a waiting `tasks/result` still finds it.
    pub fn expires_at(&self) -> SystemTime {
        if self.ttl_from_end {
            return self.last_updated_at + self.ttl;
        }
        (self.created_at + self.ttl).max(self.last_updated_at + REAP_GRACE.min(self.ttl))
    }

    fn outcome_len(&self) -> usize {
        self.outcome.as_ref().map_or(0, |o| o.len())
    }
}

/// How long a finished task is kept at least, even when its ttl passed while it ran.
const REAP_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// The store holds `limit` tasks, running or kept until their ttl.
    Full { limit: usize },
    /// The retained outcomes fill `limit` bytes.
    BytesFull { limit: usize },
    /// The client holds `limit` tasks.
    ClientFull { limit: usize },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Full { limit } => {
                write!(f, "task store is full ({limit} tasks, max_tasks; finished ones are kept until their ttl)")
            }
            StoreError::BytesFull { limit } => {
                write!(f, "task store is full ({limit} bytes of retained results, max_store_bytes)")
            }
            StoreError::ClientFull { limit } => {
                write!(f, "too many tasks for this client (limit {limit}, max_tasks_per_owner)")
            }
        }
    }
}

/// Storage for task records. Implementations keep their own bounds.
pub trait TaskStore: Send + Sync {
    /// Adds a task (its `seq` is assigned here), unless a limit refuses it.
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> Result<(), StoreError>;
    fn get(&self, id: &str) -> Option<TaskRecord>;
    /// Changes a task with `f`; returns the record after the change.
    fn update(&self, id: &str, f: &mut dyn FnMut(&mut TaskRecord)) -> Option<TaskRecord>;
    /// The owner's tasks with `seq` greater than `after`, oldest first, at most `limit`; and
    /// whether more follow.
    fn list(&self, owner: &str, after: u64, limit: usize) -> (Vec<TaskRecord>, bool);
    /// A receiver that sees each status change; closed when the task is removed.
    fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>>;
    /// Removes finished tasks whose ttl has passed; returns them.
    fn remove_expired(&self, now: SystemTime) -> Vec<TaskRecord>;
    /// Removes task `id` if it is finished and its ttl has passed.
    fn remove_if_expired(&self, id: &str, now: SystemTime) -> Option<TaskRecord>;
    /// The highest `seq` handed out so far.
    fn last_seq(&self) -> u64;
    /// Bytes of retained outcomes.
    fn outcome_bytes(&self) -> usize;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Entry {
    rec: TaskRecord,
    /// Wakes waiters on status changes; dropped once the task is terminal (nothing changes
    /// after that, and a finished task costs less without it).
    tx: Option<watch::Sender<TaskStatus>>,
}

struct Inner {
    running: HashMap<String, Entry>,
    /// Finished tasks, most recently used last (a shared backend would order by expiry).
    finished: LruCache<String, Entry>,
    per_client: HashMap<String, usize>,
    next_seq: u64,
    outcome_bytes: usize,
}

/// The in-memory store.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_tasks: usize,
    max_bytes: usize,
}

impl MemoryStore {
    /// At most `max_tasks` tasks, and `max_bytes` bytes of retained outcomes.
    pub fn new(max_tasks: usize, max_bytes: usize) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Inner {
                running: HashMap::new(),
                finished: LruCache::unbounded(),
                per_client: HashMap::new(),
                next_seq: 1,
                outcome_bytes: 0,
            }),
            max_tasks,
            max_bytes,
        }
    }
}

impl Inner {
    fn release(&mut self, rec: &TaskRecord) {
        self.outcome_bytes -= rec.outcome_len();
        if let Some(n) = self.per_client.get_mut(&rec.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&rec.client);
            }
        }
    }
}

impl TaskStore for MemoryStore {
    fn insert(&self, mut rec: TaskRecord, client_limit: usize) -> Result<(), StoreError> {
        let mut st = self.inner.lock().unwrap();
        if st.running.len() + st.finished.len() >= self.max_tasks {
            return Err(StoreError::Full { limit: self.max_tasks });
        }
        if st.outcome_bytes >= self.max_bytes {
            return Err(StoreError::BytesFull { limit: self.max_bytes });
        }
        if st.per_client.get(&rec.client).copied().unwrap_or(0) >= client_limit {
            return Err(StoreError::ClientFull { limit: client_limit });
        }
        rec.seq = st.next_seq;
        st.next_seq += 1;
        st.outcome_bytes += rec.outcome_len();
        *st.per_client.entry(rec.client.clone()).or_default() += 1;
        let tx = (!rec.status.is_terminal()).then(|| watch::channel(rec.status).0);
        let entry = Entry { rec, tx };
        if entry.rec.status.is_terminal() {
            st.finished.put(entry.rec.id.clone(), entry);
        } else {
            st.running.insert(entry.rec.id.clone(), entry);
        }
        Ok(())
    }

    fn get(&self, id: &str) -> Option<TaskRecord> {
        let mut st = self.inner.lock().unwrap();
        if let Some(e) = st.running.get(id) {
            return Some(e.rec.clone());
        }
        st.finished.get(id).map(|e| e.rec.clone())
    }

    fn update(&self, id: &str, f: &mut dyn FnMut(&mut TaskRecord)) -> Option<TaskRecord> {
        let mut guard = self.inner.lock().unwrap();
        let st = &mut *guard;
        if let Some(e) = st.running.get_mut(id) {
            let before = e.rec.status;
            let before_len = e.rec.outcome_len();
            f(&mut e.rec);
            let after = e.rec.clone();
            if after.status != before
                && let Some(tx) = &e.tx
            {
                tx.send_replace(after.status);
            }
            st.outcome_bytes = st.outcome_bytes - before_len + after.outcome_len();
            if after.status.is_terminal() {
                let mut e = st.running.remove(id).expect("present");
                e.tx = None;
                st.finished.put(id.to_string(), e);
            }
            return Some(after);
        }
        let e = st.finished.get_mut(id)?;
        let (before, outcome) = (e.rec.status, e.rec.outcome.clone());
        f(&mut e.rec);
        // A terminal task stays terminal (the spec forbids leaving a terminal status), and
        // keeps its outcome.
        e.rec.status = before;
        e.rec.outcome = outcome;
        Some(e.rec.clone())
    }

    fn list(&self, owner: &str, after: u64, limit: usize) -> (Vec<TaskRecord>, bool) {
        let st = self.inner.lock().unwrap();
        let mut mine: Vec<&TaskRecord> = st
            .running
            .values()
            .map(|e| &e.rec)
            .chain(st.finished.iter().map(|(_, e)| &e.rec))
            .filter(|r| r.owner == owner && r.seq > after)
            .collect();
        mine.sort_by_key(|r| r.seq);
        let more = mine.len() > limit;
        (mine.into_iter().take(limit).cloned().collect(), more)
    }

    fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        let st = self.inner.lock().unwrap();
        let e = st.running.get(id).or_else(|| st.finished.peek(id))?;
        Some(match &e.tx {
            Some(tx) => tx.subscribe(),
            // A finished task: its status is final, and the receiver says so at once.
            None => watch::channel(e.rec.status).1,
        })
    }

    fn remove_expired(&self, now: SystemTime) -> Vec<TaskRecord> {
        let mut st = self.inner.lock().unwrap();
        let expired: Vec<String> =
            st.finished.iter().filter(|(_, e)| e.rec.expires_at() <= now).map(|(k, _)| k.clone()).collect();
        let mut out = Vec::new();
        for id in expired {
            if let Some(e) = st.finished.pop(&id) {
                st.release(&e.rec);
                out.push(e.rec);
            }
        }
        out
    }

    fn remove_if_expired(&self, id: &str, now: SystemTime) -> Option<TaskRecord> {
        let mut st = self.inner.lock().unwrap();
        if st.finished.peek(id)?.rec.expires_at() > now {
            return None;
        }
        let e = st.finished.pop(id)?;
        st.release(&e.rec);
        Some(e.rec)
    }

    fn last_seq(&self) -> u64 {
        self.inner.lock().unwrap().next_seq - 1
    }

    fn outcome_bytes(&self) -> usize {
        self.inner.lock().unwrap().outcome_bytes
    }

    fn len(&self) -> usize {
        let st = self.inner.lock().unwrap();
        st.running.len() + st.finished.len()
    }
}

/// RFC 3339 UTC with milliseconds, e.g. `2025-11-25T10:30:00.000Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: &str, owner: &str) -> TaskRecord {
        TaskRecord::new(
            id.into(),
            owner.into(),
            owner.into(),
            "up".into(),
            Duration::from_secs(60),
            Duration::from_secs(1),
        )
    }

    fn finish(s: &MemoryStore, id: &str) {
        s.update(id, &mut |r| r.status = TaskStatus::Completed).unwrap();
    }

    #[test]
    fn a_full_store_refuses_and_evicts_nothing() {
        let s = MemoryStore::new(2, 1 << 20);
        s.insert(rec("a", "o"), 10).unwrap();
        s.insert(rec("b", "o"), 10).unwrap();
        assert_eq!(s.insert(rec("c", "o"), 10), Err(StoreError::Full { limit: 2 }));
        finish(&s, "a");
        assert_eq!(s.insert(rec("c", "o"), 10), Err(StoreError::Full { limit: 2 }), "finished tasks are kept");
        assert!(s.get("a").is_some() && s.get("b").is_some());
        assert_eq!(s.remove_expired(SystemTime::now() + Duration::from_secs(120)).len(), 1, "only the finished one");
        s.insert(rec("c", "o"), 10).unwrap();
    }

    #[test]
    fn the_client_limit_counts_finished_tasks_too() {
        let s = MemoryStore::new(100, 1 << 20);
        s.insert(rec("x1", "x"), 2).unwrap();
        finish(&s, "x1");
        s.insert(rec("y1", "y"), 2).unwrap();
        s.insert(rec("x2", "x"), 2).unwrap();
        assert_eq!(s.insert(rec("x3", "x"), 2), Err(StoreError::ClientFull { limit: 2 }));
        assert!(s.get("x1").is_some() && s.get("y1").is_some());
    }

    #[test]
    fn retained_outcomes_are_counted_in_bytes() {
        let s = MemoryStore::new(100, 10);
        s.insert(rec("a", "o"), 10).unwrap();
        s.update("a", &mut |r| {
            r.status = TaskStatus::Completed;
            r.outcome = Some("0123456789".into());
        });
        assert_eq!(s.outcome_bytes(), 10);
        s.update("a", &mut |r| r.outcome = None);
        assert_eq!(s.outcome_bytes(), 10, "a finished task keeps its outcome");
        assert_eq!(s.insert(rec("b", "o"), 10), Err(StoreError::BytesFull { limit: 10 }));
        s.remove_expired(SystemTime::now() + Duration::from_secs(120));
        assert_eq!(s.outcome_bytes(), 0);
        s.insert(rec("b", "o"), 10).unwrap();
    }

    #[test]
    fn terminal_status_sticks_and_waiters_wake() {
        let s = MemoryStore::new(10, 1 << 20);
        s.insert(rec("a", "o"), 10).unwrap();
        let mut w = s.watch("a").unwrap();
        s.update("a", &mut |r| r.status = TaskStatus::Cancelled);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let seen = rt.block_on(async { *w.wait_for(|st| st.is_terminal()).await.unwrap() });
        assert_eq!(seen, TaskStatus::Cancelled, "a waiter from before wakes with the terminal status");
        assert_eq!(*s.watch("a").unwrap().borrow(), TaskStatus::Cancelled, "a finished task's watch is final");
        let after = s.update("a", &mut |r| r.status = TaskStatus::Completed).unwrap();
        assert_eq!(after.status, TaskStatus::Cancelled);
    }

    #[test]
    fn listing_is_per_owner_and_paged() {
        let s = MemoryStore::new(100, 1 << 20);
        for i in 0..5 {
            s.insert(rec(&format!("a{i}"), "a"), 10).unwrap();
            s.insert(rec(&format!("b{i}"), "b"), 10).unwrap();
        }
        let (page, more) = s.list("a", 0, 3);
        assert_eq!(page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a0", "a1", "a2"]);
        assert!(more);
        let (page, more) = s.list("a", page[2].seq, 3);
        assert_eq!(page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a3", "a4"]);
        assert!(!more);
    }

    #[test]
    fn expiry_removes_finished_tasks_only_and_closes_waiters() {
        let s = MemoryStore::new(10, 1 << 20);
        let mut r = rec("a", "o");
        r.ttl = Duration::from_millis(1);
        s.insert(r, 10).unwrap();
        let later = SystemTime::now() + Duration::from_secs(5);
        assert!(s.remove_expired(later).is_empty(), "a running task outlives its ttl");
        let w = s.watch("a").unwrap();
        finish(&s, "a");
        let gone = s.remove_expired(later);
        assert_eq!(gone.len(), 1);
        assert!(s.get("a").is_none());
        assert!(w.has_changed().is_err(), "the sender is gone");
    }

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_066_600_123)),
            "2025-11-25T10:30:00.123Z"
        );
    }
}
