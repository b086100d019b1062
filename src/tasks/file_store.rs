//! The durable task store: a redb database (`tasks.redb`) in the data directory
//! (`[tasks] path`), in front of which a [`MemoryStore`] keeps the hot copy.
//!
//! - **Reads** (`get`, `list`, `watch`, the counts) come from memory: the database is read
//!   once, when the store opens, and every task it holds is put back in memory then (the
//!   store's limits bound what that costs). A task that was running when the process died
//!   comes back `failed`, with [`RESTARTED`] as its status message and as the error its
//!   `tasks/result` gives; a finished one whose ttl has passed is dropped.
//! - **Writes** go to memory first, then, in the same order (a lock held across both), to
//!   one writer thread that commits whatever has queued up in one transaction (group
//!   commit). What must survive a crash is awaited: a new task (so that an id a client
//!   holds is never unknown after a restart) and a change that made a task terminal, or that
//!   changed a finished one. Removals (and session records) are written without waiting and
//!   without an fsync of their own: the next durable commit carries them, or after a second
//!   a commit of their own without one; a removal lost to a crash is expired again when the
//!   store opens. Changes to a running task (status messages, input-required
//!   and back) are not written at all: after a restart a running task is `failed` whatever
//!   it said, so nothing is spent on them, and progress never reaches the store.
//! - **Sessions.** An HTTP session's identity ([`SessionRecord`]) is written when it is
//!   initialized (without waiting: its first task's durable write carries it) and removed
//!   when it ends; at reopening only those whose owner still has tasks are kept, so that a
//!   client coming back with its `Mcp-Session-Id` reaches its tasks again.
//! - The directory is locked while the store is open (`flock` on [`LOCK_FILE`]; redb
//!   itself would let several processes share the file): a second gateway on the same
//!   directory fails to start, saying so. The lock goes with the process, `kill -9` too.

use crate::mcp::tasks::TaskStatus;
use crate::tasks::memory_store::MemoryStore;
use crate::tasks::store::{Edit, SessionRecord, StoreError, StoreFuture, TaskRecord, TaskStore};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{oneshot, watch};

/// The status message (and error) of a task that was running when the gateway stopped.
pub const RESTARTED: &str = "the gateway restarted while the task was running";

/// The file inside the data directory.
pub const DB_FILE: &str = "tasks.redb";

/// Held locked by the gateway that has the directory open.
pub const LOCK_FILE: &str = "lock";

const TASKS: TableDefinition<&str, &[u8]> = TableDefinition::new("tasks");
/// HTTP sessions by `Mcp-Session-Id`, JSON [`SessionRecord`]s.
const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");

/// Jobs committed in one transaction at most.
const MAX_BATCH: usize = 512;

enum Op {
    Put(String, Vec<u8>),
    Delete(String),
    PutSession(String, Vec<u8>),
    DeleteSession(String),
}

struct Job {
    ops: Vec<Op>,
    /// Told once the ops are durable; `None`: nobody waits (and no fsync is owed).
    done: Option<oneshot::Sender<Result<(), String>>>,
}

pub struct FileStore {
    mem: MemoryStore,
    /// Held across the memory change and the queueing of its write, so that the database
    /// sees the changes in the order memory did.
    writer: Mutex<mpsc::Sender<Job>>,
    /// The finished tasks brought back when the store opened.
    restored: Mutex<Vec<TaskRecord>>,
    /// The sessions remembered from before the restart whose owners still have tasks.
    sessions: Mutex<HashMap<String, SessionRecord>>,
    path: PathBuf,
    /// Joined on drop, so that the database is closed (and may be opened again) after.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Locked while the store is open; unlocked when closed.
    _lock: std::fs::File,
}

/// Locks the data directory for this process, or says who holds it.
fn lock_dir(dir: &Path) -> Result<std::fs::File, StoreError> {
    use std::os::fd::AsRawFd;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| backend(format!("cannot open {}: {e}", path.display())))?;
    // SAFETY: flock(2) on a descriptor this function owns; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(backend(format!("{} is in use by another gateway", dir.display())));
    }
    Ok(file)
}

