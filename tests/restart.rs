//! The file store across a crash of the real binary: `kill -9` mid-task, then a restart on
//! the same data directory. A finished task and its result are still there; the task that
//! was running is `failed`, saying the gateway restarted.
//!
//! The client reaches them through its old `Mcp-Session-Id`: the store remembers the
//! session, and the restarted gateway revives it (docs/operating.md, "Data and retention").
//!
//! A damaged store file (random byte flips, a zero-length file) stops the gateway from
//! starting with an error naming the file and what to do, never a panic.

use crate::common;

use common::gateway_proc::{signal, spawn, start};
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

/// The extension tasks a 2025-11-25 client was given by a 2026-07-28 upstream (ids of the
/// upstream's, which need no session there) survive a `kill -9` of the gateway: the revived
/// session follows them again. One the upstream still runs is `working` and can be
/// cancelled, one that ended meanwhile gives its result, and one the upstream no longer
/// knows is `failed`, saying the gateway restarted.
#[tokio::test]
async fn upstream_tasks_are_followed_again_after_kill_9() {
    use common::ext_server::{Server, extension_server};
    let state = std::sync::Arc::new(std::sync::Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nsync_interval = \"0ms\"\n{}",
        http_upstream("up", &up.url())
    );
    std::fs::write(&config, text).unwrap();

    let (gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/up"));
    c.initialize("2025-11-25").await;
    let mut ids = Vec::new();
    for tool in ["endless", "slow", "endless"] {
        let created = c.request("tools/call", json!({"name": tool, "arguments": {}, "task": {"ttl": 600000}})).await;
        ids.push(created.result()["task"]["taskId"].as_str().expect("a task").to_string());
    }
    // A plain answer becomes a task of the gateway's, awaited durable (sync_interval 0): its
    // commit carries the session's record, written before it.
    let echoed = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "task": {}})).await;
    assert!(echoed.result()["task"]["taskId"].is_string(), "{:?}", echoed.response);
    signal(gw.pid(), libc::SIGKILL);
    drop(gw);
    // The upstream finishes the slow one and forgets the last one while the gateway is down.
    {
        let mut s = state.lock().unwrap();
        let slow = s.tasks.get_mut(&ids[1]).unwrap();
        slow.steps = 3;
        slow.status = "completed";
        s.tasks.remove(&ids[2]);
    }

    let (_gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/up");
    let got = c.request("tasks/get", json!({"taskId": ids[0]})).await;
    assert_eq!(got.result()["status"], "working", "the upstream still runs it: {:?}", got.response);
    let result = c.request("tasks/result", json!({"taskId": ids[1]})).await;
    assert_eq!(result.result()["content"][0]["text"], "slow done after 3 steps", "{:?}", result.response);
    let lost = c.request("tasks/get", json!({"taskId": ids[2]})).await;
    assert_eq!(lost.result()["status"], "failed", "{:?}", lost.response);
    let message = lost.result()["statusMessage"].as_str().unwrap();
    assert!(message.starts_with(taskgate::RESTARTED), "{message}");
    let result = c.request("tasks/result", json!({"taskId": ids[2]})).await;
    assert_eq!(result.error_code(), -32603, "{:?}", result.response);
    let listed = c.request("tasks/list", json!({})).await;
    let listed: Vec<&str> =
        listed.result()["tasks"].as_array().unwrap().iter().filter_map(|t| t["taskId"].as_str()).collect();
    for id in &ids {
        assert!(listed.contains(&id.as_str()), "{id} is listed: {listed:?}");
    }
    let cancelled = c.request("tasks/cancel", json!({"taskId": ids[0]})).await;
    assert_eq!(cancelled.result()["status"], "cancelled", "{:?}", cancelled.response);
    assert!(state.lock().unwrap().tasks[&ids[0]].cancelled, "the cancel reached the upstream");
    // Another session does not see them.
    let mut other = HttpMcp::new(&format!("http://{addr}/mcp/up"));
    other.initialize("2025-11-25").await;
    let hidden = other.request("tasks/get", json!({"taskId": ids[0]})).await;
    assert_eq!(hidden.error_code(), -32602, "{:?}", hidden.response);
}

