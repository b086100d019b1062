//! Tests of `import`: each kind of `mcpServers` entry, names mapped or refused, warnings, errors.

use super::*;
use crate::config::{HttpMode, Transport};

const FILE: &str = r#"{
  "mcpServers": {
    "files": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/a \"quoted\" dir"],
      "env": {"API_KEY": "s3cret", "odd key": "line\nbreak"},
      "cwd": "/srv/files"
    },
    "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer tok"}},
    "legacy": {"type": "sse", "url": "http://127.0.0.1:9000/sse"},
    "windsurf": {"serverUrl": "https://w.example.com/mcp", "type": "http"},
    "local tools": {"type": "stdio", "command": "/usr/bin/tool", "autoApprove": ["x"]}
  },
  "globalShortcut": "Ctrl+Space"
}"#;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn the_printed_toml_loads_into_the_same_upstreams_as_the_direct_translation() {
    let m = McpServers::parse(FILE).unwrap();
    let toml = m.to_toml("claude.json");
    let loaded = Config::parse(&toml, &no_env).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let direct = m.config(&no_env).unwrap();
    assert_eq!(format!("{:?}", loaded.upstreams), format!("{:?}", direct.upstreams), "{toml}");
    assert_eq!(loaded.server.listen, ServerConfig::default().listen);
    assert_eq!(direct.upstreams.len(), 5);

    let up = |n: &str| direct.upstream(n).unwrap_or_else(|| panic!("{n} in {toml}"));
    let Transport::Stdio { command, args, env, cwd } = &up("files").transport else { panic!() };
    assert_eq!(command, "npx");
    assert_eq!(cwd.as_deref(), Some(std::path::Path::new("/srv/files")));
    assert_eq!(args.last().unwrap().value, "/tmp/a \"quoted\" dir");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.value.as_str())).collect();
    assert_eq!(env, [("API_KEY", "s3cret"), ("odd key", "line\nbreak")]);
    let Transport::Http { url, headers, mode } = &up("remote").transport else { panic!() };
    assert_eq!((url.value.as_str(), *mode), ("https://mcp.example.com/mcp", HttpMode::Auto));
    assert_eq!((headers[0].0.as_str(), headers[0].1.value.as_str()), ("Authorization", "Bearer tok"));
    let Transport::Http { mode, .. } = &up("legacy").transport else { panic!() };
    assert_eq!(*mode, HttpMode::Sse);
    let Transport::Http { url, mode, .. } = &up("windsurf").transport else { panic!() };
    assert_eq!((url.value.as_str(), *mode), ("https://w.example.com/mcp", HttpMode::StreamableHttp));
    assert!(matches!(up("local-tools").transport, Transport::Stdio { .. }), "a space maps to '-'");
    assert!(toml.contains("# \"local tools\" in the mcpServers file"), "{toml}");
    assert!(toml.contains("may hold secrets"), "{toml}");
}

#[test]
fn unknown_fields_disabled_entries_and_mapped_names_are_warned_about() {
    let m = McpServers::parse(FILE).unwrap();
    let w = m.warnings.join("\n");
    assert!(w.contains("mcpServers.\"local tools\".autoApprove: not a field taskgate reads"), "{w}");
    assert!(w.contains("served as \"local-tools\""), "{w}");
    assert!(!w.contains("globalShortcut"), "other top-level settings of the client are none of ours: {w}");
    let off = r#"{"mcpServers": {"a": {"command": "x", "disabled": true}, "b": {"command": "y", "disabled": false}}}"#;
    let m = McpServers::parse(off).unwrap();
    assert_eq!(m.servers.len(), 1);
    assert_eq!(m.servers[0].name, "b");
    assert!(m.warnings.iter().any(|w| w == "mcpServers.\"a\": disabled, skipped"), "{:?}", m.warnings);
}

#[test]
fn vs_code_servers_and_env_references_are_read() {
    let m =
        McpServers::parse(r#"{"servers": {"gh": {"url": "https://h/mcp", "headers": {"X-Key": "${KEY}"}}}}"#).unwrap();
    let c = m.config(&|k| (k == "KEY").then(|| "v1".to_string())).unwrap();
    let Transport::Http { headers, .. } = &c.upstreams[0].transport else { panic!() };
    assert_eq!(headers[0].1.value, "v1");
    let e = m.config(&no_env).unwrap_err();
    assert!(e.0.contains("KEY is not set"), "{e}");
}

#[test]
fn bad_json_says_where() {
    let e = McpServers::parse("{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",}\n}}").unwrap_err();
    assert_eq!(e.0, "not valid JSON at line 2, column 24: trailing comma");
}

#[test]
fn bad_entries_are_refused_naming_them() {
    let cases = [
        (r#"{"mcpServers": {"a": {"args": ["x"]}}}"#, "mcpServers.\"a\": neither \"command\""),
        (r#"{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}"#, "mcpServers.\"a\": set \"command\""),
        (r#"{"mcpServers": {"***": {"command": "x"}}}"#, "mcpServers.\"***\": not usable as an upstream name"),
        (r#"{"mcpServers": {"": {"command": "x"}}}"#, "mcpServers.\"\": not usable"),
        (r#"{"mcpServers": {"a b": {"command": "x"}, "a-b": {"command": "y"}}}"#, "maps to \"a-b\""),
        (r#"{"mcpServers": {"a": {"command": "x", "args": "-y"}}}"#, "mcpServers.\"a\".args: must be an array"),
        (r#"{"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}}"#, "mcpServers.\"a\".env.K: must be a string"),
        (r#"{"mcpServers": {"a": {"url": "ftp://h/"}}}"#, "mcpServers.\"a\": upstream \"a\".url"),
        (r#"{"mcpServers": {"a": {"url": "http://h/", "type": "ws"}}}"#, "mcpServers.\"a\".type"),
        (r#"{"mcpServers": {"a": {"url": "http://h/", "type": "stdio"}}}"#, "\"stdio\" needs a \"command\""),
        (r#"{"mcpServers": {"a": {"command": "x", "type": "sse"}}}"#, "\"sse\" needs a \"url\""),
        (r#"{"mcpServers": {"a": {"url": "http://h/", "env": {}}}}"#, "mcpServers.\"a\".env: only applies"),
        (r#"{"mcpServers": {"a": {"command": "x", "headers": {}}}}"#, "mcpServers.\"a\".headers: only applies"),
        (r#"{"mcpServers": {"a": {"url": "http://h/", "headers": {"a b": "v"}}}}"#, "not a valid header name"),
        (r#"{"mcpServers": {}}"#, "holds no server"),
        (r#"{"other": {}}"#, "no \"mcpServers\""),
        (r#"[1]"#, "top level must be a JSON object"),
    ];
    for (text, want) in cases {
        let e = McpServers::parse(text).err().unwrap_or_else(|| panic!("accepted: {text}"));
        assert!(e.0.contains(want), "{text}: {:?} should say {want:?}", e.0);
    }
}
