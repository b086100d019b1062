//! Opening the file store's database and bringing back what it holds. A damaged file is
//! refused with an error that names it and says what to do, never a panic: the whole file is
//! checked as it opens (redb verifies every page's checksum), a zero-length file counts as
//! damaged (redb would take it for a new, empty store), and a panic inside redb while it
//! opens or reads the file is caught and reported as damage like any other.

use super::codec::{RESTARTED, backend, decode, encode};
use super::writer::{ERAS, Op, SESSIONS, TASKS};
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::memory_store::MemoryStore;
use crate::tasks::store::{SessionRecord, StoreError, TaskRecord};
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::SystemTime;

/// What the database held when it opened, and the writes that put it right (expired and
/// unreadable records removed, running tasks failed).
pub(super) struct Opened {
    pub(super) db: Database,
    pub(super) restored: Vec<TaskRecord>,
    pub(super) sessions: HashMap<String, SessionRecord>,
    /// The era found for each upstream (`gateway::eras`).
    pub(super) eras: HashMap<String, String>,
    pub(super) fixes: Vec<Op>,
}

/// Why opening failed: damage to the file, or anything else (its directory, permissions).
enum Failure {
    Damaged(String),
    Other(String),
}

/// Opens the database at `path` (created if missing) and puts every task it keeps into `mem`.
pub(super) fn open(path: &Path, mem: &MemoryStore, now: SystemTime) -> Result<Opened, StoreError> {
    if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        return Err(damaged(path, "it is empty (zero bytes), as a file cut short is"));
    }
    match quietly(|| load(path, mem, now)) {
        Ok(Ok(opened)) => Ok(opened),
        Ok(Err(Failure::Damaged(why))) => Err(damaged(path, &why)),
        Ok(Err(Failure::Other(why))) => Err(backend(format!("cannot open {}: {why}", path.display()))),
        Err(panicked) => Err(damaged(path, &format!("reading it failed: {panicked}"))),
    }
}

/// The error for a damaged store file: which file, and what to do.
fn damaged(path: &Path, why: &str) -> StoreError {
    let p = path.display();
    backend(format!(
        "the store file {p} is damaged ({why}). Move it aside (for example to {p}.damaged) and start the \
         gateway again: it then starts with an empty store, and the tasks the file held are lost"
    ))
}

fn failure(e: impl Into<redb::Error>) -> Failure {
    match e.into() {
        redb::Error::Corrupted(why) => Failure::Damaged(why),
        redb::Error::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            Failure::Damaged(format!("it does not hold a task store: {e}"))
        }
        redb::Error::RepairAborted => Failure::Damaged("its repair did not complete".into()),
        redb::Error::UpgradeRequired(v) => {
            Failure::Other(format!("it is in an older file format ({v}) that this version does not read"))
        }
        e => Failure::Other(e.to_string()),
    }
}

fn load(path: &Path, mem: &MemoryStore, now: SystemTime) -> Result<Opened, Failure> {
    let db = Database::builder().set_check_integrity_on_open(true).create(path).map_err(failure)?;
    let mut fixes: Vec<Op> = Vec::new();
    let mut restored = Vec::new();
    each_row(&db, TASKS, |k, v| {
        let Some(rec) = decode(v) else {
            tracing::warn!(task = %k, "dropping an unreadable task record");
            fixes.push(Op::Delete(k.to_string()));
            return;
        };
        let rec = if rec.status.is_terminal() {
            if rec.expires_at() <= now {
                fixes.push(Op::Delete(rec.id.clone()));
                return;
            }
            rec
        } else {
            let rec = restarted(rec, now);
            fixes.push(Op::Put(rec.id.clone(), encode(&rec)));
            rec
        };
        restored.push(rec.clone());
        mem.restore(rec);
    })?;
    let owners: HashSet<&str> = restored.iter().map(|r| r.owner.as_str()).collect();
    let mut sessions = HashMap::new();
    each_row(&db, SESSIONS, |k, v| match serde_json::from_slice::<SessionRecord>(v).map(|s| follows(s, now)) {
        Ok((s, follows)) if follows || owners.contains(s.owner.as_str()) => {
            sessions.insert(s.id.clone(), s);
        }
        // A session with no task left has nothing to come back for.
        _ => fixes.push(Op::DeleteSession(k.to_string())),
    })?;
    let mut eras = HashMap::new();
    each_row(&db, ERAS, |k, v| {
        if let Ok(text) = std::str::from_utf8(v) {
            eras.insert(k.to_string(), text.to_string());
        }
    })?;
    Ok(Opened { db, restored, sessions, eras, fixes })
}

/// Hands every row of `table` to `f` (none where the table does not exist yet).
fn each_row(db: &Database, table: TableDefinition<&str, &[u8]>, mut f: impl FnMut(&str, &[u8])) -> Result<(), Failure> {
    let read = db.begin_read().map_err(failure)?;
    match read.open_table(table) {
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(()),
        Err(e) => Err(failure(e)),
        Ok(table) => {
            for row in table.iter().map_err(failure)? {
                let (k, v) = row.map_err(failure)?;
                f(k.value(), v.value());
            }
            Ok(())
        }
    }
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

/// Session `s` without the upstream tasks whose ttl has passed, and whether it still
/// follows any.
fn follows(mut s: SessionRecord, now: SystemTime) -> (SessionRecord, bool) {
    s.drop_expired(now);
    let follows = !s.upstream_tasks.is_empty();
    (s, follows)
}

thread_local! {
    /// This thread runs [`quietly`]: a panic here is caught and reported, not printed.
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, returning the message of a panic in it instead of unwinding further. The panic
/// is not printed (the error it becomes says what happened); panics elsewhere are printed as
/// before.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let printed = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                printed(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let res = std::panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    res.map_err(|p| {
        let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
        format!("the database library panicked: {}", msg.unwrap_or_else(|| "no message".into()))
    })
}
