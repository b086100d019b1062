//! The shared task store: Redis or Valkey (`[tasks] store = "redis"`, `redis_url`), for
//! several gateway replicas behind one load balancer. Everything `tasks/get|result|list|
//! cancel` needs is in Redis, so any replica answers for any task; what only the replica
//! running a task holds (its upstream call, its sessions' streams) is reached through the
//! status channel (`fanout`).
//!
//! - **Keys**, under the configured prefix (`taskgate:`): `t:<id>` a task's hash (`codec`);
//!   `seq`, `count`, `bytes` and `client:<client>` counters; `owner:<owner>` a sorted set of
//!   the owner's task ids by seq (for `tasks/list`), `all` every task id by seq (for the
//!   task page); `expiry` a sorted set of finished tasks
//!   by the end of their retention; `acct` what each task counts against the limits;
//!   `session:<id>` an HTTP session's [`SessionRecord`]; `era:<upstream>` the era found for
//!   an upstream (`gateway::eras`); `status` the pub/sub channel.
//! - **Limits** are exact: a new task is admitted by one script that checks `max_tasks`,
//!   `max_store_bytes` and the client's `max_tasks_per_owner` and takes its place
//!   (`scripts::INSERT`); a removal gives back what its task counted in the same step. As in
//!   the other stores, `max_store_bytes` counts whole records (`TaskRecord::stored_len`), refuses a new task that would not fit, and a result is
//!   checked against it just before it is written (by `Hosted::finish`), so replicas
//!   finishing at the same moment may overshoot it by their results.
//! - **Changes** (`update`) are a read, the caller's edit, and a compare-and-set on the
//!   record's version (`scripts::UPDATE`), retried when another replica changed it in
//!   between: the edit may run more than once, and what its last run made is stored. A
//!   status change is published by the same script.
//! - **Retention.** A running task has no key expiry; a finished one is removed when its
//!   retention ends by whichever replica sweeps first (every replica sweeps every
//!   [`SWEEP_EVERY`], removals are atomic), and its hash also expires by itself
//!   [`KEY_GRACE`] later, should no replica be left to sweep.
//! - **Failures.** Each call is bounded ([`CALL_TIMEOUT`]); a failure is
//!   [`StoreError::Backend`] naming the store, which reaches the client as -32603. The
//!   connection manager reconnects on the next call, the subscriber in a loop with backoff
//!   (re-reading what its watchers watch, as changes made meanwhile were not heard).
//!   The counts map a failure to a safe answer (see each) and log it.
//! - **Restarts and dead replicas.** A replica starting fails no task: the running ones may
//!   belong to other live replicas. Each replica renews a heartbeat key
//!   (`replica:<id>`, living [`HEARTBEAT_TTL`]) at each sweep, and `running` maps each
//!   running task to the replica running its call; a replica that finds a task of a replica
//!   whose heartbeat lapsed fails it with [`ORPHANED`] (its `tasks/result` is that error),
//!   once Redis has been reachable for longer than the heartbeat's life (so that an outage,
//!   which lets every heartbeat lapse, fails no live replica's tasks).
//! - **A store that went back in time.** Each replica knows the tasks it runs (inserted, not
//!   yet ended by it). A task that `running` maps to this replica but that it does not run
//!   had its end lost by Redis (restored from an older snapshot, failed over to a replica
//!   that had not heard it): the replica fails it with [`LOST_END`] at its next sweep, so
//!   that no `tasks/result` waits for an end that already came.

mod background;
mod codec;
mod conn;
mod fanout;
mod replicas;
mod scripts;

use crate::config::{RedisSettings, TasksConfig};
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::{Edit, RemoteChange, SessionRecord, StoreError, StoreFuture, TaskRecord, TaskStore};
use background::{Sweeper, listen, subscribe};
use codec::{decode, meta, ms};
pub use conn::CALL_TIMEOUT;
use conn::{Fields, Keys, Scripts, backend, bounded};
use fanout::Fanout;
use redis::AsyncCommands;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// How often each replica removes the finished tasks whose retention ended.
pub const SWEEP_EVERY: Duration = Duration::from_secs(2);
/// How long after its retention a finished task's hash expires by itself.
pub const KEY_GRACE: Duration = Duration::from_secs(3600);
/// How long a session record is kept after it was written.
pub const SESSION_KEEP: Duration = Duration::from_secs(24 * 3600);
/// Compare-and-set attempts of one `update` before it gives up.
const MAX_ATTEMPTS: usize = 64;

