//! Two real gateway processes on one Redis (`[tasks] store = "redis"`), as behind a load
//! balancer that does not pin sessions: a task created through one is served by the other
//! to the same client (its `Mcp-Session-Id` revived there), a `tasks/result` waiting on the
//! second wakes when the first finishes the task, and a cancel through the second reaches
//! the upstream call on the first, and the status notification of a task the first ends
//! reaches the client's stream on the second. Then Redis goes away and comes back; and a
//! task that ends while Redis is away is stored when it is back.

use crate::common;

use common::gateway_proc::{Proc, readyz, start};
use common::redis_server::RedisServer;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn config(dir: &std::path::Path, redis: &RedisServer) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nstore = \"redis\"\nredis_url = \"{}\"\nredis_prefix = \"replicas:\"\nlist_page_size = 1\n{}",
        redis.url(),
        builtin_upstream("demo")
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn task_id(out: &Outcome) -> String {
    out.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", out.response)).to_string()
}

#[tokio::test]
async fn a_task_made_on_one_replica_is_served_by_the_other() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &redis);
    let (_gw1, addr1): (Proc, String) = start(&config).await;
    let (_gw2, addr2) = start(&config).await;

    let mut c1 = HttpMcp::new(&format!("http://{addr1}/mcp/demo"));
    c1.initialize("2025-11-25").await;
    let slow = json!({"name": "slow", "arguments": {"duration_ms": 1500, "steps": 3}, "task": {"ttl": 600000}});
    let id = task_id(&c1.request("tools/call", slow).await);

    // The same client through the other replica: its session is revived there from Redis.
    let mut c2 = HttpMcp::new(&format!("http://{addr2}/mcp/demo"));
    c2.session = c1.session.clone();
    let got = c2.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "working", "{}", got.response);
    let listed = c2.request("tasks/list", json!({})).await;
    let ids: Vec<&str> =
        listed.result()["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str()], "{}", listed.response);
    // The client's GET stream is on replica 2: the status notification of the task's end,
    // which replica 1 makes, reaches it there.
    let stream = c2.get_raw(&[]).await;
    assert_eq!(stream.status(), 200);
    let mut stream = SseReader::new(stream.into_body());
    // Blocks on replica 2 until replica 1's call ends (heard on the store's channel).
    let result = tokio::time::timeout(STEP, c2.request("tasks/result", json!({"taskId": id}))).await.expect("woken");
    assert!(result.result()["content"].is_array(), "{}", result.response);
    assert_eq!(c2.request("tasks/get", json!({"taskId": id})).await.result()["status"], "completed");
    loop {
        let (_, msg) = stream.next().await.expect("the stream stays open");
        let p = &msg["params"];
        if msg["method"] == "notifications/tasks/status" && p["taskId"] == id.as_str() && p["status"] == "completed" {
            break;
        }
    }

    // A task cancelled through replica 2 is cancelled upstream by replica 1, which runs it.
    let long = json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 600}, "task": {"ttl": 600000},
        "_meta": {"progressToken": "long"}});
    let id = task_id(&c1.request("tools/call", long).await);
    eventually("the call is under way upstream", async || {
        c1.request("tasks/get", json!({"taskId": id})).await.result()["statusMessage"].is_string()
    })
    .await;
    let cancelled = c2.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled.result()["status"], "cancelled", "{}", cancelled.response);
    eventually("the upstream on replica 1 saw the cancellation", async || {
        stats_cancelled(&c1.request("resources/read", json!({"uri": "demo://stats"})).await) == 1
    })
    .await;
    assert_eq!(c1.request("tasks/get", json!({"taskId": id})).await.result()["status"], "cancelled");
    assert_eq!(c1.request("tasks/result", json!({"taskId": id})).await.error_code(), -32603);

    // A tasks/list cursor from one replica pages on the other (one task per page).
    let first = c1.request("tasks/list", json!({})).await;
    let cursor = first.result()["nextCursor"].as_str().unwrap_or_else(|| panic!("a next page: {}", first.response));
    let second = c2.request("tasks/list", json!({"cursor": cursor})).await;
    assert_eq!(second.result()["tasks"][0]["taskId"], id.as_str(), "{}", second.response);

    // Another client reaches neither replica's tasks.
    let mut other = HttpMcp::new(&format!("http://{addr2}/mcp/demo"));
    other.initialize("2025-11-25").await;
    assert_eq!(other.request("tasks/get", json!({"taskId": id})).await.error_code(), -32602);
}

