//! `taskgate import` and `taskgate serve --mcp-servers` on the real binary: a desktop
//! client's `mcpServers` file printed as config, refused with a clear error, and served.

use crate::common;

use common::gateway_proc::start_with;
use common::*;
use serde_json::json;

fn import(file: &std::path::Path) -> std::process::Output {
    std::process::Command::new(bin()).arg("import").arg(file).output().unwrap()
}

#[test]
fn import_prints_a_config_the_gateway_loads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("claude_desktop_config.json");
    let servers = json!({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"TOKEN": "t0k"}, "alwaysAllow": []},
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer b"}},
        "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
    }});
    std::fs::write(&file, servers.to_string()).unwrap();
    let out = import(&file);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let toml = String::from_utf8(out.stdout).unwrap();
    let c = taskgate::Config::parse(&toml, &|_| None).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let names: Vec<&str> = c.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["files", "remote", "old"]);
    assert!(toml.contains("env = { TOKEN = \"t0k\" }"), "secrets are copied as they are: {toml}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("mcpServers.\"files\".alwaysAllow: not a field taskgate reads, skipped"), "{stderr}");

    // What the binary prints, `taskgate check` accepts.
    let config = dir.path().join("config.toml");
    std::fs::write(&config, &toml).unwrap();
    let check = std::process::Command::new(bin()).args(["check", "--config"]).arg(&config).output().unwrap();
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}

#[test]
fn import_refuses_bad_input_with_status_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servers.json");
    for (text, want) in [
        ("{\"mcpServers\": {\n  \"a\": {\"command\": }\n}}", "not valid JSON at line 2, column 20"),
        ("{\"mcpServers\": {\"a\": {\"env\": {}}}}", "mcpServers.\"a\": neither \"command\""),
        ("{\"mcpServers\": {\"?!\": {\"command\": \"x\"}}}", "mcpServers.\"?!\": not usable as an upstream name"),
    ] {
        std::fs::write(&file, text).unwrap();
        let out = import(&file);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(out.stdout.is_empty(), "no config printed for {text}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.starts_with(&format!("taskgate: {}: ", file.display())), "{stderr}");
        assert!(stderr.contains(want), "{text}: {stderr}");
    }
    let out = import(&dir.path().join("missing.json"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read it"));
}

#[tokio::test]
async fn serve_mcp_servers_serves_a_stdio_entry() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("servers.json");
    let servers = json!({"mcpServers": {"demo tools": {"command": bin(), "args": ["demo-server"]}}});
    std::fs::write(&file, servers.to_string()).unwrap();
    let args = ["serve", "--mcp-servers", file.to_str().unwrap(), "--listen", "127.0.0.1:0"];
    let (_gw, addr) = start_with(&args).await;
    // "demo tools" is served under the name it maps to.
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo-tools"));
    let init = c.initialize("2025-06-18").await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    let listed = c.request("tools/list", json!({})).await;
    let tools: Vec<&str> =
        listed.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.contains(&"echo") && tools.contains(&"slow"), "{tools:?}");
    let echoed = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "through"}})).await;
    assert_eq!(echoed.result()["content"][0]["text"], "through", "{:?}", echoed.response);
    // Nothing was written beside the client's file: the task store is in memory.
    let beside: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(beside, [std::ffi::OsString::from("servers.json")]);
}

#[test]
fn serve_mcp_servers_and_config_are_exclusive() {
    let out = std::process::Command::new(bin())
        .args(["serve", "--mcp-servers", "a.json", "--config", "b.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"));
}
