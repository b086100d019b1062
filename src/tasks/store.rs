//! The task store: bounded, owner-scoped task records with their final outcome, and waiters
//! that wake on status changes.
//!
//! [`TaskStore`] is the seam for a shared backend (several gateway replicas); [`MemoryStore`]
//! is the embedded default. Running tasks are never evicted; finished ones are evicted least
//! recently used first when the store or an owner is at its limit, and every task is removed
//! once its ttl has passed.

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
    /// Who may list it: the creating session until authentication exists.
    pub owner: String,
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
}

impl TaskRecord {
    pub fn new(id: String, owner: String, upstream: String, ttl: Duration, poll_interval: Duration) -> TaskRecord {
        let now = SystemTime::now();
        TaskRecord {
            id,
            owner,
            upstream,
            seq: 0,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl,
            poll_interval,
            outcome: None,
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

    pub fn expires_at(&self) -> SystemTime {
        self.created_at + self.ttl
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// Every slot holds a running task.
    Full { limit: usize },
    /// The owner's every slot holds a running task.
    OwnerFull { limit: usize },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Full { limit } => write!(f, "the gateway's task store is full ({limit} running tasks)"),
            StoreError::OwnerFull { limit } => write!(f, "too many running tasks for this client (limit {limit})"),
        }
    }
}

/// Storage for task records. Implementations keep their own bounds.
pub trait TaskStore: Send + Sync {
    /// Adds a task (its `seq` is assigned here), making room by evicting finished tasks.
    fn insert(&self, rec: TaskRecord, owner_limit: usize) -> Result<(), StoreError>;
    fn get(&self, id: &str) -> Option<TaskRecord>;
    /// Changes a task with `f`; returns the record after the change.
    fn update(&self, id: &str, f: &mut dyn FnMut(&mut TaskRecord)) -> Option<TaskRecord>;
    /// The owner's tasks with `seq` greater than `after`, oldest first, at most `limit`; and
    /// whether more follow.
    fn list(&self, owner: &str, after: u64, limit: usize) -> (Vec<TaskRecord>, bool);
    /// A receiver that sees each status change; closed when the task is removed.
    fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>>;
    /// Removes tasks whose ttl has passed; returns them.
    fn remove_expired(&self, now: SystemTime) -> Vec<TaskRecord>;
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
    finished: LruCache<String, Entry>,
    per_owner: HashMap<String, usize>,
    next_seq: u64,
}

/// The in-memory store.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_tasks: usize,
}

impl MemoryStore {
    pub fn new(max_tasks: usize) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Inner {
                running: HashMap::new(),
                finished: LruCache::unbounded(),
                per_owner: HashMap::new(),
                next_seq: 1,
            }),
            max_tasks,
        }
    }
}

impl Inner {
    fn release(&mut self, owner: &str) {
        if let Some(n) = self.per_owner.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.per_owner.remove(owner);
            }
        }
    }

    fn evict_finished(&mut self, owner: Option<&str>) -> bool {
        let victim = match owner {
            None => self.finished.peek_lru().map(|(k, _)| k.clone()),
            Some(o) => self.finished.iter().rev().find(|(_, e)| e.rec.owner == o).map(|(k, _)| k.clone()),
        };
        let Some(id) = victim else { return false };
        if let Some(e) = self.finished.pop(&id) {
            self.release(&e.rec.owner);
        }
        true
    }
}

impl TaskStore for MemoryStore {
    fn insert(&self, mut rec: TaskRecord, owner_limit: usize) -> Result<(), StoreError> {
        let mut st = self.inner.lock().unwrap();
        while st.per_owner.get(&rec.owner).copied().unwrap_or(0) >= owner_limit {
            if !st.evict_finished(Some(&rec.owner)) {
                return Err(StoreError::OwnerFull { limit: owner_limit });
            }
        }
        while st.running.len() + st.finished.len() >= self.max_tasks {
            if !st.evict_finished(None) {
                return Err(StoreError::Full { limit: self.max_tasks });
            }
        }
        rec.seq = st.next_seq;
        st.next_seq += 1;
        *st.per_owner.entry(rec.owner.clone()).or_default() += 1;
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
        let mut st = self.inner.lock().unwrap();
        if let Some(e) = st.running.get_mut(id) {
            let before = e.rec.status;
            f(&mut e.rec);
            let after = e.rec.clone();
            if after.status != before
                && let Some(tx) = &e.tx
            {
                tx.send_replace(after.status);
            }
            if after.status.is_terminal() {
                let mut e = st.running.remove(id).expect("present");
                e.tx = None;
                st.finished.put(id.to_string(), e);
            }
            return Some(after);
        }
        let e = st.finished.get_mut(id)?;
        let before = e.rec.status;
        f(&mut e.rec);
        // A terminal task stays terminal (the spec forbids leaving a terminal status).
        if e.rec.status != before {
            e.rec.status = before;
        }
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
        let expired_running: Vec<String> =
            st.running.values().filter(|e| e.rec.expires_at() <= now).map(|e| e.rec.id.clone()).collect();
        let expired_finished: Vec<String> =
            st.finished.iter().filter(|(_, e)| e.rec.expires_at() <= now).map(|(k, _)| k.clone()).collect();
        let mut out = Vec::new();
        for id in expired_running {
            if let Some(e) = st.running.remove(&id) {
                st.release(&e.rec.owner);
                out.push(e.rec);
            }
        }
        for id in expired_finished {
            if let Some(e) = st.finished.pop(&id) {
                st.release(&e.rec.owner);
                out.push(e.rec);
            }
        }
        out
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
        TaskRecord::new(id.into(), owner.into(), "up".into(), Duration::from_secs(60), Duration::from_secs(1))
    }

    fn finish(s: &MemoryStore, id: &str) {
        s.update(id, &mut |r| r.status = TaskStatus::Completed).unwrap();
    }

    #[test]
    fn running_tasks_are_never_evicted() {
        let s = MemoryStore::new(2);
        s.insert(rec("a", "o"), 10).unwrap();
        s.insert(rec("b", "o"), 10).unwrap();
        assert_eq!(s.insert(rec("c", "o"), 10), Err(StoreError::Full { limit: 2 }));
        finish(&s, "a");
        s.insert(rec("c", "o"), 10).unwrap();
        assert!(s.get("a").is_none(), "the finished task made room");
        assert!(s.get("b").is_some() && s.get("c").is_some());
    }

    #[test]
    fn owner_limit_evicts_the_owners_finished_tasks_only() {
        let s = MemoryStore::new(100);
        s.insert(rec("x1", "x"), 2).unwrap();
        finish(&s, "x1");
        s.insert(rec("y1", "y"), 2).unwrap();
        finish(&s, "y1");
        s.insert(rec("x2", "x"), 2).unwrap();
        s.insert(rec("x3", "x"), 2).unwrap();
        assert!(s.get("x1").is_none() && s.get("y1").is_some());
        assert_eq!(s.insert(rec("x4", "x"), 2), Err(StoreError::OwnerFull { limit: 2 }));
    }

    #[test]
    fn terminal_status_sticks_and_waiters_wake() {
        let s = MemoryStore::new(10);
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
        let s = MemoryStore::new(100);
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
    fn expiry_removes_and_closes_waiters() {
        let s = MemoryStore::new(10);
        let mut r = rec("a", "o");
        r.ttl = Duration::from_millis(1);
        s.insert(r, 10).unwrap();
        let w = s.watch("a").unwrap();
        let gone = s.remove_expired(SystemTime::now() + Duration::from_secs(1));
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
