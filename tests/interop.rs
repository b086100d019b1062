//! Interop with the official SDKs as real peers, through the `taskgate` binary:
//! the TypeScript SDK client over Streamable HTTP and over stdio, against server-everything
//! (stdio upstream), a TypeScript SDK server (HTTP upstream) and the built-in demo; the
//! Python `mcp` client in its default mode (it probes `server/discover` first); a 2024-11-05
//! client (TypeScript SDK 1.0.4) over the legacy HTTP+SSE transport.
//!
//! The peers are installed at pinned versions by `scripts/setup-interop`, which the test
//! command runs first. A missing peer fails the test; nothing here skips.
//!
//! Every process a test starts runs in its own process group and is stopped with its whole
//! tree (the gateway's stdio upstreams, a client's `taskgate stdio`); a test fails if any of
//! them is left behind.

#[path = "common/proc_tree.rs"]
mod proc_tree;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn require(path: &Path) -> String {
    assert!(
        path.exists(),
        "interop peer missing: {} — run scripts/setup-interop (the README's test command does)",
        path.display()
    );
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
        let mut child = proc_tree::own_group(cmd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        for pipe in
            [Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Box::new(child.stderr.take().unwrap())]
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
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
    let mut p = Proc::spawn(
        Command::new(python())
            .arg(require(&interop_dir().join("py_server.py")))
            .args([transport, "0"])
            .current_dir(interop_dir()),
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

#[test]
fn python_client_default_mode_over_http() {
    let gw = Gateway::start("");
    run_client(&gw, &python(), &py("everything", &http(gw.url("everything"))));
    run_client(&gw, &python(), &py("demo", &http(gw.url("demo"))));
    // The client's server/discover probe was answered by the gateway itself (-32601), and
    // the client went on with initialize.
    assert!(gw.proc.output().contains("answered the client's server/discover probe"), "{}", gw.proc.output());
}

#[test]
fn python_client_default_mode_over_stdio() {
    let gw = Gateway::start("");
    run_client(&gw, &python(), &py("demo", &stdio(gw.stdio_args("demo"))));
    run_client(&gw, &python(), &py("everything", &stdio(gw.stdio_args("everything"))));
}

#[test]
fn python_client_sees_the_probe_refused_over_stdio() {
    // Over stdio the gateway's log goes to the client's stderr; run one client and read it.
    let gw = Gateway::start("");
    let mut client =
        Proc::spawn(Command::new(python()).args(py("demo", &stdio(gw.stdio_args("demo")))).current_dir(interop_dir()));
    assert!(client.finish(CLIENT_TIMEOUT), "{}", client.output());
    assert!(client.output().contains("answered the client's server/discover probe"), "{}", client.output());
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
