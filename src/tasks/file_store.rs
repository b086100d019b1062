//! The durable task store: a redb database (`tasks.redb`) in the data directory
//! (`[tasks] path`), in front of which a [`MemoryStore`] keeps the hot copy.
//!
//! - **Reads** (`get`, `list`, `watch`, the counts) come from memory: the database is read
//!   once, when the store opens, and every task it holds is put back in memory then (the
//!   store's limits bound what that costs). A task that was running when the process died
//!   comes back `failed`, with [`RESTARTED`] as its status message and as the error its
//!   `tasks/result` gives; a finished one whose ttl has passed is dropped. A `get` of a task
//!   whose end is queued but not yet durable waits for its commit (at most the sync
//!   interval): `tasks/get` and `tasks/result` never show an end a crash could still undo,
//!   and `tasks/list` shows such a task still `working` (a status watch may see the end that
//!   moment sooner).
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
//!   committed at once and a new task is awaited too. With `[tasks] durability = "interval"`
//!   an end is not awaited either: it is answered at once and on disk within the interval,
//!   as a new task is. Removals and session records wait for
//!   the next commit, or a second (one lost to a crash is expired again at opening). Changes
//!   to a running task (status messages, input required and back) are not written: after a
//!   restart a running task is `failed` whatever it said, and progress never reaches the store.
//! - **Failing commits** (a full disk, an I/O error). The writer keeps every write it could
//!   not commit and tries again (reopening the database: redb refuses every write on a
//!   handle whose I/O failed), 100 ms after the failure doubling to 1 s, until a commit
//!   succeeds; then everything is as before, by itself. Meanwhile nothing it cannot keep is
//!   acknowledged: a new task is refused (-32603 naming the file and why), an end waiting
//!   for its commit is not shown (`get` and `update` of it fail at once, naming the store;
//!   the hosted tasks keep it and write it again, `tasks::hosted::unstored`), and
//!   [`TaskStore::failing`] says why (`/readyz`). With `durability = "interval"` an end is
//!   answered before its commit, as always, and written once commits succeed.
//! - **A damaged file** (`opening`): refused with an error naming the file and what to do;
//!   never a panic, and a zero-length file is damaged, not a new store.
//! - **Sessions.** An HTTP session's identity ([`SessionRecord`]) is written when it is
//!   initialized (without waiting: its first task's commit carries it) and removed
//!   when it ends, and again when the upstream tasks it follows change; at reopening only
//!   those whose owner still has tasks, or that follow an upstream task whose ttl has not
//!   passed, are kept, so that a client coming back with its `Mcp-Session-Id` reaches its
//!   tasks again.
//! - **Eras.** What era each upstream was found to speak (`gateway::eras`), one short
//!   record per upstream name, written lazily and read back at opening.
//! - The directory is locked while the store is open (`flock` on [`LOCK_FILE`]; redb
//!   itself would let several processes share the file): a second gateway on the same
//!   directory fails to start, saying so. The lock goes with the process, `kill -9` too.

use crate::config::Durability;
use crate::locks::Mutex;
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::memory_store::MemoryStore;
use crate::tasks::store::{Edit, RECORD_OVERHEAD, SessionRecord, StoreError, StoreFuture, TaskRecord, TaskStore};
pub use codec::RESTARTED;
use codec::{backend, encode};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};
use tokio::sync::{oneshot, watch};
use writer::{Db, Due, Health, Job, Op, Pending};

/// The file inside the data directory.
pub const DB_FILE: &str = "tasks.redb";

/// Held locked by the gateway that has the directory open.
pub const LOCK_FILE: &str = "lock";

mod codec;
mod opening;
mod writer;

/// The default `[tasks] sync_interval`: at most one durable commit (one fsync) per 10 ms.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(10);

pub struct FileStore {
    mem: MemoryStore,
    /// Held across the memory change and the queueing of its write, so that the database
    /// sees the changes in the order memory did.
    writer: Mutex<Queue>,
    /// The last job the writer committed, and whether its commits fail now.
    health: watch::Receiver<Health>,
    /// How long a new task may wait for its durable commit (`[tasks] sync_interval`); zero:
    /// its insert waits for it.
    sync_interval: Duration,
    /// `Interval`: a task's end is not waited for either (`[tasks] durability`).
    durability: Durability,
    /// The finished tasks brought back when the store opened.
    restored: Mutex<Vec<TaskRecord>>,
    /// The sessions remembered from before the restart whose owners still have tasks.
    sessions: Mutex<HashMap<String, SessionRecord>>,
    /// What each session record on disk counts against `max_store_bytes`, with the tasks'
    /// (its JSON and [`RECORD_OVERHEAD`]): at most one per session open or remembered.
    session_bytes: Mutex<HashMap<String, usize>>,
    /// The era found for each upstream (`gateway::eras`), read at opening: one short entry
    /// per upstream name ever configured.
    eras: Mutex<HashMap<String, String>>,
    path: PathBuf,
    /// Joined on drop, so that the database is closed (and may be opened again) after.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Locked while the store is open; unlocked when closed.
    _lock: std::fs::File,
}

