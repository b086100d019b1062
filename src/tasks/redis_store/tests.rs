//! What only a shared store has: two stores (two replicas) on one server, and the server
//! going away and coming back. The behaviour every store shares is `tasks::store_suite`'s.

use super::RedisStore;
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::{SessionRecord, StoreError, TaskRecord, TaskStore};
use std::time::{Duration, Instant};

use crate::tasks::store_suite::redis_server::RedisServer;

async fn replica(url: &str, prefix: &str) -> RedisStore {
    replica_with(url, prefix, "", None).await
}

/// A replica with `tasks` (more `[tasks]` keys) and, if given, `timing`.
async fn replica_with(url: &str, prefix: &str, tasks: &str, timing: Option<super::Timing>) -> RedisStore {
    let text = format!(
        "[tasks]\nstore = \"redis\"\nredis_url = \"{url}\"\nredis_prefix = \"{prefix}\"\n{tasks}[[upstream]]\nname = \"a\"\nbuiltin = \"demo\"\n"
    );
    let config = crate::config::Config::parse(&text, &|_| None).unwrap();
    let crate::config::StoreKind::Redis(settings) = &config.tasks.store else { unreachable!() };
    match timing {
        Some(t) => RedisStore::open_timed(settings, &config.tasks, t).await.unwrap(),
        None => RedisStore::open(settings, &config.tasks).await.unwrap(),
    }
}

