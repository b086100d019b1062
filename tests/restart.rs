//! The file store across a crash of the real binary: `kill -9` mid-task, then a restart on
//! the same data directory. A finished task and its result are still there; the task that
//! was running is `failed`, saying the gateway restarted.
//!
//! The client reaches them through its old `Mcp-Session-Id`: the store remembers the
//! session, and the restarted gateway revives it (README, "Data and retention").

mod common;

use common::gateway_proc::{signal, start};
use common::*;
use serde_json::json;
use taskgate::{FileStore, TaskStatus, TaskStore};

#[tokio::test]
async fn finished_tasks_survive_kill_9_and_running_ones_come_back_failed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    // No store named: a config read from a file keeps its tasks in taskgate-data beside it.
    // Every write awaited durable, a new task's too (sync_interval 0): the running task is on
    // disk once its CreateTaskResult is sent, however soon the kill comes. One task per
    // tasks/list page: a cursor from before the crash is used after it.
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nsync_interval = \"0ms\"\nlist_page_size = 1\n{}",
        builtin_upstream("demo")
    );
    std::fs::write(&config, text).unwrap();

    let (gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let created =
        c.request("tools/call", json!({"name": "echo", "arguments": {"text": "kept"}, "task": {"ttl": 600000}})).await;
    let done_id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
    let result = c.request("tasks/result", json!({"taskId": done_id})).await;
    assert_eq!(result.result()["content"][0]["text"], "kept", "{:?}", result.response);
    let created = c
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}, "task": {"ttl": 600000}}),
        )
        .await;
    let running_id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
    let got = c.request("tasks/get", json!({"taskId": running_id})).await;
    assert_eq!(got.result()["status"], "working");
    let first = c.request("tasks/list", json!({})).await;
    assert_eq!(first.result()["tasks"][0]["taskId"], done_id.as_str(), "{:?}", first.response);
    let cursor = first.result()["nextCursor"].as_str().expect("a second page").to_string();

    signal(gw.pid(), libc::SIGKILL);
    drop(gw);

    let (gw, addr) = start(&config).await;
    // The same client, with the same Mcp-Session-Id: its session is revived.
    c.url = format!("http://{addr}/mcp/demo");
    let got = c.request("tasks/get", json!({"taskId": done_id})).await;
    assert_eq!(got.result()["status"], "completed", "{:?}", got.response);
    let result = c.request("tasks/result", json!({"taskId": done_id})).await;
    assert_eq!(result.result()["content"][0]["text"], "kept", "the result is served again: {:?}", result.response);
    let got = c.request("tasks/get", json!({"taskId": running_id})).await;
    assert_eq!(got.result()["status"], "failed", "{:?}", got.response);
    assert_eq!(got.result()["statusMessage"], taskgate::RESTARTED);
    let result = c.request("tasks/result", json!({"taskId": running_id})).await;
    assert_eq!(result.error_code(), -32603, "{:?}", result.response);
    let listed = c.request("tasks/list", json!({"cursor": cursor})).await;
    let page = listed.result()["tasks"].as_array().unwrap();
    assert_eq!(page.len(), 1, "the cursor from before the crash still works: {:?}", listed.response);
    assert_eq!(page[0]["taskId"], running_id.as_str());
    assert!(listed.result().get("nextCursor").is_none(), "{:?}", listed.response);
    // Its link is opened again on the gateway's behalf.
    let echoed = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "again"}})).await;
    assert_eq!(echoed.result()["content"][0]["text"], "again", "{:?}", echoed.response);

    // Another session does not see them.
    let mut other = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    other.initialize("2025-11-25").await;
    let hidden = other.request("tasks/get", json!({"taskId": done_id})).await;
    assert_eq!(hidden.error_code(), -32602, "a new session does not see another session's tasks");
    // An unknown session id is still 404.
    let mut stranger = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    stranger.session = Some("0123456789abcdef0123456789abcdef".into());
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": done_id}});
    assert_eq!(stranger.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await.status, 404);
    drop(gw); // SIGTERM: the store is closed, its lock let go.

    let s = FileStore::open(&dir.path().join("taskgate-data"), 100, 1 << 20).expect("the store reopens");
    let ran = s.get(&running_id).await.unwrap().expect("the failed task is kept until its ttl");
    assert_eq!(ran.status, TaskStatus::Failed);
}

#[tokio::test]
async fn a_task_cut_by_sigterm_comes_back_failed_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text =
        format!("[server]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"300ms\"\n{}", stdio_demo_upstream("demo"));
    std::fs::write(&config, text).unwrap();

    let (gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let created = c
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}, "task": {"ttl": 600000}}),
        )
        .await;
    let id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
    drop(gw); // SIGTERM, and waits for the exit.

    let (_gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/demo");
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "failed", "{:?}", got.response);
    let message = got.result()["statusMessage"].as_str().unwrap();
    assert!(message.ends_with("the gateway is shutting down"), "stored as it ended: {message}");
}

/// With a sync interval (long here, so that a write acknowledged before its commit would be
/// caught), a task's end is acknowledged only once it is durable, and carries every write
/// queued before it: a `kill -9` right after `tasks/result` loses neither the finished task
/// nor the running one created before it.
#[tokio::test]
async fn with_a_sync_interval_an_acknowledged_end_survives_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text =
        format!("[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nsync_interval = \"400ms\"\n{}", builtin_upstream("demo"));
    std::fs::write(&config, text).unwrap();

    let (gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let slow = json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}, "task": {"ttl": 600000}});
    let running_id = c.request("tools/call", slow).await.result()["task"]["taskId"].as_str().unwrap().to_string();
    let mut done_ids = Vec::new();
    for text in ["first", "second"] {
        let created = c
            .request("tools/call", json!({"name": "echo", "arguments": {"text": text}, "task": {"ttl": 600000}}))
            .await;
        let id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
        let result = c.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(result.result()["content"][0]["text"], text, "{:?}", result.response);
        done_ids.push(id);
    }
    signal(gw.pid(), libc::SIGKILL);
    drop(gw);

    let (_gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/demo");
    for (id, text) in done_ids.iter().zip(["first", "second"]) {
        let result = c.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(result.result()["content"][0]["text"], text, "acknowledged, so durable: {:?}", result.response);
    }
    let got = c.request("tasks/get", json!({"taskId": running_id})).await;
    assert_eq!(got.result()["status"], "failed", "its creation rode with the later ends: {:?}", got.response);
    assert_eq!(got.result()["statusMessage"], taskgate::RESTARTED);
}