impl Drop for FileStore {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it has written what was queued.
        *self.writer.get_mut().unwrap_or_else(|e| e.into_inner()) = mpsc::channel().0;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The durable fields of a record, minus the outcome (stored after them, as is).
#[derive(Serialize, Deserialize)]
struct Stored {
    id: String,
    owner: String,
    client: String,
    upstream: String,
    seq: u64,
    status: String,
    status_message: Option<String>,
    created_ms: u64,
    updated_ms: u64,
    ttl_ms: u64,
    poll_ms: u64,
    ttl_from_end: bool,
    has_outcome: bool,
}

fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// `Stored` as JSON, a newline, then the outcome's text: the outcome is JSON text already,
/// and is not escaped a second time.
fn encode(r: &TaskRecord) -> Vec<u8> {
    let s = Stored {
        id: r.id.clone(),
        owner: r.owner.clone(),
        client: r.client.clone(),
        upstream: r.upstream.clone(),
        seq: r.seq,
        status: r.status.as_str().into(),
        status_message: r.status_message.clone(),
        created_ms: ms(r.created_at),
        updated_ms: ms(r.last_updated_at),
        ttl_ms: r.ttl.as_millis() as u64,
        poll_ms: r.poll_interval.as_millis() as u64,
        ttl_from_end: r.ttl_from_end,
        has_outcome: r.outcome.is_some(),
    };
    let mut out = serde_json::to_vec(&s).expect("records serialize");
    if let Some(o) = &r.outcome {
        out.push(b'\n');
        out.extend_from_slice(o.as_bytes());
    }
    out
}

fn decode(bytes: &[u8]) -> Option<TaskRecord> {
    let (head, outcome) = match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    };
    let s: Stored = serde_json::from_slice(head).ok()?;
    let outcome = match (s.has_outcome, outcome) {
        (true, Some(o)) => Some(Arc::from(std::str::from_utf8(o).ok()?)),
        _ => None,
    };
    Some(TaskRecord {
        id: s.id,
        owner: s.owner,
        client: s.client,
        upstream: s.upstream,
        seq: s.seq,
        status: TaskStatus::parse(&s.status)?,
        status_message: s.status_message,
        created_at: at(s.created_ms),
        last_updated_at: at(s.updated_ms),
        ttl: Duration::from_millis(s.ttl_ms),
        poll_interval: Duration::from_millis(s.poll_ms),
        outcome,
        ttl_from_end: s.ttl_from_end,
    })
}

/// What a task that was running at the restart ended with.
fn restarted(mut r: TaskRecord, now: SystemTime) -> TaskRecord {
    r.status = TaskStatus::Failed;
    r.status_message = Some(RESTARTED.into());
    r.last_updated_at = now;
    let err = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": crate::jsonrpc::INTERNAL_ERROR, "message": RESTARTED}});
    r.outcome = Some(err.to_string().into());
    r
}

fn backend(cause: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { store: "file", cause: cause.to_string() }
}

impl FileStore {
    /// Opens (or creates) the store in directory `dir`, with the limits of a
    /// [`MemoryStore`]. Blocking I/O: call it before serving, or off the runtime.
    pub fn open(dir: &Path, max_tasks: usize, max_bytes: usize) -> Result<FileStore, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| backend(format!("cannot create {}: {e}", dir.display())))?;
        let lock = lock_dir(dir)?;
        let path = dir.join(DB_FILE);
        let db = Database::create(&path).map_err(|e| backend(format!("cannot open {}: {e}", path.display())))?;
        let now = SystemTime::now();
        let mem = MemoryStore::new(max_tasks, max_bytes);
        let mut fixes: Vec<Op> = Vec::new();
        let mut restored = Vec::new();
        {
            let read = db.begin_read().map_err(backend)?;
            match read.open_table(TASKS) {
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(backend(e)),
                Ok(table) => {
                    for row in table.iter().map_err(backend)? {
                        let (k, v) = row.map_err(backend)?;
                        let Some(rec) = decode(v.value()) else {
                            tracing::warn!(task = %k.value(), "dropping an unreadable task record");
                            fixes.push(Op::Delete(k.value().to_string()));
                            continue;
                        };
                        let rec = if rec.status.is_terminal() {
                            if rec.expires_at() <= now {
                                fixes.push(Op::Delete(rec.id.clone()));
                                continue;
                            }
                            rec
                        } else {
                            let rec = restarted(rec, now);
                            fixes.push(Op::Put(rec.id.clone(), encode(&rec)));
                            rec
                        };
                        restored.push(rec.clone());
                        mem.restore(rec);
                    }
                }
            }
        }
        let owners: HashSet<&str> = restored.iter().map(|r| r.owner.as_str()).collect();
        let mut sessions = HashMap::new();
        {
            let read = db.begin_read().map_err(backend)?;
            match read.open_table(SESSIONS) {
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(backend(e)),
                Ok(table) => {
                    for row in table.iter().map_err(backend)? {
                        let (k, v) = row.map_err(backend)?;
                        match serde_json::from_slice::<SessionRecord>(v.value()) {
                            Ok(s) if owners.contains(s.owner.as_str()) => {
                                sessions.insert(s.id.clone(), s);
                            }
                            // A session with no task left has nothing to come back for.
                            _ => fixes.push(Op::DeleteSession(k.value().to_string())),
                        }
                    }
                }
            }
        }
        commit(&db, std::slice::from_ref(&Job { ops: fixes, done: None }), Durability::Immediate).map_err(backend)?;
        if !restored.is_empty() {
            tracing::info!(tasks = restored.len(), path = %path.display(), "task store reopened");
        }
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("taskgate-store".into())
            .spawn(move || write_loop(db, rx))
            .map_err(backend)?;
        Ok(FileStore {
            mem,
            writer: Mutex::new(tx),
            restored: Mutex::new(restored),
            sessions: Mutex::new(sessions),
            path,
            thread: Some(thread),
            _lock: lock,
        })
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `ops`; the receiver says when they are durable (`durable`), else `None`.
    fn queue(tx: &mpsc::Sender<Job>, ops: Vec<Op>, durable: bool) -> Option<oneshot::Receiver<Result<(), String>>> {
        let (done, rx) = if durable {
            let (a, b) = oneshot::channel();
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        // The writer outlives every sender; a send fails only if it panicked, and the
        // waiter then hears so.
        let _ = tx.send(Job { ops, done });
        rx
    }
}

