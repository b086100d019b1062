//! Long calls (`[upstream.long_calls]`) with the official SDK clients as real peers, through
//! the `taskgate` binary in front of its built-in demo: each client's request timeout (2 s)
//! is far shorter than the `slow` call it makes (6 s), and it never sees a timeout. The
//! deferred answer names a task; the client calls `taskgate_wait` until the tool's own
//! result, stops another call with `taskgate_cancel`, and a second session of it is refused
//! the first one's task id like an id that never was. The exact wire behaviour is in
//! tests/long_calls.rs; the scenarios are `ts_long_calls.mjs` and `py_client.py longcalls`.
//!
//! The Python client runs in `--mode legacy` (an `initialize` session of 2025-11-25 without
//! the `tasks` capability) and in its default mode, which speaks 2026-07-28 to the gateway
//! without the tasks extension: the same flow, but with no session there is no other session
//! to refuse (such a task is known by its id alone) and the SDK sends no `ping`.
//!
//! Each run prints its figures (`figure deferred_ms`, `figure waits`, `figure result_ms`),
//! shown with `--no-capture`.

use crate::common::interop::*;

/// The demo again, as `longcalls`: deferred after 1 s, each wait at most 1.5 s, both within
/// the clients' 2 s timeout. The waits end at 2.5, 4 and 5.5 s, half a second from the 6 s
/// call's end: a wait that runs out as the call ends may say "still running" with the status
/// `completed` (the gateway reads the status after the wait ran out, and the result is not
/// delivered to waiters at once), which these runs do not meet.
const LONG_CALLS: &str = "[[upstream]]\nname = \"longcalls\"\nbuiltin = \"demo\"\n\n\
                          [upstream.long_calls]\ndefer_after = \"1s\"\nwait_max = \"1500ms\"\n";

/// The clients' timeout per request, as the scenarios set it.
const CLIENT_TIMEOUT_MS: u64 = 2000;

fn ts_long_calls(transport: Vec<String>) -> Vec<String> {
    let mut v = vec![require(&interop_dir().join("ts_long_calls.mjs")), "longcalls".into()];
    v.extend(transport);
    v
}

fn py_legacy(transport: Vec<String>) -> Vec<String> {
    let mode = ["--mode", "legacy", "--expect-protocol", "2025-11-25"].map(String::from).to_vec();
    py("longcalls", &[mode, transport].concat())
}

fn py_default_mode(transport: Vec<String>) -> Vec<String> {
    py("longcalls", &modern(transport))
}

/// The figures a run printed, checked: the deferred answer came after `defer_after` and
/// before the client's timeout, the result after the tool's 6 s, through one wait or more.
fn figures(label: &str, out: &str) {
    let figure = |name: &str| -> u64 {
        let prefix = format!("figure {name} ");
        let line = out.lines().find_map(|l| l.strip_prefix(&prefix));
        line.and_then(|v| v.trim().parse().ok()).unwrap_or_else(|| panic!("no figure {name}:\n{out}"))
    };
    let (deferred, waits, result) = (figure("deferred_ms"), figure("waits"), figure("result_ms"));
    println!("{label}: deferred answer after {deferred} ms, result after {result} ms through {waits} waits");
    assert!((1000..CLIENT_TIMEOUT_MS).contains(&deferred), "deferred after {deferred} ms:\n{out}");
    assert!(result >= 6000 && waits >= 1, "result after {result} ms, {waits} waits:\n{out}");
}

#[test]
fn ts_client_long_calls_over_http() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, "node", &ts_long_calls(http(gw.url("longcalls"))));
    figures("ts http", &out);
}

#[test]
fn ts_client_long_calls_over_stdio() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, "node", &ts_long_calls(stdio(gw.stdio_args("longcalls"))));
    figures("ts stdio", &out);
}

#[test]
fn python_legacy_client_long_calls_over_http() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, &python(), &py_legacy(http(gw.url("longcalls"))));
    figures("py http", &out);
}

#[test]
fn python_legacy_client_long_calls_over_stdio() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, &python(), &py_legacy(stdio(gw.stdio_args("longcalls"))));
    figures("py stdio", &out);
}

#[test]
fn python_default_mode_client_long_calls_over_http() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, &python(), &py_default_mode(http(gw.url("longcalls"))));
    figures("py 2026-07-28 http", &out);
}

#[test]
fn python_default_mode_client_long_calls_over_stdio() {
    let gw = Gateway::start(LONG_CALLS);
    let out = run_client(&gw, &python(), &py_default_mode(stdio(gw.stdio_args("longcalls"))));
    figures("py 2026-07-28 stdio", &out);
}
