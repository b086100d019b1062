//! Interop with the official SDKs as real peers, through the `taskgate` binary:
//! the TypeScript SDK client over Streamable HTTP and over stdio, against server-everything
//! (stdio upstream), a TypeScript SDK server (HTTP upstream) and the built-in demo; the
//! Python `mcp` client in its default mode, which probes `server/discover` and stays on
//! 2026-07-28 through the gateway (stateless requests, multi round-trip elicitation), and in
//! legacy mode; a 2024-11-05
//! client (TypeScript SDK 1.0.4) over the legacy HTTP+SSE transport; and, directly without the
//! gateway, the wire facts of the rmcp 3.11 task server (`tests/interop/rmcp_server`: the tasks
//! extension `io.modelcontextprotocol/tasks`, both eras, stdio and Streamable HTTP).
//!
//! The peers are installed at pinned versions by `scripts/setup-interop`, which the test
//! command runs first. A missing peer fails the test; nothing here skips.
//!
//! Every process a test starts runs in its own process group and is stopped with its whole
//! tree (the gateway's stdio upstreams, a client's `taskgate stdio`); a test fails if any of
//! them is left behind.

#[path = "common/proc_tree.rs"]
mod proc_tree;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn require(path: &Path) -> String {
    assert!(path.exists(), "interop peer missing: {} — run scripts/setup-interop (scripts/test does)", path.display());
    path.to_str().unwrap().to_string()
}

fn server_everything() -> String {
    require(&interop_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
}

fn python() -> String {
    require(&interop_dir().join(".venv/bin/python"))
}

/// How long a stopped process tree gets to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A child process in its own process group; when dropped it is stopped with every process
/// below it, and the test fails if one survives. Its output is kept.
struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
    stopped: bool,
}

impl Proc {
    fn spawn(cmd: &mut Command) -> Proc {
        Proc::spawn_with(cmd, Stdio::null(), None)
    }

    /// Like `spawn`, with stdin piped (returned) and every stdout line also sent to a channel.
    fn spawn_piped(cmd: &mut Command) -> (Proc, ChildStdin, mpsc::Receiver<String>) {
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
        for (pipe, lines) in pipes {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Some(tx) = &lines {
                        let _ = tx.send(line.clone());
                    }
                    let mut l = log.lock().unwrap();
                    l.push_str(&line);
                    l.push('\n');
                }
            });
        }
        Proc { child, log, stopped: false }
    }

    fn output(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits for a line containing `marker` and returns it.
    fn wait_for(&mut self, marker: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self.output().lines().find(|l| l.contains(marker)) {
                return line.to_string();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("process exited ({status}) before printing {marker:?}:\n{}", self.output());
            }
            assert!(Instant::now() < deadline, "no {marker:?} within 30 s:\n{}", self.output());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit (bounded) and returns whether it succeeded.
    fn finish(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(50)); // let the readers drain
                return status.success();
            }
            if Instant::now() > deadline {
                self.stop();
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the process and its tree; panics (unless already panicking) if any survived.
    fn stop(&mut self) {
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
struct Gateway {
    proc: Proc,
    addr: SocketAddr,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gateway {
    fn start(extra_upstreams: &str) -> Gateway {
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

    fn url(&self, upstream: &str) -> String {
        format!("http://{}/mcp/{upstream}", self.addr)
    }

    /// Arguments that run `taskgate stdio` in front of `upstream`.
    fn stdio_args(&self, upstream: &str) -> Vec<String> {
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
fn start_py_server() -> (Proc, u16) {
    start_py_server_over("--http")
}

/// The same over `--http` (Streamable HTTP at /mcp) or `--sse` (legacy HTTP+SSE at /sse).
fn start_py_server_over(transport: &str) -> (Proc, u16) {
    start_py_server_with(&[transport, "0"])
}

fn start_py_server_with(args: &[&str]) -> (Proc, u16) {
    let mut p = Proc::spawn(
        Command::new(python()).arg(require(&interop_dir().join("py_server.py"))).args(args).current_dir(interop_dir()),
    );
    let line = p.wait_for("listening ");
    let port = line.split_whitespace().last().unwrap().parse().unwrap();
    (p, port)
}

/// Config for the Python server as a stdio upstream (`py`) and over HTTP (`pyhttp`).
fn py_upstreams(http_port: u16) -> String {
    format!(
        "[[upstream]]\nname = \"py\"\ncommand = {:?}\nargs = [{:?}]\n\n[[upstream]]\nname = \"pyhttp\"\nurl = \"http://127.0.0.1:{http_port}/mcp\"\n",
        python(),
        require(&interop_dir().join("py_server.py"))
    )
}

/// The TypeScript SDK server of the interop kit, on 127.0.0.1.
fn start_ts_server() -> (Proc, u16) {
    let mut p = Proc::spawn(
        Command::new("node").arg(require(&interop_dir().join("ts_server.mjs"))).arg("0").current_dir(interop_dir()),
    );
    let line = p.wait_for("listening ");
    let port = line.split_whitespace().last().unwrap().parse().unwrap();
    (p, port)
}

/// Runs a client script to the end and asserts that it passed every check.
fn run_client(gateway: &Gateway, program: &str, args: &[String]) {
    let mut client = Proc::spawn(Command::new(program).args(args).current_dir(interop_dir()));
    let ok = client.finish(CLIENT_TIMEOUT);
    let out = client.output();
    assert!(
        ok && out.lines().any(|l| l.starts_with("PASS ")),
        "client {program} {args:?} failed:\n{out}\n--- gateway log ---\n{}",
        gateway.proc.output()
    );
    assert!(!out.lines().any(|l| l.starts_with("FAIL ")), "{out}");
}

fn ts(scenario: &str, transport: &[String]) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("ts_client.mjs")), scenario.to_string()];
    v.extend_from_slice(transport);
    v
}

fn py(scenario: &str, transport: &[String]) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("py_client.py")), scenario.to_string()];
    v.extend_from_slice(transport);
    v
}

/// A Python client's arguments, checking it negotiated 2026-07-28 (it did not fall back).
fn modern(transport: Vec<String>) -> Vec<String> {
    [vec!["--expect-protocol".into(), "2026-07-28".into()], transport].concat()
}

fn http(url: String) -> Vec<String> {
    vec!["--http".into(), url]
}

fn stdio(args: Vec<String>) -> Vec<String> {
    let mut v = vec!["--stdio".to_string()];
    v.extend(args);
    v
}

#[test]
fn ts_client_over_http_to_server_everything() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &ts("everything", &http(gw.url("everything"))));
}

