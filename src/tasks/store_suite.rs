//! One suite for every [`TaskStore`]: each test is a function over the trait, run against
//! each backend by `suite!`, so that everything above the trait can count on the same
//! behaviour. The file store's own (restart) tests follow.
//!
//! The `redis` half starts a `redis-server` of its own per test (`tests/common/
//! redis_server.rs`): it fails, rather than skips, where none is on PATH (`scripts/test`
//! installs one with `scripts/setup-redis`).

use crate::mcp::task_messages::TaskStatus;
use crate::tasks::file_store::{FileStore, RESTARTED};
use crate::tasks::store::{RECORD_OVERHEAD, SessionRecord, StoreError, TaskRecord, TaskStore};
use std::time::Duration;

fn rec(id: &str, owner: &str) -> TaskRecord {
    TaskRecord::new(id.into(), owner.into(), owner.into(), "up".into(), Duration::from_secs(60), Duration::from_secs(1))
}

async fn finish(s: &dyn TaskStore, id: &str) {
    s.update(id, &mut |r| r.status = TaskStatus::Completed).await.unwrap().unwrap();
}

async fn a_full_store_refuses_and_evicts_nothing(s: &dyn TaskStore) {
    s.insert(rec("a", "o"), 10).await.unwrap();
    s.insert(rec("b", "o"), 10).await.unwrap();
    assert_eq!(s.insert(rec("c", "o"), 10).await.unwrap_err(), StoreError::Full { limit: 2 });
    finish(s, "a").await;
    assert_eq!(s.insert(rec("c", "o"), 10).await.unwrap_err(), StoreError::Full { limit: 2 }, "finished are kept");
    assert!(s.get("a").await.unwrap().is_some() && s.get("b").await.unwrap().is_some());
    let later = crate::clock::wall_now() + Duration::from_secs(120);
    assert!(s.remove_if_expired("b", later).await.is_none(), "only the finished one");
    assert!(s.remove_if_expired("a", later).await.is_some());
    s.insert(rec("c", "o"), 10).await.unwrap();
}

async fn the_client_limit_counts_finished_tasks_too(s: &dyn TaskStore) {
    s.insert(rec("x1", "x"), 2).await.unwrap();
    finish(s, "x1").await;
    s.insert(rec("y1", "y"), 2).await.unwrap();
    s.insert(rec("x2", "x"), 2).await.unwrap();
    assert_eq!(s.insert(rec("x3", "x"), 2).await.unwrap_err(), StoreError::ClientFull { limit: 2 });
    assert!(s.get("x1").await.unwrap().is_some() && s.get("y1").await.unwrap().is_some());
}

async fn whole_records_are_counted_in_bytes(s: &dyn TaskStore) {
    // The suite runs this with max_bytes = 2 * RECORD_OVERHEAD + 100.
    let base = rec("a", "o").stored_len();
    s.insert(rec("a", "o"), 10).await.unwrap();
    assert_eq!(s.stored_bytes().await, base, "a new record counts before it has an outcome");
    s.update("a", &mut |r| r.status_message = Some("m".repeat(50))).await.unwrap();
    assert_eq!(s.stored_bytes().await, base + 50, "its status message counts");
    s.update("a", &mut |r| {
        r.status = TaskStatus::Completed;
        r.outcome = Some("0123456789".into());
    })
    .await
    .unwrap();
    assert_eq!(s.stored_bytes().await, base + 60);
    s.update("a", &mut |r| r.outcome = None).await.unwrap();
    assert_eq!(s.stored_bytes().await, base + 60, "a finished task keeps its outcome");
    let mut big = rec("b", "o");
    big.tool = Some("t".repeat(400));
    assert_eq!(
        s.insert(big, 10).await.unwrap_err(),
        StoreError::BytesFull { limit: 2 * RECORD_OVERHEAD + 100 },
        "a record whose tool name does not fit is refused"
    );
    s.insert(rec("b", "o"), 10).await.unwrap();
    assert_eq!(s.stored_bytes().await, 2 * base + 60);
    assert_eq!(
        s.insert(rec("c", "o"), 10).await.unwrap_err(),
        StoreError::BytesFull { limit: 2 * RECORD_OVERHEAD + 100 }
    );
    s.remove_if_expired("a", crate::clock::wall_now() + Duration::from_secs(120)).await.unwrap();
    assert_eq!(s.stored_bytes().await, base, "the removed task gave back all it counted");
    s.insert(rec("c", "o"), 10).await.unwrap();
}

