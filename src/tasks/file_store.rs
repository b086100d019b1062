//! The durable task store: a redb database (`tasks.redb`) in the data directory
//! (`[tasks] path`), in front of which a [`MemoryStore`] keeps the hot copy.
//!
//! - **Reads** (`get`, `list`, `watch`, the counts) come from memory: the database is read
//!   once, when the store opens, and every task it holds is put back in memory then (the
//!   store's limits bound what that costs). A task that was running when the process died
//!   comes back `failed`, with [`RESTARTED`] as its status message and as the error its
//!   `tasks/result` gives; a finished one whose ttl has passed is dropped.
//! - **Writes** go to memory first, then, in the same order (a lock held across both), to
//!   one writer thread, which keeps the last write of each task until its next commit. Every
//!   commit is durable (one fsync; redb 4.6 keeps a `Durability::None` commit in memory
//!   only, so a `kill -9` loses it) and takes all that queued: at once when a write is due
//!   and the previous commit began `[tasks] sync_interval` ago or more (10 ms by default),
//!   else when it is that old, so under load one fsync serves every task that ended meanwhile.
//!   A change that made a task terminal (or changed a finished one) is awaited: its
//!   `tasks/result` and status notification wait for its commit, at most the interval. A new
//!   task is not awaited (its `CreateTaskResult` goes out at once) but is due within the
//!   interval, and any later awaited write carries it: a crash in that window can leave a
//!   client an id the restarted gateway does not know, where it would otherwise find the
//!   task `failed` (its work is lost either way). With `sync_interval = 0` a due write is
//!   committed at once and a new task is awaited too. Removals and session records wait for
//!   the next commit, or a second (one lost to a crash is expired again at opening). Changes
//!   to a running task (status messages, input required and back) are not written: after a
//!   restart a running task is `failed` whatever it said, and progress never reaches the store.
//! - **Sessions.** An HTTP session's identity ([`SessionRecord`]) is written when it is
//!   initialized (without waiting: its first task's commit carries it) and removed
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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
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

/// The default `[tasks] sync_interval`: at most one durable commit (one fsync) per 10 ms.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(10);

enum Op {
    Put(String, Vec<u8>),
    Delete(String),
    PutSession(String, Vec<u8>),
    DeleteSession(String),
}

/// How soon a write must be durable.
enum Due {
    /// Someone waits until it is: told then (or told the commit failed).
    Awaited(oneshot::Sender<Result<(), String>>),
    /// Within the sync interval; nobody waits (a new task, when the interval is not zero).
    Soon,
    /// Whenever the next commit is, within [`LAZY_WRITES`] (removals, session records).
    Lazy,
}

struct Job {
    ops: Vec<Op>,
    due: Due,
}

pub struct FileStore {
    mem: MemoryStore,
    /// Held across the memory change and the queueing of its write, so that the database
    /// sees the changes in the order memory did.
    writer: Mutex<mpsc::Sender<Job>>,
    /// How long a new task may wait for its durable commit (`[tasks] sync_interval`); zero:
    /// its insert waits for it.
    sync_interval: Duration,
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
    /// [`MemoryStore`] and the [`DEFAULT_SYNC_INTERVAL`]. Blocking I/O: call it before
    /// serving, or off the runtime.
    pub fn open(dir: &Path, max_tasks: usize, max_bytes: usize) -> Result<FileStore, StoreError> {
        FileStore::open_synced(dir, max_tasks, max_bytes, DEFAULT_SYNC_INTERVAL)
    }

