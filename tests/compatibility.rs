//! The compatibility matrix of published servers (issue 24, item 3): every server of
//! `compatibility/servers.rs` behind one `taskgate serve` with the default configuration (one
//! upstream per server), driven by a client of every generation (`compatibility/clients.rs`),
//! each cell run through the gateway and direct. Fails when a step that passes direct fails
//! through the gateway, and when docs/compatibility.md (`compatibility/report.rs`) is not what
//! the run found, with the lines that differ (`UPDATE_DOCS=1` writes it instead).
//!
//! The peers are installed by `scripts/setup-compat` (servers) and `scripts/setup-interop`
//! (clients, the rmcp server), which the test command runs first; a missing peer fails the
//! test. Servers that listen are started once; the cells run side by side, at most
//! `COMPAT_PARALLEL` (default 6) clients at a time.

use crate::common::pace;
use crate::common::proc_tree;

#[path = "compatibility/clients.rs"]
mod clients;
#[path = "compatibility/report.rs"]
mod report;
#[path = "compatibility/servers.rs"]
mod servers;

use clients::{COLUMNS, Kind};
use report::Cell;
use servers::{Launch, Server};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A process the matrix started (a server or the gateway), in its own process group, its
/// output kept; stopped with its tree when dropped.
struct Proc {
    child: Child,
    log: Arc<Mutex<String>>,
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
        let pipes: [Box<dyn Read + Send>; 2] =
            [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
        for pipe in pipes {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut l = log.lock().unwrap();
                    if l.len() < 1 << 20 {
                        l.push_str(&line);
                        l.push('\n');
                    }
                }
            });
        }
        Proc { child, log }
    }

    /// The first line holding `marker`, waited for (30 s at most).
    fn wait_for(&mut self, marker: &str) -> String {
        let line = pace::until(Duration::from_secs(30), || {
            if let Some(line) = self.log.lock().unwrap().lines().find(|l| l.contains(marker)) {
                return Some(line.to_string());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{:?} exited ({status}) before printing {marker:?}:\n{}", self.child, self.log.lock().unwrap());
            }
            None
        });
        line.unwrap_or_else(|| panic!("no {marker:?} within 30 s:\n{}", self.log.lock().unwrap()))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let left = proc_tree::stop_tree(&mut self.child, Duration::from_secs(5));
        if !left.is_empty() && !std::thread::panicking() {
            panic!("processes left behind: {left:?}");
        }
    }
}

/// The port in a `listening <port>` line.
fn port_of(line: &str) -> u16 {
    line.rsplit(' ').next().unwrap().trim().parse().unwrap()
}

/// A legacy HTTP+SSE server-everything 2025.1.14 of its own (it serves one session), and its URL.
fn start_sse() -> (Proc, String) {
    let mut sse = Proc::spawn(
        Command::new("node")
            .arg("--require")
            .arg(servers::compat_dir().join("loopback.cjs"))
            .arg(servers::everything_sse_script()),
    );
    let url = format!("http://127.0.0.1:{}/sse", port_of(&sse.wait_for("listening ")));
    (sse, url)
}

/// The gateway's config: one upstream per server (per column for a server that serves one
/// session, at the URLs `sse_urls`), nothing but what names and starts it (and time to
/// start).
fn gateway_config(servers: &[Server], sse_urls: &[String]) -> String {
    let mut text = String::new();
    for s in servers {
        if let Launch::SseOnePerSession = s.launch {
            for (col, url) in sse_urls.iter().enumerate() {
                text.push_str(&format!("[[upstream]]\nname = {:?}\nurl = {url:?}\n\n", servers::upstream_name(s, col)));
            }
            continue;
        }
        text.push_str(&format!("[[upstream]]\nname = {:?}\n", s.name));
        match &s.launch {
            Launch::Stdio(argv) => {
                text.push_str(&format!("command = {:?}\nargs = {:?}\n", argv[0], &argv[1..]));
                // A Python server's start on the loaded 2-core CI machine has taken more than
                // the default 10 s (mcp-server-git, once); its start is not what is compared.
                text.push_str("connect_timeout = \"30s\"\n");
            }
            Launch::Http(url) => text.push_str(&format!("url = {url:?}\n")),
            Launch::SseOnePerSession => unreachable!(),
        }
        if !s.env.is_empty() {
            let env: Vec<String> = s.env.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
            text.push_str(&format!("env = {{ {} }}\n", env.join(", ")));
        }
        text.push('\n');
    }
    text
}

/// One run to make: a cell (row, column), direct or through the gateway.
struct Job {
    row: usize,
    col: usize,
    direct: bool,
}

/// A finished run: row, column, direct, what the client reported.
type Ran = (usize, usize, bool, clients::Run);

