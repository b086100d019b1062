//! The interop tests' harness (tests/interop.rs, tests/interop_rmcp.rs): the pinned peers
//! (`scripts/setup-interop` installs them; a missing peer fails the test, nothing skips),
//! processes stopped with their whole tree, the gateway binary with a config naming every
//! peer upstream, the SDK client scripts' arguments, a raw line-delimited JSON-RPC client
//! and a raw HTTP/1.1 POST.

#![allow(dead_code)]

use super::proc_tree;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

pub fn require(path: &Path) -> String {
    assert!(path.exists(), "interop peer missing: {} — run scripts/setup-interop (scripts/test does)", path.display());
    path.to_str().unwrap().to_string()
}

pub fn server_everything() -> String {
    require(&interop_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
}

pub fn python() -> String {
    require(&interop_dir().join(".venv/bin/python"))
}

/// How long a stopped process tree gets to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// A child process in its own process group; when dropped it is stopped with every process
/// below it, and the test fails if one survives. Its output is kept.
pub struct Proc {
    pub child: Child,
    log: Arc<Mutex<String>>,
    /// The threads reading its stdout and stderr; they end at the pipes' end.
    readers: Vec<std::thread::JoinHandle<()>>,
    stopped: bool,
}

impl Proc {
    pub fn spawn(cmd: &mut Command) -> Proc {
        Proc::spawn_with(cmd, Stdio::null(), None)
    }

    /// Like `spawn`, with stdin piped (returned) and every stdout line also sent to a channel.
    pub fn spawn_piped(cmd: &mut Command) -> (Proc, ChildStdin, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        let mut p = Proc::spawn_with(cmd, Stdio::piped(), Some(tx));
        let stdin = p.child.stdin.take().unwrap();
        (p, stdin, rx)
    }

    fn spawn_with(cmd: &mut Command, stdin: Stdio, stdout_lines: Option<mpsc::Sender<String>>) -> Proc {
        let mut child = proc_tree::own_group(cmd)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let pipes = [
            (Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, stdout_lines),
            (Box::new(child.stderr.take().unwrap()), None),
        ];
        let mut readers = vec![];
        for (pipe, lines) in pipes {
            let log = log.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Some(tx) = &lines {
                        let _ = tx.send(line.clone());
                    }
                    let mut l = log.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            }));
        }
        Proc { child, log, readers, stopped: false }
    }

    pub fn output(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits for a line containing `marker` and returns it.
    pub fn wait_for(&mut self, marker: &str) -> String {
        let line = super::pace::until(Duration::from_secs(30), || {
            if let Some(line) = self.output().lines().find(|l| l.contains(marker)) {
                return Some(line.to_string());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("process exited ({status}) before printing {marker:?}:\n{}", self.output());
            }
            None
        });
        line.unwrap_or_else(|| panic!("no {marker:?} within 30 s:\n{}", self.output()))
    }

    /// Waits for the process to exit (bounded) and returns whether it succeeded.
    pub fn finish(&mut self, timeout: Duration) -> bool {
        let Some(status) = super::pace::until(timeout, || self.child.try_wait().unwrap()) else {
            self.stop();
            return false;
        };
        // Its output is all in once the readers have met the pipes' end (bounded: a child it
        // left behind may hold them open).
        super::pace::until(Duration::from_secs(2), || self.readers.iter().all(|r| r.is_finished()).then_some(()));
        status.success()
    }

    /// Stops the process and its tree; panics (unless already panicking) if any survived.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let left = proc_tree::stop_tree(&mut self.child, STOP_GRACE);
        if !left.is_empty() && !std::thread::panicking() {
            panic!("processes left behind by {}: {left:?}", self.child.id());
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The gateway binary with a config naming every peer upstream, on a free port.
pub struct Gateway {
    pub proc: Proc,
    pub addr: SocketAddr,
    pub config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gateway {
    pub fn start(extra_upstreams: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let text = format!(
            "[[upstream]]\nname = \"everything\"\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
             [[upstream]]\nname = \"demo\"\nbuiltin = \"demo\"\n\n{extra_upstreams}",
            server_everything()
        );
        std::fs::write(&config, text).unwrap();
        let mut proc = Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_taskgate"))
                .args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
                .env("RUST_LOG", "info"),
        );
        let line = proc.wait_for("listening on http://");
        let addr = line.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
        Gateway { proc, addr, config, _dir: dir }
    }

    pub fn url(&self, upstream: &str) -> String {
        format!("http://{}/mcp/{upstream}", self.addr)
    }

    /// Arguments that run `taskgate stdio` in front of `upstream`.
    pub fn stdio_args(&self, upstream: &str) -> Vec<String> {
        vec![
            env!("CARGO_BIN_EXE_taskgate").to_string(),
            "stdio".into(),
            "--config".into(),
            self.config.to_str().unwrap().into(),
            "--upstream".into(),
            upstream.into(),
        ]
    }
}

/// The Python SDK server of the interop kit (no tasks) over HTTP, on 127.0.0.1.
pub fn start_py_server() -> (Proc, u16) {
    start_py_server_over("--http")
}

/// The same over `--http` (Streamable HTTP at /mcp) or `--sse` (legacy HTTP+SSE at /sse).
pub fn start_py_server_over(transport: &str) -> (Proc, u16) {
    start_py_server_with(&[transport, "0"])
}

pub fn start_py_server_with(args: &[&str]) -> (Proc, u16) {
    let mut p = Proc::spawn(
        Command::new(python()).arg(require(&interop_dir().join("py_server.py"))).args(args).current_dir(interop_dir()),
    );
    let line = p.wait_for("listening ");
    let port = line.split_whitespace().last().unwrap().parse().unwrap();
    (p, port)
}

/// Config for the Python server as a stdio upstream (`py`) and over HTTP (`pyhttp`).
pub fn py_upstreams(http_port: u16) -> String {
    format!(
        "[[upstream]]\nname = \"py\"\ncommand = {:?}\nargs = [{:?}]\n\n[[upstream]]\nname = \"pyhttp\"\nurl = \"http://127.0.0.1:{http_port}/mcp\"\n",
        python(),
        require(&interop_dir().join("py_server.py"))
    )
}

/// The TypeScript SDK server of the interop kit, on 127.0.0.1.
pub fn start_ts_server() -> (Proc, u16) {
    let mut p = Proc::spawn(
        Command::new("node").arg(require(&interop_dir().join("ts_server.mjs"))).arg("0").current_dir(interop_dir()),
    );
    let line = p.wait_for("listening ");
    let port = line.split_whitespace().last().unwrap().parse().unwrap();
    (p, port)
}

/// Runs a client script to the end, asserts that it passed every check, and returns its
/// output (stdout and stderr).
pub fn run_client(gateway: &Gateway, program: &str, args: &[String]) -> String {
    let mut client = Proc::spawn(Command::new(program).args(args).current_dir(interop_dir()));
    let ok = client.finish(CLIENT_TIMEOUT);
    let out = client.output();
    assert!(
        ok && out.lines().any(|l| l.starts_with("PASS ")),
        "client {program} {args:?} failed:\n{out}\n--- gateway log ---\n{}",
        gateway.proc.output()
    );
    assert!(!out.lines().any(|l| l.starts_with("FAIL ")), "{out}");
    out
}

pub fn ts(scenario: &str, transport: &[String]) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("ts_client.mjs")), scenario.to_string()];
    v.extend_from_slice(transport);
    v
}

