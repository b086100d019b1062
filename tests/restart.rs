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
    // No [tasks] table: a config read from a file keeps its tasks in taskgate-data beside it.
    std::fs::write(&config, format!("[server]\nlisten = \"127.0.0.1:0\"\n{}", builtin_upstream("demo"))).unwrap();

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
    let listed = c.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"].as_array().unwrap().len(), 2, "{:?}", listed.response);
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
