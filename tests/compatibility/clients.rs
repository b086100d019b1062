//! The columns of the compatibility matrix (one client per generation) and how one cell is
//! run: the cell scripts of tests/compat (`ts_cell.mjs`, `py_cell.py`, `raw_cell.py`) as
//! child processes in their own process groups, stopped with their trees, each printing one
//! `CELL {...}` line.

use super::proc_tree;
use super::servers::{Launch, Server, Tasks, compat_dir, interop_dir};
use serde_json::{Value, json};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long one cell's client may run.
const CELL_TIMEOUT: Duration = Duration::from_secs(90);

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// A TypeScript SDK release (the npm alias in tests/interop/node_modules).
    Ts(&'static str),
    PyLegacy,
    PyAuto,
    Raw,
}

#[derive(Clone, Copy)]
pub struct Column {
    pub title: &'static str,
    pub kind: Kind,
}

pub const COLUMNS: &[Column] = &[
    Column { title: "TS SDK 1.0.4 (2024-11-05)", kind: Kind::Ts("sdk-2024-11-05") },
    Column { title: "TS SDK 1.12.3 (2025-03-26)", kind: Kind::Ts("sdk-2025-03-26") },
    Column { title: "TS SDK 1.22.0 (2025-06-18)", kind: Kind::Ts("sdk-2025-06-18") },
    Column { title: "TS SDK 1.32.2 (2025-11-25, tasks)", kind: Kind::Ts("@modelcontextprotocol/sdk") },
    Column { title: "Python SDK 2.3.0 legacy (2025-11-25)", kind: Kind::PyLegacy },
    Column { title: "Python SDK 2.3.0 auto (2026-07-28)", kind: Kind::PyAuto },
    Column { title: "raw 2026-07-28 (tasks extension)", kind: Kind::Raw },
];

impl Kind {
    /// Whether the client can make a task: 2025-11-25 core tasks (TS 1.32.2) or the tasks
    /// extension (the raw client). The Python SDK's client has no task API.
    fn makes_tasks(self) -> bool {
        matches!(self, Kind::Ts("@modelcontextprotocol/sdk") | Kind::Raw)
    }

    fn is_python(self) -> bool {
        matches!(self, Kind::PyLegacy | Kind::PyAuto)
    }
}

/// The task a cell runs: `hosted` (the server has none, the client makes one), `relayed` (both
/// have tasks), `bridged` (the server runs the tool as a task, the client calls it plainly), or
/// none, with the reason.
pub fn task_kind(server: &Server, kind: Kind) -> Result<&'static str, &'static str> {
    match (server.tasks, kind.makes_tasks()) {
        (Tasks::None, true) => Ok("hosted"),
        (Tasks::None, false) if kind.is_python() => Err("no task API in the client"),
        (Tasks::None, false) => Err("neither side has tasks"),
        (_, true) => Ok("relayed"),
        (_, false) => Ok("bridged"),
    }
}

/// What a cell's client connects to.
pub enum Target {
    Stdio(Vec<String>),
    Sse(String),
    Http(String),
}

/// The target of a direct cell (the client straight to the server), if the transports meet.
pub fn direct_target(server: &Server, kind: Kind) -> Result<Target, &'static str> {
    match (&server.launch, kind) {
        (Launch::Stdio(argv), _) => Ok(Target::Stdio(argv.clone())),
        // The URL is the one of the server started for this session.
        (Launch::SseOnePerSession, Kind::Ts(_)) => Ok(Target::Sse(String::new())),
        (Launch::SseOnePerSession, _) => Err("no HTTP+SSE transport in the client"),
        (Launch::Http(_), Kind::Ts("sdk-2024-11-05")) => Err("no Streamable HTTP in the client"),
        (Launch::Http(url), _) => Ok(Target::Http(url.clone())),
    }
}

/// The target through the gateway at `addr`: its Streamable HTTP endpoint for the upstream, or
/// its legacy HTTP+SSE endpoint for a client that has only that.
pub fn gateway_target(upstream: &str, kind: Kind, addr: &str) -> Target {
    match kind {
        Kind::Ts("sdk-2024-11-05") => Target::Sse(format!("http://{addr}/sse/{upstream}")),
        _ => Target::Http(format!("http://{addr}/mcp/{upstream}")),
    }
}

/// One step of a run, as the cell script reported it.
#[derive(Clone, Debug)]
pub struct Step {
    pub step: String,
    pub ok: bool,
    pub detail: String,
}

/// What one run of a cell's client reported.
#[derive(Clone, Debug)]
pub struct Run {
    pub steps: Vec<Step>,
}

impl Run {
    pub fn ok(&self, step: &str) -> bool {
        self.steps.iter().any(|s| s.step == step && s.ok)
    }

    pub fn first_failure(&self) -> Option<&Step> {
        self.steps.iter().find(|s| !s.ok)
    }
}

/// Runs one cell's client against `target`; `task` is the task step's spec, if any.
pub fn run(server: &Server, kind: Kind, target: &Target, task: Option<(&str, &Value)>) -> Run {
    let target_json = match target {
        Target::Stdio(argv) => json!({"stdio": argv}),
        Target::Sse(url) => json!({"sse": url}),
        Target::Http(url) => json!({"http": url}),
    };
    let mut task_json = Value::Null;
    if let Some((k, spec)) = task {
        task_json = spec.clone();
        task_json["kind"] = k.into();
    }
    let cell = json!({"target": target_json, "list": server.list, "call": server.call, "task": task_json}).to_string();
    let interop = interop_dir();
    let mut cmd = match kind {
        Kind::Ts(alias) => {
            let mut c = Command::new("node");
            c.arg(compat_dir().join("ts_cell.mjs")).arg(interop.join("node_modules").join(alias)).arg(&cell);
            c
        }
        Kind::PyLegacy | Kind::PyAuto => {
            let mut c = Command::new(interop.join(".venv/bin/python"));
            let mode = if kind == Kind::PyAuto { "auto" } else { "legacy" };
            c.arg(compat_dir().join("py_cell.py")).arg(mode).arg(&cell);
            c
        }
        Kind::Raw => {
            let mut c = Command::new("python3");
            c.arg(compat_dir().join("raw_cell.py")).arg(&cell);
            c
        }
    };
    for (k, v) in &server.env {
        cmd.env(k, v);
    }
    cmd.env("COMPAT_TIMEOUT_MS", (CELL_TIMEOUT.as_millis() - 10_000).to_string());
    let mut child = proc_tree::own_group(&mut cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    super::pace::until(CELL_TIMEOUT, || child.try_wait().unwrap());
    let left = proc_tree::stop_tree(&mut child, Duration::from_secs(3));
    let out = out.join().unwrap();
    let err = err.join().unwrap();
    assert!(left.is_empty(), "processes left behind by a cell's client: {left:?}");
    let Some(line) = out.lines().find_map(|l| l.strip_prefix("CELL ")) else {
        let tail: String = err.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
        return Run { steps: vec![Step { step: "client".into(), ok: false, detail: format!("no result: {tail}") }] };
    };
    let v: Value = serde_json::from_str(line).unwrap();
    let steps = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Step {
            step: s["step"].as_str().unwrap().to_string(),
            ok: s["ok"].as_bool().unwrap(),
            detail: s["detail"].as_str().unwrap_or("").to_string(),
        })
        .collect();
    Run { steps }
}