async fn durable(rx: Option<oneshot::Receiver<Result<(), String>>>) -> Result<(), StoreError> {
    match rx {
        None => Ok(()),
        Some(rx) => match rx.await {
            Ok(r) => r.map_err(backend),
            Err(_) => Err(backend("the writer thread stopped")),
        },
    }
}

fn commit(db: &Database, jobs: &[Job], durability: Durability) -> Result<(), String> {
    let mut txn = db.begin_write().map_err(|e| e.to_string())?;
    txn.set_durability(durability).map_err(|e| e.to_string())?;
    {
        let mut tasks = txn.open_table(TASKS).map_err(|e| e.to_string())?;
        let mut sessions = txn.open_table(SESSIONS).map_err(|e| e.to_string())?;
        for op in jobs.iter().flat_map(|j| &j.ops) {
            match op {
                Op::Put(k, v) => tasks.insert(k.as_str(), v.as_slice()).map(|_| ()),
                Op::Delete(k) => tasks.remove(k.as_str()).map(|_| ()),
                Op::PutSession(k, v) => sessions.insert(k.as_str(), v.as_slice()).map(|_| ()),
                Op::DeleteSession(k) => sessions.remove(k.as_str()).map(|_| ()),
            }
            .map_err(|e| e.to_string())?;
        }
    }
    txn.commit().map_err(|e| e.to_string())
}

/// How long writes nobody waits for (removals, session records) wait for a durable commit
/// to carry them before they are committed on their own (without an fsync).
const LAZY_WRITES: Duration = Duration::from_secs(1);