/// The status message (and error) of a task whose replica stopped while running it.
pub const ORPHANED: &str = "the gateway replica running the task stopped";

/// The status message (and error) of a task whose end the store lost.
pub const LOST_END: &str =
    "the task store lost this task's end (Redis went back to an older state); the gateway no longer runs it";

/// How long a replica's heartbeat key lives: a replica not heard of for this long is taken
/// as gone, and the tasks it was running are failed with [`ORPHANED`] by another.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);

/// The store's timings (shorter in tests).
#[derive(Clone, Copy)]
pub(crate) struct Timing {
    pub sweep_every: Duration,
    pub heartbeat_ttl: Duration,
}

/// What the store's calls and its background tasks share (private fields; reached through
/// [`RedisStore`]).
pub struct Core {
    conn: ConnectionManager,
    keys: Keys,
    fanout: Arc<Fanout>,
    max_tasks: usize,
    max_bytes: usize,
    scripts: Arc<Scripts>,
    timing: Timing,
    /// Why the last heartbeat failed, until one succeeds (`/readyz` reports it).
    unreachable: crate::locks::Mutex<Option<String>>,
    /// The tasks this replica runs: inserted by it, and not yet ended by it (at most
    /// `max_tasks`, as the store admits no more).
    mine: crate::locks::Mutex<std::collections::HashSet<String>>,
}

pub struct RedisStore {
    core: Arc<Core>,
    /// The subscriber and the sweeper, stopped with the store.
    background: Vec<tokio::task::JoinHandle<()>>,
}

impl std::ops::Deref for RedisStore {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        for t in &self.background {
            t.abort();
        }
    }
}

impl RedisStore {
    /// Connects to the store `r` describes, with `cfg`'s limits, and subscribes to its
    /// channel before returning (so that no change is missed by a watcher).
    pub async fn open(r: &RedisSettings, cfg: &TasksConfig) -> Result<RedisStore, StoreError> {
        RedisStore::open_timed(r, cfg, Timing { sweep_every: SWEEP_EVERY, heartbeat_ttl: HEARTBEAT_TTL }).await
    }

    pub(crate) async fn open_timed(
        r: &RedisSettings,
        cfg: &TasksConfig,
        timing: Timing,
    ) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(r.url.value.as_str()).map_err(|e| backend(format!("tasks.redis_url: {e}")))?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(1));
        let conn = bounded(client.get_connection_manager_with_config(manager)).await?;
        let keys = Keys(r.prefix.clone());
        let pubsub = subscribe(&client, &keys.channel()).await?;
        let fanout = Arc::new(Fanout::new(cfg.max_tasks, crate::random::id128()));
        let scripts = Arc::new(Scripts {
            insert: redis::Script::new(scripts::INSERT),
            update: redis::Script::new(scripts::UPDATE),
            remove: redis::Script::new(scripts::REMOVE_EXPIRED),
        });
        let listener = tokio::spawn(listen(client, pubsub, conn.clone(), keys.clone(), fanout.clone()));
        let core = Arc::new(Core {
            conn,
            keys,
            fanout,
            max_tasks: cfg.max_tasks,
            max_bytes: cfg.max_store_bytes,
            scripts,
            timing,
            unreachable: crate::locks::Mutex::new(None),
            mine: crate::locks::Mutex::default(),
        });
        // Alive from the start, so that no replica takes this one's tasks for orphans.
        core.heartbeat().await?;
        let mut store = RedisStore { core: core.clone(), background: vec![listener] };
        store.background.push(tokio::spawn(async move {
            let mut up_for = Duration::ZERO;
            loop {
                tokio::time::sleep(timing.sweep_every).await;
                core.sweeper().remove(crate::clock::wall_now(), None).await;
                let beat = core.heartbeat().await;
                *core.unreachable.lock().unwrap() = beat.as_ref().err().map(ToString::to_string);
                up_for = match beat {
                    Ok(()) => up_for + timing.sweep_every,
                    Err(_) => Duration::ZERO,
                };
                // Only once Redis has been reachable long enough for every live replica
                // to have renewed its heartbeat (an outage lets them all lapse).
                if up_for > timing.heartbeat_ttl {
                    core.fail_orphans().await;
                }
            }
        }));
        tracing::info!(url = %crate::config::redact_url(&r.url.written), prefix = %r.prefix, replica = %store.fanout.origin, "redis task store connected");
        Ok(store)
    }

    /// [`RedisStore::open`] from synchronous code running on the gateway's (multi-threaded)
    /// runtime, whose tasks the connection then lives on.
    pub fn open_blocking(r: &RedisSettings, cfg: &TasksConfig) -> Result<Arc<dyn TaskStore>, StoreError> {
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| backend("a redis store is opened on a tokio runtime"))?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err(backend("a redis store is opened on a multi-threaded runtime"));
        }
        let store = tokio::task::block_in_place(|| handle.block_on(RedisStore::open(r, cfg)))?;
        Ok(Arc::new(store))
    }
}