async fn terminal_status_sticks_and_waiters_wake(s: &dyn TaskStore) {
    s.insert(rec("a", "o"), 10).await.unwrap();
    let mut w = s.watch("a").await.unwrap().unwrap();
    s.update("a", &mut |r| r.status = TaskStatus::Cancelled).await.unwrap();
    let seen = *w.wait_for(|st| st.is_terminal()).await.unwrap();
    assert_eq!(seen, TaskStatus::Cancelled, "a waiter from before wakes with the terminal status");
    assert_eq!(
        *s.watch("a").await.unwrap().unwrap().borrow(),
        TaskStatus::Cancelled,
        "a finished task's watch is final"
    );
    let after = s.update("a", &mut |r| r.status = TaskStatus::Completed).await.unwrap().unwrap();
    assert_eq!(after.status, TaskStatus::Cancelled);
}

async fn listing_is_per_owner_and_paged(s: &dyn TaskStore) {
    for i in 0..5 {
        s.insert(rec(&format!("a{i}"), "a"), 10).await.unwrap();
        s.insert(rec(&format!("b{i}"), "b"), 10).await.unwrap();
    }
    let (page, more) = s.list("a", 0, 3).await.unwrap();
    assert_eq!(page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a0", "a1", "a2"]);
    assert!(more);
    let (page, more) = s.list("a", page[2].seq, 3).await.unwrap();
    assert_eq!(page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a3", "a4"]);
    assert!(!more);
    assert_eq!(s.last_seq().await, 10);
    assert_eq!(s.count().await, 10);
}

async fn listing_all_spans_owners_keeps_the_tool_and_drops_removed_tasks(s: &dyn TaskStore) {
    for i in 0..3 {
        let mut r = rec(&format!("a{i}"), "a");
        r.tool = Some(format!("tool{i}"));
        s.insert(r, 10).await.unwrap();
        s.insert(rec(&format!("b{i}"), "b"), 10).await.unwrap();
    }
    let (page, more) = s.list_all(0, 4).await.unwrap();
    assert_eq!(page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["a0", "b0", "a1", "b1"]);
    assert!(more);
    assert_eq!(page[2].tool.as_deref(), Some("tool1"), "the tool is stored with the task");
    assert_eq!(page[1].tool, None);
    finish(s, "a1").await;
    let later = crate::clock::wall_now() + Duration::from_secs(120);
    assert!(s.remove_if_expired("a1", later).await.is_some());
    assert!(s.remove_if_expired("a2", later).await.is_none(), "a running one stays");
    let (page, more) = s.list_all(page[1].seq, 10).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["b1", "a2", "b2"],
        "a removed task is not listed"
    );
    assert!(!more);
    assert_eq!(s.get("a2").await.unwrap().unwrap().tool.as_deref(), Some("tool2"));
}

async fn expiry_removes_finished_tasks_only_and_closes_waiters(s: &dyn TaskStore) {
    let mut r = rec("a", "o");
    r.ttl = Duration::from_millis(1);
    s.insert(r, 10).await.unwrap();
    let later = crate::clock::wall_now() + Duration::from_secs(5);
    assert!(s.remove_if_expired("a", later).await.is_none(), "a running task outlives its ttl");
    let w = s.watch("a").await.unwrap().unwrap();
    finish(s, "a").await;
    assert_eq!(s.remove_if_expired("a", later).await.map(|r| r.id), Some("a".to_string()));
    assert!(s.get("a").await.unwrap().is_none());
    assert!(w.has_changed().is_err(), "the sender is gone");
    assert!(s.remove_if_expired("a", later).await.is_none());
}

async fn unknown_tasks_are_none(s: &dyn TaskStore) {
    assert!(s.get("nope").await.unwrap().is_none());
    assert!(s.watch("nope").await.unwrap().is_none());
    assert!(s.update("nope", &mut |r| r.status = TaskStatus::Failed).await.unwrap().is_none());
}

#[path = "../../tests/common/redis_server.rs"]
pub(crate) mod redis_server;

async fn redis_store(max_tasks: usize, max_bytes: usize, url: &str) -> crate::tasks::redis_store::RedisStore {
    let prefix = format!("test{}:", crate::random::id128());
    let text = format!(
        "[tasks]\nstore = \"redis\"\nredis_url = \"{url}\"\nredis_prefix = \"{prefix}\"\n[[upstream]]\nname = \"a\"\nbuiltin = \"demo\"\n"
    );
    let config = crate::config::Config::parse(&text, &|_| None).unwrap();
    let crate::config::StoreKind::Redis(settings) = &config.tasks.store else { unreachable!() };
    let cfg = crate::config::TasksConfig { max_tasks, max_store_bytes: max_bytes, ..Default::default() };
    crate::tasks::redis_store::RedisStore::open(settings, &cfg).await.unwrap()
}

/// Each test against each store: `memory`, `file` in a fresh directory (at the default
/// sync interval, with every write awaited: `file_strict`, and with ends not awaited:
/// `file_interval`), `redis` on a server of its own.
macro_rules! suite {
    ($($name:ident: max_tasks $max:expr, max_bytes $bytes:expr;)*) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name(&crate::tasks::memory_store::MemoryStore::new($max, $bytes)).await;
            })*
        }
        mod redis {
            $(#[tokio::test]
            async fn $name() {
                let server = super::redis_server::RedisServer::start();
                let s = super::redis_store($max, $bytes, &server.url()).await;
                super::$name(&s).await;
            })*
        }
        mod file {
            $(#[tokio::test]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let s = crate::tasks::file_store::FileStore::open(dir.path(), $max, $bytes).unwrap();
                super::$name(&s).await;
            })*
        }
        mod file_strict {
            $(#[tokio::test]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let s = crate::tasks::file_store::FileStore::open_synced(dir.path(), $max, $bytes, std::time::Duration::ZERO).unwrap();
                super::$name(&s).await;
            })*
        }
        mod file_interval {
            $(#[tokio::test]
            async fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let s = crate::tasks::file_store::FileStore::open(dir.path(), $max, $bytes)
                    .unwrap()
                    .with_durability(crate::config::Durability::Interval);
                super::$name(&s).await;
            })*
        }
    };
}

