//! The conformance suite's client scenarios that a gateway's upstream side meets, with taskgate
//! as the client of the suite's mock server (the server scenarios are `conformance.rs`'s).

use crate::common::interop::Proc;
use crate::conformance::{conformance_dir, need, node, suite, tail, wait_exit};
use std::process::Command;
use std::time::Duration;

/// The client scenarios a gateway's upstream side meets, with taskgate as the client of the
/// suite's mock server (tests/conformance/client_through_gateway.sh starts it, the mock's URL
/// its one upstream, and drives it with curl as a client of the scenario's era): no check fails
/// or warns, and one at least passes.
const CLIENT_SCENARIOS: [&str; 3] = ["initialize", "request-metadata", "http-standard-headers"];

#[test]
fn client_scenarios_with_the_gateway_as_the_client() {
    let script = need(conformance_dir().join("client_through_gateway.sh"), "a checkout that has it");
    let dir = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for scenario in CLIENT_SCENARIOS {
        let out = dir.path().join(scenario);
        let mut p = Proc::spawn(
            Command::new(node())
                .args([suite().as_str(), "client", "--command", script.as_str(), "--scenario", scenario, "-o"])
                .arg(&out)
                .env("TASKGATE_BIN", env!("CARGO_BIN_EXE_taskgate")),
        );
        wait_exit(&mut p, &format!("conformance client --scenario {scenario}"), Duration::from_secs(120));
        let mut checks: Vec<(String, String)> = Vec::new();
        for entry in std::fs::read_dir(&out).unwrap().flatten() {
            let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else { continue };
            let list: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            checks.extend(list.iter().map(|c| {
                (c["id"].as_str().unwrap_or("?").to_string(), c["status"].as_str().unwrap_or("?").to_string())
            }));
        }
        if !checks.iter().any(|(_, status)| status == "SUCCESS") {
            wrong.push(format!("{scenario}: no check passed\n{}", tail(&p.output())));
        }
        for (id, status) in checks.iter().filter(|(_, status)| status == "FAILURE" || status == "WARNING") {
            wrong.push(format!("{scenario}: {id} {status}"));
        }
    }
    assert!(wrong.is_empty(), "client scenarios with taskgate as the client:\n  {}", wrong.join("\n  "));
}