impl Core {
    fn sweeper(&self) -> Sweeper {
        Sweeper { conn: self.conn.clone(), keys: self.keys.clone(), scripts: self.scripts.clone() }
    }

    async fn fields(&self, id: &str) -> Result<Fields, StoreError> {
        let mut c = self.conn.clone();
        bounded(redis::cmd("HMGET").arg(self.keys.task(id)).arg(&["m", "seq", "ver", "out"]).query_async(&mut c)).await
    }

    async fn read(&self, id: &str) -> Result<Option<(TaskRecord, u64)>, StoreError> {
        let (m, seq, ver, out) = self.fields(id).await?;
        let Some(m) = m else { return Ok(None) };
        let rec = decode(&m, seq.unwrap_or(0), out).ok_or_else(|| backend(format!("task {id}: unreadable record")))?;
        if rec.status.is_terminal() {
            // Ended, whoever ended it (a cancel on another replica too): not run here.
            self.mine.lock().unwrap().remove(id);
        }
        Ok(Some((rec, ver.unwrap_or(0))))
    }

    async fn do_insert(&self, mut rec: TaskRecord, client_limit: usize) -> Result<TaskRecord, StoreError> {
        let k = &self.keys;
        let len = rec.stored_len();
        let acct = format!("{len}\n{}\n{}", rec.client, rec.owner);
        let mut c = self.conn.clone();
        // Known as this replica's before the store maps it here, so no sweep in between
        // takes it for a task whose end was lost.
        let running_here = !rec.status.is_terminal();
        if running_here {
            self.mine.lock().unwrap().insert(rec.id.clone());
        }
        let seq: Result<i64, StoreError> = bounded(
            self.scripts
                .insert
                .key(k.k("count"))
                .key(k.k("bytes"))
                .key(k.client(&rec.client))
                .key(k.k("seq"))
                .key(k.task(&rec.id))
                .key(k.owner(&rec.owner))
                .key(k.k("acct"))
                .key(k.k("running"))
                .key(k.k("all"))
                .arg(self.max_tasks)
                .arg(self.max_bytes)
                .arg(client_limit)
                .arg(meta(&rec))
                .arg(&rec.id)
                .arg(acct)
                .arg(&self.fanout.origin)
                .arg(len)
                .invoke_async(&mut c),
        )
        .await;
        if running_here && !matches!(seq, Ok(s) if s > 0) {
            self.mine.lock().unwrap().remove(&rec.id);
        }
        match seq? {
            -1 => Err(StoreError::Full { limit: self.max_tasks }),
            -2 => Err(StoreError::BytesFull { limit: self.max_bytes }),
            -3 => Err(StoreError::ClientFull { limit: client_limit }),
            seq => {
                rec.seq = seq as u64;
                Ok(rec)
            }
        }
    }