    /// [`FileStore::open`], making at most one durable commit per `sync_interval` (zero: one
    /// as soon as a write is waited for).
    pub fn open_synced(
        dir: &Path,
        max_tasks: usize,
        max_bytes: usize,
        sync_interval: Duration,
    ) -> Result<FileStore, StoreError> {
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
        let mut pending = Pending::default();
        pending.add(fixes);
        pending.commit(&db).map_err(backend)?;
        if !restored.is_empty() {
            tracing::info!(tasks = restored.len(), path = %path.display(), "task store reopened");
        }
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("taskgate-store".into())
            .spawn(move || write_loop(db, rx, sync_interval))
            .map_err(backend)?;
        Ok(FileStore {
            mem,
            writer: Mutex::new(tx),
            sync_interval,
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

    /// Queues `ops`. The writer outlives every sender; a send fails only if it panicked, and
    /// a waiter then hears so (its sender is dropped).
    fn queue(tx: &mpsc::Sender<Job>, ops: Vec<Op>, due: Due) {
        let _ = tx.send(Job { ops, due });
    }

    /// Queues `ops`; the receiver says when they are durable.
    fn queue_awaited(tx: &mpsc::Sender<Job>, ops: Vec<Op>) -> Option<oneshot::Receiver<Result<(), String>>> {
        let (done, rx) = oneshot::channel();
        Self::queue(tx, ops, Due::Awaited(done));
        Some(rx)
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

/// What the writer holds until its next commit: the last write of each key (a later write
/// of a task replaces an earlier one not yet committed), and who waits for it.
#[derive(Default)]
struct Pending {
    tasks: HashMap<String, Option<Vec<u8>>>,
    sessions: HashMap<String, Option<Vec<u8>>>,
    waiters: Vec<oneshot::Sender<Result<(), String>>>,
    /// A write is due within the sync interval (awaited or [`Due::Soon`]).
    due: bool,
    /// When the oldest write not yet committed came.
    since: Option<Instant>,
}

impl Pending {
    fn add(&mut self, ops: Vec<Op>) {
        self.since.get_or_insert_with(Instant::now);
        for op in ops {
            match op {
                Op::Put(k, v) => self.tasks.insert(k, Some(v)),
                Op::Delete(k) => self.tasks.insert(k, None),
                Op::PutSession(k, v) => self.sessions.insert(k, Some(v)),
                Op::DeleteSession(k) => self.sessions.insert(k, None),
            };
        }
    }

    fn take(&mut self, job: Job) {
        self.add(job.ops);
        self.due |= !matches!(job.due, Due::Lazy);
        if let Due::Awaited(w) = job.due {
            self.waiters.push(w);
        }
    }

    /// When the next commit is due, if one is: `last` is when the previous durable commit
    /// began.
    fn deadline(&self, last: Option<Instant>, interval: Duration) -> Option<Instant> {
        let since = self.since?;
        if self.due { Some(last.map_or(since, |l| (l + interval).max(since))) } else { Some(since + LAZY_WRITES) }
    }

    /// Commits what is held in one durable transaction, and tells the waiters.
    fn commit(&mut self, db: &Database) -> Result<(), String> {
        let res = write(db, &self.tasks, &self.sessions);
        if let Err(e) = &res {
            tracing::error!(error = %e, "task store write failed");
        }
        for w in self.waiters.drain(..) {
            let _ = w.send(res.clone());
        }
        self.tasks.clear();
        self.sessions.clear();
        (self.due, self.since) = (false, None);
        res
    }
}

type Rows = HashMap<String, Option<Vec<u8>>>;

fn write(db: &Database, tasks: &Rows, sessions: &Rows) -> Result<(), String> {
    let e = |e: redb::Error| e.to_string();
    let mut txn = db.begin_write().map_err(|x| e(x.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|x| e(x.into()))?;
    for (def, rows) in [(TASKS, tasks), (SESSIONS, sessions)] {
        if rows.is_empty() {
            continue;
        }
        let mut table = txn.open_table(def).map_err(|x| e(x.into()))?;
        for (k, v) in rows {
            match v {
                Some(v) => table.insert(k.as_str(), v.as_slice()).map(|_| ()),
                None => table.remove(k.as_str()).map(|_| ()),
            }
            .map_err(|x| e(x.into()))?;
        }
    }
    txn.commit().map_err(|x| e(x.into()))
}

/// How long writes nobody waits for (removals, session records) wait for a commit to carry
/// them before they get one of their own.
const LAZY_WRITES: Duration = Duration::from_secs(1);

/// The writer thread: gathers what is queued, the last write of each key winning, and
/// commits it all in one durable transaction (one fsync) when a write is due: at once if
/// the last commit began `interval` ago or more, else when it is that old, so that whatever
/// queues meanwhile shares the fsync. Writes nobody waits for ride along, or get a commit of
/// their own after [`LAZY_WRITES`]. Ends when the store is dropped, committing what it holds.
fn write_loop(db: Database, rx: mpsc::Receiver<Job>, interval: Duration) {
    let mut held = Pending::default();
    let mut last: Option<Instant> = None;
    loop {
        let next = match held.deadline(last, interval) {
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            Some(at) => match at.checked_duration_since(Instant::now()) {
                Some(wait) if !wait.is_zero() => rx.recv_timeout(wait),
                _ => Err(mpsc::RecvTimeoutError::Timeout),
            },
        };
        match next {
            Ok(job) => {
                held.take(job);
                while let Ok(job) = rx.try_recv() {
                    held.take(job);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                last = Some(Instant::now());
                let _ = held.commit(&db);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // The last writes, made durable before the thread ends.
    if held.since.is_some() {
        let _ = held.commit(&db);
    }
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
                let ops = vec![Op::Put(rec.id.clone(), encode(&rec))];
                let rx = if self.sync_interval.is_zero() {
                    Self::queue_awaited(&tx, ops)
                } else {
                    Self::queue(&tx, ops, Due::Soon);
                    None
                };
                (rec, rx)
            })
        };
        Box::pin(async move {
            let (rec, rx) = queued?;
            durable(rx).await?;
            Ok(rec)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<TaskRecord>> {
        Box::pin(std::future::ready(self.mem.get(id)))
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
                (Some(a), Some(b)) if persists(b, a) => {
                    Self::queue_awaited(&tx, vec![Op::Put(a.id.clone(), encode(a))])
                }
                _ => None,
            };
            (after, rx)
        };
        Box::pin(async move {
            durable(rx).await?;
            Ok(after)
        })
    }

    fn list<'a>(&'a self, owner: &'a str, after: u64, limit: usize) -> StoreFuture<'a, (Vec<TaskRecord>, bool)> {
        Box::pin(std::future::ready(self.mem.list(owner, after, limit)))
    }

    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<watch::Receiver<TaskStatus>>> {
        Box::pin(std::future::ready(self.mem.watch(id)))
    }

    fn remove_expired(&self, now: SystemTime) -> StoreFuture<'_, Vec<TaskRecord>> {
        let tx = self.writer.lock().unwrap();
        let gone = self.mem.remove_expired(now);
        if !gone.is_empty() {
            Self::queue(&tx, gone.iter().map(|r| Op::Delete(r.id.clone())).collect(), Due::Lazy);
        }
        Box::pin(std::future::ready(gone))
    }

    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        let tx = self.writer.lock().unwrap();
        let gone = self.mem.remove_if_expired(id, now);
        if let Some(r) = &gone {
            Self::queue(&tx, vec![Op::Delete(r.id.clone())], Due::Lazy);
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
        Self::queue(&self.writer.lock().unwrap(), vec![Op::PutSession(rec.id, bytes)], Due::Lazy);
        Box::pin(std::future::ready(()))
    }

    fn get_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionRecord>> {
        Box::pin(std::future::ready(self.sessions.lock().unwrap().get(id).cloned()))
    }

    fn remove_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.sessions.lock().unwrap().remove(id);
        Self::queue(&self.writer.lock().unwrap(), vec![Op::DeleteSession(id.to_string())], Due::Lazy);
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
        StoreKind::File(dir) => {
            Arc::new(FileStore::open_synced(dir, cfg.max_tasks, cfg.max_store_bytes, cfg.sync_interval)?)
        }
    })
}