#[test]
fn ts_client_over_stdio_to_server_everything() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &ts("everything", &stdio(gw.stdio_args("everything"))));
}

#[test]
fn ts_client_to_ts_server_over_http_upstream() {
    let (_server, port) = start_ts_server();
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"tsserver\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"));
    run_client(&gw, "node", &ts("tsserver", &http(gw.url("tsserver"))));
    run_client(&gw, "node", &ts("tsserver", &stdio(gw.stdio_args("tsserver"))));
}

#[test]
fn ts_client_to_builtin_demo() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &ts("demo", &http(gw.url("demo"))));
}

/// The Python client's default mode probes `server/discover`: the gateway answers it, and
/// the client stays on 2026-07-28 (stateless requests) in front of legacy servers.
#[test]
fn python_client_default_mode_over_http() {
    let gw = Gateway::start("");
    run_client(&gw, &python(), &py("everything", &modern(http(gw.url("everything")))));
    run_client(&gw, &python(), &py("demo", &modern(http(gw.url("demo")))));
}

#[test]
fn python_client_default_mode_over_stdio() {
    let gw = Gateway::start("");
    run_client(&gw, &python(), &py("demo", &modern(stdio(gw.stdio_args("demo")))));
    run_client(&gw, &python(), &py("everything", &modern(stdio(gw.stdio_args("everything")))));
}

/// `--mode legacy` skips the probe: the same gateway serves it an `initialize` session.
#[test]
fn python_client_legacy_mode_still_initializes() {
    let gw = Gateway::start("");
    let legacy = |t: Vec<String>| {
        [vec!["--mode".into(), "legacy".into(), "--expect-protocol".into(), "2025-11-25".into()], t].concat()
    };
    run_client(&gw, &python(), &py("demo", &legacy(http(gw.url("demo")))));
    run_client(&gw, &python(), &py("demo", &legacy(stdio(gw.stdio_args("demo")))));
}

/// A 2026-07-28 Python client in front of Python servers of both eras: the legacy one over
/// stdio and HTTP (translated), and the modern-only one (its requests relayed as they are).
#[test]
fn python_modern_client_in_front_of_python_servers_of_both_eras() {
    let (_legacy, legacy_port) = start_py_server();
    let (_modern, modern_port) = start_py_server_with(&["--http", "0", "--modern"]);
    let gw = Gateway::start(&format!(
        "[[upstream]]\nname = \"pystdio\"\ncommand = {:?}\nargs = [{:?}]\n\n[[upstream]]\nname = \"pyhttp\"\nurl = \"http://127.0.0.1:{legacy_port}/mcp\"\n\n[[upstream]]\nname = \"pymodern\"\nurl = \"http://127.0.0.1:{modern_port}/mcp\"\n",
        python(),
        require(&interop_dir().join("py_server.py"))
    ));
    for name in ["pystdio", "pyhttp", "pymodern"] {
        run_client(&gw, &python(), &py("pyserver", &modern(http(gw.url(name)))));
    }
    run_client(&gw, &python(), &py("pyserver", &modern(stdio(gw.stdio_args("pymodern")))));
}

// ---- a legacy HTTP+SSE upstream (the Python SDK's SSE server) ----

#[test]
fn python_sse_server_behind_transport_sse_and_auto() {
    let (_py, port) = start_py_server_over("--sse");
    let sse_url = format!("http://127.0.0.1:{port}/sse");
    let gw = Gateway::start(&format!(
        "[[upstream]]\nname = \"pysse\"\nurl = \"{sse_url}\"\ntransport = \"sse\"\n\n\
         [[upstream]]\nname = \"pyauto\"\nurl = \"{sse_url}\"\n"
    ));
    // tools/call echo, and progress from `slow`, with each SDK's client.
    run_client(&gw, &python(), &py("pyserver", &http(gw.url("pysse"))));
    run_client(&gw, "node", &ts("pyserver", &http(gw.url("pysse"))));
    // `auto` (the default): the POST on /sse is refused (405), and the gateway goes on over SSE.
    run_client(&gw, &python(), &py("pyserver", &http(gw.url("pyauto"))));
    let log = gw.proc.output();
    assert!(log.contains("trying the legacy HTTP+SSE transport at the same URL"), "{log}");
    assert!(log.contains("using the legacy HTTP+SSE transport"), "{log}");
    // Hosted tasks over it: the cancellation reaches the server through the endpoint too.
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url("pysse"))));
}

// ---- hosted tasks (the gateway hosts tasks for upstreams without them) ----

fn tasks_scenario(extra: &[&str], transport: Vec<String>) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("ts_client.mjs")), "tasks".to_string()];
    v.extend(extra.iter().map(|s| s.to_string()));
    v.extend(transport);
    v
}

#[test]
fn ts_tasks_client_against_python_server_over_stdio_and_http_upstreams() {
    let (_py, port) = start_py_server();
    let gw = Gateway::start(&py_upstreams(port));
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url("py"))));
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url("pyhttp"))));
}

