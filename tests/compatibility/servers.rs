//! The rows of the compatibility matrix: published servers at the versions pinned in
//! tests/compat (npm, PyPI) and tests/interop (the rmcp crate), how each is started, which
//! tool each cell lists and calls, and which task a cell runs. Also the servers left out.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// How a server runs: a command the client (or the gateway) starts over stdio, or a URL of a
/// process the matrix started once.
#[derive(Clone)]
pub enum Launch {
    Stdio(Vec<String>),
    /// server-everything 2025.1.14's legacy HTTP+SSE server, which serves one session in its
    /// life (it exits when that session closes): the matrix starts one per session.
    SseOnePerSession,
    /// A Streamable HTTP endpoint.
    Http(String),
}

/// What the server does with tasks.
#[derive(Clone, Copy, PartialEq)]
pub enum Tasks {
    None,
    /// 2025-11-25 core tasks, with a tool it requires as a task.
    Core,
    /// The 2026-07-28 tasks extension, with a tool it runs as a task.
    Extension,
}

/// One row.
#[derive(Clone)]
pub struct Server {
    /// The gateway upstream's name.
    pub name: &'static str,
    pub package: &'static str,
    pub sdk: &'static str,
    pub protocol: &'static str,
    pub transport: &'static str,
    pub launch: Launch,
    /// Environment for the server process (the gateway's `env`, the client's own for direct).
    pub env: Vec<(&'static str, String)>,
    pub tasks: Tasks,
    /// A tool `tools/list` must show, and a cheap call: name, arguments, text its result holds.
    pub list: &'static str,
    pub call: Value,
    /// The tool run as a task: hosted (`Tasks::None`), relayed or bridged otherwise.
    pub task: Value,
}

/// The upstream's name in the gateway's config for column `col`: one per column for a server
/// that serves one session in its life, else the server's own.
pub fn upstream_name(server: &Server, col: usize) -> String {
    match server.launch {
        Launch::SseOnePerSession => format!("{}-{col}", server.name),
        _ => server.name.to_string(),
    }
}

/// Servers that cannot run here, and why (they go in the doc as they are).
pub const LEFT_OUT: &[(&str, &str)] = &[
    (
        "npm @modelcontextprotocol/server-github, -gitlab, -slack, -brave-search, -google-maps, -gdrive, -everart, -aws-kb-retrieval",
        "need the internet and credentials",
    ),
    ("npm @modelcontextprotocol/server-postgres, -redis", "need a database server and its credentials"),
    ("npm @modelcontextprotocol/server-puppeteer", "downloads a browser build at install time"),
    ("PyPI mcp-server-fetch", "fetches web pages: needs the internet"),
    (
        "a published Rust MCP server binary crate (`cargo install`)",
        "none was evaluated in time; the Rust row is the rmcp task server of tests/interop, built from the rmcp crate on crates.io",
    ),
];

fn need(path: PathBuf) -> String {
    assert!(
        path.exists(),
        "compatibility peer missing: {} — run scripts/setup-compat and scripts/setup-interop (scripts/test does)",
        path.display()
    );
    path.to_str().unwrap().to_string()
}

pub fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat")
}

pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

fn npm_bin(package: &str, file: &str) -> String {
    need(compat_dir().join("node_modules").join(package).join(file))
}

fn call(name: &str, arguments: Value, expect: &str) -> Value {
    json!({"name": name, "arguments": arguments, "expect": expect})
}

pub fn rmcp_binary() -> String {
    need(interop_dir().join("rmcp_server/target/release/taskgate-interop-rmcp-server"))
}

pub fn everything_sse_script() -> String {
    npm_bin("everything-2025.1.14", "dist/sse.js")
}

