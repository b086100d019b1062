//! The in-memory task store: everything in this process, lost when it ends. Its methods
//! are synchronous (a lock held for a few map operations); [`TaskStore`] wraps them in
//! futures that are ready at once. `tasks::file_store` keeps one of these as its hot copy.

use crate::locks::Mutex;
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::{Edit, StoreError, StoreFuture, TaskRecord, TaskStore};
use lru::LruCache;
use std::collections::HashMap;
use std::time::SystemTime;
use tokio::sync::watch;

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
    stored_bytes: usize,
}

/// The in-memory store.
pub struct MemoryStore {
    inner: Mutex<Inner>,
    max_tasks: usize,
    max_bytes: usize,
}

impl MemoryStore {
    /// At most `max_tasks` tasks, and `max_bytes` bytes of records (`TaskRecord::stored_len`).
    pub fn new(max_tasks: usize, max_bytes: usize) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Inner {
                running: HashMap::new(),
                finished: LruCache::unbounded(),
                per_client: HashMap::new(),
                next_seq: 1,
                stored_bytes: 0,
            }),
            max_tasks,
            max_bytes,
        }
    }
}

impl Inner {
    fn release(&mut self, rec: &TaskRecord) {
        self.stored_bytes -= rec.stored_len();
        if let Some(n) = self.per_client.get_mut(&rec.client) {
            *n -= 1;
            if *n == 0 {
                self.per_client.remove(&rec.client);
            }
        }
    }
}

impl MemoryStore {
    pub fn insert(&self, mut rec: TaskRecord, client_limit: usize) -> Result<TaskRecord, StoreError> {
        let mut st = self.inner.lock().unwrap();
        if st.running.len() + st.finished.len() >= self.max_tasks {
            return Err(StoreError::Full { limit: self.max_tasks });
        }
        if st.stored_bytes + rec.stored_len() > self.max_bytes {
            return Err(StoreError::BytesFull { limit: self.max_bytes });
        }
        if st.per_client.get(&rec.client).copied().unwrap_or(0) >= client_limit {
            return Err(StoreError::ClientFull { limit: client_limit });
        }
        rec.seq = st.next_seq;
        st.next_seq += 1;
        Ok(st.put(rec))
    }

