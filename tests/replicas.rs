//! Two real gateway processes on one Redis (`[tasks] store = "redis"`), as behind a load
//! balancer that does not pin sessions: a task created through one is served by the other
//! to the same client (its `Mcp-Session-Id` revived there), a `tasks/result` waiting on the
//! second wakes when the first finishes the task, and a cancel through the second reaches
//! the upstream call on the first, and the status notification of a task the first ends
//! reaches the client's stream on the second. Then Redis goes away and comes back.

mod common;

use common::gateway_proc::{Proc, start};
use common::redis_server::RedisServer;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

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

fn stats_cancelled(out: &Outcome) -> i64 {
    let text = out.result()["contents"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["cancelled"].as_i64().unwrap()
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
    let long = json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}, "task": {"ttl": 600000}});
    let id = task_id(&c1.request("tools/call", long).await);
    tokio::time::sleep(Duration::from_millis(200)).await;
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
