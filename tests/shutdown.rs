//! SIGTERM on the real binary: in-flight calls finish within `drain_timeout`, the rest get
//! a JSON-RPC error, a request on a connection already open gets 503, stdio children are
//! stopped gently, and the process exits 0.

use crate::common;

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
            if pace::until(Duration::from_secs(5), || child.try_wait().ok().flatten()).is_none() {
                let _ = child.start_kill();
            }
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
    let gone =
        pace::until_async(Duration::from_secs(5), async || (!pids.iter().any(|p| alive(*p))).then_some(())).await;
    assert!(gone.is_some(), "child processes {pids:?} are still there");
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

/// The gateway binary on `config` (written to a file in `dir`), its log lines passed on as
/// they come.
struct Logged {
    gw: Stopper,
    pid: u32,
    addr: String,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
}

impl Logged {
    async fn start(dir: &std::path::Path, config: &str) -> Logged {
        let path = dir.join("config.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = common::gateway_proc::spawn(&["serve", "--config", path.to_str().unwrap()]);
        let pid = child.id().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(l)) = stderr.next_line().await {
                let _ = tx.send(l);
            }
        });
        let mut me = Logged { gw: Stopper(Some(child)), pid, addr: String::new(), lines };
        let line = me.until("listening on http://").await;
        me.addr = line.split("listening on http://").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
        me
    }

    /// Reads the log up to the first line containing `needle`, and returns it.
    async fn until(&mut self, needle: &str) -> String {
        loop {
            let line = tokio::time::timeout(STEP, self.lines.recv()).await;
            let line = line.unwrap_or_else(|_| panic!("no {needle:?} in the log")).expect("the log ended");
            if line.contains(needle) {
                return line;
            }
        }
    }
}

/// A gateway in front of the stdio demo with this `drain_timeout`, and a client session of
/// `version` on it.
async fn draining(timeout: &str, version: &str) -> (tempfile::TempDir, Logged, HttpMcp) {
    let dir = tempfile::tempdir().unwrap();
    let config =
        format!("[server]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"{timeout}\"\n{}", stdio_demo_upstream("demo"));
    let gw = Logged::start(dir.path(), &config).await;
    let mut c = HttpMcp::new(&format!("http://{}/mcp/demo", gw.addr));
    c.initialize(version).await;
    (dir, gw, c)
}

/// Eight calls in flight when SIGTERM comes all get their full results; meanwhile no new
/// connection is accepted; the gateway says it drained (the drain ended before its
/// timeout), and exits 0.
#[tokio::test]
async fn a_drain_loses_no_response() {
    let (_dir, mut gw, c) = draining("20s", "2025-11-25").await;
    let kids = children(gw.pid);
    const N: i64 = 8;
    let mut calls = Vec::new();
    for id in 0..N {
        let resp = c.post_streaming(slow(100 + id, 1500, 5), &[]).await;
        calls.push(SseReader::new(resp.into_body()));
    }
    // Every call runs upstream: each has sent progress.
    for events in &mut calls {
        assert_eq!(events.next().await.unwrap().1["method"], "notifications/progress");
    }

    signal(gw.pid, libc::SIGTERM);
    gw.until("shutting down: no new connections").await;
    let refused = tokio::net::TcpStream::connect(&gw.addr).await;
    assert!(refused.is_err(), "no new connection while draining");
    for (id, events) in (100..).zip(&mut calls) {
        let done = response_of(events, id).await;
        assert_eq!(done["result"]["content"][0]["text"], "done after 5 steps", "{done}");
    }
    gw.until("drained: every request in flight was answered").await;
    let status = wait_exit(&mut gw.gw).await;
    assert!(status.success(), "{status}");
    wait_gone(&kids).await;
}