pub fn py(scenario: &str, transport: &[String]) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("py_client.py")), scenario.to_string()];
    v.extend_from_slice(transport);
    v
}

/// A Python client's arguments, checking it negotiated 2026-07-28 (it did not fall back).
pub fn modern(transport: Vec<String>) -> Vec<String> {
    [vec!["--expect-protocol".into(), "2026-07-28".into()], transport].concat()
}

pub fn http(url: String) -> Vec<String> {
    vec!["--http".into(), url]
}

pub fn stdio(args: Vec<String>) -> Vec<String> {
    let mut v = vec!["--stdio".to_string()];
    v.extend(args);
    v
}

/// The TypeScript client's hosted-tasks scenario with these extra arguments.
pub fn tasks_scenario(extra: &[&str], transport: Vec<String>) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("ts_client.mjs")), "tasks".to_string()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(transport);
    v
}

// ---- the rmcp task server (tests/interop/rmcp_server) ----

pub const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

pub fn rmcp_server() -> String {
    require(&interop_dir().join("rmcp_server/target/release/taskgate-interop-rmcp-server"))
}

/// The `_meta` of a 2026-07-28 request; `extension` declares the tasks extension.
pub fn modern_meta(version: &str, extension: bool) -> serde_json::Value {
    let capabilities =
        if extension { serde_json::json!({"extensions": {TASKS_EXT: {}}}) } else { serde_json::json!({}) };
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "taskgate-interop-test", "version": "0"},
    })
}

/// A raw JSON-RPC client on the rmcp server's stdin/stdout, one message per line.
pub struct RawStdio {
    pub proc: Proc,
    pub stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pub next_id: i64,
    /// Notifications received while waiting for responses, in order.
    pub notifications: Vec<serde_json::Value>,
}

impl RawStdio {
    pub fn start() -> RawStdio {
        Self::start_cmd(&mut Command::new(rmcp_server()))
    }