/// The writer thread: takes what has queued up and commits it in one transaction, durably
/// (telling the waiters) if anyone waits; writes nobody waits for are held for the next
/// such commit, for at most [`LAZY_WRITES`] or [`MAX_BATCH`] jobs. Ends when the store is
/// dropped, committing what it holds.
fn write_loop(db: Database, rx: mpsc::Receiver<Job>) {
    let mut lazy: Vec<Job> = Vec::new();
    loop {
        let next = if lazy.is_empty() {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(LAZY_WRITES)
        };
        let first = match next {
            Ok(j) => j,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = commit(&db, &lazy, Durability::None) {
                    tracing::error!(error = %e, "task store write failed");
                }
                lazy.clear();
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut jobs = std::mem::take(&mut lazy);
        jobs.push(first);
        while jobs.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        let waited = jobs.iter().any(|j| j.done.is_some());
        if !waited && jobs.len() < MAX_BATCH {
            lazy = jobs;
            continue;
        }
        let res = commit(&db, &jobs, if waited { Durability::Immediate } else { Durability::None });
        if let Err(e) = &res {
            tracing::error!(error = %e, "task store write failed");
        }
        for j in jobs {
            if let Some(d) = j.done {
                let _ = d.send(res.clone());
            }
        }
    }
    // The last removals, made durable before the thread ends.
    let _ = commit(&db, &lazy, Durability::Immediate);
}

/// Whether a change is one the database must see.
fn persists(before: &(TaskStatus, Option<String>, SystemTime, Duration, bool), after: &TaskRecord) -> bool {
    let now = (after.status, after.status_message.clone(), after.last_updated_at, after.ttl, after.ttl_from_end);
    if *before == now {
        return false;
    }
    after.status.is_terminal() || before.3 != after.ttl || before.4 != after.ttl_from_end
}

impl TaskStore for FileStore {
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> StoreFuture<'_, Result<TaskRecord, StoreError>> {
        let queued = {
            let tx = self.writer.lock().unwrap();
            self.mem.insert(rec, client_limit).map(|rec| {
                let rx = Self::queue(&tx, vec![Op::Put(rec.id.clone(), encode(&rec))], true);
                (rec, rx)
            })
        };
        Box::pin(async move {
            let (rec, rx) = queued?;
            durable(rx).await?;
            Ok(rec)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.mem.get(id))))
    }

    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let (after, rx) = {
            let tx = self.writer.lock().unwrap();
            let mut before = None;
            let after = self.mem.update(id, &mut |r| {
                before = Some((r.status, r.status_message.clone(), r.last_updated_at, r.ttl, r.ttl_from_end));
                f(r)
            });
            let rx = match (&after, &before) {
                (Some(a), Some(b)) if persists(b, a) => Self::queue(&tx, vec![Op::Put(a.id.clone(), encode(a))], true),
                _ => None,
            };
            (after, rx)
        };
        Box::pin(async move {
            durable(rx).await?;
            Ok(after)
        })
    }

    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>> {
        Box::pin(std::future::ready(Ok(self.mem.list(owner, after, limit))))
    }

    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.mem.watch(id))))
    }

    fn remove_expired(&self, now: SystemTime) -> StoreFuture<'_, Vec<TaskRecord>> {
        let tx = self.writer.lock().unwrap();
        let gone = self.mem.remove_expired(now);
        if !gone.is_empty() {
            Self::queue(&tx, gone.iter().map(|r| Op::Delete(r.id.clone())).collect(), false);
        }
        Box::pin(std::future::ready(gone))
    }

    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        let tx = self.writer.lock().unwrap();
        let gone = self.mem.remove_if_expired(id, now);
        if let Some(r) = &gone {
            Self::queue(&tx, vec![Op::Delete(r.id.clone())], false);
        }
        Box::pin(std::future::ready(gone))
    }

    fn last_seq(&self) -> StoreFuture<'_, u64> {
        Box::pin(std::future::ready(self.mem.last_seq()))
    }

    fn outcome_bytes(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(self.mem.outcome_bytes()))
    }

    fn count(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(self.mem.len()))
    }

    fn put_session(&self, rec: SessionRecord) -> StoreFuture<'_, ()> {
        let bytes = serde_json::to_vec(&rec).expect("records serialize");
        Self::queue(&self.writer.lock().unwrap(), vec![Op::PutSession(rec.id, bytes)], false);
        Box::pin(std::future::ready(()))
    }

    fn get_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionRecord>> {
        Box::pin(std::future::ready(self.sessions.lock().unwrap().get(id).cloned()))
    }

    fn remove_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.sessions.lock().unwrap().remove(id);
        Self::queue(&self.writer.lock().unwrap(), vec![Op::DeleteSession(id.to_string())], false);
        Box::pin(std::future::ready(()))
    }

    fn finished_at_open(&self) -> Vec<TaskRecord> {
        std::mem::take(&mut *self.restored.lock().unwrap())
    }

    fn name(&self) -> &'static str {
        "file"
    }
}

/// The store `[tasks]` asks for.
pub fn open_configured(cfg: &crate::config::TasksConfig) -> Result<Arc<dyn TaskStore>, StoreError> {
    use crate::config::StoreKind;
    Ok(match &cfg.store {
        StoreKind::Memory => Arc::new(MemoryStore::new(cfg.max_tasks, cfg.max_store_bytes)),
        StoreKind::File(dir) => Arc::new(FileStore::open(dir, cfg.max_tasks, cfg.max_store_bytes)?),
        StoreKind::Redis(r) => crate::tasks::redis_store::RedisStore::open_blocking(r, cfg)?,
    })
}