#[test]
fn published_servers_through_the_gateway_pass_what_they_pass_direct() {
    let started = Instant::now();
    let scratch = tempfile::tempdir().unwrap();
    servers::prepare_scratch(scratch.path());
    for alias in ["sdk-2024-11-05", "sdk-2025-03-26", "sdk-2025-06-18", "@modelcontextprotocol/sdk", "eventsource"] {
        let p = servers::interop_dir().join("node_modules").join(alias);
        assert!(p.exists(), "interop client peer missing: {} — run scripts/setup-interop", p.display());
    }
    let py = servers::interop_dir().join(".venv/bin/python");
    assert!(py.exists(), "interop client peer missing: {} — run scripts/setup-interop", py.display());

    // The servers that listen, started once (the one-session SSE server once per column).
    let (sse, sse_urls): (Vec<Proc>, Vec<String>) = COLUMNS.iter().map(|_| start_sse()).unzip();
    let mut rmcp = Proc::spawn(Command::new(servers::rmcp_binary()).args(["--http", "0"]));
    let rmcp_url = format!("http://127.0.0.1:{}/mcp", port_of(&rmcp.wait_for("listening ")));
    let servers = servers::all(scratch.path(), &rmcp_url);

    let config = scratch.path().join("gateway.toml");
    std::fs::write(&config, gateway_config(&servers, &sse_urls)).unwrap();
    let mut gateway = Proc::spawn(Command::new(env!("CARGO_BIN_EXE_taskgate")).env("RUST_LOG", "info").args([
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]));
    let line = gateway.wait_for("listening on http://");
    let addr = line.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().to_string();

    // Every run, the long ones (tasks that take seconds) first.
    let mut jobs = Vec::new();
    for (row, server) in servers.iter().enumerate() {
        for (col, column) in COLUMNS.iter().enumerate() {
            for direct in [false, true] {
                if direct && clients::direct_target(server, column.kind).is_err() {
                    continue;
                }
                jobs.push(Job { row, col, direct });
            }
        }
    }
    jobs.sort_by_key(|j| (servers[j.row].tasks == servers::Tasks::None, j.row, j.col, j.direct));
    let jobs = Arc::new(Mutex::new(jobs));
    let results: Arc<Mutex<Vec<Ran>>> = Arc::default();
    let parallel: usize = std::env::var("COMPAT_PARALLEL").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    std::thread::scope(|scope| {
        for _ in 0..parallel {
            scope.spawn(|| {
                loop {
                    let Some(job) = jobs.lock().unwrap().pop() else { break };
                    let server = &servers[job.row];
                    let kind: Kind = COLUMNS[job.col].kind;
                    let mut own_sse = None;
                    let target = match clients::direct_target(server, kind) {
                        Ok(clients::Target::Sse(url)) if job.direct && url.is_empty() => {
                            let (proc, url) = start_sse();
                            own_sse = Some(proc);
                            clients::Target::Sse(url)
                        }
                        Ok(target) if job.direct => target,
                        _ => clients::gateway_target(&servers::upstream_name(server, job.col), kind, &addr),
                    };
                    // A hosted task is the gateway's: direct, a plain answer is no hosted one.
                    let task = clients::task_kind(server, kind)
                        .ok()
                        .map(|k| if job.direct && k == "hosted" { "hosted, direct" } else { k })
                        .map(|k| (k, &server.task));
                    let run = clients::run(server, kind, &target, task);
                    drop(own_sse);
                    results.lock().unwrap().push((job.row, job.col, job.direct, run));
                }
            });
        }
    });

    let results = std::mem::take(&mut *results.lock().unwrap());
    let find = |row: usize, col: usize, direct: bool| {
        results.iter().find(|(r, c, d, _)| (*r, *c, *d) == (row, col, direct)).map(|(.., run)| run.clone())
    };
    let cells: Vec<Vec<Cell>> = (0..servers.len())
        .map(|row| {
            (0..COLUMNS.len())
                .map(|col| {
                    let kind = COLUMNS[col].kind;
                    Cell {
                        gateway: find(row, col, false).expect("every gateway cell ran"),
                        direct: clients::direct_target(&servers[row], kind)
                            .map(|_| find(row, col, true).expect("every direct cell ran")),
                        task: clients::task_kind(&servers[row], kind),
                    }
                })
                .collect()
        })
        .collect();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compatibility.md");
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    let doc = report::render(&servers, &cells) + &report::kept(&written);
    eprintln!("compatibility matrix: {} runs in {:.1} s", results.len(), started.elapsed().as_secs_f64());
    let differs = (doc != written).then(|| report::diff(&written, &doc));
    if differs.is_some() && std::env::var_os("UPDATE_DOCS").is_some() {
        // Written whole and renamed into place: tests/docs.rs and tests/conformance.rs may be
        // reading it meanwhile.
        let part = path.with_extension("md.part");
        std::fs::write(&part, &doc).unwrap();
        std::fs::rename(&part, &path).unwrap();
        eprintln!("docs/compatibility.md: rewritten");
    }

    let mut lost = Vec::new();
    for (server, row) in servers.iter().zip(&cells) {
        for (col, cell) in COLUMNS.iter().zip(row) {
            let steps = cell.regressions();
            if !steps.is_empty() {
                let why = cell.gateway.first_failure().map(|s| format!("{}: {}", s.step, s.detail)).unwrap_or_default();
                lost.push(format!("{} × {}: {} ({why})", server.name, col.title, steps.join(", ")));
            }
        }
    }
    if !lost.is_empty() {
        // What the gateway found out about its upstreams, to tell why.
        let log = gateway.log.lock().unwrap().clone();
        let found: Vec<&str> = log.lines().filter(|l| l.contains("probe") || l.contains("speaks")).take(60).collect();
        eprintln!("the gateway's era detection:\n{}", found.join("\n"));
    }
    drop((gateway, sse, rmcp));
    assert!(lost.is_empty(), "cells that pass direct fail through the gateway:\n{}", lost.join("\n"));
    if let Some(diff) = differs.filter(|_| std::env::var_os("UPDATE_DOCS").is_none()) {
        panic!(
            "docs/compatibility.md is not what this run found (- the file, + this run):\n{diff}\n\
             If the change is meant, write it with: UPDATE_DOCS=1 cargo nextest run --test all -E 'test(/compatibility::/)'"
        );
    }
}