/// The way to the writer thread.
struct Queue {
    tx: mpsc::Sender<Job>,
    /// The last job queued.
    seq: u64,
    /// Tasks whose end (or later change) is queued, and its job: `get` waits until it is
    /// durable, so that no `tasks/result` answers with a result a crash could still lose.
    ends: HashMap<String, u64>,
}

impl Queue {
    /// Queues `ops`, returning the job's seq. The writer outlives every sender; a send fails
    /// only if it panicked, and a waiter then hears so (its sender is dropped).
    fn send(&mut self, ops: Vec<Op>, due: Due) -> u64 {
        self.seq += 1;
        let _ = self.tx.send(Job { ops, due, seq: self.seq });
        self.seq
    }

    /// Queues `ops`; the receiver says when they are durable.
    fn awaited(&mut self, ops: Vec<Op>) -> (u64, oneshot::Receiver<Result<(), String>>) {
        let (done, rx) = oneshot::channel();
        (self.send(ops, Due::Awaited(done)), rx)
    }
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
        self.writer.get_mut().unwrap_or_else(|e| e.into_inner()).tx = mpsc::channel().0;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl FileStore {
    /// Opens (or creates) the store in directory `dir`, with the limits of a
    /// [`MemoryStore`] and the [`DEFAULT_SYNC_INTERVAL`]. Blocking I/O: call it before
    /// serving, or off the runtime.
    pub fn open(dir: &Path, max_tasks: usize, max_bytes: usize) -> Result<FileStore, StoreError> {
        FileStore::open_synced(dir, max_tasks, max_bytes, DEFAULT_SYNC_INTERVAL)
    }

    /// The store, acknowledging a task's end as `durability` says (the default: once it is
    /// on disk).
    pub fn with_durability(mut self, durability: Durability) -> FileStore {
        self.durability = durability;
        self
    }

    /// Whether no task's end waits for its commit (as with [`Durability::Interval`]).
    #[cfg(test)]
    pub(crate) fn awaits_no_end(&self) -> bool {
        self.writer.lock().unwrap().ends.is_empty()
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
        let mem = MemoryStore::new(max_tasks, max_bytes);
        let opening::Opened { db, restored, sessions, eras, fixes } =
            opening::open(&path, &mem, crate::clock::wall_now())?;
        let mut session_bytes = HashMap::new();
        for (id, rec) in &sessions {
            let len = session_len(rec);
            mem.account_other(0, len, true);
            session_bytes.insert(id.clone(), len);
        }
        let mut pending = Pending::default();
        pending.add(fixes);
        pending.commit(&db, &path).map_err(backend)?;
        if !restored.is_empty() {
            tracing::info!(tasks = restored.len(), path = %path.display(), "task store reopened");
        }
        let (tx, rx) = mpsc::channel();
        let (health_tx, health) = watch::channel(Health::default());
        let db = Db { db: Some(db), path: path.clone() };
        let thread = std::thread::Builder::new()
            .name("taskgate-store".into())
            .spawn(move || writer::write_loop(db, rx, sync_interval, health_tx))
            .map_err(backend)?;
        Ok(FileStore {
            mem,
            writer: Mutex::new(Queue { tx, seq: 0, ends: HashMap::new() }),
            health,
            sync_interval,
            durability: Durability::End,
            restored: Mutex::new(restored),
            sessions: Mutex::new(sessions),
            session_bytes: Mutex::new(session_bytes),
            eras: Mutex::new(eras),
            path,
            thread: Some(thread),
            _lock: lock,
        })
    }

    /// Where the database lives.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until job `seq` is durable; fails at once, saying why, while commits fail
    /// (the writer keeps trying: a later call may succeed).
    async fn durable_by(&self, seq: u64) -> Result<(), StoreError> {
        let mut health = self.health.clone();
        let h = health
            .wait_for(|h| h.synced >= seq || h.failing.is_some())
            .await
            .map_err(|_| backend("the writer thread stopped"))?;
        match &h.failing {
            _ if h.synced >= seq => Ok(()),
            Some(why) => Err(backend(why)),
            None => Ok(()),
        }
    }

    /// A listing's page as it may be shown: a task whose end is not durable yet (its commit
    /// pending, or failing on a full disk) is still running, as a crash would leave it.
    fn without_undurable_ends(&self, mut page: Vec<TaskRecord>) -> Vec<TaskRecord> {
        let synced = self.health.borrow().synced;
        let q = self.writer.lock().unwrap();
        if q.ends.is_empty() {
            return page;
        }
        for r in &mut page {
            if q.ends.get(&r.id).is_some_and(|&seq| seq > synced) {
                r.status = TaskStatus::Working;
                r.status_message = None;
                r.outcome = None;
            }
        }
        page
    }

    /// The end queued as job `seq` is durable: reads no longer wait for it.
    fn forget_end(&self, id: &str, seq: u64) {
        let mut q = self.writer.lock().unwrap();
        if q.ends.get(id) == Some(&seq) {
            q.ends.remove(id);
        }
    }

    /// Takes back a new task whose awaited commit failed (its client is told it was not
    /// made): gone from memory at once, and from the disk with the next commit.
    fn unmake(&self, id: &str) {
        let mut q = self.writer.lock().unwrap();
        let now = crate::clock::wall_now();
        self.mem.update(id, &mut |r| {
            r.status = TaskStatus::Failed;
            r.ttl = Duration::ZERO;
            r.ttl_from_end = true;
            r.last_updated_at = now;
        });
        self.mem.remove_if_expired(id, now);
        q.send(vec![Op::Delete(id.to_string())], Due::Soon);
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
        if let Some(why) = self.health.borrow().failing.clone() {
            // It could not be kept: refused, as the client would otherwise hold an id a
            // crash could make unknown.
            let why = format!("{why}; new tasks are refused until a commit succeeds");
            return Box::pin(std::future::ready(Err(backend(why))));
        }
        let queued = {
            let mut q = self.writer.lock().unwrap();
            self.mem.insert(rec, client_limit).map(|rec| {
                let ops = vec![Op::Put(rec.id.clone(), encode(&rec))];
                let rx = if self.sync_interval.is_zero() {
                    Some(q.awaited(ops).1)
                } else {
                    q.send(ops, Due::Soon);
                    None
                };
                (rec, rx)
            })
        };
        Box::pin(async move {
            let (rec, rx) = queued?;
            if let Err(e) = durable(rx).await {
                self.unmake(&rec.id);
                return Err(e);
            }
            Ok(rec)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let Some(&seq) = self.writer.lock().unwrap().ends.get(id) else {
            return Box::pin(std::future::ready(Ok(self.mem.get(id))));
        };
        Box::pin(async move {
            // Its end is not durable yet: wait for the commit that carries it, or say that
            // commits fail.
            self.durable_by(seq).await?;
            self.forget_end(id, seq);
            Ok(self.mem.get(id))
        })
    }

    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let (after, wait) = {
            let mut q = self.writer.lock().unwrap();
            let mut before = None;
            let after = self.mem.update(id, &mut |r| {
                before = Some((r.status, r.status_message.clone(), r.last_updated_at, r.ttl, r.ttl_from_end));
                f(r)
            });
            let wait = match (&after, &before) {
                (Some(a), Some(b)) if persists(b, a) && self.durability == Durability::Interval => {
                    // Acknowledged now, on disk within the interval (as a new task is).
                    q.send(vec![Op::Put(a.id.clone(), encode(a))], Due::Soon);
                    None
                }
                (Some(a), Some(b)) if persists(b, a) => {
                    let (seq, rx) = q.awaited(vec![Op::Put(a.id.clone(), encode(a))]);
                    q.ends.insert(a.id.clone(), seq);
                    Some((seq, Some(rx)))
                }
                // Nothing new to write, but an end not yet durable: it is not shown as kept
                // before it is.
                _ => q.ends.get(id).map(|&seq| (seq, None)),
            };
            (after, wait)
        };
        Box::pin(async move {
            let Some((seq, rx)) = wait else { return Ok(after) };
            match rx {
                Some(rx) => durable(Some(rx)).await?,
                None => self.durable_by(seq).await?,
            }
            self.forget_end(id, seq);
            Ok(after)
        })
    }

    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>> {
        let (page, more) = self.mem.list(owner, after, limit);
        Box::pin(std::future::ready(Ok((self.without_undurable_ends(page), more))))
    }

    fn list_all(&self, after: u64, limit: usize) -> StoreFuture<'_, Result<(Vec<TaskRecord>, bool), StoreError>> {
        let (page, more) = self.mem.list_where(None, after, limit);
        Box::pin(std::future::ready(Ok((self.without_undurable_ends(page), more))))
    }

    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>> {
        Box::pin(std::future::ready(Ok(self.mem.watch(id))))
    }

    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        let mut q = self.writer.lock().unwrap();
        let gone = self.mem.remove_if_expired(id, now);
        if let Some(r) = &gone {
            q.ends.remove(&r.id);
            q.send(vec![Op::Delete(r.id.clone())], Due::Lazy);
        }
        Box::pin(std::future::ready(gone))
    }

