//! The stdio fronts (`taskgate stdio`, `taskgate demo-server`) under load: a fast client is
//! slowed down, never dropped; a client that stops reading stops what is produced for it,
//! with memory bounded, and then gets every message; stdin may be a file or a socket.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A process this test started, stopped by its pid when dropped: SIGTERM, then SIGKILL.
struct Proc {
    child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: kill(2) on a process this test started; no memory is involved.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            if pace::until(Duration::from_secs(3), || self.child.try_wait().ok().flatten()).is_none() {
                let _ = self.child.start_kill();
            }
        }
    }
}

/// `taskgate stdio` in front of the demo on stdio, or (`gateway` false) `taskgate demo-server`.
fn start(gateway: bool, stdin: Stdio, stdout: Stdio) -> Proc {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, stdio_demo_upstream("up")).unwrap();
    let mut cmd = tokio::process::Command::new(bin());
    if gateway {
        cmd.args(["stdio", "--config", path.to_str().unwrap(), "--upstream", "up"]);
    } else {
        cmd.arg("demo-server");
    }
    let child = cmd.stdin(stdin).stdout(stdout).stderr(Stdio::inherit()).kill_on_drop(true).spawn().unwrap();
    Proc { child, _dir: dir }
}

fn line(v: &Value) -> Vec<u8> {
    let mut l = serde_json::to_vec(v).unwrap();
    l.push(b'\n');
    l
}

fn initialize() -> Vec<u8> {
    let mut out =
        line(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init_params("2025-06-18")}));
    out.extend(line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})));
    out
}

fn echo(id: u64, text: &str) -> Vec<u8> {
    line(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}),
    )
}

/// Reads answers until every id in 1..=n has one; checks each is an echo of `text(id)`.
/// Returns how many were refused as busy (the only error allowed).
async fn read_answers<R: tokio::io::AsyncRead + Unpin>(
    lines: &mut tokio::io::Lines<BufReader<R>>,
    n: u64,
    text: impl Fn(u64) -> String,
) -> usize {
    let mut seen = HashSet::new();
    let mut busy = 0;
    while (seen.len() as u64) < n {
        let l = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no answer within 30 s; {} of {n} so far", seen.len()))
            .unwrap()
            .unwrap_or_else(|| panic!("stdout closed after {} of {n} answers", seen.len()));
        let m: Value = serde_json::from_str(&l).unwrap();
        let Some(id) = m["id"].as_u64().filter(|id| *id > 0) else { continue };
        assert!(seen.insert(id), "two answers to {id}");
        if m["error"]["code"] == -32004 {
            busy += 1;
            continue;
        }
        assert_eq!(m["result"]["content"][0]["text"].as_str(), Some(text(id).as_str()), "{}", &l[..l.len().min(200)]);
    }
    busy
}

/// Writes `initialize` and waits for its answer.
async fn handshake<W: tokio::io::AsyncWrite + Unpin, R: tokio::io::AsyncRead + Unpin>(
    w: &mut W,
    lines: &mut tokio::io::Lines<BufReader<R>>,
) {
    w.write_all(&initialize()).await.unwrap();
    let init = tokio::time::timeout(STEP, lines.next_line()).await.unwrap().unwrap().unwrap();
    assert!(init.contains("\"protocolVersion\""), "{init}");
}