fn rec(id: &str) -> TaskRecord {
    TaskRecord::new(id.into(), "o".into(), "c".into(), "up".into(), Duration::from_secs(60), Duration::from_secs(1))
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn two_replicas_see_each_others_tasks_changes_and_sessions() {
    let server = RedisServer::start();
    let (a, b) = (replica(&server.url(), "r:").await, replica(&server.url(), "r:").await);
    let mut heard_by_a = a.remote_changes().unwrap();
    a.insert(rec("t1"), 10).await.unwrap();
    assert_eq!(b.get("t1").await.unwrap().unwrap().status, TaskStatus::Working);
    let mut on_b = b.watch("t1").await.unwrap().unwrap();
    // B cancels: A, which would run the call, hears it; B's own watcher wakes too.
    b.update("t1", &mut |r| r.status = TaskStatus::Cancelled).await.unwrap();
    let change = tokio::time::timeout(WAIT, heard_by_a.recv()).await.unwrap().unwrap();
    assert_eq!((change.id.as_str(), change.status), ("t1", TaskStatus::Cancelled));
    assert_eq!(*on_b.wait_for(|s| s.is_terminal()).await.unwrap(), TaskStatus::Cancelled);
    // A watcher on B wakes when A ends a task (over the channel).
    a.insert(rec("t2"), 10).await.unwrap();
    let mut on_b = b.watch("t2").await.unwrap().unwrap();
    a.update("t2", &mut |r| r.status = TaskStatus::Completed).await.unwrap();
    let seen = tokio::time::timeout(WAIT, on_b.wait_for(|s| s.is_terminal())).await.unwrap().map(|s| *s);
    assert_eq!(seen.unwrap(), TaskStatus::Completed);
    // Both count against one limit.
    assert_eq!(b.count().await, 2);
    assert_eq!(b.insert(rec("t3"), 2).await.unwrap_err(), StoreError::ClientFull { limit: 2 });
    let s = SessionRecord {
        id: "s1".into(),
        path: "/mcp/a".into(),
        owner: "o".into(),
        client: "c".into(),
        version: "2025-11-25".into(),
        init_params: "{}".into(),
        upstream_tasks: vec![crate::tasks::store::FollowedTask {
            id: "up-1".into(),
            task: serde_json::json!({"taskId": "up-1", "status": "working"}),
            expires_ms: Some(1),
        }],
    };
    a.put_session(s.clone()).await;
    assert_eq!(b.get_session("s1").await, Some(s));
    b.remove_session("s1").await;
    assert!(a.get_session("s1").await.is_none());
}

async fn append(s: &dyn TaskStore) {
    for _ in 0..20 {
        s.update("t", &mut |r| r.status_message.get_or_insert_default().push('x')).await.unwrap();
    }
}

#[tokio::test]
async fn concurrent_changes_from_two_replicas_are_none_lost() {
    let server = RedisServer::start();
    let (a, b) = (replica(&server.url(), "c:").await, replica(&server.url(), "c:").await);
    a.insert(rec("t"), 10).await.unwrap();
    tokio::join!(append(&a), append(&b));
    assert_eq!(a.get("t").await.unwrap().unwrap().status_message.unwrap().len(), 40);
}

#[tokio::test]
async fn redis_going_away_is_a_prompt_backend_error_and_its_return_heals() {
    let mut server = RedisServer::start();
    let port = server.port;
    let (a, b) = (replica(&server.url(), "d:").await, replica(&server.url(), "d:").await);
    a.insert(rec("t"), 10).await.unwrap();
    server.stop();
    let started = Instant::now();
    match a.get("t").await {
        Err(StoreError::Backend { store: "redis", .. }) => {}
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(matches!(a.insert(rec("u"), 10).await, Err(StoreError::Backend { store: "redis", .. })));
    assert!(started.elapsed() < 3 * super::CALL_TIMEOUT, "bounded: {:?}", started.elapsed());
    let _server = RedisServer::start_on(port);
    let deadline = Instant::now() + WAIT;
    while a.insert(rec("v"), 10).await.is_err() {
        assert!(Instant::now() < deadline, "the store did not come back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The subscribers are back too: a change on one replica wakes a watcher on the other.
    // B's connection learns of the outage on its next call, and is connected again after it.
    let deadline = Instant::now() + WAIT;
    let mut on_b = loop {
        match b.watch("v").await {
            Ok(w) => break w.unwrap(),
            Err(_) => assert!(Instant::now() < deadline, "the store did not come back for B"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    loop {
        b.update("v", &mut |r| r.status = TaskStatus::InputRequired).await.unwrap();
        a.update("v", &mut |r| r.status = TaskStatus::Working).await.unwrap();
        b.update("v", &mut |r| r.status = TaskStatus::InputRequired).await.unwrap();
        // B's own write shows at once; A's must come over the channel.
        let mut heard = b.remote_changes().unwrap();
        a.update("v", &mut |r| r.status = TaskStatus::Working).await.unwrap();
        if tokio::time::timeout(Duration::from_millis(500), heard.recv()).await.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "the subscriber did not come back");
    }
    a.update("v", &mut |r| r.status = TaskStatus::Completed).await.unwrap();
    let seen = tokio::time::timeout(WAIT, on_b.wait_for(|s| s.is_terminal())).await.unwrap().map(|s| *s);
    assert_eq!(seen.unwrap(), TaskStatus::Completed);
}

#[tokio::test]
async fn the_running_tasks_of_a_replica_that_stopped_are_failed_by_another_and_no_others() {
    let server = RedisServer::start();
    let timing = super::Timing { sweep_every: Duration::from_millis(100), heartbeat_ttl: Duration::from_millis(400) };
    let a = replica_with(&server.url(), "h:", "", Some(timing)).await;
    let b = replica_with(&server.url(), "h:", "", Some(timing)).await;
    a.insert(rec("on-a"), 10).await.unwrap();
    b.insert(rec("on-b"), 10).await.unwrap();
    // Both alive for several heartbeat lifetimes: nothing is failed.
    tokio::time::sleep(timing.heartbeat_ttl * 3).await;
    assert_eq!(b.get("on-a").await.unwrap().unwrap().status, TaskStatus::Working);
    assert_eq!(a.get("on-b").await.unwrap().unwrap().status, TaskStatus::Working);
    let mut w = b.watch("on-a").await.unwrap().unwrap();
    drop(a);
    let seen = tokio::time::timeout(WAIT, w.wait_for(|s| s.is_terminal())).await.unwrap().map(|s| *s);
    assert_eq!(seen.unwrap(), TaskStatus::Failed);
    let rec = b.get("on-a").await.unwrap().unwrap();
    assert_eq!(rec.status_message.as_deref(), Some(super::ORPHANED));
    assert!(rec.outcome.as_deref().unwrap().contains(super::ORPHANED), "its tasks/result is an error saying so");
    assert_eq!(b.get("on-b").await.unwrap().unwrap().status, TaskStatus::Working, "the living replica's task runs on");
}

/// A listing reads summaries: a page of tasks with large results costs none of their bytes
/// (the task page lists every refresh), while `get` still reads the result.
#[tokio::test]
async fn listings_do_not_read_outcomes() {
    let server = RedisServer::start();
    let s = replica(&server.url(), "l:").await;
    let big: std::sync::Arc<str> = format!("{{\"result\":\"{}\"}}", "r".repeat(100_000)).into();
    for i in 0..5 {
        s.insert(rec(&format!("t{i}")), 10).await.unwrap();
        let out = big.clone();
        s.update(&format!("t{i}"), &mut |r| {
            r.status = TaskStatus::Completed;
            r.outcome = Some(out.clone());
        })
        .await
        .unwrap();
    }
    let (page, _) = s.list("o", 0, 10).await.unwrap();
    assert_eq!(page.len(), 5);
    assert!(page.iter().all(|r| r.outcome.is_none() && r.status == TaskStatus::Completed));
    let (all, _) = s.list_all(0, 10).await.unwrap();
    assert!(all.iter().all(|r| r.outcome.is_none()));
    assert_eq!(s.get("t0").await.unwrap().unwrap().outcome.as_deref(), Some(&*big));
}

/// Redis went back to an older state (a restored snapshot) after a task had ended: the
/// replica the store says runs it knows it does not, and fails it saying so, rather than
/// leaving it `working` with a `tasks/result` waiting for ever. Its running tasks are kept.
#[tokio::test]
async fn a_task_whose_end_the_store_lost_is_failed_by_its_replica() {
    let server = RedisServer::start();
    let timing = super::Timing { sweep_every: Duration::from_millis(100), heartbeat_ttl: Duration::from_millis(300) };
    let a = replica_with(&server.url(), "b:", "", Some(timing)).await;
    a.insert(rec("ended"), 10).await.unwrap();
    a.insert(rec("runs"), 10).await.unwrap();
    // The state before the end, as a snapshot would have it.
    let mut c = a.conn.clone();
    let key = a.keys.task("ended");
    let (m, ver): (String, u64) = redis::cmd("HMGET").arg(&key).arg(&["m", "ver"]).query_async(&mut c).await.unwrap();
    a.update("ended", &mut |r| {
        r.status = TaskStatus::Completed;
        r.outcome = Some("{\"result\":{}}".into());
    })
    .await
    .unwrap();
    // Restored: working again, mapped to the replica that ran it, its end gone.
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg(&key)
        .arg("m")
        .arg(&m)
        .arg("ver")
        .arg(ver)
        .ignore()
        .cmd("HDEL")
        .arg(&key)
        .arg("out")
        .ignore()
        .cmd("HSET")
        .arg(a.keys.k("running"))
        .arg("ended")
        .arg(&a.fanout.origin)
        .ignore()
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(a.get("ended").await.unwrap().unwrap().status, TaskStatus::Working);
    let deadline = Instant::now() + WAIT;
    let failed = loop {
        if let Some(r) = a.get("ended").await.unwrap().filter(|r| r.status == TaskStatus::Failed) {
            break r;
        }
        assert!(Instant::now() < deadline, "the lost end was never noticed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(failed.status_message.as_deref(), Some(super::LOST_END));
    assert!(failed.outcome.as_deref().unwrap().contains(super::LOST_END));
    assert_eq!(a.get("runs").await.unwrap().unwrap().status, TaskStatus::Working, "what runs here runs on");
}

/// Results ending at once on two replicas stay within `max_store_bytes` together: each write
/// is checked against the bytes the store holds in the step that makes it, and one that does
/// not fit ends its task with the error saying so.
#[tokio::test]
async fn results_ending_at_once_on_two_replicas_stay_within_max_store_bytes() {
    let server = RedisServer::start();
    let a = replica_with(&server.url(), "x:", "max_store_bytes = 65536\n", None).await;
    let b = replica_with(&server.url(), "x:", "max_store_bytes = 65536\n", None).await;
    let ids: Vec<String> = (0..10).map(|i| format!("t{i}")).collect();
    for id in &ids {
        a.insert(rec(id), 100).await.unwrap();
    }
    let result: std::sync::Arc<str> = format!("{{\"result\":\"{}\"}}", "r".repeat(20_000)).into();
    let ends = ids.iter().enumerate().map(|(i, id)| {
        let store = if i % 2 == 0 { &a } else { &b };
        let out = result.clone();
        async move {
            store
                .update(id, &mut |r| {
                    r.status = TaskStatus::Completed;
                    r.outcome = Some(out.clone());
                })
                .await
                .unwrap()
        }
    });
    futures_util::future::join_all(ends).await;
    let stored = a.stored_bytes().await;
    assert!(stored <= 65536, "{stored} bytes stored");
    let mut full = 0;
    for id in &ids {
        let r = a.get(id).await.unwrap().unwrap();
        if r.status == TaskStatus::Failed {
            assert!(r.status_message.as_deref().unwrap().contains("max_store_bytes"), "{:?}", r.status_message);
            full += 1;
        }
    }
    assert!((1..10).contains(&full), "{full} of 10 did not fit");
}