#[test]
fn ts_tasks_clients_side_by_side_over_shared_links_to_the_python_server() {
    // One Python server process (stdio) and one upstream HTTP session serve both clients.
    let (_py, port) = start_py_server();
    let shared = py_upstreams(port).replace("\n\n[[upstream]]", "\nshare = true\n\n[[upstream]]") + "share = true\n";
    assert_eq!(shared.matches("share = true").count(), 2, "{shared}");
    let gw = Gateway::start(&shared);
    for upstream in ["py", "pyhttp"] {
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url(upstream))))
                });
            }
        });
    }
    let log = gw.proc.output();
    assert_eq!(log.matches("shared upstream link open").count(), 2, "one link per upstream for all clients:\n{log}");
}

/// Upstreams running the TypeScript SDK release of each older protocol version (no tasks).
fn old_ts_upstreams() -> String {
    let script = require(&interop_dir().join("ts_server_old.mjs"));
    ["2024-11-05", "2025-03-26", "2025-06-18"]
        .map(|v| format!("[[upstream]]\nname = \"ts-{v}\"\ncommand = \"node\"\nargs = [{script:?}, \"{v}\"]\n\n"))
        .concat()
}

#[test]
fn ts_tasks_client_at_2025_11_25_in_front_of_servers_that_predate_tasks() {
    // The gateway negotiates each side apart: the client keeps 2025-11-25 (and the gateway's
    // hosted tasks) whatever the server speaks.
    let gw = Gateway::start(&old_ts_upstreams());
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url("ts-2025-06-18"))));
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], stdio(gw.stdio_args("ts-2024-11-05"))));
}

#[test]
fn ts_tasks_client_over_stdio_downstream() {
    let (_py, port) = start_py_server();
    let gw = Gateway::start(&py_upstreams(port));
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], stdio(gw.stdio_args("py"))));
}

#[test]
fn ts_tasks_client_against_a_tool_server_everything_marks_forbidden() {
    // server-everything declares tasks but leaves this tool unmarked (forbidden): the gateway
    // hosts the task for it.
    let gw = Gateway::start("");
    let args = [
        "--tool",
        "trigger-long-running-operation",
        "--args",
        r#"{"duration":1,"steps":3}"#,
        "--cancel-args",
        r#"{"duration":30,"steps":30}"#,
        "--expect-text",
        "Long running operation completed",
    ];
    run_client(&gw, "node", &tasks_scenario(&args, http(gw.url("everything"))));
}

// ---- bridged tasks (server-everything's task-required simulate-research-query) ----

fn bridge_scenario(version: &str, transport: Vec<String>) -> Vec<String> {
    let mut v =
        vec![require(&interop_dir().join("ts_bridge.mjs")), "bridge".into(), "--protocol".into(), version.into()];
    v.extend(transport);
    v
}

#[test]
fn bridge_a_2025_06_18_client_over_http() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &bridge_scenario("2025-06-18", http(gw.url("everything"))));
}

#[test]
fn bridge_a_2025_06_18_client_to_a_strictly_versioned_task_server() {
    // server-everything behind a wrapper that refuses task fields in sessions negotiated before
    // 2025-11-25: the bridge works only because the gateway negotiates 2025-11-25 upstream on
    // its own behalf, whatever the client speaks.
    let mut server = Proc::spawn(
        Command::new("node")
            .args([require(&interop_dir().join("ts_server.mjs")), "0".into(), "--everything".into(), "--strict".into()])
            .current_dir(interop_dir()),
    );
    let line = server.wait_for("listening ");
    let port: u16 = line.split_whitespace().last().unwrap().parse().unwrap();
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"strict\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"));
    run_client(&gw, "node", &bridge_scenario("2025-06-18", http(gw.url("strict"))));
}

#[test]
fn bridge_a_2025_06_18_client_over_stdio() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &bridge_scenario("2025-06-18", stdio(gw.stdio_args("everything"))));
}

#[test]
fn bridge_a_2024_11_05_client_over_http() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &bridge_scenario("2024-11-05", http(gw.url("everything"))));
}

#[test]
fn bridge_a_2025_11_25_client_plainly_and_as_a_task() {
    let gw = Gateway::start("");
    run_client(&gw, "node", &bridge_scenario("2025-11-25", http(gw.url("everything"))));
}

// ---- legacy HTTP+SSE (the 2024-11-05 transport) at /sse/<name> ----

/// The TypeScript SDK 1.0.4 client (it speaks only 2024-11-05) over its `SSEClientTransport`
/// to `/sse/<upstream>`; when it closes its stream, the gateway ends the session.
fn legacy_sse_client(gw: &mut Gateway, scenario: &str, upstream: &str) {
    let script = require(&interop_dir().join("ts_sse_client.mjs"));
    require(&interop_dir().join("node_modules/sdk-2024-11-05/package.json"));
    let url = format!("http://{}/sse/{upstream}", gw.addr);
    run_client(gw, "node", &[script, scenario.into(), url]);
    gw.proc.wait_for("ended with its stream");
}

#[test]
fn a_2024_11_05_client_over_http_sse_to_the_builtin_demo() {
    let mut gw = Gateway::start("");
    legacy_sse_client(&mut gw, "demo", "demo");
}

#[test]
fn a_2024_11_05_client_over_http_sse_to_server_everything() {
    let mut gw = Gateway::start("");
    legacy_sse_client(&mut gw, "everything", "everything");
}

