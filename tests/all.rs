//! Every integration test in one binary: each file in tests/ is a module of it, so taskgate,
//! its dependencies' generics and the helpers in tests/common are compiled and linked once,
//! not once per file (docs/testing.md, "Where the test command's time goes"). Run one file's
//! tests with `cargo nextest run --test all <file>::` (or `cargo test`).

mod common;

mod auth;
mod auth_jwt;
mod auth_modern_upstream;
mod bridge;
mod client_shares;
mod compatibility;
mod conformance;
mod conformance_clients;
mod dialects;
mod dialects_review;
mod docs;
mod dual_era;
mod eras;
mod extension_core_tasks;
mod extension_tasks;
mod faults;
mod full_disk;
mod held_inputs;
mod hosted_tasks;
mod http_batches;
mod http_downstream;
mod http_layers;
mod http_limits;
mod http_strictness;
mod http_upstream;
mod import;
mod interop;
mod interop_long_calls;
mod interop_policy;
mod interop_rmcp;
mod layers;
mod legacy_sse;
mod long_calls;
mod modern_clients;
mod modern_input;
mod modern_review;
mod modern_tasks;
mod modern_upstream;
mod ops;
mod plain_call_locks;
mod progress;
mod protocol_headers;
mod rate_limits;
mod record_bounds;
mod relayed_tasks;
mod reload;
mod replicas;
mod restart;
mod revival;
mod shared_links;
mod shared_links_review;
mod shutdown;
mod spans;
mod sse_upstream;
mod stdio_backpressure;
mod stdio_upstream;
mod stream_lifecycle;
mod strict_legacy;
mod task_page;
mod task_page_browser;
mod task_rules;
mod task_rules_limits;
mod tls;
mod tool_policy;
mod transports;
mod upstream_authorization;
mod upstream_batches;
mod upstream_conns;
mod versions;
mod wire_edges;

/// A file in tests/ that is not a module here would never be built (`autotests = false`).
#[test]
fn every_file_in_tests_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let this = std::fs::read_to_string(dir.join("all.rs")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(module) = name.strip_suffix(".rs")
            && module != "all"
            && !this.lines().any(|l| l == format!("mod {module};"))
        {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "add `mod <file>;` to tests/all.rs for: {missing:?}");
}