    async fn do_update(&self, id: &str, f: Edit<'_>) -> Result<Option<TaskRecord>, StoreError> {
        // An outcome that would take the store past max_store_bytes (counted with what other
        // replicas wrote meanwhile, and with ends written after an outage) is replaced by the
        // error saying so, as `Hosted::finish` does where it can see the whole store.
        let mut bytes_full: Option<usize> = None;
        for _ in 0..MAX_ATTEMPTS {
            let Some((mut rec, ver)) = self.read(id).await? else {
                self.mine.lock().unwrap().remove(id);
                return Ok(None);
            };
            let (before, outcome, before_len) = (rec.status, rec.outcome.clone(), rec.stored_len());
            f(&mut rec);
            if before.is_terminal() {
                // A terminal task stays terminal, and keeps its outcome.
                rec.status = before;
                rec.outcome = outcome;
            } else if let (Some(len), Some(_)) = (bytes_full, &rec.outcome) {
                let why = format!(
                    "task store is full: the result ({len} bytes) does not fit in max_store_bytes ({})",
                    self.max_bytes
                );
                let err = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": crate::jsonrpc::INTERNAL_ERROR, "message": why}});
                rec.status = TaskStatus::Failed;
                rec.status_message = Some(why);
                rec.outcome = Some(err.to_string().into());
            }
            let after_len = rec.stored_len();
            let acct = if after_len != before_len {
                format!("{after_len}\n{}\n{}", rec.client, rec.owner)
            } else {
                String::new()
            };
            let (expires, key_expires) = if rec.status.is_terminal() {
                let at = ms(rec.expires_at());
                (at.to_string(), (at + KEY_GRACE.as_millis() as u64).to_string())
            } else {
                (String::new(), String::new())
            };
            let message = if rec.status != before {
                codec::published(id, rec.status, "{ver}", &self.fanout.origin)
            } else {
                String::new()
            };
            let k = &self.keys;
            let mut c = self.conn.clone();
            let new_ver: i64 = bounded(
                self.scripts
                    .update
                    .key(k.task(id))
                    .key(k.k("bytes"))
                    .key(k.k("expiry"))
                    .key(k.k("acct"))
                    .key(k.k("running"))
                    .arg(ver)
                    .arg(meta(&rec))
                    .arg(rec.outcome.as_deref().unwrap_or(""))
                    .arg(if rec.outcome.is_some() { "1" } else { "0" })
                    .arg(after_len as i64 - before_len as i64)
                    .arg(acct)
                    .arg(expires)
                    .arg(key_expires)
                    .arg(id)
                    .arg(k.channel())
                    .arg(message)
                    .arg(if bytes_full.is_none() && rec.outcome.is_some() {
                        self.max_bytes.to_string()
                    } else {
                        String::new()
                    })
                    .invoke_async(&mut c),
            )
            .await?;
            if new_ver == -2 {
                bytes_full = Some(rec.outcome.as_ref().map_or(0, |o| o.len()));
                continue;
            }
            if new_ver > 0 {
                if rec.status.is_terminal() {
                    self.mine.lock().unwrap().remove(id);
                }
                self.fanout.show(id, Some(rec.status), new_ver as u64);
                return Ok(Some(rec));
            }
        }
        Err(backend(format!("task {id} kept changing under {MAX_ATTEMPTS} attempts to update it")))
    }

    /// The tasks of the index `index` (an owner's, or `all`) after `after`.
    async fn do_list(&self, index: String, after: u64, limit: usize) -> Result<(Vec<TaskRecord>, bool), StoreError> {
        let mut c = self.conn.clone();
        let ids: Vec<String> = bounded(
            redis::cmd("ZRANGEBYSCORE")
                .arg(index)
                .arg(format!("({after}"))
                .arg("+inf")
                .arg("LIMIT")
                .arg(0)
                .arg(limit + 1)
                .query_async(&mut c),
        )
        .await?;
        let more = ids.len() > limit;
        // Summaries: a listing shows no outcome, and reading each would cost a page of tasks
        // their results' bytes.
        let mut pipe = redis::pipe();
        for id in ids.iter().take(limit) {
            pipe.cmd("HMGET").arg(self.keys.task(id)).arg(&["m", "seq"]);
        }
        let rows: Vec<(Option<String>, Option<u64>)> =
            if ids.is_empty() { Vec::new() } else { bounded(pipe.query_async(&mut c)).await? };
        // A task whose hash expired by itself before a sweep removed it is left out.
        let page = rows.into_iter().filter_map(|(m, seq)| decode(&m?, seq.unwrap_or(0), None)).collect();
        Ok((page, more))
    }

    async fn do_watch(&self, id: &str) -> Result<Option<watch::Receiver<TaskStatus>>, StoreError> {
        let rx = self.fanout.subscribe(id).ok_or_else(|| backend("too many watched tasks (max_tasks)"))?;
        let read = self.read(id).await;
        let (rec, ver) = match read {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => {
                drop(rx);
                self.fanout.forget_unwatched(id);
                return read.map(|_| None);
            }
        };
        if rec.status.is_terminal() {
            drop(rx);
            self.fanout.forget_unwatched(id);
            // A finished task: its status is final, and the receiver says so at once.
            return Ok(Some(watch::channel(rec.status).1));
        }
        self.fanout.show(id, Some(rec.status), ver);
        Ok(Some(rx))
    }