/// Every row; `scratch` is a folder for the servers' files (a git repository, a file to read,
/// a memory file), `rmcp_url` the server the matrix started once.
pub fn all(scratch: &Path, rmcp_url: &str) -> Vec<Server> {
    let node = |package: &str, file: &str, extra: &[&str]| {
        let mut v = vec!["node".to_string(), npm_bin(package, file)];
        v.extend(extra.iter().map(|s| s.to_string()));
        Launch::Stdio(v)
    };
    let venv = |bin: &str, extra: &[&str]| {
        let mut v = vec![need(compat_dir().join(".venv/bin").join(bin))];
        v.extend(extra.iter().map(|s| s.to_string()));
        Launch::Stdio(v)
    };
    let files = scratch.join("files");
    let repo = scratch.join("repo");
    let file = files.join("hello.txt");
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let echo_old = call("echo", json!({"message": "compat"}), "Echo: compat");
    let long_old = call("longRunningOperation", json!({"duration": 1, "steps": 2}), "Long running operation completed");
    let research = call("simulate-research-query", json!({"topic": "otters"}), "# Research Report: otters");
    let slow = call("slow", json!({"seconds": 1, "steps": 2}), "slow done after 2 steps");
    let read = call("read_file", json!({"path": s(&file)}), "compat file");
    let graph = call("read_graph", json!({}), "entities");
    let think = call(
        "sequentialthinking",
        json!({"thought": "compat", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1}),
        "thoughtNumber",
    );
    let time = call(
        "convert_time",
        json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        "T21:00:00+09:00",
    );
    let git = call("git_status", json!({"repo_path": s(&repo)}), "On branch");
    let everything_old = |transport, launch| Server {
        name: if transport == "stdio" { "everything-old" } else { "everything-old-sse" },
        package: "npm @modelcontextprotocol/server-everything@2025.1.14",
        sdk: "TypeScript SDK 1.0.1",
        protocol: "2024-11-05",
        transport,
        launch,
        env: vec![],
        tasks: Tasks::None,
        list: "longRunningOperation",
        call: echo_old.clone(),
        task: long_old.clone(),
    };
    vec![
        everything_old("stdio", node("everything-2025.1.14", "dist/index.js", &[])),
        everything_old("legacy HTTP+SSE", Launch::SseOnePerSession),
        Server {
            name: "filesystem",
            package: "npm @modelcontextprotocol/server-filesystem@2025.7.1",
            sdk: "TypeScript SDK 1.12.3",
            protocol: "2025-03-26",
            transport: "stdio",
            launch: node("@modelcontextprotocol/server-filesystem", "dist/index.js", &[&s(&files)]),
            env: vec![],
            tasks: Tasks::None,
            list: "read_file",
            call: read.clone(),
            task: read,
        },
        Server {
            name: "memory",
            package: "npm @modelcontextprotocol/server-memory@2025.11.25",
            sdk: "TypeScript SDK 1.19.1",
            protocol: "2025-06-18",
            transport: "stdio",
            launch: node("@modelcontextprotocol/server-memory", "dist/index.js", &[]),
            env: vec![("MEMORY_FILE_PATH", s(&scratch.join("memory.json")))],
            tasks: Tasks::None,
            list: "read_graph",
            call: graph.clone(),
            task: graph,
        },
        Server {
            name: "everything",
            package: "npm @modelcontextprotocol/server-everything@2026.8.31",
            sdk: "TypeScript SDK 1.32.2",
            protocol: "2025-11-25 (tasks)",
            transport: "stdio",
            launch: node("@modelcontextprotocol/server-everything", "dist/index.js", &["stdio"]),
            env: vec![],
            tasks: Tasks::Core,
            list: "echo",
            call: call("echo", json!({"message": "compat"}), "Echo: compat"),
            task: research,
        },
        Server {
            name: "thinking",
            package: "npm @modelcontextprotocol/server-sequential-thinking@2026.8.31",
            sdk: "TypeScript SDK 1.32.2",
            protocol: "2025-11-25",
            transport: "stdio",
            launch: node("@modelcontextprotocol/server-sequential-thinking", "dist/index.js", &[]),
            env: vec![],
            tasks: Tasks::None,
            list: "sequentialthinking",
            call: think.clone(),
            task: think,
        },
        Server {
            name: "time",
            package: "PyPI mcp-server-time==2026.10.19",
            sdk: "Python SDK (mcp) 2.3.0",
            protocol: "2026-07-28 and 2025-11-25",
            transport: "stdio",
            launch: venv("mcp-server-time", &[]),
            env: vec![],
            tasks: Tasks::None,
            list: "get_current_time",
            call: time.clone(),
            task: time,
        },
        Server {
            name: "git",
            package: "PyPI mcp-server-git==2026.10.19",
            sdk: "Python SDK (mcp) 2.3.0",
            protocol: "2026-07-28 and 2025-11-25",
            transport: "stdio",
            launch: venv("mcp-server-git", &["--repository", &s(&repo)]),
            env: vec![],
            tasks: Tasks::None,
            list: "git_status",
            call: git.clone(),
            task: git,
        },
        Server {
            name: "rmcp",
            package: "crates.io rmcp =3.11.0 (tests/interop/rmcp_server)",
            sdk: "Rust SDK (rmcp) 3.11.0",
            protocol: "2026-07-28 (tasks extension) and 2024-11-05 … 2025-11-25",
            transport: "stdio",
            launch: Launch::Stdio(vec![rmcp_binary()]),
            env: vec![],
            tasks: Tasks::Extension,
            list: "slow",
            call: call("echo", json!({"text": "compat"}), "compat"),
            task: slow.clone(),
        },
        Server {
            name: "rmcp-http",
            package: "crates.io rmcp =3.11.0 (tests/interop/rmcp_server)",
            sdk: "Rust SDK (rmcp) 3.11.0",
            protocol: "2026-07-28 (tasks extension) and 2024-11-05 … 2025-11-25",
            transport: "Streamable HTTP",
            launch: Launch::Http(rmcp_url.to_string()),
            env: vec![],
            tasks: Tasks::Extension,
            list: "slow",
            call: call("echo", json!({"text": "compat"}), "compat"),
            task: slow,
        },
    ]
}

/// The files the servers read: a folder with one file, an empty git repository with one
/// commit, under `scratch`.
pub fn prepare_scratch(scratch: &Path) {
    let files = scratch.join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("hello.txt"), "compat file\n").unwrap();
    let repo = scratch.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=compat", "-c", "user.email=compat@127.0.0.1", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(&repo)
            .status()
            .expect("git is needed by mcp-server-git's row")
            .success();
        assert!(ok, "git {args:?} failed");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("README"), "compat\n").unwrap();
    git(&["add", "README"]);
    git(&["commit", "-q", "-m", "compat"]);
}