    /// A raw client on any line-delimited JSON-RPC process (e.g. `taskgate stdio`).
    pub fn start_cmd(cmd: &mut Command) -> RawStdio {
        let (proc, stdin, lines) = Proc::spawn_piped(cmd);
        RawStdio { proc, stdin, lines, next_id: 0, notifications: Vec::new() }
    }

    /// Sends a request and returns its response, answering the server's requests on the way
    /// with `answer` and keeping them and the notifications (in order) in `notifications`.
    pub fn request_answering(
        &mut self,
        method: &str,
        params: serde_json::Value,
        answer: impl Fn(&serde_json::Value) -> serde_json::Value,
    ) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.recv(left) else {
                panic!("no response to {method} (id {id}) within 30 s:\n{}", self.proc.output());
            };
            if message.get("method").is_none() && message.get("id") == Some(&serde_json::json!(id)) {
                return message;
            }
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = answer(&message);
                self.send(&serde_json::json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
            }
            self.notifications.push(message);
        }
    }

    pub fn send(&mut self, message: &serde_json::Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()).unwrap_or_else(|e| {
            panic!("writing to the rmcp server: {e}\n{}", self.proc.output());
        });
    }

    pub fn recv(&mut self, timeout: Duration) -> Option<serde_json::Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON from the rmcp server ({e}): {line}")))
    }

    /// Sends a request and returns its whole response message (`result` or `error`), keeping
    /// the notifications that come before it.
    pub fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.recv(left) else {
                panic!("no response to {method} (id {id}) within 10 s:\n{}", self.proc.output());
            };
            if message.get("id") == Some(&serde_json::json!(id)) {
                assert!(message.get("method").is_none(), "a request from the server: {message}");
                return message;
            }
            assert!(message.get("id").is_none(), "a response to another id: {message}");
            self.notifications.push(message);
        }
    }

    pub fn result(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let response = self.request(method, params);
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {response}"),
        }
    }

    pub fn error(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let response = self.request(method, params);
        match response.get("error") {
            Some(error) => error.clone(),
            None => panic!("{method} did not fail: {response}"),
        }
    }

    /// Polls `tasks/get` until the task's status is `until` (or terminal), bounded.
    pub fn poll(&mut self, task_id: &str, until: &str, meta: &serde_json::Value) -> Vec<serde_json::Value> {
        let mut seen = Vec::new();
        let done = super::pace::until(Duration::from_secs(15), || {
            let got = self.result("tasks/get", serde_json::json!({"taskId": task_id, "_meta": meta}));
            let status = got["status"].as_str().unwrap_or_default().to_string();
            seen.push(got);
            (status == until || ["completed", "failed", "cancelled"].contains(&status.as_str())).then_some(())
        });
        assert!(done.is_some(), "task {task_id} not {until} within 15 s: {seen:?}");
        seen
    }
}

pub fn keys(value: &serde_json::Value) -> Vec<&str> {
    let mut k: Vec<&str> = value.as_object().expect("an object").keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

pub fn text_of(result: &serde_json::Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {result}"))
}

pub const RMCP_VERSIONS: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// One HTTP/1.1 POST to 127.0.0.1:`port`/mcp on a connection of its own: the status, the
/// headers (lower-cased names) and the JSON-RPC messages of the body (the `data:` lines of an
/// event stream, or a JSON body).
pub fn rmcp_http_post(
    port: u16,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> (u16, String, Vec<serde_json::Value>) {
    http_post(port, "/mcp", headers, body)
}

/// [`rmcp_http_post`] to any path.
pub fn http_post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> (u16, String, Vec<serde_json::Value>) {
    use std::net::TcpStream;
    let body = body.to_string();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    // The server ends a stateless response's stream after the response (connection: close).
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("reading the response: {e}: {:?}", String::from_utf8_lossy(&raw)));
    let raw = String::from_utf8(raw).unwrap();
    let (head, mut rest) = raw.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end: {raw:?}"));
    let status: u16 = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let head = head.to_ascii_lowercase();
    let mut payload = String::new();
    if head.contains("transfer-encoding: chunked") {
        loop {
            let (size, after) = rest.split_once("\r\n").unwrap();
            let size = usize::from_str_radix(size.trim(), 16).unwrap();
            if size == 0 {
                break;
            }
            payload.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
    } else {
        payload.push_str(rest);
    }
    let messages = if head.contains("content-type: text/event-stream") {
        payload
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    } else if payload.is_empty() {
        vec![] // 202 Accepted
    } else {
        vec![serde_json::from_str(&payload).unwrap_or_else(|e| panic!("{e}: {payload:?}"))]
    };
    (status, head, messages)
}