suite! {
    a_full_store_refuses_and_evicts_nothing: max_tasks 2, max_bytes 1 << 20;
    the_client_limit_counts_finished_tasks_too: max_tasks 100, max_bytes 1 << 20;
    whole_records_are_counted_in_bytes: max_tasks 100, max_bytes 2 * crate::tasks::store::RECORD_OVERHEAD + 100;
    terminal_status_sticks_and_waiters_wake: max_tasks 10, max_bytes 1 << 20;
    listing_is_per_owner_and_paged: max_tasks 100, max_bytes 1 << 20;
    listing_all_spans_owners_keeps_the_tool_and_drops_removed_tasks: max_tasks 100, max_bytes 1 << 20;
    expiry_removes_finished_tasks_only_and_closes_waiters: max_tasks 10, max_bytes 1 << 20;
    unknown_tasks_are_none: max_tasks 10, max_bytes 1 << 20;
}

fn session(id: &str, owner: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        path: "/mcp/demo".into(),
        owner: owner.into(),
        client: "127.0.0.1".into(),
        version: "2025-11-25".into(),
        init_params: "{}".into(),
        upstream_tasks: Vec::new(),
    }
}

/// A session record following upstream task `id`, whose ttl ends `expires_ms` after the epoch.
fn following(id: &str, owner: &str, task: &str, expires_ms: Option<u64>) -> SessionRecord {
    let task = crate::tasks::store::FollowedTask {
        id: task.into(),
        task: serde_json::json!({"taskId": task, "status": "working"}),
        expires_ms,
    };
    SessionRecord { upstream_tasks: vec![task], ..session(id, owner) }
}

#[tokio::test]
async fn the_memory_store_remembers_no_session() {
    let s = crate::tasks::memory_store::MemoryStore::new(10, 1 << 20);
    TaskStore::put_session(&s, session("s1", "o")).await;
    assert!(TaskStore::get_session(&s, "s1").await.is_none(), "its sessions die with the process anyway");
}

#[tokio::test]
async fn a_reopened_file_store_remembers_the_sessions_that_still_have_tasks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = FileStore::open(dir.path(), 100, 1 << 20).unwrap();
        for (id, owner) in [("kept", "o1"), ("taskless", "o2"), ("ended", "o3")] {
            s.put_session(session(id, owner)).await;
        }
        // No task of the gateway's, but one of the upstream's that it follows (unlimited),
        // and one whose upstream task's ttl has passed.
        s.put_session(following("follows", "o4", "up-1", None)).await;
        s.put_session(following("followed-expired", "o5", "up-2", Some(1))).await;
        s.insert(rec("t1", "o1"), 10).await.unwrap();
        s.insert(rec("t3", "o3"), 10).await.unwrap();
        s.remove_session("ended").await;
        assert!(s.get_session("kept").await.is_none(), "only sessions from before the opening are looked up");
    }
    let s = FileStore::open(dir.path(), 100, 1 << 20).unwrap();
    assert_eq!(s.get_session("kept").await, Some(session("kept", "o1")));
    assert!(s.get_session("taskless").await.is_none(), "no task left to come back for");
    assert!(s.get_session("ended").await.is_none(), "it ended");
    assert_eq!(s.get_session("follows").await, Some(following("follows", "o4", "up-1", None)));
    assert!(s.get_session("followed-expired").await.is_none(), "its only upstream task is past its ttl");
}

