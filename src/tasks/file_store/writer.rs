//! The file store's writer thread: what it holds between commits, and when it commits.

use redb::{Database, Durability, TableDefinition};
use std::collections::HashMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// Tasks by id: a JSON head, a newline, the outcome's text.
pub(super) const TASKS: TableDefinition<&str, &[u8]> = TableDefinition::new("tasks");
/// HTTP sessions by `Mcp-Session-Id`, JSON `SessionRecord`s.
pub(super) const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// The era found for each upstream, by upstream name (JSON text, `gateway::eras`).
pub(super) const ERAS: TableDefinition<&str, &[u8]> = TableDefinition::new("eras");

pub(super) enum Op {
    Put(String, Vec<u8>),
    Delete(String),
    PutSession(String, Vec<u8>),
    DeleteSession(String),
    PutEra(String, Vec<u8>),
}

/// How soon a write must be durable.
pub(super) enum Due {
    /// Someone waits until it is: told then (or told the commit failed).
    Awaited(oneshot::Sender<Result<(), String>>),
    /// Within the sync interval; nobody waits (a new task, when the interval is not zero).
    Soon,
    /// Whenever the next commit is, within [`LAZY_WRITES`] (removals, session records).
    Lazy,
}

pub(super) struct Job {
    pub(super) ops: Vec<Op>,
    pub(super) due: Due,
    /// Its place in the queue: [`write_loop`] publishes the last one committed.
    pub(super) seq: u64,
}

/// What the writer holds until its next commit: the last write of each key (a later write
/// of a task replaces an earlier one not yet committed), and who waits for it.
#[derive(Default)]
pub(super) struct Pending {
    tasks: HashMap<String, Option<Vec<u8>>>,
    sessions: HashMap<String, Option<Vec<u8>>>,
    eras: HashMap<String, Option<Vec<u8>>>,
    waiters: Vec<oneshot::Sender<Result<(), String>>>,
    /// A write is due within the sync interval (awaited or [`Due::Soon`]).
    due: bool,
    /// When the oldest write not yet committed came.
    since: Option<Instant>,
    /// The last job taken.
    seq: u64,
}

impl Pending {
    pub(super) fn add(&mut self, ops: Vec<Op>) {
        self.since.get_or_insert_with(Instant::now);
        for op in ops {
            match op {
                Op::Put(k, v) => self.tasks.insert(k, Some(v)),
                Op::Delete(k) => self.tasks.insert(k, None),
                Op::PutSession(k, v) => self.sessions.insert(k, Some(v)),
                Op::DeleteSession(k) => self.sessions.insert(k, None),
                Op::PutEra(k, v) => self.eras.insert(k, Some(v)),
            };
        }
    }

    fn take(&mut self, job: Job) {
        self.add(job.ops);
        self.seq = job.seq;
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
    pub(super) fn commit(&mut self, db: &Database) -> Result<(), String> {
        let res = write(db, &self.tasks, &self.sessions, &self.eras);
        if let Err(e) = &res {
            tracing::error!(error = %e, "task store write failed");
        }
        for w in self.waiters.drain(..) {
            let _ = w.send(res.clone());
        }
        self.tasks.clear();
        self.sessions.clear();
        self.eras.clear();
        (self.due, self.since) = (false, None);
        res
    }
}

type Rows = HashMap<String, Option<Vec<u8>>>;

fn write(db: &Database, tasks: &Rows, sessions: &Rows, eras: &Rows) -> Result<(), String> {
    let e = |e: redb::Error| e.to_string();
    let mut txn = db.begin_write().map_err(|x| e(x.into()))?;
    txn.set_durability(Durability::Immediate).map_err(|x| e(x.into()))?;
    for (def, rows) in [(TASKS, tasks), (SESSIONS, sessions), (ERAS, eras)] {
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

/// How long writes nobody waits for (removals, session and era records) wait for a commit to carry
/// them before they get one of their own.
const LAZY_WRITES: Duration = Duration::from_secs(1);

/// The writer thread: gathers what is queued, the last write of each key winning, and
/// commits it all in one durable transaction (one fsync) when a write is due: at once if
/// the last commit began `interval` ago or more, else when it is that old, so that whatever
/// queues meanwhile shares the fsync. Writes nobody waits for ride along, or get a commit of
/// their own after [`LAZY_WRITES`]. Ends when the store is dropped, committing what it holds.
pub(super) fn write_loop(db: Database, rx: mpsc::Receiver<Job>, interval: Duration, synced: watch::Sender<u64>) {
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
                let seq = held.seq;
                let _ = held.commit(&db);
                // A failed commit too: its waiters hear why; readers are not held forever.
                synced.send_replace(seq);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // The last writes, made durable before the thread ends.
    if held.since.is_some() {
        let seq = held.seq;
        let _ = held.commit(&db);
        synced.send_replace(seq);
    }
}