#[tokio::test]
async fn redis_going_away_is_an_error_naming_the_store_and_its_return_heals() {
    let mut redis = RedisServer::start();
    let port = redis.port;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &redis);
    let (mut gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let echo = json!({"name": "echo", "arguments": {"text": "hi"}, "task": {"ttl": 600000}});
    let id = task_id(&c.request("tools/call", echo.clone()).await);

    redis.stop();
    let got =
        tokio::time::timeout(STEP, c.request("tasks/get", json!({"taskId": id}))).await.expect("answered in time");
    assert_eq!(got.error_code(), -32603, "{}", got.response);
    let message = got.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("redis task store"), "{message}");
    let made = tokio::time::timeout(STEP, c.request("tools/call", echo.clone())).await.expect("answered in time");
    assert_eq!(made.error_code(), -32603, "{}", made.response);
    assert!(gw.0.try_wait().unwrap().is_none(), "the gateway is still running");

    // Back (empty: the test's server keeps nothing): the gateway works again, unrestarted.
    let _redis = RedisServer::start_on(port);
    let mut id = None;
    eventually("tasks are made again", async || match c.request("tools/call", echo.clone()).await {
        out if out.response.get("result").is_some() => {
            id = Some(task_id(&out));
            true
        }
        _ => false,
    })
    .await;
    let id = id.unwrap();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "hi", "{}", result.response);
}

/// The review's case: Redis stops for 10 s while a 3 s hosted task runs, and comes back with
/// its data. The task's end, which could not be stored when it came, is kept and written
/// once Redis is back; the `tasks/result` that waited through the outage gets the result;
/// and the task is then retained and removed as any finished task, giving its owner's
/// place (`max_tasks_per_owner = 1`) back.
#[tokio::test]
async fn a_task_ending_during_a_redis_outage_is_stored_when_redis_returns() {
    /// The outage's length: the scenario, not a wait for an event.
    const OUTAGE: Duration = Duration::from_secs(10);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("redis");
    std::fs::create_dir(&data).unwrap();
    let mut redis = RedisServer::start_persistent(&data);
    let port = redis.port;
    let config = dir.path().join("config.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nsse_keepalive = \"1s\"\n[tasks]\nstore = \"redis\"\nredis_url = \"{}\"\n\
         redis_prefix = \"outage:\"\nstore_outage_wait = \"60s\"\n{}[upstream.tasks]\nmax_tasks_per_owner = 1\n",
        redis.url(),
        builtin_upstream("demo")
    );
    std::fs::write(&config, text).unwrap();
    let (_gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let slow = json!({"name": "slow", "arguments": {"duration_ms": 3000, "steps": 3}, "task": {"ttl": 15000},
                      "_meta": {"progressToken": "outage"}});
    let id = task_id(&c.request("tools/call", slow).await);

    // A tasks/result waits on it: the task's progress comes on its stream once it waits.
    let wait = json!({"jsonrpc": "2.0", "id": 77, "method": "tasks/result", "params": {"taskId": id}});
    let resp = c.post_streaming(serde_json::to_vec(&wait).unwrap(), &[]).await;
    assert_eq!(resp.status(), 200);
    let mut stream = SseReader::new(resp.into_body());
    let progress = async |stream: &mut SseReader| loop {
        let (_, m) = stream.next().await.expect("the stream stays open");
        assert!(m.get("id") != Some(&json!(77)), "answered before the task ended: {m}");
        if m["method"] == "notifications/progress" {
            return m["params"]["progress"].as_f64().unwrap();
        }
    };
    assert_eq!(progress(&mut stream).await, 1.0);
    redis.stop();
    // The task's last step comes while Redis is away: its end cannot be stored.
    while progress(&mut stream).await < 3.0 {}
    let answered = tokio::spawn(async move {
        loop {
            let (_, m) = stream.next().await.expect("the stream stays open until the answer");
            if m.get("id") == Some(&json!(77)) {
                return (m, Instant::now());
            }
        }
    });
    eventually("/readyz names the failing store", async || {
        let (status, body) = readyz(&addr).await;
        status == 503 && body.contains("task store failing")
    })
    .await;
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.error_code(), -32603, "{}", got.response);
    // Kept: the outage's length is the subject; that the tasks/result still waits through it
    // has no event to wait for.
    tokio::time::sleep(OUTAGE.saturating_sub(Duration::from_secs(3))).await;
    assert!(!answered.is_finished(), "the tasks/result still waits for the store (store_outage_wait 60s)");

    let _redis = RedisServer::start_persistent_on(port, &data);
    let back = Instant::now();
    let (answer, at) = tokio::time::timeout(STEP, answered).await.expect("answered once Redis is back").unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "done after 3 steps", "{answer}");
    eprintln!(
        "figure: the task's end, kept through a {OUTAGE:?} Redis outage, reached its waiting tasks/result {:?} after Redis was back",
        at - back
    );
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "completed", "{}", got.response);
    eventually("/readyz is ready again", async || readyz(&addr).await.0 == 200).await;

    // Its owner's one place is held while it is retained, and given back when its ttl ends.
    let echo = json!({"name": "echo", "arguments": {"text": "next"}, "task": {"ttl": 15000}});
    assert_eq!(c.request("tools/call", echo.clone()).await.error_code(), -32004);
    eventually("the finished task is removed and its owner's place given back", async || {
        c.request("tools/call", echo.clone()).await.response.get("result").is_some()
    })
    .await;
    assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.error_code(), -32602);
}
