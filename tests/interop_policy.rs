//! The operator's policy and a config reload with the official TypeScript SDK client as the
//! real peer, through the `taskgate` binary in front of its built-in demo over Streamable
//! HTTP (`ts_policy.mjs`): a denied tool is unlisted and refused as unknown, a call past the
//! rate limit is the HTTP 429 the SDK throws, and after the test rewrites the config and
//! sends SIGHUP the same SDK session, never initialized again, sees the new policy at once.

use crate::common::gateway_proc::signal;
use crate::common::interop::*;
use std::io::Write as _;
use std::process::Command;

const BEFORE: &str = "[[upstream]]\nname = \"policy\"\nbuiltin = \"demo\"\n\
                      [upstream.tools]\ndeny = [\"add\"]\n\
                      [upstream.limits]\ncalls_per_minute = 1\nburst = 2\n";
const AFTER: &str = "[[upstream]]\nname = \"policy\"\nbuiltin = \"demo\"\n\
                     [upstream.tools]\ndeny = [\"echo\"]\n";

#[test]
fn ts_client_meets_the_policy_and_keeps_its_session_across_a_reload() {
    let mut gw = Gateway::start(BEFORE);
    let script = require(&interop_dir().join("ts_policy.mjs"));
    let (mut client, mut stdin, _) = Proc::spawn_piped(
        Command::new("node").args([script.as_str(), "policy", "--http", &gw.url("policy")]).current_dir(interop_dir()),
    );
    client.wait_for("RELOAD ");

    let text = std::fs::read_to_string(&gw.config).unwrap();
    std::fs::write(&gw.config, text.replace(BEFORE, AFTER)).unwrap();
    signal(gw.proc.child.id(), libc::SIGHUP);
    let reloaded = gw.proc.wait_for("config reload");
    assert!(reloaded.contains("config reloaded") && reloaded.contains("\"policy\""), "{reloaded}");
    writeln!(stdin, "go").unwrap();

    let ok = client.finish(CLIENT_TIMEOUT);
    let out = client.output();
    assert!(ok && out.contains("PASS policy: 8 checks"), "{out}\n--- gateway log ---\n{}", gw.proc.output());
    gw.proc.stop();
}

/// The Python SDK client, in its legacy mode (a 2025-11-25 session) and its default mode
/// (2026-07-28, no session): the same policy, and the refusal past the bucket as each era
/// carries it.
#[test]
fn python_client_meets_the_policy_in_both_eras() {
    let gw = Gateway::start(BEFORE);
    for mode in [vec!["--mode", "legacy", "--expect-protocol", "2025-11-25"], vec!["--expect-protocol", "2026-07-28"]] {
        let mode: Vec<String> = mode.into_iter().map(String::from).collect();
        let out = run_client(&gw, &python(), &py("policy", &[mode.clone(), http(gw.url("policy"))].concat()));
        assert!(out.contains("PASS policy"), "{mode:?}: {out}");
    }
}
