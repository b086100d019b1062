//! HTTP session revival after a restart, at its edges: a session its client deleted after
//! the restart, a revival that finds `max_sessions` taken, a revival with an
//! unsupported `MCP-Protocol-Version`, two requests reviving the same session at once (docs/operating.md, "Data
//! and retention").

use crate::common;

use common::gateway_proc::start;
use common::*;
use serde_json::{Value, json};

fn config_file(dir: &std::path::Path, server: &str) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    let text = format!("[server]\nlisten = \"127.0.0.1:0\"\n{server}{}", builtin_upstream("demo"));
    std::fs::write(&config, text).unwrap();
    config
}

/// A session with one finished task (so that the store keeps it across the restart), and
/// that task's id.
async fn session_with_a_task(addr: &str) -> (HttpMcp, String) {
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let created =
        c.request("tools/call", json!({"name": "echo", "arguments": {"text": "kept"}, "task": {"ttl": 600000}})).await;
    let id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "kept", "{:?}", result.response);
    (c, id)
}

/// A gateway restarted after a session (with `server` settings) made a task: what the tests
/// hold on to, the client pointed at the new gateway.
struct Restarted {
    _dir: tempfile::TempDir,
    _gw: common::gateway_proc::Proc,
    addr: String,
    c: HttpMcp,
    task: String,
}

async fn restarted_with_a_task(server: &str) -> Restarted {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), server);
    let (gw, addr) = start(&config).await;
    let (mut c, task) = session_with_a_task(&addr).await;
    drop(gw);
    let (gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/demo");
    Restarted { _dir: dir, _gw: gw, addr, c, task }
}

fn body(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})).unwrap()
}

#[tokio::test]
async fn a_session_deleted_after_the_restart_is_not_revived_afterwards() {
    let Restarted { _dir, _gw, addr: _, c, task } = restarted_with_a_task("").await;
    assert_eq!(c.delete().await, 200, "the client ends the session it holds");
    let after = c.post_raw(body("tasks/get", json!({"taskId": task})), &[]).await;
    assert_eq!(after.status, 404, "a deleted session is not revived: {:?}", String::from_utf8_lossy(&after.body));
}

#[tokio::test]
async fn a_revival_that_finds_max_sessions_taken_is_busy_not_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), "max_sessions = 1\n");
    let (gw, addr) = start(&config).await;
    let (mut c, task) = session_with_a_task(&addr).await;
    drop(gw);

    let (_gw, addr) = start(&config).await;
    let mut other = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    other.initialize("2025-11-25").await;
    c.url = format!("http://{addr}/mcp/demo");
    let busy = c.post_raw(body("tasks/get", json!({"taskId": task})), &[]).await;
    // A 404 would tell the client to initialize again, giving up its tasks.
    assert_eq!(busy.status, 503, "{:?}", String::from_utf8_lossy(&busy.body));
    assert_eq!(other.delete().await, 200);
    let got = c.request("tasks/get", json!({"taskId": task})).await;
    assert_eq!(got.result()["status"], "completed", "revived once a slot is free: {:?}", got.response);
}

/// A revival names any version the gateway speaks (not only the session's, as the spec has
/// it: the session goes on in its own); one it does not speak is 400 and revives nothing.
#[tokio::test]
async fn a_revival_with_an_unsupported_protocol_version_is_refused() {
    let Restarted { _dir, _gw, addr: _, mut c, task } = restarted_with_a_task("").await;
    c.version = None;
    let wrong = c.post_raw(body("tasks/get", json!({"taskId": task})), &[("mcp-protocol-version", "1999-01-01")]).await;
    // As for a session that never went away: the version is wrong, the session is not unknown.
    assert_eq!(wrong.status, 400, "{:?}", String::from_utf8_lossy(&wrong.body));
    let other = c.post_raw(body("tasks/get", json!({"taskId": task})), &[("mcp-protocol-version", "2025-06-18")]).await;
    assert_eq!(other.status, 200, "{:?}", String::from_utf8_lossy(&other.body));
    c.version = Some("2025-11-25".into());
    let got = c.request("tasks/get", json!({"taskId": task})).await;
    assert_eq!(got.result()["status"], "completed", "{:?}", got.response);
}

#[tokio::test]
async fn two_requests_reviving_one_session_at_once_share_it() {
    let Restarted { _dir, _gw, addr: _, mut c, task } = restarted_with_a_task("max_sessions = 1\n").await;
    let bodies: Vec<Vec<u8>> = (0..8)
        .map(|i| {
            let msg = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tasks/get", "params": {"taskId": task}});
            serde_json::to_vec(&msg).unwrap()
        })
        .collect();
    // The only slot goes to the first revival; the others find its session, not a full server.
    let all = futures_util::future::join_all(bodies.into_iter().map(|b| c.post_raw(b, &[]))).await;
    for r in &all {
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    }
    let got = c.request("tasks/list", json!({})).await;
    assert_eq!(got.result()["tasks"].as_array().unwrap().len(), 1, "{:?}", got.response);
}

// A session's removal is not awaited, but is in a durable commit within a second (the next
// one, or one of its own).
#[tokio::test]
async fn a_session_deleted_before_a_crash_is_not_revived() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(dir.path(), "");
    let (gw, addr) = start(&config).await;
    let (mut c, task) = session_with_a_task(&addr).await;
    assert_eq!(c.delete().await, 200);
    // Kept: past the second after which a removal is committed on its own. That commit shows
    // nowhere outside the process, and the crash must come after it.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    common::gateway_proc::signal(gw.pid(), libc::SIGKILL);
    drop(gw);

    let (_gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/demo");
    let after = c.post_raw(body("tasks/get", json!({"taskId": task})), &[]).await;
    assert_eq!(after.status, 404, "the client ended it: {:?}", String::from_utf8_lossy(&after.body));
}

#[tokio::test]
async fn a_get_stream_that_reconnects_first_revives_its_session() {
    let Restarted { _dir, _gw, addr, mut c, task } = restarted_with_a_task("").await;
    // A 404 would tell the client to initialize again, giving its tasks up.
    let stream = c.get_raw(&[]).await;
    assert_eq!(stream.status(), 200, "the stream reconnects to the revived session");
    let content_type = stream.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
    assert!(content_type.starts_with("text/event-stream"), "{content_type}");
    let got = c.request("tasks/get", json!({"taskId": task})).await;
    assert_eq!(got.result()["status"], "completed", "{:?}", got.response);
    // A GET with an id nobody remembers is still 404.
    let mut stranger = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    stranger.session = Some("0123456789abcdef0123456789abcdef".into());
    assert_eq!(stranger.get_raw(&[]).await.status(), 404);
}