async fn fast_client(gateway: bool) {
    const N: u64 = 20_000;
    let mut p = start(gateway, Stdio::piped(), Stdio::piped());
    let mut w = p.child.stdin.take().unwrap();
    let mut lines = BufReader::new(p.child.stdout.take().unwrap()).lines();
    handshake(&mut w, &mut lines).await;
    let start = Instant::now();
    // Written as fast as the pipe takes them, while the answers are read.
    let writer = tokio::spawn(async move {
        let mut buf = Vec::new();
        for id in 1..=N {
            buf.extend(echo(id, &format!("m{id}")));
            if buf.len() > 32 * 1024 || id == N {
                w.write_all(&buf).await.unwrap();
                buf.clear();
            }
        }
        w
    });
    let busy = read_answers(&mut lines, N, |id| format!("m{id}")).await;
    let w = writer.await.unwrap();
    eprintln!("{N} answers in {:?}, {busy} refused as busy", start.elapsed());
    // Waiting for in-flight room is bounded (a second), so a very slow machine may see a few
    // refusals; none is lost either way.
    assert!(busy < N as usize / 100, "{busy} of {N} refused as busy");
    drop(w);
    let status = tokio::time::timeout(STEP, p.child.wait()).await.expect("exits at the end of stdin").unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn a_fast_client_of_taskgate_stdio_gets_every_answer() {
    fast_client(true).await;
}

#[tokio::test]
async fn a_fast_client_of_the_demo_server_gets_every_answer() {
    fast_client(false).await;
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_client_that_stops_reading_slows_its_senders_and_then_gets_everything() {
    // Each answer is ~2×16 KiB (the text and the arguments echoed); all of them would be
    // ~100 MiB if they piled up in the gateway.
    const N: u64 = 3_000;
    let text = |id: u64| format!("{id:06}{}", "x".repeat(16 * 1024));
    let mut p = start(true, Stdio::piped(), Stdio::piped());
    let pid = p.pid();
    let mut w = p.child.stdin.take().unwrap();
    let mut lines = BufReader::new(p.child.stdout.take().unwrap()).lines();
    handshake(&mut w, &mut lines).await;
    let before = rss_kib(pid);

    let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = tokio::spawn({
        let written = written.clone();
        async move {
            for id in 1..=N {
                w.write_all(&echo(id, &text(id))).await.unwrap();
                written.store(id, std::sync::atomic::Ordering::Relaxed);
            }
            w
        }
    });
    // Not reading for 3 s: the gateway stops reading too, so the writer is held up.
    let mut peak = before;
    for _ in 0..30 {
        // Kept: the 3 s without reading are the subject; the RSS is sampled across them.
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak = peak.max(rss_kib(pid));
    }
    let sent = written.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("while not reading: {sent} of {N} requests written; gateway RSS {before} KiB -> peak {peak} KiB");
    assert!(sent < N / 2, "the writer was not slowed down: {sent} of {N} written");
    assert!(peak < before + 48 * 1024, "the gateway grew from {before} KiB to {peak} KiB");

    // Reading again: every answer arrives.
    let busy = read_answers(&mut lines, N, text).await;
    assert!(busy < N as usize / 100, "{busy} of {N} refused as busy");
    drop(writer.await.unwrap());
    let status = tokio::time::timeout(STEP, p.child.wait()).await.expect("exits at the end of stdin").unwrap();
    assert!(status.success(), "{status}");
}

/// stdin from a file, stdout to a file: the blocking path. Every request is answered, then
/// the process exits by itself at the end of the file.
async fn from_a_file(gateway: bool) {
    const N: u64 = 500;
    let dir = tempfile::tempdir().unwrap();
    let mut input = initialize();
    for id in 1..=N {
        input.extend(echo(id, &format!("f{id}")));
    }
    // The last request is still running at the end of the file.
    input.extend(line(&json!({"jsonrpc": "2.0", "id": N + 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": 300, "steps": 3}, "_meta": {"progressToken": "p"}}})));
    std::fs::write(dir.path().join("in"), &input).unwrap();
    let stdin = std::fs::File::open(dir.path().join("in")).unwrap();
    let stdout = std::fs::File::create(dir.path().join("out")).unwrap();
    let mut p = start(gateway, stdin.into(), stdout.into());
    let status = tokio::time::timeout(STEP, p.child.wait()).await.expect("exits at the end of its input").unwrap();
    assert!(status.success(), "{status}");
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    let msgs: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let answered: HashSet<u64> =
        msgs.iter().filter(|m| m.get("method").is_none()).filter_map(|m| m["id"].as_u64()).collect();
    assert_eq!(answered, (0..=N + 1).collect::<HashSet<u64>>());
    let last = msgs.iter().find(|m| m["id"] == N + 1).unwrap();
    assert_eq!(last["result"]["content"][0]["text"], "done after 3 steps", "{last}");
    assert_eq!(msgs.iter().filter(|m| m["method"] == "notifications/progress").count(), 3);
}

#[tokio::test]
async fn taskgate_stdio_reads_a_file_and_ends_at_its_end() {
    from_a_file(true).await;
}

#[tokio::test]
async fn the_demo_server_reads_a_file_and_ends_at_its_end() {
    from_a_file(false).await;
}

#[tokio::test]
async fn stdin_and_stdout_may_be_a_socket() {
    // Node's child_process hands its children socketpairs, not pipes.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let theirs_out = theirs.try_clone().unwrap();
    let mut p = start(true, std::os::fd::OwnedFd::from(theirs).into(), std::os::fd::OwnedFd::from(theirs_out).into());
    ours.set_nonblocking(true).unwrap();
    let ours = tokio::net::UnixStream::from_std(ours).unwrap();
    let (r, mut w) = ours.into_split();
    let mut lines = BufReader::new(r).lines();
    handshake(&mut w, &mut lines).await;
    let mut reqs = Vec::new();
    for id in 1..=2_000 {
        reqs.extend(echo(id, &format!("s{id}")));
    }
    let writer = tokio::spawn(async move {
        w.write_all(&reqs).await.unwrap();
        w
    });
    assert_eq!(read_answers(&mut lines, 2_000, |id| format!("s{id}")).await, 0);
    let mut w = writer.await.unwrap();
    w.shutdown().await.unwrap();
    let status = tokio::time::timeout(STEP, p.child.wait()).await.expect("exits at the end of stdin").unwrap();
    assert!(status.success(), "{status}");
}

/// Whether the pipe behind `fd` (either end) is full: what it holds is within two pages of
/// its size (its first page may be partly read, its last partly written).
fn pipe_full(fd: std::os::fd::RawFd) -> bool {
    let mut queued: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int; F_GETPIPE_SZ and _SC_PAGESIZE read nothing; `fd` is a
    // pipe end this test holds open.
    let (asked, size, page) = unsafe {
        (
            libc::ioctl(fd, libc::FIONREAD, &mut queued),
            libc::fcntl(fd, libc::F_GETPIPE_SZ),
            libc::sysconf(libc::_SC_PAGESIZE) as libc::c_int,
        )
    };
    asked == 0 && size > 0 && queued + 2 * page >= size
}

#[tokio::test]
async fn sigterm_ends_taskgate_stdio_while_its_client_does_not_read() {
    use std::os::fd::AsRawFd;
    let mut p = start(true, Stdio::piped(), Stdio::piped());
    let mut w = p.child.stdin.take().unwrap();
    let out = p.child.stdout.take().unwrap();
    let (requests, answers) = (w.as_raw_fd(), out.as_raw_fd());
    let mut lines = BufReader::new(out).lines();
    handshake(&mut w, &mut lines).await;
    let text = "y".repeat(64 * 1024);
    let writer = tokio::spawn(async move {
        for id in 1..=1_000 {
            if w.write_all(&echo(id, &text)).await.is_err() {
                break;
            }
        }
    });
    // Held up: the answers fill the pipe the client does not read, then the requests fill
    // the one the gateway no longer reads, and the writer waits.
    eventually("both pipes full", async || pipe_full(answers) && pipe_full(requests)).await;
    assert!(!writer.is_finished(), "the writer is held up");
    // SAFETY: kill(2) on the process this test started.
    unsafe { libc::kill(p.pid() as libc::pid_t, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(10), p.child.wait()).await.expect("did not exit").unwrap();
    assert!(status.success(), "{status}");
    writer.abort();
}
