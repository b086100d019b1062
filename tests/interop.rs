//! Interop with the official SDKs as real peers, through the `taskgate` binary:
//! the TypeScript SDK client over Streamable HTTP and over stdio, against server-everything
//! (stdio upstream), a TypeScript SDK server (HTTP upstream) and the built-in demo; the
//! Python `mcp` client in its default mode, which probes `server/discover` and stays on
//! 2026-07-28 through the gateway (stateless requests, multi round-trip elicitation), and in
//! legacy mode; a 2024-11-05
//! client (TypeScript SDK 1.0.4) over the legacy HTTP+SSE transport. The rmcp task server's
//! tests are in tests/interop_rmcp.rs; the harness both share is tests/common/interop.rs.
//!
//! The peers are installed at pinned versions by `scripts/setup-interop`, which the test
//! command runs first. A missing peer fails the test; nothing here skips.
//!
//! Every process a test starts runs in its own process group and is stopped with its whole
//! tree (the gateway's stdio upstreams, a client's `taskgate stdio`); a test fails if any of
//! them is left behind.

use crate::common::interop;
use crate::common::pace;
use crate::common::proc_tree;

use interop::*;
use std::process::Command;
use std::time::Duration;

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

/// The helper itself: a shell that started two sleepers is stopped with both, and nothing of
/// its tree or group survives.
#[test]
fn stopping_a_process_stops_its_whole_tree() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "sleep 60 & sleep 60 & echo started; wait"]);
    let mut p = Proc::spawn(&mut cmd);
    p.wait_for("started");
    let pid = p.child.id() as i32;
    // Until both have exec'd: a child forked a moment ago is still `sh` by its cmdline.
    let execd = |t: &Vec<i32>| t.len() >= 2 && t.iter().all(|&d| proc_tree::cmdline(d).starts_with("sleep"));
    let tree = pace::until(Duration::from_secs(10), || Some(proc_tree::descendants(pid)).filter(execd))
        .unwrap_or_else(|| proc_tree::descendants(pid));
    assert_eq!(tree.len(), 2, "the shell's two sleepers: {tree:?}");
    assert!(tree.iter().all(|&d| proc_tree::cmdline(d).starts_with("sleep")), "{tree:?}");
    let left = proc_tree::stop_tree(&mut p.child, STOP_GRACE);
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(tree.iter().all(|&d| !proc_tree::alive(d)), "a sleeper survived: {tree:?}");
    assert!(proc_tree::group_members(pid).is_empty());
}
