//! The task store: bounded, owner-scoped task records with their final outcome, and waiters
//! that wake on status changes.
//!
//! [`TaskStore`] is the async seam behind which the backends sit: `tasks::memory_store`
//! (in this process only), `tasks::file_store` (a redb database in a data directory, the
//! default for a config read from a file) and `tasks::redis_store` (Redis or Valkey, shared
//! by several gateway replicas).
//! The store also keeps what revives an HTTP session after a restart ([`SessionRecord`]):
//! tasks belong to their creating session, so durable tasks need a durable owner to be
//! reached. No task is evicted to make room: a full store (by count, per client, or by the bytes of
//! its records, outcomes included) refuses new tasks. A finished task is removed once its ttl, counted
//! from creation, has passed; a running one never is.

use crate::mcp::task_messages::TaskStatus;
use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
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
    /// The tool called (`params.name` of the `tools/call`), where known: the task page
    /// shows it.
    pub tool: Option<String>,
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
        let now = crate::clock::wall_now();
        TaskRecord {
            id,
            owner,
            client,
            upstream,
            tool: None,
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

    /// What the record counts against `max_store_bytes`: every variable field (ids,
    /// owner, client, upstream, tool, status message, outcome) and a fixed part for the
    /// rest, so that what a store holds grows with its limits, never with what a peer sends.
    pub(crate) fn stored_len(&self) -> usize {
        RECORD_OVERHEAD
            + self.id.len()
            + self.owner.len()
            + self.client.len()
            + self.upstream.len()
            + self.tool.as_ref().map_or(0, String::len)
            + self.status_message.as_ref().map_or(0, String::len)
            + self.outcome.as_ref().map_or(0, |o| o.len())
    }
}

/// What revives an HTTP session after a restart: the identity its tasks belong to, and how
/// its client initialized (`downstream::http_server`, "revive").
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SessionRecord {
    /// Its `Mcp-Session-Id`.
    pub id: String,
    /// The path it was created on.
    pub path: String,
    pub owner: String,
    pub client: String,
    /// The negotiated version.
    pub version: String,
    /// The client's `initialize` params, as the session keeps them (JSON text).
    pub init_params: String,
    /// The upstream's tasks the session was given and follows (a 2025-11-25 client's tasks
    /// of a 2026-07-28 extension upstream, `gateway::session::ext::translated`): their ids are
    /// the upstream's, valid without the session, so a revived session follows them again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upstream_tasks: Vec<FollowedTask>,
}

/// A task the upstream runs and a session follows, as [`SessionRecord`] keeps it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FollowedTask {
    /// The upstream's task id (the client knows it by that id too).
    pub id: String,
    /// The core `Task` the client was last shown.
    pub task: Value,
    /// When its ttl ends (milliseconds since the Unix epoch; none: unlimited): past it,
    /// it is not followed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<u64>,
}

impl SessionRecord {
    /// Drops the followed tasks whose ttl has passed at `now`.
    pub fn drop_expired(&mut self, now: SystemTime) {
        let now_ms = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as u64;
        self.upstream_tasks.retain(|t| t.expires_ms.is_none_or(|e| e > now_ms));
    }
}

/// A task's status changed in another process sharing the store.
#[derive(Clone, Debug)]
pub struct RemoteChange {
    pub id: String,
    pub status: TaskStatus,
}

/// What a record costs beyond its variable fields (`TaskRecord::stored_len`): its fixed
/// fields, their names in the durable stores' encoding, and the maps that index it.
pub const RECORD_OVERHEAD: usize = 256;

/// How long a finished task is kept at least, even when its ttl passed while it ran.
const REAP_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, PartialEq)]
pub enum StoreError {
    /// The store holds `limit` tasks, running or kept until their ttl.
    Full { limit: usize },
    /// The kept records (with their outcomes) fill `limit` bytes.
    BytesFull { limit: usize },
    /// The client holds `limit` tasks.
    ClientFull { limit: usize },
    /// The backend failed (a disk error, a closed database): `store` names it.
    Backend { store: &'static str, cause: String },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Full { limit } => {
                write!(f, "task store is full ({limit} tasks, max_tasks; finished ones are kept until their ttl)")
            }
            StoreError::BytesFull { limit } => {
                write!(f, "task store is full ({limit} bytes of kept tasks and results, max_store_bytes)")
            }
            StoreError::ClientFull { limit } => {
                write!(f, "too many tasks for this client (limit {limit}, max_tasks_per_owner)")
            }
            StoreError::Backend { store, cause } => write!(f, "the {store} task store failed: {cause}"),
        }
    }
}

/// A boxed future of a store call: the trait stays object-safe (`Arc<dyn TaskStore>`) and
/// the one allocation per call is visible here. Hand-written rather than `async-trait`: the
/// same thing, without a proc-macro dependency, and with the `Send` bound in plain sight.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A change to a record, applied under the store's own lock (or transaction).
pub type Edit<'a> = &'a mut (dyn FnMut(&mut TaskRecord) + Send);