/// The Python server in 2026-07-28-only mode (`--modern`), behind the gateway: the
/// TypeScript SDK 1.32.2 client at 2025-11-25 and the SDK 1.0.4 client (2024-11-05, over
/// legacy HTTP+SSE) get a session the gateway synthesizes from `server/discover`, and tools,
/// progress and hosted 2025-11-25 tasks work through stateless requests. Under `era =
/// "auto"` as under `"modern"`.
#[test]
fn legacy_clients_in_front_of_the_python_server_in_modern_mode() {
    let (_server, port) = start_py_server_with(&["--http", "0", "--modern"]);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut gw = Gateway::start(&format!(
        "[[upstream]]\nname = \"pymodern\"\nurl = \"{url}\"\n\n[[upstream]]\nname = \"pyonly\"\nurl = \"{url}\"\nera = \"modern\"\n"
    ));
    run_client(&gw, "node", &ts("pyserver", &http(gw.url("pymodern"))));
    run_client(&gw, "node", &ts("pyserver", &http(gw.url("pyonly"))));
    // 2025-11-25 tasks hosted by the gateway, the calls stateless upstream; the upstream's
    // `slow` is cancelled when its task is (the server's own counters say so).
    run_client(&gw, "node", &tasks_scenario(&["--stats-tool", "stats"], http(gw.url("pymodern"))));
    legacy_sse_client(&mut gw, "pyserver", "pymodern");
    let log = gw.proc.output();
    assert!(log.contains("the upstream speaks 2026-07-28"), "{log}");
}

/// Input requests: py_server.py's `greet` (one elicitation) and `trip` (a name and the
/// roots, then a city that depends on the name) use the SDK's resolvers. The server in
/// 2026-07-28-only mode answers with `InputRequiredResult`s (one per round, `requestState`
/// sealed by the SDK); the gateway asks the TypeScript SDK 1.32.2 client (2025-11-25, over
/// HTTP and over the stdio front) with `elicitation/create` and `roots/list` and retries with
/// its answers until the result is complete. The same scenario against a legacy session of
/// the same server (server requests mid-call) passes as well: the client cannot tell. The
/// Python SDK's client (`py_client.py pyinput`) answers them as well.
#[test]
fn input_requests_of_the_python_server_in_modern_mode_reach_a_legacy_client() {
    let (_modern, port) = start_py_server_with(&["--http", "0", "--modern"]);
    let (_legacy, legacy_port) = start_py_server();
    let gw = Gateway::start(&format!(
        "[[upstream]]\nname = \"pymodern\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n[[upstream]]\nname = \"pylegacy\"\nurl = \"http://127.0.0.1:{legacy_port}/mcp\"\n"
    ));
    run_client(&gw, "node", &ts("pyinput", &http(gw.url("pymodern"))));
    run_client(&gw, "node", &ts("pyinput", &stdio(gw.stdio_args("pymodern"))));
    run_client(&gw, "node", &ts("pyinput", &http(gw.url("pylegacy"))));
    // The Python SDK's own client (auto mode: its probe of the gateway is refused, it
    // initializes) answers them too.
    run_client(&gw, &python(), &py("pyinput", &http(gw.url("pymodern"))));
    let log = gw.proc.output();
    assert!(log.contains("the upstream speaks 2026-07-28"), "{log}");
}

/// The rmcp server is dual era: the probe finds it modern, and plain tools (`echo`) work
/// for a legacy client through stateless requests.
#[test]
fn the_dual_era_rmcp_server_is_spoken_to_as_modern_for_plain_tools() {
    use serde_json::json;
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let port = gw.addr.port();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, head, msgs) = http_post(port, "/mcp/rmcp", &[], &init);
    assert_eq!(status, 200, "{msgs:?}\n{}", gw.proc.output());
    let result = &msgs[0]["result"];
    assert_eq!(result["serverInfo"]["name"], "taskgate-interop-rmcp-server", "{result}");
    assert!(result["capabilities"].get("extensions").is_none(), "{result}");
    let sid = head.lines().find_map(|l| l.strip_prefix("mcp-session-id:")).unwrap().trim().to_string();
    let hs = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = http_post(port, "/mcp/rmcp", &hs, &note);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi rmcp"}}});
    let (_, _, msgs) = http_post(port, "/mcp/rmcp", &hs, &call);
    let echo = msgs.iter().find(|m| m["id"] == 2).unwrap_or_else(|| panic!("{msgs:?}"));
    assert_eq!(text_of(&echo["result"]), "hi rmcp", "{echo}");
    assert!(echo["result"].get("resultType").is_none(), "{echo}");
    let log = gw.proc.output();
    assert!(log.contains("the upstream speaks 2026-07-28"), "{log}");
}

/// The TypeScript SDK 1.32.2 client with 2025-11-25 tasks in front of the rmcp server (the
/// tasks extension): core tasks translated both ways, over HTTP and the stdio front. The
/// extension has no progress for tasks (`--min-progress 0`), and the gateway sends
/// `notifications/tasks/status` only while a `tasks/result` waits (the spec says MAY:
/// `--no-status-notifications`); every other check is the scenario's own, `stats` showing
/// rmcp saw the cancellation.
#[test]
fn ts_tasks_client_in_front_of_the_rmcp_extension_task_server() {
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let args = ["--tool", "slow", "--stats-tool", "stats", "--min-progress", "0", "--no-status-notifications"];
    run_client(&gw, "node", &tasks_scenario(&args, http(gw.url("rmcp"))));
    run_client(&gw, "node", &tasks_scenario(&args, stdio(gw.stdio_args("rmcp"))));
}