    /// A count, or `default` (logged) if Redis cannot say.
    async fn counter(&self, key: &str, default: u64) -> u64 {
        let mut c = self.conn.clone();
        match bounded(c.get::<_, Option<u64>>(self.keys.k(key))).await {
            Ok(n) => n.unwrap_or(0),
            Err(e) => {
                tracing::error!(error = %e, key, "task store");
                default
            }
        }
    }
}

impl TaskStore for RedisStore {
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> StoreFuture<'_, Result<TaskRecord, StoreError>> {
        Box::pin(self.do_insert(rec, client_limit))
    }
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(async move { Ok(self.read(id).await?.map(|(r, _)| r)) })
    }
    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(self.do_update(id, f))
    }
    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>> {
        Box::pin(self.do_list(self.keys.owner(owner), after, limit))
    }
    fn list_all(&self, after: u64, limit: usize) -> StoreFuture<'_, Result<(Vec<TaskRecord>, bool), StoreError>> {
        Box::pin(self.do_list(self.keys.k("all"), after, limit))
    }
    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>> {
        Box::pin(self.do_watch(id))
    }
    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        Box::pin(async move { self.sweeper().remove(now, Some(id)).await.pop() })
    }
    /// On failure, `u64::MAX`: a cursor is then taken as valid, and the listing that
    /// follows reports the failure.
    fn last_seq(&self) -> StoreFuture<'_, u64> {
        Box::pin(self.counter("seq", u64::MAX))
    }
    /// On failure, 0: the write of the result that follows reports the failure.
    fn stored_bytes(&self) -> StoreFuture<'_, usize> {
        Box::pin(async move { self.counter("bytes", 0).await as usize })
    }
    /// On failure, 0.
    fn count(&self) -> StoreFuture<'_, usize> {
        Box::pin(async move { self.counter("count", 0).await as usize })
    }
    /// Kept [`SESSION_KEEP`]; a failure is logged (the session is then not revived
    /// elsewhere).
    fn put_session(&self, rec: SessionRecord) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let text = serde_json::to_string(&rec).expect("records serialize");
            let mut c = self.conn.clone();
            let res: Result<(), _> =
                bounded(c.pset_ex(self.keys.session(&rec.id), text, SESSION_KEEP.as_millis() as u64)).await;
            if let Err(e) = res {
                tracing::error!(error = %e, "task store: cannot remember the session");
            }
        })
    }
    /// A failure is logged and finds no session.
    fn get_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionRecord>> {
        Box::pin(async move {
            let mut c = self.conn.clone();
            match bounded(c.get::<_, Option<String>>(self.keys.session(id))).await {
                Ok(text) => text.and_then(|t| serde_json::from_str(&t).ok()),
                Err(e) => {
                    tracing::error!(error = %e, "task store: cannot look the session up");
                    None
                }
            }
        })
    }
    fn remove_session<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut c = self.conn.clone();
            if let Err(e) = bounded(c.del::<_, ()>(self.keys.session(id))).await {
                tracing::error!(error = %e, "task store: cannot forget the session");
            }
        })
    }
    /// Kept [`SESSION_KEEP`] (then found out again); a failure is logged.
    fn put_era<'a>(&'a self, upstream: &'a str, found: String) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut c = self.conn.clone();
            let res: Result<(), _> =
                bounded(c.pset_ex(self.keys.era(upstream), found, SESSION_KEEP.as_millis() as u64)).await;
            if let Err(e) = res {
                tracing::error!(error = %e, "task store: cannot remember the upstream's era");
            }
        })
    }
    /// A failure is logged and finds nothing (the era is found out again).
    fn get_era<'a>(&'a self, upstream: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(async move {
            let mut c = self.conn.clone();
            match bounded(c.get::<_, Option<String>>(self.keys.era(upstream))).await {
                Ok(text) => text,
                Err(e) => {
                    tracing::error!(error = %e, "task store: cannot look the upstream's era up");
                    None
                }
            }
        })
    }
    fn remote_changes(&self) -> Option<tokio::sync::broadcast::Receiver<RemoteChange>> {
        Some(self.fanout.remote())
    }
    /// Found at each sweep ([`SWEEP_EVERY`]), by its heartbeat.
    fn failing(&self) -> Option<String> {
        self.unreachable.lock().unwrap().clone()
    }
    fn name(&self) -> &'static str {
        "redis"
    }
}

#[cfg(test)]
mod tests;