/// Session records count with the tasks against `max_store_bytes`, whole: one that does not
/// fit is not written (nor remembered at the reopening), a removed one gives its bytes back,
/// and those remembered at a reopening are counted again.
#[tokio::test]
async fn a_file_stores_session_records_count_against_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let big = |id: &str, owner: &str, n: usize| SessionRecord {
        init_params: format!("{{\"pad\":\"{}\"}}", "p".repeat(n)),
        ..session(id, owner)
    };
    {
        let s = FileStore::open(dir.path(), 100, 4000).unwrap();
        s.put_session(big("a", "o1", 1500)).await;
        let held = s.stored_bytes().await;
        assert!(held > 1500, "{held}");
        // A second that does not fit is not written.
        s.put_session(big("b", "o2", 3000)).await;
        assert_eq!(s.stored_bytes().await, held);
        // A task takes what is left; one more record of the first session's size does not fit.
        s.insert(rec("t1", "o1"), 10).await.unwrap();
        s.insert(rec("t2", "o2"), 10).await.unwrap();
        s.put_session(big("c", "o3", 3000)).await;
        let with_tasks = s.stored_bytes().await;
        // Removed: its bytes come back.
        s.put_session(big("d", "o4", 100)).await;
        let with_d = s.stored_bytes().await;
        assert!(with_d > with_tasks);
        s.remove_session("d").await;
        assert_eq!(s.stored_bytes().await, with_tasks);
    }
    let s = FileStore::open(dir.path(), 100, 4000).unwrap();
    assert!(s.get_session("a").await.is_some());
    assert!(s.get_session("b").await.is_none(), "never written");
    assert!(s.stored_bytes().await > 1500, "the remembered record is counted again");
}

#[tokio::test]
async fn a_reopened_file_store_keeps_finished_tasks_and_fails_running_ones() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = FileStore::open(dir.path(), 100, 1 << 20).unwrap();
        s.insert(rec("done", "o"), 10).await.unwrap();
        s.insert(rec("running", "o"), 10).await.unwrap();
        let mut short = rec("short", "o");
        short.ttl = Duration::from_millis(1);
        s.insert(short, 10).await.unwrap();
        TaskStore::update(&s, "done", &mut |r| {
            r.status = TaskStatus::Completed;
            r.outcome = Some(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#.into());
        })
        .await
        .unwrap();
        TaskStore::update(&s, "running", &mut |r| r.status_message = Some("halfway".into())).await.unwrap();
        finish(&s, "short").await;
    }
    // The short one's ttl passes while the gateway is down.
    std::thread::sleep(Duration::from_millis(1100));
    let s = FileStore::open(dir.path(), 100, 1 << 20).unwrap();
    let done = TaskStore::get(&s, "done").await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.outcome.as_deref(), Some(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#));
    let ran = TaskStore::get(&s, "running").await.unwrap().unwrap();
    assert_eq!(ran.status, TaskStatus::Failed);
    assert_eq!(ran.status_message.as_deref(), Some(RESTARTED));
    assert!(ran.outcome.as_deref().unwrap().contains(RESTARTED), "its tasks/result is an error saying so");
    assert!(TaskStore::get(&s, "short").await.unwrap().is_none(), "expired while down");
    assert_eq!(s.finished_at_open().len(), 2, "the sweeper is told of both");
    assert_eq!(TaskStore::last_seq(&s).await, 2, "new tasks list after the kept ones");
    assert!(FileStore::open(dir.path(), 100, 1 << 20).is_err(), "one gateway per data directory");
    // What was fixed at the reopening is durable too.
    drop(s);
    let s = FileStore::open(dir.path(), 100, 1 << 20).unwrap();
    assert_eq!(TaskStore::get(&s, "running").await.unwrap().unwrap().status, TaskStatus::Failed);
}

#[tokio::test]
async fn with_interval_durability_an_end_is_answered_before_its_commit_and_written_after() {
    let dir = tempfile::tempdir().unwrap();
    {
        // The longest interval: a commit a second after the one the creation started.
        let s = FileStore::open_synced(dir.path(), 10, 1 << 20, Duration::from_secs(1))
            .unwrap()
            .with_durability(crate::config::Durability::Interval);
        s.insert(rec("t", "o"), 10).await.unwrap();
        finish(&s, "t").await;
        assert!(s.awaits_no_end(), "the end is not waited for, by the update or a get");
        assert_eq!(TaskStore::get(&s, "t").await.unwrap().unwrap().status, TaskStatus::Completed);
    } // Closed: the writer commits what is queued.
    let s = FileStore::open(dir.path(), 10, 1 << 20).unwrap();
    assert_eq!(TaskStore::get(&s, "t").await.unwrap().unwrap().status, TaskStatus::Completed, "written all the same");
}