/// A 2025-06-18 client (raw JSON-RPC on `taskgate stdio`, and over HTTP) in front of the
/// rmcp server, whose `slow` and `ask` are extension tasks (-32021 without the extension):
/// the gateway retries declaring it and bridges the task. `slow`'s status messages become
/// progress; `ask`'s elicitation reaches the client as a plain request of the call and its
/// answer reaches rmcp (`answer: <text>`); `notifications/cancelled` cancels the task there.
#[test]
fn a_2025_06_18_client_is_bridged_through_rmcp_extension_tasks() {
    use serde_json::json;
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let mut c = RawStdio::start_cmd(Command::new(&gw.stdio_args("rmcp")[0]).args(&gw.stdio_args("rmcp")[1..]));
    let init = c.result(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw-2025-06-18", "version": "0"}}),
    );
    assert_eq!(init["protocolVersion"], "2025-06-18", "{init}");
    assert!(init["capabilities"].get("tasks").is_none() && init["capabilities"].get("extensions").is_none(), "{init}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let slow = c.result(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": {"progressToken": "s"}}),
    );
    assert_eq!(text_of(&slow), "slow done after 3 steps", "{slow}");
    assert!(slow.get("resultType").is_none() && slow.get("_meta").is_none(), "{slow}");
    let progress: Vec<&serde_json::Value> =
        c.notifications.iter().filter(|n| n["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "status messages become progress: {:?}", c.notifications);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "s"), "{progress:?}");
    assert!(
        progress.iter().all(|p| p["params"]["message"].as_str().is_some_and(|m| m.starts_with("step "))),
        "{progress:?}"
    );

    c.notifications.clear();
    let asked =
        c.request_answering("tools/call", json!({"name": "ask", "arguments": {"question": "colour?"}}), |req| {
            assert_eq!(req["method"], "elicitation/create", "{req}");
            json!({"action": "accept", "content": {"answer": "blue"}})
        });
    assert_eq!(text_of(&asked["result"]), "answer: blue", "{asked}");
    let elicitations: Vec<&serde_json::Value> =
        c.notifications.iter().filter(|n| n["method"] == "elicitation/create").collect();
    assert_eq!(elicitations.len(), 1, "asked once: {:?}", c.notifications);
    assert_eq!(elicitations[0]["params"]["message"], "colour?");
    assert!(elicitations[0]["params"].get("_meta").is_none(), "no related-task: {}", elicitations[0]);

    // Cancelled while it runs: rmcp counts the cancellation (its stats are the process's,
    // and the gateway's stdio front runs its own rmcp process).
    c.next_id += 1;
    let id = c.next_id;
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 30, "steps": 30}, "_meta": {"progressToken": "long"}}}));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let m = c
            .recv(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| panic!("no progress for the long call"));
        if m["method"] == "notifications/progress" && m["params"]["progressToken"] == "long" {
            break;
        }
    }
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "enough"}}));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stats = c.result("tools/call", json!({"name": "stats", "arguments": {}}));
        let counts: serde_json::Value = serde_json::from_str(text_of(&stats)).unwrap();
        if counts["slow_cancelled"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the task was not cancelled upstream: {counts}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !c.notifications.iter().any(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none()),
        "a cancelled call gets no response"
    );

    // Over HTTP too (no input: the blocking call, its progress on the POST's stream).
    let port = gw.addr.port();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, head, _) = http_post(port, "/mcp/rmcp", &[], &init);
    assert_eq!(status, 200);
    let sid = head.lines().find_map(|l| l.strip_prefix("mcp-session-id:")).unwrap().trim().to_string();
    let hs = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let _ = http_post(port, "/mcp/rmcp", &hs, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": {"progressToken": 5}}});
    let (_, _, msgs) = http_post(port, "/mcp/rmcp", &hs, &call);
    let answer = msgs.iter().find(|m| m["id"] == 2).unwrap_or_else(|| panic!("{msgs:?}"));
    assert_eq!(text_of(&answer["result"]), "slow done after 3 steps", "{answer}");
    assert!(
        msgs.iter().any(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == 5),
        "{msgs:?}"
    );
    let log = gw.proc.output();
    assert!(log.contains("retrying it declaring the extension"), "{log}");
}

/// The helper itself: a shell that started two sleepers is stopped with both, and nothing of
/// its tree or group survives.
#[test]
fn stopping_a_process_stops_its_whole_tree() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "sleep 60 & sleep 60 & echo started; wait"]);
    let mut p = Proc::spawn(&mut cmd);
    p.wait_for("started");
    let pid = p.child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(10);
    let tree = loop {
        let tree = proc_tree::descendants(pid);
        if tree.len() >= 2 || Instant::now() > deadline {
            break tree;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(tree.len(), 2, "the shell's two sleepers: {tree:?}");
    assert!(tree.iter().all(|&d| proc_tree::cmdline(d).starts_with("sleep")), "{tree:?}");
    let left = proc_tree::stop_tree(&mut p.child, STOP_GRACE);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(tree.iter().all(|&d| !proc_tree::alive(d)), "a sleeper survived: {tree:?}");
    assert!(proc_tree::group_members(pid).is_empty());
}

// ---- the rmcp task server (tests/interop/rmcp_server), directly, without the gateway ----
//
// These pin the wire facts of rmcp 3.11 that the gateway's 2026-07-28 dialect relies on
// (recorded in tests/interop/README.md, "What rmcp 3.11 sends").

const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

fn rmcp_server() -> String {
    require(&interop_dir().join("rmcp_server/target/release/taskgate-interop-rmcp-server"))
}

/// The `_meta` of a 2026-07-28 request; `extension` declares the tasks extension.
fn modern_meta(version: &str, extension: bool) -> serde_json::Value {
    let capabilities =
        if extension { serde_json::json!({"extensions": {TASKS_EXT: {}}}) } else { serde_json::json!({}) };
    serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "taskgate-interop-test", "version": "0"},
    })
}

/// A raw JSON-RPC client on the rmcp server's stdin/stdout, one message per line.
struct RawStdio {
    proc: Proc,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: i64,
    /// Notifications received while waiting for responses, in order.
    notifications: Vec<serde_json::Value>,
}

impl RawStdio {
    fn start() -> RawStdio {
        Self::start_cmd(&mut Command::new(rmcp_server()))
    }

    /// A raw client on any line-delimited JSON-RPC process (e.g. `taskgate stdio`).
    fn start_cmd(cmd: &mut Command) -> RawStdio {
        let (proc, stdin, lines) = Proc::spawn_piped(cmd);
        RawStdio { proc, stdin, lines, next_id: 0, notifications: Vec::new() }
    }