/// Storage for task records, asynchronous so that a networked backend fits behind it.
/// Implementations keep their own bounds. Everything above this trait behaves the same
/// whichever implementation is chosen (the one suite in `tasks::store_suite` checks it).
pub trait TaskStore: Send + Sync {
    /// Adds a task (its `seq` is assigned here), unless a limit refuses it; returns it as
    /// stored. Once this returns, the task is as durable as the store is (the file store's:
    /// on disk within its `sync_interval`, unless that is zero; see `tasks::file_store`).
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> StoreFuture<'_, Result<TaskRecord, StoreError>>;
    ///
    /// The reads a client's request depends on (`get`, `list`, `watch`) return the
    /// backend's failure, so that the client hears the store failed rather than that its
    /// task does not exist. The counts and removals below do not: a networked store maps a
    /// failure to the safe answer named in its docs and logs it.
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// Changes a task with `f`; returns the record after the change. A terminal task keeps
    /// its status and outcome whatever `f` does. Once this returns, a change that made the
    /// task terminal is as durable as the store is.
    /// A shared store may run `f` more than once (a compare-and-set retried when another
    /// process changed the task in between): what its last run made is stored.
    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// The owner's tasks with `seq` greater than `after`, oldest first, at most `limit`; and
    /// whether more follow. Listings are summaries: a store may leave each record's outcome
    /// out (a remote one does, so that a page costs no results' bytes), and no caller reads it.
    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>>;
    /// Every owner's tasks with `seq` greater than `after`, oldest first, at most `limit`;
    /// and whether more follow (the task page's view across owners).
    fn list_all(&self, after: u64, limit: usize) -> StoreFuture<'_, Result<(Vec<TaskRecord>, bool), StoreError>>;
    /// A receiver that sees each status change (made by any process sharing the store);
    /// closed when the task is removed.
    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>>;
    /// Removes task `id` if it is finished and its ttl has passed. Stores do not sweep: the
    /// hosted tasks' clock ([`Deadlines`](crate::clock::Deadlines)) calls this when each
    /// finished task's retention ends.
    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>>;
    /// The highest `seq` handed out so far.
    fn last_seq(&self) -> StoreFuture<'_, u64>;
    /// Bytes of kept records, outcomes included (`TaskRecord::stored_len` of each).
    fn stored_bytes(&self) -> StoreFuture<'_, usize>;
    /// Tasks kept, running and finished.
    fn count(&self) -> StoreFuture<'_, usize>;
    /// Finished tasks whose retention is counted by the store's caller (the sweeper): those
    /// a durable store brought back from before a restart.
    fn finished_at_open(&self) -> Vec<TaskRecord> {
        Vec::new()
    }
    /// Remembers an HTTP session, so that it can be revived after a restart. Not awaited
    /// durable: the durable write of the session's first task carries it. A store that does
    /// not outlive the process keeps nothing.
    fn put_session(&self, _rec: SessionRecord) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
    /// A session remembered from before a restart (only those whose owner still has tasks
    /// are kept when the store opens).
    fn get_session<'a>(&'a self, _id: &'a str) -> StoreFuture<'a, Option<SessionRecord>> {
        Box::pin(std::future::ready(None))
    }
    /// The session ended (deleted by its client, or idle): it is not revived.
    fn remove_session<'a>(&'a self, _id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
    /// Remembers what era upstream `upstream` was found to speak (`found`: JSON text, see
    /// `gateway::eras`), so that a restarted gateway, or another replica, need not find out
    /// again. A store that does not outlive the process keeps nothing. Not awaited durable.
    fn put_era<'a>(&'a self, _upstream: &'a str, _found: String) -> StoreFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }
    /// What [`TaskStore::put_era`] remembered for `upstream`, if anything.
    fn get_era<'a>(&'a self, _upstream: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(std::future::ready(None))
    }
    /// Status changes made by other processes sharing the store (a shared store's
    /// replicas), for what only the process running a task can do: cancel its upstream
    /// call, tell its sessions. `None` for a store this process has alone.
    fn remote_changes(&self) -> Option<tokio::sync::broadcast::Receiver<RemoteChange>> {
        None
    }
    /// Makes every write queued so far durable, those nobody waits for included (session
    /// records, removals): shutdown's last word to the store. A store whose writes are
    /// durable when they return has nothing to do.
    fn flush(&self) -> StoreFuture<'_, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Why the store cannot keep what it is given now, if so (a file store whose commits
    /// fail, a shared store that cannot be reached): `/readyz` reports it.
    fn failing(&self) -> Option<String> {
        None
    }
    /// The store's name in errors and logs.
    fn name(&self) -> &'static str;
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
    let Ok(year @ 0..=9999) = u32::try_from(year) else {
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            rem / 3600,
            (rem % 3600) / 60,
            rem % 60,
            d.subsec_millis()
        );
    };
    // Written digit by digit: a task's record is made with two of these on every status
    // change and `tasks/get`, and `format!` cost ten times as much (callgrind).
    let mut out = String::with_capacity(24);
    let mut put = |n: u32, width: u32, then: char| {
        for place in (0..width).rev() {
            out.push(char::from(b'0' + (n / 10u32.pow(place) % 10) as u8));
        }
        out.push(then);
    };
    let rem = rem as u32;
    put(year, 4, '-');
    put(month as u32, 2, '-');
    put(day as u32, 2, 'T');
    put(rem / 3600, 2, ':');
    put(rem % 3600 / 60, 2, ':');
    put(rem % 60, 2, '.');
    put(d.subsec_millis(), 3, 'Z');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_066_600_123)),
            "2025-11-25T10:30:00.123Z"
        );
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(951_825_599_009)),
            "2000-02-29T11:59:59.009Z",
            "a leap day"
        );
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_800)),
            "10000-01-01T00:00:00.000Z",
            "past year 9999, as many digits as it takes"
        );
    }
}