/// How `taskgate serve` on a store file ended: it listened (and was stopped), or it exited
/// with `code` and its log.
enum Served {
    Listened,
    Exited(Option<i32>, String),
}

async fn serve(config: &std::path::Path) -> Served {
    use tokio::io::AsyncBufReadExt;
    let mut child = spawn(&["serve", "--config", config.to_str().unwrap()]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut log = String::new();
    loop {
        let line = tokio::time::timeout(STEP, lines.next_line()).await.expect("neither listening nor exited");
        match line.unwrap() {
            Some(l) if l.contains("listening on ") => break,
            Some(l) => log.push_str(&(l + "\n")),
            None => {
                let status = tokio::time::timeout(STEP, child.wait()).await.expect("exited").unwrap();
                return Served::Exited(status.code(), log);
            }
        }
    }
    signal(child.id().unwrap(), libc::SIGTERM);
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let status = tokio::time::timeout(STEP, child.wait()).await.expect("stopped").unwrap();
    // Ended by SIGTERM itself if it came before the handler was in place.
    use std::os::unix::process::ExitStatusExt;
    assert!(status.code() == Some(0) || status.signal() == Some(libc::SIGTERM), "stopped by SIGTERM: {status}");
    Served::Listened
}

/// A small pseudo-random sequence (xorshift64*), so that each seed damages the file the same
/// way every run.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[tokio::test]
async fn a_damaged_store_file_is_a_clear_error_never_a_panic() {
    /// Damaged copies tried: each flips 1 to 8 bytes of the file.
    const SEEDS: u64 = 48;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    {
        // A real store: finished tasks with results.
        let s = FileStore::open(&data, 100, 1 << 20).unwrap();
        for i in 0..20 {
            let rec = taskgate::TaskRecord::new(
                format!("task-{i}"),
                "owner".into(),
                "client".into(),
                "demo".into(),
                std::time::Duration::from_secs(3600),
                std::time::Duration::from_secs(1),
            );
            let id = s.insert(rec, 100).await.unwrap().id;
            let outcome = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x".repeat(i * 50)}]}});
            s.update(&id, &mut |r| {
                r.status = TaskStatus::Completed;
                r.outcome = Some(outcome.to_string().into());
            })
            .await
            .unwrap();
        }
    }
    let db = data.join(taskgate::DB_FILE);
    let good = std::fs::read(&db).unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\npath = {:?}\n{}",
        data.to_str().unwrap(),
        builtin_upstream("demo")
    );
    std::fs::write(&config, text).unwrap();
    let refused = |code: Option<i32>, log: &str| {
        assert_eq!(code, Some(1), "a damaged store is an error, not a panic (101):\n{log}");
        assert!(
            log.contains(db.to_str().unwrap()) && log.contains("Move it aside"),
            "names the file and what to do:\n{log}"
        );
        assert!(!log.contains("panicked"), "no panic is printed:\n{log}");
    };
    let (mut started, mut damaged) = (0, 0);
    for seed in 1..=SEEDS {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut bytes = good.clone();
        for _ in 0..=next(&mut state) % 8 {
            let at = (next(&mut state) % bytes.len() as u64) as usize;
            bytes[at] ^= (next(&mut state) % 255 + 1) as u8;
        }
        std::fs::write(&db, &bytes).unwrap();
        match serve(&config).await {
            Served::Listened => started += 1,
            Served::Exited(code, log) => {
                refused(code, &log);
                damaged += 1;
            }
        }
    }
    eprintln!(
        "figure: {SEEDS} damaged copies of a store file: {damaged} refused with the clear error, {started} started (damage outside what the store holds), 0 panics"
    );

    // A zero-length file is damaged, not a new store.
    std::fs::write(&db, b"").unwrap();
    match serve(&config).await {
        Served::Exited(code, log) => {
            refused(code, &log);
            assert!(log.contains("empty"), "{log}");
        }
        Served::Listened => panic!("a zero-length store file was taken for an empty store"),
    }
}