    /// Sends a request and returns its response, answering the server's requests on the way
    /// with `answer` and keeping them and the notifications (in order) in `notifications`.
    fn request_answering(
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

    fn send(&mut self, message: &serde_json::Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()).unwrap_or_else(|e| {
            panic!("writing to the rmcp server: {e}\n{}", self.proc.output());
        });
    }

    fn recv(&mut self, timeout: Duration) -> Option<serde_json::Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON from the rmcp server ({e}): {line}")))
    }

    /// Sends a request and returns its whole response message (`result` or `error`), keeping
    /// the notifications that come before it.
    fn request(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
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

    fn result(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let response = self.request(method, params);
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {response}"),
        }
    }

    fn error(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let response = self.request(method, params);
        match response.get("error") {
            Some(error) => error.clone(),
            None => panic!("{method} did not fail: {response}"),
        }
    }

    /// Polls `tasks/get` until the task's status is `until` (or terminal), bounded.
    fn poll(&mut self, task_id: &str, until: &str, meta: &serde_json::Value) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut seen = Vec::new();
        loop {
            let got = self.result("tasks/get", serde_json::json!({"taskId": task_id, "_meta": meta}));
            let status = got["status"].as_str().unwrap_or_default().to_string();
            seen.push(got);
            if status == until || ["completed", "failed", "cancelled"].contains(&status.as_str()) {
                return seen;
            }
            assert!(Instant::now() < deadline, "task {task_id} not {until} within 15 s: {seen:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn keys(value: &serde_json::Value) -> Vec<&str> {
    let mut k: Vec<&str> = value.as_object().expect("an object").keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

fn text_of(result: &serde_json::Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {result}"))
}

const RMCP_VERSIONS: [&str; 5] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

#[test]
fn rmcp_server_answers_server_discover_and_serves_extension_tasks_over_stdio() {
    let mut s = RawStdio::start();
    let ext = modern_meta("2026-07-28", true);
    let plain = modern_meta("2026-07-28", false);

    // server/discover: every version it knows, the extension declared, serverInfo in _meta.
    let discover = s.result("server/discover", serde_json::json!({"_meta": ext}));
    assert_eq!(
        discover,
        serde_json::json!({
            "resultType": "complete",
            "supportedVersions": RMCP_VERSIONS,
            "capabilities": {"extensions": {TASKS_EXT: {}}, "tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "taskgate-interop-rmcp-server", "version": "0.1.0"}},
        })
    );
    // Without the per-request _meta, even server/discover is refused.
    let e = s.error("server/discover", serde_json::json!({}));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("io.modelcontextprotocol/protocolVersion"), "{e}");

    let tools = s.result("tools/list", serde_json::json!({"_meta": ext}));
    assert_eq!(tools["resultType"], "complete");
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "slow", "ask", "stats"]);
    assert!(tools["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()), "{tools}");

    // The server decides: echo is never a task, even for a client that declared the extension.
    let echo = s.result("tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": ext}));
    assert_eq!(
        echo,
        serde_json::json!({"resultType": "complete", "content": [{"type": "text", "text": "hi"}], "isError": false})
    );

    // slow: a flat CreateTaskResult.
    let created = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": ext}),
    );
    assert_eq!(
        keys(&created),
        ["createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "statusMessage", "taskId", "ttlMs"],
        "{created}"
    );
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    assert_eq!(created["statusMessage"], "step 0 of 3");
    assert_eq!(created["ttlMs"], 300_000);
    assert_eq!(created["pollIntervalMs"], 250);
    assert_eq!(created["createdAt"], created["lastUpdatedAt"]);
    let task_id = created["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_id.len(), 36, "a UUID: {task_id}");

    // tasks/get: a DetailedTask with resultType "complete"; the result inlined at completion.
    let polls = s.poll(&task_id, "completed", &ext);
    for got in &polls {
        assert_eq!(got["resultType"], "complete", "{got}");
        assert_eq!(got["taskId"], task_id.as_str());
        assert_eq!(got["createdAt"], created["createdAt"], "createdAt is stable: {got}");
        assert_eq!((&got["ttlMs"], &got["pollIntervalMs"]), (&created["ttlMs"], &created["pollIntervalMs"]));
        let message = got["statusMessage"].as_str().unwrap();
        assert!(message.starts_with("step ") && message.ends_with(" of 3"), "{got}");
    }
    let done = polls.last().unwrap();
    assert_eq!(done["status"], "completed", "{polls:?}");
    assert_eq!(done["statusMessage"], "step 3 of 3");
    assert!(done.get("error").is_none() && done.get("inputRequests").is_none(), "{done}");
    assert_eq!(
        done["result"],
        serde_json::json!({
            "content": [{"type": "text", "text": "slow done after 3 steps"}],
            "isError": false,
            "resultType": "complete",
        })
    );
    assert_ne!(done["lastUpdatedAt"], created["lastUpdatedAt"]);
    // No progress or task notifications on stdio for a task.
    assert!(s.notifications.is_empty(), "{:?}", s.notifications);

    // tasks/cancel: an empty ack; the running task settles as cancelled.
    let long = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 30, "steps": 30}, "_meta": ext}),
    );
    let long_id = long["taskId"].as_str().unwrap().to_string();
    let ack = s.result("tasks/cancel", serde_json::json!({"taskId": long_id, "_meta": ext}));
    assert_eq!(ack, serde_json::json!({"resultType": "complete"}));
    let cancelled = s.poll(&long_id, "cancelled", &ext).pop().unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(cancelled.get("result").is_none() && cancelled.get("error").is_none(), "{cancelled}");
    // Cancelling a terminal task is acknowledged the same way, and changes nothing.
    assert_eq!(s.result("tasks/cancel", serde_json::json!({"taskId": long_id, "_meta": ext})), ack);
    assert_eq!(s.poll(&long_id, "cancelled", &ext).pop().unwrap()["status"], "cancelled");
    let stats = s.result("tools/call", serde_json::json!({"name": "stats", "arguments": {}, "_meta": ext}));
    let counters: serde_json::Value = serde_json::from_str(text_of(&stats)).unwrap();
    assert_eq!(counters, serde_json::json!({"slow_started": 2, "slow_finished": 1, "slow_cancelled": 1}));

    // Unknown task: -32602. tasks/result and tasks/list do not exist: -32601.
    let e = s.error("tasks/get", serde_json::json!({"taskId": "no-such-task", "_meta": ext}));
    assert_eq!(e, serde_json::json!({"code": -32602, "message": "unknown task: no-such-task"}));
    for method in ["tasks/result", "tasks/list"] {
        let e = s.error(method, serde_json::json!({"taskId": task_id, "_meta": ext}));
        assert_eq!(e, serde_json::json!({"code": -32601, "message": method}));
    }

    // Input during a task: input_required with inputRequests, answered by tasks/update.
    let asked = s.result(
        "tools/call",
        serde_json::json!({"name": "ask", "arguments": {"question": "Which colour?"}, "_meta": ext}),
    );
    assert_eq!(asked["resultType"], "task");
    let ask_id = asked["taskId"].as_str().unwrap().to_string();
    let waiting = s.poll(&ask_id, "input_required", &ext).pop().unwrap();
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert_eq!(
        waiting["inputRequests"],
        serde_json::json!({"answer": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Which colour?",
                "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
            },
        }})
    );
    let update = serde_json::json!({
        "taskId": ask_id,
        "inputResponses": {"answer": {"action": "accept", "content": {"answer": "blue"}}},
        "_meta": ext,
    });
    assert_eq!(s.result("tasks/update", update), serde_json::json!({"resultType": "complete"}));
    let answered = s.poll(&ask_id, "completed", &ext).pop().unwrap();
    assert_eq!(answered["status"], "completed", "{answered}");
    assert!(answered.get("inputRequests").is_none(), "{answered}");
    assert_eq!(text_of(&answered["result"]), "answer: blue");

    // Without the extension on the request: -32021 for slow and for tasks/*, plain results
    // for tools that are never tasks.
    let missing = serde_json::json!({
        "code": -32021,
        "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}},
    });
    let e = s.error("tools/call", serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1}, "_meta": plain}));
    assert_eq!(e, missing);
    for method in ["tasks/get", "tasks/cancel"] {
        assert_eq!(s.error(method, serde_json::json!({"taskId": task_id, "_meta": plain})), missing, "{method}");
    }
    let e = s.error("tasks/update", serde_json::json!({"taskId": task_id, "inputResponses": {}, "_meta": plain}));
    assert_eq!(e, missing);
    let echo = s.result("tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "x"}, "_meta": plain}));
    assert_eq!(text_of(&echo), "x");

    // A version it does not know: -32022 with the supported list; no _meta: -32602; no ping.
    let e = s.error("tools/list", serde_json::json!({"_meta": modern_meta("2099-01-01", true)}));
    assert_eq!(e["code"], -32022, "{e}");
    assert_eq!(e["data"], serde_json::json!({"requested": "2099-01-01", "supported": RMCP_VERSIONS}));
    assert_eq!(s.error("tools/list", serde_json::json!({}))["code"], -32602);
    assert_eq!(
        s.error("ping", serde_json::json!({"_meta": ext})),
        serde_json::json!({"code": -32601, "message": "ping"})
    );
    assert!(s.notifications.is_empty(), "{:?}", s.notifications);

    // It exits at the end of its input.
    drop(s.stdin);
    assert!(s.proc.finish(Duration::from_secs(10)), "no clean exit at EOF:\n{}", s.proc.output());
}