    fn last_seq(&self) -> StoreFuture<'_, u64> {
        Box::pin(std::future::ready(self.mem.last_seq()))
    }

    fn stored_bytes(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(self.mem.stored_bytes()))
    }

    fn count(&self) -> StoreFuture<'_, usize> {
        Box::pin(std::future::ready(self.mem.len()))
    }

    /// Counted with the tasks against `max_store_bytes`: a record that does not fit is not
    /// written (the session goes on, but is not revived after a restart), and says so.
    fn put_session(&self, rec: SessionRecord) -> StoreFuture<'_, ()> {
        let bytes = serde_json::to_vec(&rec).expect("records serialize");
        let len = bytes.len() + RECORD_OVERHEAD;
        let mut sizes = self.session_bytes.lock().unwrap();
        let before = sizes.get(&rec.id).copied().unwrap_or(0);
        if !self.mem.account_other(before, len, false) {
            tracing::warn!(
                bytes = len,
                "task store is full (max_store_bytes): a session's record is not written, and the session would not be revived after a restart"
            );
            return Box::pin(std::future::ready(()));
        }
        sizes.insert(rec.id.clone(), len);
        drop(sizes);
        self.writer.lock().unwrap().send(vec![Op::PutSession(rec.id, bytes)], Due::Lazy);
        Box::pin(std::future::ready(()))
    }

    fn flush(&self) -> StoreFuture<'_, Result<(), StoreError>> {
        // An empty job waited for: its commit carries whatever the writer holds.
        let (_, done) = self.writer.lock().unwrap().awaited(Vec::new());
        Box::pin(async move { done.await.map_err(|_| backend("the store's writer has stopped"))?.map_err(backend) })
    }

    fn get_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionRecord>> {
        Box::pin(std::future::ready(self.sessions.lock().unwrap().get(id).cloned()))
    }

    fn remove_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        self.sessions.lock().unwrap().remove(id);
        if let Some(before) = self.session_bytes.lock().unwrap().remove(id) {
            self.mem.account_other(before, 0, false);
        }
        self.writer.lock().unwrap().send(vec![Op::DeleteSession(id.to_string())], Due::Lazy);
        Box::pin(std::future::ready(()))
    }

    fn put_era<'a>(&'a self, upstream: &'a str, found: String) -> StoreFuture<'a, ()> {
        let bytes = found.clone().into_bytes();
        self.eras.lock().unwrap().insert(upstream.to_string(), found);
        self.writer.lock().unwrap().send(vec![Op::PutEra(upstream.to_string(), bytes)], Due::Lazy);
        Box::pin(std::future::ready(()))
    }

    fn get_era<'a>(&'a self, upstream: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(std::future::ready(self.eras.lock().unwrap().get(upstream).cloned()))
    }

    fn failing(&self) -> Option<String> {
        self.health.borrow().failing.clone()
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
        StoreKind::File(dir) => Arc::new(
            FileStore::open_synced(dir, cfg.max_tasks, cfg.max_store_bytes, cfg.sync_interval)?
                .with_durability(cfg.durability),
        ),
        StoreKind::Redis(r) => crate::tasks::redis_store::RedisStore::open_blocking(r, cfg)?,
    })
}

/// What a session record counts against `max_store_bytes`.
fn session_len(rec: &SessionRecord) -> usize {
    serde_json::to_vec(rec).map_or(0, |b| b.len()) + RECORD_OVERHEAD
}