/// Calls longer than `drain_timeout`: the gateway answers them with an error at the
/// timeout, says so in its log, and exits 0 (long before the calls would have ended).
#[tokio::test]
async fn a_drain_past_its_timeout_ends_there_and_says_so() {
    let (_dir, mut gw, c) = draining("400ms", "2025-06-18").await;
    let mut calls = Vec::new();
    for id in 0..3 {
        let resp = c.post_streaming(slow(200 + id, 60_000, 600), &[]).await;
        let mut events = SseReader::new(resp.into_body());
        assert_eq!(events.next().await.unwrap().1["method"], "notifications/progress");
        calls.push(events);
    }
    signal(gw.pid, libc::SIGTERM);
    let said = gw.until("drain_timeout (400ms) reached").await;
    assert!(said.contains("answering them with an error"), "{said}");
    for (id, events) in (200..).zip(&mut calls) {
        let cut = response_of(events, id).await;
        assert_eq!(cut["error"]["code"], -32000, "{cut}");
    }
    let status = wait_exit(&mut gw.gw).await;
    assert!(status.success(), "{status}");
}

/// A request that reaches an open connection once shutdown has begun is answered 503 with
/// `Connection: close`, and the connection ends; the call in flight still gets its result.
#[tokio::test]
async fn a_request_during_the_drain_gets_503_and_its_connection_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = start_gateway(&format!("[server]\ndrain_timeout = \"20s\"\n{}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let call = c.post_streaming(slow(7, 800, 4), &[]).await;
    let mut call = SseReader::new(call.into_body());
    assert_eq!(call.next().await.unwrap().1["method"], "notifications/progress");

    // A connection whose request has begun to arrive: a pipe of 16 bytes, so that the
    // second write returns only once the server has read the first.
    let (mut client, io) = tokio::io::duplex(16);
    tokio::spawn(gw.server.clone().serve_connection(io, "127.0.0.1:9".parse().unwrap()));
    let body = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": init_params("2025-06-18")}))
    .unwrap();
    let head = format!(
        "POST /mcp/demo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let request = format!("{head}{body}");
    client.write_all(&request.as_bytes()[..32]).await.unwrap();
    gw.server.stop_accepting();
    let server = gw.server.clone();
    let shutdown = tokio::spawn(async move { server.shutdown().await });
    let (mut from, mut to) = tokio::io::split(client);
    // The rest is written while the answer is read: the pipe holds 16 bytes each way.
    let rest = request.as_bytes()[32..].to_vec();
    tokio::spawn(async move { to.write_all(&rest).await });
    let mut answer = String::new();
    tokio::time::timeout(STEP, from.read_to_string(&mut answer)).await.expect("the connection closes").unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("\r\nconnection: close\r\n"), "{answer}");
    assert!(answer.contains("shutting down"), "{answer}");

    let done = response_of(&mut call, 7).await;
    assert_eq!(done["result"]["content"][0]["text"], "done after 4 steps", "{done}");
    tokio::time::timeout(STEP, shutdown).await.expect("shutdown is bounded").unwrap();
}

/// A modern (2026-07-28) client's calls have no session to count them: the drain waits for
/// their streamed answers all the same.
#[tokio::test]
async fn modern_calls_in_flight_are_drained_too() {
    use common::modern_client::{mirrored, request};
    let gw = start_gateway(&format!("[server]\ndrain_timeout = \"20s\"\n{}", builtin_upstream("demo"))).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let mut calls = Vec::new();
    for id in 0..3 {
        let args =
            json!({"name": "slow", "arguments": {"duration_ms": 900, "steps": 3}, "_meta": {"progressToken": id}});
        let mut req = request(json!(300 + id), "tools/call", args, json!({}));
        req["params"]["_meta"]["progressToken"] = json!(id);
        let h = mirrored(&req);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let resp = c.post_streaming(serde_json::to_vec(&req).unwrap(), &h).await;
        let mut events = SseReader::new(resp.into_body());
        assert_eq!(events.next().await.unwrap().1["method"], "notifications/progress");
        calls.push(events);
    }
    let server = gw.server.clone();
    let shutdown = tokio::spawn(async move { server.shutdown().await });
    for (id, events) in (300..).zip(&mut calls) {
        let done = response_of(events, id).await;
        assert_eq!(done["result"]["content"][0]["text"], "done after 3 steps", "{done}");
    }
    tokio::time::timeout(STEP, shutdown).await.expect("shutdown is bounded").unwrap();
}