#[test]
fn rmcp_server_is_dual_era_an_initialize_opens_a_legacy_session_over_stdio() {
    // initialize answers every legacy version it is asked for, and 2025-11-25 for anything
    // else (2026-07-28 has no handshake). It declares the extension in legacy sessions too.
    for (asked, answered) in
        RMCP_VERSIONS.iter().zip(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2025-11-25"])
    {
        let mut s = RawStdio::start();
        let init = s.result(
            "initialize",
            serde_json::json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert_eq!(
            init,
            serde_json::json!({
                "protocolVersion": answered,
                "capabilities": {"extensions": {TASKS_EXT: {}}, "tools": {}},
                "serverInfo": {"name": "taskgate-interop-rmcp-server", "version": "0.1.0"},
            }),
            "initialize at {asked}"
        );
    }

    let mut s = RawStdio::start();
    // A server/discover first does not choose the era; the initialize after it does.
    let discover = s.result("server/discover", serde_json::json!({"_meta": modern_meta("2026-07-28", true)}));
    assert_eq!(discover["supportedVersions"], serde_json::json!(RMCP_VERSIONS));
    s.result(
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    s.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // Legacy results carry no resultType.
    let tools = s.result("tools/list", serde_json::json!({}));
    assert!(tools.get("resultType").is_none(), "{tools}");
    assert_eq!(tools["tools"].as_array().unwrap().len(), 4);
    assert_eq!(s.result("ping", serde_json::json!({})), serde_json::json!({}));

    // slow in a legacy session: a plain call with progress per step.
    let slow = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.3, "steps": 3}, "_meta": {"progressToken": "p1"}}),
    );
    assert_eq!(
        slow,
        serde_json::json!({"content": [{"type": "text", "text": "slow done after 3 steps"}], "isError": false})
    );
    let progress: Vec<serde_json::Value> = std::mem::take(&mut s.notifications);
    assert_eq!(
        progress,
        (1..=3)
            .map(|i| serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "p1", "progress": f64::from(i), "total": 3.0, "message": format!("step {i} of 3"),
            }}))
            .collect::<Vec<_>>()
    );
    // A 2025-11-25 task-augmented call is served plainly: rmcp has no 2025-11-25 tasks.
    let augmented = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1, "steps": 1}, "task": {"ttl": 60000}}),
    );
    assert_eq!(text_of(&augmented), "slow done after 1 steps");
    assert!(augmented.get("task").is_none(), "{augmented}");
    // tasks/*: -32021 for a session whose initialize did not declare the extension;
    // tasks/result and tasks/list: -32601.
    let e = s.error("tasks/get", serde_json::json!({"taskId": "x"}));
    assert_eq!(e["code"], -32021, "{e}");
    assert_eq!(s.error("tasks/result", serde_json::json!({"taskId": "x"}))["code"], -32601);
    assert_eq!(s.error("tasks/list", serde_json::json!({}))["code"], -32601);
    let ask = s.result("tools/call", serde_json::json!({"name": "ask", "arguments": {"question": "q"}}));
    assert_eq!(ask["isError"], true, "{ask}");

    // notifications/cancelled stops a plain call: no response, no more progress.
    s.next_id += 1;
    let id = s.next_id;
    s.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 20, "steps": 20}, "_meta": {"progressToken": "p2"},
    }}));
    let first = s.recv(Duration::from_secs(10)).expect("a first progress");
    assert_eq!(first["params"]["progressToken"], "p2", "{first}");
    s.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
    let mut after = Vec::new();
    while let Some(m) = s.recv(Duration::from_millis(1500)) {
        after.push(m);
    }
    // At most a progress already in flight when the cancellation arrived.
    assert!(after.len() <= 1 && after.iter().all(|m| m["method"] == "notifications/progress"), "{after:?}");
    let stats = s.result("tools/call", serde_json::json!({"name": "stats", "arguments": {}}));
    let counters: serde_json::Value = serde_json::from_str(text_of(&stats)).unwrap();
    assert_eq!(counters["slow_cancelled"], 1, "{counters}");

    // In a legacy session, a request whose own _meta names 2026-07-28 is served as modern.
    let modern = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1, "steps": 1}, "_meta": modern_meta("2026-07-28", true)}),
    );
    assert_eq!(modern["resultType"], "task", "{modern}");
}