    /// Puts back a task from before a restart, as it was (its `seq` too), whatever the
    /// limits say: it was admitted once.
    pub fn restore(&self, rec: TaskRecord) {
        let mut st = self.inner.lock().unwrap();
        st.next_seq = st.next_seq.max(rec.seq + 1);
        st.put(rec);
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records of another kind kept beside the tasks (a durable store's session records)
    /// change from `before` to `after` bytes, counted with the tasks' against `max_bytes`:
    /// `false` (nothing counted) when growing would pass it. `restored`: put back from
    /// before a restart, counted whatever the limit says.
    pub fn account_other(&self, before: usize, after: usize, restored: bool) -> bool {
        let mut st = self.inner.lock().unwrap();
        let others = st.stored_bytes.saturating_sub(before);
        if after > before && others + after > self.max_bytes && !restored {
            return false;
        }
        st.stored_bytes = others + after;
        true
    }
}

impl Inner {
    fn put(&mut self, rec: TaskRecord) -> TaskRecord {
        let st = self;
        st.stored_bytes += rec.stored_len();
        *st.per_client.entry(rec.client.clone()).or_default() += 1;
        let tx = (!rec.status.is_terminal()).then(|| watch::channel(rec.status).0);
        let out = rec.clone();
        let entry = Entry { rec, tx };
        if entry.rec.status.is_terminal() {
            st.finished.put(entry.rec.id.clone(), entry);
        } else {
            st.running.insert(entry.rec.id.clone(), entry);
        }
        out
    }
}

impl MemoryStore {
    pub fn get(&self, id: &str) -> Option<TaskRecord> {
        let mut st = self.inner.lock().unwrap();
        if let Some(e) = st.running.get(id) {
            return Some(e.rec.clone());
        }
        st.finished.get(id).map(|e| e.rec.clone())
    }

    pub fn update(&self, id: &str, f: &mut dyn FnMut(&mut TaskRecord)) -> Option<TaskRecord> {
        let mut guard = self.inner.lock().unwrap();
        let st = &mut *guard;
        if let Some(e) = st.running.get_mut(id) {
            let before = e.rec.status;
            let before_len = e.rec.stored_len();
            f(&mut e.rec);
            let after = e.rec.clone();
            if after.status != before
                && let Some(tx) = &e.tx
            {
                tx.send_replace(after.status);
            }
            st.stored_bytes = st.stored_bytes - before_len + after.stored_len();
            if after.status.is_terminal() {
                let mut e = st.running.remove(id).expect("present");
                e.tx = None;
                st.finished.put(id.to_string(), e);
            }
            return Some(after);
        }
        let e = st.finished.get_mut(id)?;
        let (before, outcome, before_len) = (e.rec.status, e.rec.outcome.clone(), e.rec.stored_len());
        f(&mut e.rec);
        // A terminal task stays terminal (the spec forbids leaving a terminal status), and
        // keeps its outcome.
        e.rec.status = before;
        e.rec.outcome = outcome;
        let after = e.rec.clone();
        st.stored_bytes = st.stored_bytes - before_len + after.stored_len();
        Some(after)
    }

    pub fn list(&self, owner: &str, after: u64, limit: usize) -> (Vec<TaskRecord>, bool) {
        self.list_where(Some(owner), after, limit)
    }

    /// [`MemoryStore::list`] of one owner's tasks, or (`None`) of everyone's.
    pub fn list_where(&self, owner: Option<&str>, after: u64, limit: usize) -> (Vec<TaskRecord>, bool) {
        let st = self.inner.lock().unwrap();
        let mut mine: Vec<&TaskRecord> = st
            .running
            .values()
            .map(|e| &e.rec)
            .chain(st.finished.iter().map(|(_, e)| &e.rec))
            .filter(|r| owner.is_none_or(|o| r.owner == o) && r.seq > after)
            .collect();
        mine.sort_by_key(|r| r.seq);
        let more = mine.len() > limit;
        (mine.into_iter().take(limit).cloned().collect(), more)
    }

    pub fn watch(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        let st = self.inner.lock().unwrap();
        let e = st.running.get(id).or_else(|| st.finished.peek(id))?;
        Some(match &e.tx {
            Some(tx) => tx.subscribe(),
            // A finished task: its status is final, and the receiver says so at once.
            None => watch::channel(e.rec.status).1,
        })
    }

    pub fn remove_if_expired(&self, id: &str, now: SystemTime) -> Option<TaskRecord> {
        let mut st = self.inner.lock().unwrap();
        if st.finished.peek(id)?.rec.expires_at() > now {
            return None;
        }
        let e = st.finished.pop(id)?;
        st.release(&e.rec);
        Some(e.rec)
    }

    pub fn last_seq(&self) -> u64 {
        self.inner.lock().unwrap().next_seq - 1
    }

    pub fn stored_bytes(&self) -> usize {
        self.inner.lock().unwrap().stored_bytes
    }

    pub fn len(&self) -> usize {
        let st = self.inner.lock().unwrap();
        st.running.len() + st.finished.len()
    }
}

impl TaskStore for MemoryStore {
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> StoreFuture<'_, Result<TaskRecord, StoreError>> {
        Box::pin(std::future::ready(MemoryStore::insert(self, rec, client_limit)))
    }
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(std::future::ready(Ok(MemoryStore::get(self, id))))
    }
    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(std::future::ready(Ok(MemoryStore::update(self, id, f))))
    }
    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>> {
        Box::pin(std::future::ready(Ok(MemoryStore::list(self, owner, after, limit))))
    }
    fn list_all(&self, after: u64, limit: usize) -> StoreFuture<'_, Result<(Vec<TaskRecord>, bool), StoreError>> {
        Box::pin(std::future::ready(Ok(self.list_where(None, after, limit))))
    }
    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>> {
        Box::pin(std::future::ready(Ok(MemoryStore::watch(self, id))))
    }
    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        Box::pin(std::future::ready(MemoryStore::remove_if_expired(self, id, now)))
    }
    fn last_seq(&self) -> StoreFuture<'_, u64> {
        Box::pin(std::future::ready(MemoryStore::last_seq(self)))
    }
    fn stored_bytes(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(MemoryStore::stored_bytes(self)))
    }
    fn count(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(MemoryStore::len(self)))
    }
    fn name(&self) -> &'static str {
        "memory"
    }
}
