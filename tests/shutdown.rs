//! SIGTERM on the real binary: in-flight calls finish within `drain_timeout`, the rest get
//! a JSON-RPC error, stdio children are stopped gently, and the process exits 0.

mod common;

use common::*;
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Stops a process this test started, by its pid: SIGTERM, wait, SIGKILL.
struct Stopper(Option<tokio::process::Child>);

impl Drop for Stopper {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take()
            && let Some(pid) = child.id()
        {
            signal(pid, libc::SIGTERM);
            for _ in 0..50 {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.start_kill();
        }
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test started; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// The pids of `pid`'s child processes (Linux: /proc/<pid>/task/*/children).
fn children(pid: u32) -> Vec<u32> {
    let mut out = vec![];
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

async fn wait_gone(pids: &[u32]) {
    for _ in 0..100 {
        if !pids.iter().any(|p| alive(*p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("child processes {pids:?} are still there");
}

async fn wait_exit(child: &mut Stopper) -> std::process::ExitStatus {
    let c = child.0.as_mut().unwrap();
    tokio::time::timeout(Duration::from_secs(10), c.wait()).await.expect("the gateway did not exit").unwrap()
}

fn slow(id: i64, ms: u64, steps: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": ms, "steps": steps}, "_meta": {"progressToken": id}}}))
    .unwrap()
}

/// Reads a call's stream up to its response.
async fn response_of(events: &mut SseReader, id: i64) -> Value {
    while let Some((_, m)) = events.next().await {
        if m.get("method").is_none() && m["id"] == id {
            return m;
        }
    }
    panic!("the stream of {id} ended without a response");
}

#[tokio::test]
async fn sigterm_drains_in_flight_calls_then_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let config =
        format!("[server]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"1500ms\"\n{}", stdio_demo_upstream("demo"));
    std::fs::write(&path, config).unwrap();
    let mut gw = Stopper(Some(
        tokio::process::Command::new(bin())
            .args(["serve", "--config", path.to_str().unwrap()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap(),
    ));
    let gw_pid = gw.0.as_ref().unwrap().id().unwrap();
    let mut lines = BufReader::new(gw.0.as_mut().unwrap().stderr.take().unwrap()).lines();
    let addr = loop {
        let line = tokio::time::timeout(STEP, lines.next_line()).await.expect("no listening line").unwrap().unwrap();
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-06-18").await;
    let kids = children(gw_pid);
    assert_eq!(kids.len(), 1, "one stdio child: {kids:?}");

    let short = c.post_streaming(slow(10, 600, 3), &[]).await;
    let long = c.post_streaming(slow(11, 20_000, 200), &[]).await;
    let mut short = SseReader::new(short.into_body());
    let mut long = SseReader::new(long.into_body());
    // Both are running upstream: each has sent progress.
    assert_eq!(short.next().await.unwrap().1["method"], "notifications/progress");
    assert_eq!(long.next().await.unwrap().1["method"], "notifications/progress");

    signal(gw_pid, libc::SIGTERM);
    let done = response_of(&mut short, 10).await;
    assert_eq!(done["result"]["content"][0]["text"], "done after 3 steps", "{done}");
    let refused = tokio::net::TcpStream::connect(&addr).await;
    assert!(refused.is_err(), "no new connections while draining");
    let cut = response_of(&mut long, 11).await;
    assert_eq!(cut["error"]["code"], -32000, "{cut}");
    assert!(cut["error"]["message"].as_str().unwrap().contains("shutting down"), "{cut}");
    assert!(long.next().await.is_none(), "the stream ends after the error");

    let status = wait_exit(&mut gw).await;
    assert!(status.success(), "{status}");
    wait_gone(&kids).await;
}

#[tokio::test]
async fn sigterm_ends_taskgate_stdio_cleanly() {
    let mut c = StdioMcp::start(&stdio_demo_upstream("demo"), "demo").await;
    c.initialize("2025-06-18").await;
    let pid = c.child.id().unwrap();
    let kids = children(pid);
    assert_eq!(kids.len(), 1, "one stdio child: {kids:?}");
    signal(pid, libc::SIGTERM);
    let status = tokio::time::timeout(Duration::from_secs(10), c.child.wait()).await.expect("did not exit").unwrap();
    assert!(status.success(), "{status}");
    wait_gone(&kids).await;
}

#[tokio::test]
async fn shutdown_deletes_upstream_http_sessions() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        _ => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {}}))],
    })
    .await;
    let gw =
        start_gateway(&format!("[server]\ndrain_timeout = \"500ms\"\n{}", http_upstream("remote", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("remote"));
    c.initialize("2025-06-18").await;
    assert!(!up.received_http().contains(&"DELETE".to_string()));
    tokio::time::timeout(Duration::from_secs(10), gw.server.shutdown()).await.expect("shutdown is bounded");
    assert!(up.received_http().contains(&"DELETE".to_string()), "the upstream session was deleted");
    assert_eq!(gw.server.session_count(), 0);
    assert!(tokio::net::TcpStream::connect(gw.addr).await.is_err(), "no longer accepting");
}