/// One HTTP/1.1 POST to 127.0.0.1:`port`/mcp on a connection of its own: the status, the
/// headers (lower-cased names) and the JSON-RPC messages of the body (the `data:` lines of an
/// event stream, or a JSON body).
fn rmcp_http_post(
    port: u16,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> (u16, String, Vec<serde_json::Value>) {
    http_post(port, "/mcp", headers, body)
}

/// [`rmcp_http_post`] to any path.
fn http_post(
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

#[test]
fn rmcp_server_over_streamable_http_serves_stateless_task_requests_and_legacy_sessions() {
    let mut p = Proc::spawn(Command::new(rmcp_server()).args(["--http", "0"]));
    let port: u16 = p.wait_for("listening ").split_whitespace().last().unwrap().parse().unwrap();
    let ext = modern_meta("2026-07-28", true);
    let modern = |method: &'static str, name: Option<&'static str>| {
        let mut h = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
        if let Some(n) = name {
            h.push(("mcp-name", n));
        }
        h
    };
    let call = |id: i64, method: &str, params: serde_json::Value| serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});

    // Stateless 2026-07-28: each POST answered on an event stream with the response alone,
    // no session id.
    let (status, head, messages) = rmcp_http_post(
        port,
        &modern("server/discover", None),
        &call(1, "server/discover", serde_json::json!({"_meta": ext})),
    );
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: text/event-stream") && !head.contains("mcp-session-id"), "{head}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["result"]["capabilities"]["extensions"], serde_json::json!({TASKS_EXT: {}}));

    let slow = serde_json::json!({"name": "slow", "arguments": {"seconds": 0.3, "steps": 2}, "_meta": ext});
    let (status, _, messages) = rmcp_http_post(port, &modern("tools/call", Some("slow")), &call(2, "tools/call", slow));
    assert_eq!(status, 200);
    assert_eq!(messages[0]["result"]["resultType"], "task", "{messages:?}");
    let task_id = messages[0]["result"]["taskId"].as_str().unwrap().to_string();
    // The task outlives its request: later POSTs (new connections) find it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let get = call(3, "tasks/get", serde_json::json!({"taskId": task_id, "_meta": ext}));
        let mut headers = modern("tasks/get", None);
        headers.push(("mcp-name", &task_id));
        let (status, _, messages) = rmcp_http_post(port, &headers, &get);
        assert_eq!(status, 200, "{messages:?}");
        let result = messages[0]["result"].clone();
        if result["status"] == "completed" {
            break result;
        }
        assert!(Instant::now() < deadline, "{result}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(text_of(&done["result"]), "slow done after 2 steps");

    // Header checks: HTTP 400 with a JSON-RPC -32020 body.
    let echo = call(4, "tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "a"}, "_meta": ext}));
    for (headers, message) in [
        (vec![], "request _meta protocolVersion requires MCP-Protocol-Version header"),
        (vec![("mcp-protocol-version", "2026-07-28")], "missing required Mcp-Method header"),
        (modern("tools/call", Some("slow")), "Mcp-Name header `slow` does not match body value `echo`"),
        (
            vec![("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/call"), ("mcp-name", "echo")],
            "MCP-Protocol-Version header (2025-11-25) does not match request _meta protocolVersion (2026-07-28)",
        ),
    ] {
        let (status, head, messages) = rmcp_http_post(port, &headers, &echo);
        assert_eq!(status, 400, "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(messages[0]["error"], serde_json::json!({"code": -32020, "message": message}));
    }

    // initialize opens a legacy session (Mcp-Session-Id) on the same endpoint.
    let init = call(
        5,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let (status, head, messages) = rmcp_http_post(port, &[], &init);
    assert_eq!(status, 200);
    assert!(head.contains("mcp-session-id: "), "{head}");
    assert_eq!(messages[0]["result"]["protocolVersion"], "2025-11-25", "{messages:?}");
    p.stop();
}
