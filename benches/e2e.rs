//! End-to-end benchmark: the same workload on 127.0.0.1, direct and through taskgate, in one
//! run, with both printed side by side.
//!
//! ```sh
//! cargo bench --bench e2e                 # full run (a few minutes)
//! cargo bench --bench e2e -- --quick      # smoke run (well under a minute)
//! cargo bench --bench e2e -- http_echo    # only the cases whose `name/c` contains a filter
//! cargo bench --bench e2e -- http_echo/32 # one case
//! cargo bench --bench e2e -- --warmup=1 --measure=30   # other durations (seconds)
//! ```
//!
//! Every server is a separate process of the optimized `taskgate` binary that cargo builds
//! for this bench (`CARGO_BIN_EXE_taskgate`); each run starts its own processes and stops
//! them by pid. The load generator is this process: a single-threaded tokio runtime holding
//! `c` client sessions, each initialized once and then calling a tool in a closed loop.
//!
//! Figures per case and side: requests/s over the measured window (after a warm-up),
//! p50/p99 latency from an HDR histogram, CPU time (user+sys from `/proc/<pid>/stat`, over the
//! measured window) per request of every process involved, and peak RSS (`VmHWM`). The last
//! lines printed are one machine-readable line per case:
//!
//! `e2e <case> c=<n> direct_rps=<x> gateway_rps=<y> ratio=<y/x> p50_added_us=<a> p99_added_us=<b> cpu_us_per_req=<c> rss_mb=<m>`
//!
//! where `cpu_us_per_req` and `rss_mb` are the gateway process's (MiB of VmHWM), and `-`
//! stands for a figure a case has no baseline for.
//!
//! Everything shares the machine's cores (2 on the project's machines): the load generator,
//! the demo server and the gateway. Each side first waits (bounded) for the machine to be
//! idle, and reports the CPU that anything else used during its window (`/proc/stat` minus
//! the watched processes); a run marked NOISY competed with another workload.

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The optimized binary cargo built for this bench target (profile `bench`).
const TASKGATE: &str = env!("CARGO_BIN_EXE_taskgate");
const PROTOCOL_VERSION: &str = "2025-06-18";
/// The version with (hosted) tasks: the tasks cases' sessions negotiate it.
const TASKS_VERSION: &str = "2025-11-25";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const ECHO_TEXT: &str = "hello from the taskgate load generator";
/// Bound on any single request, read or process start: a run that exceeds it fails loudly.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The echo text of the `tasks` case (one task = one create + one `tasks/result`).
const TASK_TEXT: &str = "x";
/// Completed tasks the `tasks_retained` case fills the store with, and the length of each
/// one's echo text. The issue's workload is results of 1 KiB: the demo's echo result carries
/// the text twice (as `content[0].text` and in `structuredContent`) around ~220 bytes of
/// JSON, so 400 characters make a stored result of ~1 KiB; the printed size says exactly.
const RETAINED_TASKS: usize = 10_000;
const RETAINED_TEXT_LEN: usize = 400;
/// The issue's target for `tasks_retained`: RSS above the idle gateway, in MB (10^6 bytes).
const RETAINED_TARGET_MB: f64 = 40.0;
/// Plain (task-less) echo rounds per session before the fill of `tasks_retained`, each one a
/// call echoing the long text and two echoing a short one, like the three messages a task
/// leaves in the session's SSE replay buffer (its two responses and a status notification):
/// more than `event_buffer` (512) events, so the buffers are at their bound before the fill.
const RETAINED_WARMUP_ROUNDS: usize = 180;

// ---------------------------------------------------------------------------------------
// What to run
// ---------------------------------------------------------------------------------------

/// What a case runs; each case prints one line of the final report.
#[derive(Clone, Copy)]
enum Workload {
    /// `tools/call echo` over Streamable HTTP (JSON responses), `c` sessions, one keep-alive
    /// connection each. Direct: the demo server itself (`taskgate demo-server --listen`).
    HttpEcho,
    /// `tools/call echo` over stdio; `c` requests pipelined on the one pipe (the stdio
    /// transport has exactly one client session). Direct: `taskgate demo-server` on stdio;
    /// gateway: `taskgate stdio` in front of it.
    StdioEcho,
    /// Progress from the demo `slow` tool with many steps (`duration_ms` 0), over HTTP (SSE),
    /// one session calling it in a closed loop. The rate is progress steps per second: how far
    /// the reported progress value advanced, i.e. upstream notifications absorbed, whether each
    /// reached the client or was coalesced into a later one (servers forward at most one per
    /// `progress_min_interval`); the notifications actually delivered are printed beside it,
    /// and every call must end with its final value. Direct: the demo server itself
    /// (`demo-server --listen`, whose session layer coalesces too); gateway: `taskgate serve`
    /// in front of the demo on stdio, which hands the gateway every one of its notifications.
    Progress,
    /// Hosted tasks, gateway only (the demo has no tasks, so there is no direct baseline):
    /// `taskgate serve` with the in-process demo (`builtin = "demo"`), `c` sessions that
    /// negotiate 2025-11-25, each in a closed loop of `tools/call echo` with `task` (answered
    /// at once with `CreateTaskResult`, status `working`) then `tasks/result` for that task
    /// (blocks until it ends; must return the echo). One task = that request pair; the rate is
    /// tasks/s, the latency one whole pair, the CPU the gateway's per task. Each session also
    /// holds a GET stream open and drains it, as SDK clients do: the gateway sends
    /// `notifications/tasks/status` there. Short `max_ttl` and a roomy store: tasks expire
    /// (the sweeper's work is part of the cost) and none is ever evicted or refused.
    Tasks,
    /// Hosted tasks retained: the same sessions and loop, a fixed number of times
    /// ([`RETAINED_TASKS`] in all, echo texts of [`RETAINED_TEXT_LEN`] characters, every task
    /// fetched with `tasks/result`, so completed), in a store that keeps them all (long ttl,
    /// `max_tasks` and `max_tasks_per_owner` large enough). `rss_mb` is the gateway's VmRSS
    /// after the fill minus its idle VmRSS (after initialize, see `Run::idle_rss_kb`);
    /// `gateway_rps` is tasks created (and fetched) per second during the fill. Afterwards
    /// every task must still answer `tasks/get` with `completed` and each session's first
    /// task its result: the retention is real. Between the idle reading and the fill, the
    /// sessions make plain echo calls of the same sizes ([`RETAINED_WARMUP_ROUNDS`]): the
    /// RSS read then, still without a task, is printed too, separating what every busy
    /// session holds anyway (its bounded SSE replay buffer keeps responses too) from what the
    /// retained tasks cost.
    TasksRetained,
}

struct Case {
    name: &'static str,
    c: usize,
    workload: Workload,
}

const CASES: &[Case] = &[
    Case { name: "http_echo", c: 1, workload: Workload::HttpEcho },
    Case { name: "http_echo", c: 32, workload: Workload::HttpEcho },
    Case { name: "stdio_echo", c: 1, workload: Workload::StdioEcho },
    Case { name: "stdio_echo", c: 32, workload: Workload::StdioEcho },
    Case { name: "progress", c: 1, workload: Workload::Progress },
    Case { name: "tasks", c: 1, workload: Workload::Tasks },
    Case { name: "tasks", c: 32, workload: Workload::Tasks },
    Case { name: "tasks_retained", c: 32, workload: Workload::TasksRetained },
];

#[derive(Clone, Copy)]
struct Plan {
    warmup: Duration,
    measure: Duration,
    /// Steps of one `slow` call in the progress case (`duration_ms` 0: as fast as it can).
    /// (The demo on stdio no longer drops what its stdout queue cannot hold: it waits for the
    /// reader, so any number of steps arrives.)
    progress_steps: u64,
    /// How long each side may wait for the rest of the machine to go idle before it starts,
    /// and how long all sides together may (so that the run's duration stays bounded).
    quiet_wait: Duration,
    quiet_budget: Duration,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            warmup: Duration::from_secs(3),
            measure: Duration::from_secs(20),
            progress_steps: 1_000,
            quiet_wait: Duration::from_secs(15),
            quiet_budget: Duration::from_secs(90),
        }
    }

    fn quick() -> Plan {
        Plan {
            warmup: Duration::from_millis(500),
            measure: Duration::from_secs(2),
            progress_steps: 1_000,
            quiet_wait: Duration::from_secs(2),
            quiet_budget: Duration::from_secs(10),
        }
    }
}

fn main() {
    let mut quick = false;
    let mut filters = Vec::new();
    let mut bench_mode = false;
    let (mut warmup, mut measure) = (None, None);
    let secs = |v: &str| Duration::from_secs_f64(v.parse::<f64>().expect("--warmup=/--measure= take seconds"));
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => quick = true,
            // `cargo bench` passes --bench; `cargo test --benches` does not: then a smoke run.
            "--bench" => bench_mode = true,
            s if s.starts_with("--warmup=") => warmup = Some(secs(&s["--warmup=".len()..])),
            s if s.starts_with("--measure=") => measure = Some(secs(&s["--measure=".len()..])),
            s if s.starts_with("--") => {}
            s => filters.push(s.to_string()),
        }
    }
    let quick = quick || !bench_mode;
    let mut plan = if quick { Plan::quick() } else { Plan::full() };
    plan.warmup = warmup.unwrap_or(plan.warmup);
    plan.measure = measure.unwrap_or(plan.measure);
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("a temp dir");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");

    println!("taskgate e2e benchmark ({})", if quick { "quick" } else { "full" });
    println!("  binary: {TASKGATE}");
    println!(
        "  cores: {}, clock ticks/s: {}, warm-up {:?}, measured {:?} per side",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        clock_ticks(),
        plan.warmup,
        plan.measure
    );
    println!("  load generator: this process, one thread; cpu = user+sys from /proc/<pid>/stat over the window");
    println!();

    let mut lines = Vec::new();
    let mut failed = false;
    let selected = |c: &&Case| {
        let id = format!("{}/{}", c.name, c.c);
        filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str()))
    };
    for case in CASES.iter().filter(selected) {
        println!("{} c={}", case.name, case.c);
        match rt.block_on(run_case(case, plan, tmp.path())) {
            Ok(line) => lines.push(line),
            Err(e) => {
                failed = true;
                println!("  FAILED: {e}");
                dump_logs(tmp.path());
            }
        }
        println!();
    }
    drop(rt);
    println!("wall time {:.1} s", started.elapsed().as_secs_f64());
    for l in &lines {
        println!("{}", l.render());
    }
    if failed {
        std::process::exit(1);
    }
}

async fn run_case(case: &Case, plan: Plan, dir: &Path) -> Result<Line, String> {
    match case.workload {
        Workload::HttpEcho => {
            let direct = {
                wait_for_quiet(plan).await;
                let (demo, addr) = spawn_listening("demo-direct", &["demo-server"], dir)?;
                let run = http_echo(addr, "/mcp", case.c, plan, &[("demo", &demo)]).await;
                demo.stop();
                run?
            };
            direct.print("direct", "req");
            let gateway = {
                wait_for_quiet(plan).await;
                let (demo, demo_addr) = spawn_listening("demo-upstream", &["demo-server"], dir)?;
                let config = write_config(dir, "http", &format!("url = \"http://{demo_addr}/mcp\"\n"))?;
                let (gw, addr) = spawn_listening("gateway-http", &["serve", "--config", path_str(&config)], dir)?;
                let run =
                    http_echo(addr, "/mcp/demo", case.c, plan, &[("gateway", &gw), ("upstream demo", &demo)]).await;
                gw.stop();
                demo.stop();
                run?
            };
            gateway.print("gateway", "req");
            Ok(Line::compare(case, &direct, &gateway))
        }
        Workload::StdioEcho => {
            let direct = {
                wait_for_quiet(plan).await;
                let demo = spawn_stdio("demo-stdio", &["demo-server"], dir)?;
                stdio_echo(demo, case.c, plan).await?
            };
            direct.print("direct", "req");
            let gateway = {
                wait_for_quiet(plan).await;
                let config =
                    write_config(dir, "stdio", &format!("command = {TASKGATE:?}\nargs = [\"demo-server\"]\n"))?;
                let gw =
                    spawn_stdio("gateway-stdio", &["stdio", "--config", path_str(&config), "--upstream", "demo"], dir)?;
                stdio_echo(gw, case.c, plan).await?
            };
            gateway.print("gateway", "req");
            Ok(Line::compare(case, &direct, &gateway))
        }
        Workload::Progress => {
            let steps = plan.progress_steps;
            println!(
                "  `slow` steps={steps} duration_ms=0 over HTTP (SSE); rate = progress steps/s (upstream notifications \
                 absorbed, coalescing included); latency = one whole call"
            );
            let direct = {
                wait_for_quiet(plan).await;
                let (demo, addr) = spawn_listening("demo-direct", &["demo-server"], dir)?;
                let run = progress(addr, "/mcp", steps, plan, &[("demo", &demo)], None).await;
                demo.stop();
                run?
            };
            direct.print("direct", "step");
            let gateway = {
                wait_for_quiet(plan).await;
                // A stdio demo upstream: it sends every one of its notifications to the gateway
                // (a demo behind HTTP would already have coalesced them, leaving nothing to relay).
                let config =
                    write_config(dir, "stdio", &format!("command = {TASKGATE:?}\nargs = [\"demo-server\"]\n"))?;
                let (gw, addr) = spawn_listening("gateway-http", &["serve", "--config", path_str(&config)], dir)?;
                let run = progress(addr, "/mcp/demo", steps, plan, &[("gateway", &gw)], Some(&gw)).await;
                let upstream = children_of(gw.pid());
                gw.stop();
                check_gone(&upstream);
                run?
            };
            gateway.print("gateway", "step");
            Ok(Line::compare(case, &direct, &gateway))
        }
        Workload::Tasks => {
            println!(
                "  hosted tasks, gateway only (no direct baseline: the demo has no tasks): `tools/call echo` with \
                 `task`, then `tasks/result`; rate = tasks/s; p50/p99 = one whole task round trip (create + result), \
                 ABSOLUTE, not added (the e2e line prints `-` for them)"
            );
            wait_for_quiet(plan).await;
            // The client asks for a ttl of 60 s; `max_ttl` caps it at 2 s, so finished tasks
            // expire (swept every 250 ms) long before the roomy store could fill.
            let config = write_config(dir, "tasks", &tasks_config("2s", 1_000_000))?;
            let (gw, addr) = spawn_listening("gateway-tasks", &["serve", "--config", path_str(&config)], dir)?;
            let run = tasks_throughput(addr, case.c, plan, &gw).await;
            gw.stop();
            let run = run?;
            run.print("gateway", "task");
            report_log_warnings(dir, "gateway-tasks");
            Ok(Line::gateway_only(case, &run))
        }
        Workload::TasksRetained => {
            println!(
                "  hosted tasks, gateway only: {RETAINED_TASKS} tasks echoing {RETAINED_TEXT_LEN} characters, each \
                 fetched with `tasks/result` (completed) and all retained; rate = tasks created/s during the fill; \
                 p50/p99 = one whole task round trip, absolute; rss = VmRSS increase over the idle gateway"
            );
            wait_for_quiet(plan).await;
            // Exactly room for them all: one task evicted, whatever the reason, fails the check.
            let config = write_config(dir, "tasks-retained", &tasks_config("1h", RETAINED_TASKS))?;
            let (gw, addr) = spawn_listening("gateway-tasks-retained", &["serve", "--config", path_str(&config)], dir)?;
            let filled = tasks_retained(addr, case.c, &gw).await;
            gw.stop();
            let (run, rss) = filled?;
            run.print("gateway", "task");
            rss.print();
            report_log_warnings(dir, "gateway-tasks-retained");
            let mut line = Line::gateway_only(case, &run);
            line.rss_mb = rss.added_kb() as f64 / 1024.0;
            Ok(line)
        }
    }
}

/// The gateway's config for the tasks cases: the in-process demo, tasks retained for at most
/// `max_ttl`, and a store (and per-session share) of `max_tasks`.
fn tasks_config(max_ttl: &str, max_tasks: usize) -> String {
    format!(
        "builtin = \"demo\"\n\n[upstream.tasks]\nttl = \"{max_ttl}\"\nmax_ttl = \"{max_ttl}\"\n\
         max_tasks_per_owner = {max_tasks}\n\n[tasks]\nmax_tasks = {max_tasks}\n"
    )
}

// ---------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------

/// What the workers of one run collected inside the measured window.
struct Tally {
    /// Requests (or notifications, for progress) completed in the window.
    done: u64,
    /// Latency in nanoseconds of the requests completed in the window.
    hist: Histogram<u64>,
    /// Responses that came as an event stream rather than plain JSON.
    sse: u64,
    /// Progress calls whose final progress value never arrived.
    lost: u64,
    /// Progress notifications that arrived in the window.
    events: u64,
    /// Event streams that ended before their response and were resumed (`Last-Event-ID`).
    resumed: u64,
    /// Tasks whose `CreateTaskResult` had a status other than `working`.
    not_working: u64,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            done: 0,
            hist: Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid bounds"),
            sse: 0,
            lost: 0,
            events: 0,
            resumed: 0,
            not_working: 0,
        }
    }

    fn record(&mut self, d: Duration) {
        self.hist.saturating_record(d.as_nanos().max(1) as u64);
    }

    fn merge(&mut self, o: Tally) {
        self.done += o.done;
        self.hist.add(&o.hist).expect("same bounds");
        self.sse += o.sse;
        self.lost += o.lost;
        self.events += o.events;
        self.resumed += o.resumed;
        self.not_working += o.not_working;
    }
}

/// One side (direct or gateway) of a case.
struct Run {
    tally: Tally,
    secs: f64,
    /// CPU µs over the window, per watched process; the first is the server under test.
    cpu_us: Vec<(String, f64)>,
    /// CPU µs of this process (the load generator) over the window.
    loadgen_cpu_us: f64,
    /// Peak RSS (VmHWM, kB) per watched process, read at the end of the run.
    hwm_kb: Vec<(String, u64)>,
    /// RSS (kB) of the server under test right after its sessions were set up, before load.
    idle_rss_kb: u64,
    /// The watched processes' roles and pids.
    pids: String,
    /// CPU the rest of the machine used during the window, in cores: anything above ~0.05
    /// means another workload competed with this run and its figures are suspect.
    background_cores: f64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.tally.done as f64 / self.secs
    }

    fn quantile_us(&self, q: f64) -> f64 {
        self.tally.hist.value_at_quantile(q) as f64 / 1000.0
    }

    fn cpu_per(&self, i: usize) -> f64 {
        self.cpu_us.get(i).map(|(_, us)| us / self.tally.done.max(1) as f64).unwrap_or(0.0)
    }

    fn print(&self, side: &str, unit: &str) {
        let mut s = format!(
            "  {side:<8} {:>9.0} {unit}/s  p50 {:>8.1} µs  p99 {:>9.1} µs  (n={}",
            self.rate(),
            self.quantile_us(0.50),
            self.quantile_us(0.99),
            self.tally.done
        );
        if self.tally.sse > 0 {
            let _ = write!(s, ", {} as SSE", self.tally.sse);
        }
        if self.tally.events > 0 {
            let _ = write!(s, ", {:.0} notifications/s delivered", self.tally.events as f64 / self.secs);
        }
        if self.tally.lost > 0 {
            let _ = write!(s, ", {} calls LOST their final progress value", self.tally.lost);
        }
        if self.tally.resumed > 0 {
            let _ = write!(s, ", {} streams resumed", self.tally.resumed);
        }
        if self.tally.not_working > 0 {
            let _ = write!(s, ", {} tasks created with a status other than `working`", self.tally.not_working);
        }
        s.push(')');
        println!("{s}");
        let per = self.tally.done.max(1) as f64;
        let mut cpu: Vec<String> = self.cpu_us.iter().map(|(n, us)| format!("{n} {:.1}", us / per)).collect();
        cpu.push(format!("load generator {:.1}", self.loadgen_cpu_us / per));
        let rss: Vec<String> = self.hwm_kb.iter().map(|(n, kb)| format!("{n} {:.1}", *kb as f64 / 1024.0)).collect();
        println!(
            "  {:<8} cpu µs/{unit}: {}; peak rss MiB: {} (idle {:.1})",
            "",
            cpu.join(", "),
            rss.join(", "),
            self.idle_rss_kb as f64 / 1024.0
        );
        println!(
            "  {:<8} pids: {}; other load on the machine: {:.2} cores{}",
            "",
            self.pids,
            self.background_cores,
            if self.background_cores > 0.1 { " (NOISY: something else ran)" } else { "" }
        );
    }
}

/// The machine-readable line of one case.
struct Line {
    case: &'static str,
    c: usize,
    direct_rps: Option<f64>,
    gateway_rps: f64,
    p50_added_us: Option<f64>,
    p99_added_us: Option<f64>,
    cpu_us_per_req: f64,
    rss_mb: f64,
}

impl Line {
    fn compare(case: &Case, direct: &Run, gateway: &Run) -> Line {
        Line {
            case: case.name,
            c: case.c,
            direct_rps: Some(direct.rate()),
            gateway_rps: gateway.rate(),
            p50_added_us: Some(gateway.quantile_us(0.50) - direct.quantile_us(0.50)),
            p99_added_us: Some(gateway.quantile_us(0.99) - direct.quantile_us(0.99)),
            cpu_us_per_req: gateway.cpu_per(0),
            rss_mb: gateway.hwm_kb.first().map(|(_, kb)| *kb as f64 / 1024.0).unwrap_or(0.0),
        }
    }

    /// A case with no direct baseline. Its latency figures are the gateway's own, not added
    /// latency, so the line's `p50_added_us`/`p99_added_us` are `-` rather than an absolute
    /// figure under an "added" name that a reader or script would compare with the others;
    /// the absolute p50/p99 are in the case's human-readable lines.
    fn gateway_only(case: &Case, gateway: &Run) -> Line {
        Line {
            case: case.name,
            c: case.c,
            direct_rps: None,
            gateway_rps: gateway.rate(),
            p50_added_us: None,
            p99_added_us: None,
            cpu_us_per_req: gateway.cpu_per(0),
            rss_mb: gateway.hwm_kb.first().map(|(_, kb)| *kb as f64 / 1024.0).unwrap_or(0.0),
        }
    }

    fn render(&self) -> String {
        let opt = |v: Option<f64>, prec: usize| v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "-".into());
        let ratio = self.direct_rps.filter(|d| *d > 0.0).map(|d| self.gateway_rps / d);
        format!(
            "e2e {} c={} direct_rps={} gateway_rps={:.0} ratio={} p50_added_us={} p99_added_us={} cpu_us_per_req={:.1} rss_mb={:.1}",
            self.case,
            self.c,
            opt(self.direct_rps, 0),
            self.gateway_rps,
            opt(ratio, 3),
            opt(self.p50_added_us, 1),
            opt(self.p99_added_us, 1),
            self.cpu_us_per_req,
            self.rss_mb
        )
    }
}

// ---------------------------------------------------------------------------------------
// The measured window, /proc readings
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Window {
    start: Instant,
    end: Instant,
}

impl Window {
    fn after_warmup(plan: Plan) -> Window {
        let start = Instant::now() + plan.warmup;
        Window { start, end: start + plan.measure }
    }

    fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
}

/// Runs `work` (which stops by itself at the window's end) while reading the CPU time of the
/// watched processes and of this process at the window's start and end.
async fn measure(
    window: Window,
    watched: &[(String, u32)],
    work: impl std::future::Future<Output = Result<Tally, String>>,
) -> Result<Run, String> {
    let idle_rss_kb = watched.first().map(|(_, pid)| proc_status_kb(*pid, "VmRSS:")).unwrap_or(0);
    let sampler = async {
        tokio::time::sleep_until(window.start.into()).await;
        let before = Sample::take(watched);
        tokio::time::sleep_until(window.end.into()).await;
        (before, Sample::take(watched))
    };
    let (tally, (before, after)) = tokio::join!(work, sampler);
    let tally = tally?;
    if tally.done == 0 {
        return Err("nothing completed in the measured window".into());
    }
    Ok(Run::between(tally, watched, &before, &after, idle_rss_kb))
}

/// CPU readings at one instant: each watched process, this process, the whole machine (µs).
struct Sample {
    at: Instant,
    watched: Vec<f64>,
    me: f64,
    machine: f64,
}

impl Sample {
    fn take(watched: &[(String, u32)]) -> Sample {
        Sample {
            at: Instant::now(),
            watched: watched.iter().map(|(_, pid)| cpu_us(&pid.to_string())).collect(),
            me: cpu_us("self"),
            machine: machine_busy_us(),
        }
    }
}

impl Run {
    /// The run whose span `before`..`after` did `tally`'s work.
    fn between(tally: Tally, watched: &[(String, u32)], before: &Sample, after: &Sample, idle_rss_kb: u64) -> Run {
        let secs = (after.at - before.at).as_secs_f64();
        let cpu_us: Vec<(String, f64)> = watched
            .iter()
            .zip(before.watched.iter().zip(&after.watched))
            .map(|((n, _), (b, a))| (n.clone(), a - b))
            .collect();
        let loadgen_cpu_us = after.me - before.me;
        let ours: f64 = cpu_us.iter().map(|(_, us)| us).sum::<f64>() + loadgen_cpu_us;
        let hwm_kb = watched.iter().map(|(n, pid)| (n.clone(), proc_status_kb(*pid, "VmHWM:"))).collect();
        let pids = watched.iter().map(|(n, pid)| format!("{n} {pid}")).collect::<Vec<_>>().join(", ");
        let background_cores = ((after.machine - before.machine - ours) / 1e6 / secs).max(0.0);
        Run { tally, secs, cpu_us, loadgen_cpu_us, hwm_kb, idle_rss_kb, pids, background_cores }
    }
}

/// Waits, at most `plan.quiet_wait`, until the machine is idle (nothing of this bench runs
/// between sides), so that a run does not start while another workload holds the cores.
async fn wait_for_quiet(plan: Plan) {
    static WAITED_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let budget = plan.quiet_budget.as_millis() as u64;
    let started = Instant::now();
    loop {
        let before = machine_busy_us();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let cores = (machine_busy_us() - before) / 0.5e6;
        let waited = WAITED_MS.fetch_add(500, std::sync::atomic::Ordering::Relaxed) + 500;
        if cores < 0.15 {
            return;
        }
        if started.elapsed() >= plan.quiet_wait || waited >= budget {
            println!("  (the machine stayed busy, {cores:.2} cores, for {:?}; running anyway)", started.elapsed());
            return;
        }
    }
}

/// Busy CPU time of the whole machine (all cores), in µs, from `/proc/stat`.
fn machine_busy_us() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else { return 0.0 };
    let Some(cpu) = stat.lines().find(|l| l.starts_with("cpu ")) else { return 0.0 };
    // user nice system idle iowait irq softirq steal ...: everything but idle and iowait.
    let busy: u64 = cpu
        .split_whitespace()
        .skip(1)
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum();
    busy as f64 * 1e6 / clock_ticks() as f64
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// utime + stime of a process (`"self"` or a pid), in µs.
fn cpu_us(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // The command name may hold spaces; fields are counted after its closing parenthesis.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 * 1e6 / clock_ticks() as f64
}

/// A `kB` line of `/proc/<pid>/status` (`VmHWM:`, `VmRSS:`).
fn proc_status_kb(pid: u32, key: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return 0 };
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).ok().is_some_and(|s| {
                s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok()) == Some(pid)
            })
        })
        .collect()
}

/// Upstream processes a gateway started must end with it; says so if one outlives it.
fn check_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let alive = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            // A zombie waiting for its (exited) parent's reaper has ended too.
            s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().next()) != Some("Z")
        })
    };
    while pids.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in pids.iter().filter(|p| alive(p)) {
        println!("  WARNING: upstream process {p} outlived its gateway");
    }
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

/// A `taskgate` process this bench started; stopped by its pid (SIGTERM, then SIGKILL).
struct Proc {
    name: String,
    child: Child,
}

impl Proc {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn watch(&self, role: &str) -> (String, u32) {
        (role.to_string(), self.pid())
    }

    /// Waits up to `limit` for the process to exit by itself.
    fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: kill(2) on our own child, not yet reaped, so the pid is still ours.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if !self.wait_exit(Duration::from_secs(5)) {
            eprintln!("{} (pid {}) ignored SIGTERM; killing it", self.name, self.pid());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn stop(mut self) {
        self.terminate();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(TASKGATE);
    // The default level, whatever the caller's environment says.
    cmd.args(args).env("RUST_LOG", "info");
    cmd
}

/// Starts a taskgate HTTP server (`demo-server` or `serve`) on 127.0.0.1:0 and waits for the
/// address it reports on stderr.
fn spawn_listening(name: &str, args: &[&str], dir: &Path) -> Result<(Proc, SocketAddr), String> {
    let mut args = args.to_vec();
    args.extend(["--listen", "127.0.0.1:0"]);
    let mut child = command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {TASKGATE}: {e}"))?;
    let stderr = child.stderr.take().expect("piped");
    let proc = Proc { name: name.to_string(), child };
    let mut log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(log, "{line}");
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let addr = rx.recv_timeout(TIMEOUT).map_err(|_| format!("{name} did not report its address"))?;
    let addr = addr.parse().map_err(|e| format!("{name} reported address {addr:?}: {e}"))?;
    Ok((proc, addr))
}

/// Starts a taskgate process that speaks MCP on its stdin/stdout.
fn spawn_stdio(name: &str, args: &[&str], dir: &Path) -> Result<Proc, String> {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| format!("cannot start {TASKGATE}: {e}"))?;
    Ok(Proc { name: name.to_string(), child })
}

fn write_config(dir: &Path, name: &str, transport: &str) -> Result<PathBuf, String> {
    let path = dir.join(format!("gateway-{name}.toml"));
    let text = format!("[[upstream]]\nname = \"demo\"\n{transport}");
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    Ok(path)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// Says how many warnings and errors a process logged, and shows the first (a refusal or a
/// full buffer would show up there before it showed up as a failure).
fn report_log_warnings(dir: &Path, name: &str) {
    // The thread copying its stderr may still be writing the last lines.
    std::thread::sleep(Duration::from_millis(100));
    let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.log"))) else { return };
    let bad: Vec<&str> = text.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    match bad.first() {
        None => println!("  {name} log: no warnings or errors"),
        Some(first) => println!("  {name} log: {} warnings/errors, the first: {first}", bad.len()),
    }
}

fn dump_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log")
            && let Ok(text) = std::fs::read_to_string(&p)
        {
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            println!("  --- {} (last lines)", p.display());
            for l in tail.iter().rev() {
                println!("  {l}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// MCP messages
// ---------------------------------------------------------------------------------------

/// The envelope fields the load generator checks; everything else is skipped unparsed.
#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    params: Option<Params>,
}

#[derive(Deserialize)]
struct Params {
    #[serde(default)]
    progress: Option<f64>,
}

impl Reply {
    fn parse(data: &[u8]) -> Result<Reply, String> {
        serde_json::from_slice(data).map_err(|e| format!("unreadable message {}: {e}", String::from_utf8_lossy(data)))
    }

    fn answers(&self, id: u64) -> bool {
        self.method.is_none() && self.id.as_ref().and_then(serde_json::Value::as_u64) == Some(id)
    }

    fn ok(&self) -> Result<(), String> {
        match (&self.result, &self.error) {
            (Some(_), None) => Ok(()),
            (_, Some(e)) => Err(format!("error response: {e}")),
            _ => Err("a response with neither result nor error".into()),
        }
    }
}

fn initialize_request(id: u64, version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"taskgate-e2e-bench","version":"0.1.0"}}}}}}"#
    )
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn echo_request(id: u64) -> String {
    echo_text_request(id, ECHO_TEXT)
}

fn echo_text_request(id: u64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
    )
}

/// A task-augmented `tools/call echo` (the client asks for a ttl of 60 s).
fn task_call_request(id: u64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},"task":{{"ttl":60000}}}}}}"#
    )
}

fn task_request(id: u64, method: &str, task_id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"taskId":"{task_id}"}}}}"#)
}

fn slow_request(id: u64, steps: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","arguments":{{"duration_ms":0,"steps":{steps}}},"_meta":{{"progressToken":"p{id}"}}}}}}"#
    )
}

/// Splits an event stream into events; hands each event's data to the caller and remembers
/// the last event id (for `Last-Event-ID`).
#[derive(Default)]
struct SseReader {
    buf: Vec<u8>,
    last_id: Option<String>,
}

impl SseReader {
    fn feed(&mut self, chunk: &[u8], mut on_data: impl FnMut(&[u8]) -> Result<(), String>) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        let mut used = 0;
        while let Some(end) = find(&self.buf[used..], b"\n\n") {
            let event = &self.buf[used..used + end];
            for line in event.split(|b| *b == b'\n') {
                if let Some(d) = line.strip_prefix(b"data: ").or_else(|| line.strip_prefix(b"data:")) {
                    on_data(d)?;
                } else if let Some(id) = line.strip_prefix(b"id: ") {
                    self.last_id = Some(String::from_utf8_lossy(id).into_owned());
                }
            }
            used += end + 2;
        }
        self.buf.drain(..used);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------
// HTTP load
// ---------------------------------------------------------------------------------------

/// One client session on its own keep-alive HTTP/1.1 connection.
struct HttpClient {
    send: SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    host: HeaderValue,
    path: String,
    /// The protocol version it initializes with (and then sends in `mcp-protocol-version`).
    version: &'static str,
    session: Option<HeaderValue>,
    next_id: u64,
}

impl HttpClient {
    async fn connect(addr: SocketAddr, path: &str, version: &'static str) -> Result<HttpClient, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(HttpClient {
            send,
            addr,
            host: HeaderValue::from_str(&addr.to_string()).expect("an address is a valid header"),
            path: path.to_string(),
            version,
            session: None,
            next_id: 0,
        })
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    async fn send(
        &mut self,
        method: Method,
        body: Bytes,
        last_event_id: Option<&str>,
    ) -> Result<Response<hyper::body::Incoming>, String> {
        let mut b = Request::builder()
            .method(method)
            .uri(self.path.as_str())
            .header(HOST, self.host.clone())
            .header(ACCEPT, "application/json, text/event-stream");
        if !body.is_empty() {
            b = b.header(CONTENT_TYPE, "application/json");
        }
        if let Some(s) = &self.session {
            b = b.header(SESSION_HEADER, s.clone()).header(VERSION_HEADER, self.version);
        }
        if let Some(l) = last_event_id {
            b = b.header("last-event-id", l);
        }
        let req = b.body(Full::new(body)).map_err(|e| e.to_string())?;
        let go = async {
            self.send.ready().await.map_err(|e| format!("connection: {e}"))?;
            self.send.send_request(req).await.map_err(|e| format!("request: {e}"))
        };
        tokio::time::timeout(TIMEOUT, go).await.map_err(|_| format!("no response within {TIMEOUT:?}"))?
    }

    /// POSTs a message and reads the whole answer: (status, is an event stream, body).
    async fn post(&mut self, body: String) -> Result<(StatusCode, bool, Bytes), String> {
        let resp = self.send(Method::POST, Bytes::from(body), None).await?;
        let status = resp.status();
        let sse = is_event_stream(&resp);
        if self.session.is_none()
            && let Some(s) = resp.headers().get(SESSION_HEADER)
        {
            self.session = Some(s.clone());
        }
        let body = tokio::time::timeout(TIMEOUT, resp.into_body().collect())
            .await
            .map_err(|_| "body timed out".to_string())?
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((status, sse, body))
    }

    /// `initialize` + `notifications/initialized`: a session ready for calls.
    async fn initialize(&mut self) -> Result<(), String> {
        let id = self.id();
        let (status, sse, body) = self.post(initialize_request(id, self.version)).await?;
        if status != StatusCode::OK {
            return Err(format!("initialize: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        check_answer(sse, &body, id)?;
        if self.session.is_none() {
            return Err("initialize: no mcp-session-id header".into());
        }
        let (status, _, body) = self.post(INITIALIZED.to_string()).await?;
        if status != StatusCode::ACCEPTED {
            return Err(format!("notifications/initialized: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        Ok(())
    }
}

fn is_event_stream(resp: &Response<hyper::body::Incoming>) -> bool {
    resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Checks that a body (JSON or an event stream) holds a successful response to `id`.
fn check_answer(sse: bool, body: &[u8], id: u64) -> Result<(), String> {
    if !sse {
        let r = Reply::parse(body)?;
        if !r.answers(id) {
            return Err(format!("expected the response to {id}, got {}", String::from_utf8_lossy(body)));
        }
        return r.ok();
    }
    let mut found = Err(format!("no response to {id} in the stream"));
    let mut reader = SseReader::default();
    reader.feed(body, |data| {
        let r = Reply::parse(data)?;
        if r.answers(id) {
            found = r.ok();
        }
        Ok(())
    })?;
    found
}

async fn connect_sessions(
    addr: SocketAddr,
    path: &str,
    c: usize,
    version: &'static str,
) -> Result<Vec<HttpClient>, String> {
    let mut clients = Vec::with_capacity(c);
    for _ in 0..c {
        let mut cl = HttpClient::connect(addr, path, version).await?;
        cl.initialize().await?;
        clients.push(cl);
    }
    Ok(clients)
}

async fn http_echo(addr: SocketAddr, path: &str, c: usize, plan: Plan, watch: &[(&str, &Proc)]) -> Result<Run, String> {
    let clients = connect_sessions(addr, path, c, PROTOCOL_VERSION).await?;
    let watched: Vec<_> = watch.iter().map(|(role, p)| p.watch(role)).collect();
    let window = Window::after_warmup(plan);
    let work = async move {
        let tasks: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(echo_loop(cl, window))).collect();
        let mut total = Tally::new();
        for t in tasks {
            total.merge(t.await.map_err(|e| e.to_string())??);
        }
        Ok(total)
    };
    measure(window, &watched, work).await
}

/// One session's closed loop: the next call goes out when the last one is answered.
async fn echo_loop(mut cl: HttpClient, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let id = cl.id();
        let (status, sse, body) = cl.post(echo_request(id)).await?;
        let t1 = Instant::now();
        if status != StatusCode::OK {
            return Err(format!("tools/call: HTTP {status}: {}", String::from_utf8_lossy(&body)));
        }
        check_answer(sse, &body, id)?;
        if window.contains(t1) {
            tally.done += 1;
            tally.sse += u64::from(sse);
            tally.record(t1 - t0);
        }
    }
}

async fn progress(
    addr: SocketAddr,
    path: &str,
    steps: u64,
    plan: Plan,
    watch: &[(&str, &Proc)],
    upstream_children_of: Option<&Proc>,
) -> Result<Run, String> {
    let mut clients = connect_sessions(addr, path, 1, PROTOCOL_VERSION).await?;
    let cl = clients.pop().expect("one session");
    let mut watched: Vec<_> = watch.iter().map(|(role, p)| p.watch(role)).collect();
    // A stdio upstream is a child of the gateway, started by the session's initialize.
    if let Some(p) = upstream_children_of {
        watched.extend(children_of(p.pid()).into_iter().map(|pid| ("upstream demo".to_string(), pid)));
    }
    let window = Window::after_warmup(plan);
    measure(window, &watched, progress_loop(cl, steps, window)).await
}

/// Calls `slow` with many steps in a closed loop. Counts, inside the window, how far the
/// reported progress advanced (steps: what the upstream sent, whether every notification got
/// through or coalescing merged some) and how many notifications arrived. A stream the server
/// drops is resumed with `Last-Event-ID`.
async fn progress_loop(mut cl: HttpClient, steps: u64, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let id = cl.id();
        let mut resp = cl.send(Method::POST, Bytes::from(slow_request(id, steps)), None).await?;
        if resp.status() != StatusCode::OK {
            return Err(format!("slow: HTTP {}", resp.status()));
        }
        let mut reader = SseReader::default();
        let mut value = 0u64;
        let mut events = 0u64;
        let mut answered = false;
        let mut stalled = 0;
        let mut trail = Vec::new();
        loop {
            let sse = is_event_stream(&resp);
            trail.push(format!("HTTP {} {}", resp.status(), if sse { "SSE" } else { "not SSE" }));
            if !sse {
                // Plain JSON: the response alone (no room for notifications before it).
                let body = tokio::time::timeout(TIMEOUT, resp.into_body().collect())
                    .await
                    .map_err(|_| "body timed out".to_string())?
                    .map_err(|e| format!("body: {e}"))?
                    .to_bytes();
                let r = Reply::parse(&body)?;
                if !r.answers(id) {
                    return Err(format!("slow: unexpected answer {}", String::from_utf8_lossy(&body)));
                }
                r.ok()?;
                break;
            }
            let mut body = resp.into_body();
            let before = events;
            loop {
                let frame = tokio::time::timeout(TIMEOUT, body.frame())
                    .await
                    .map_err(|_| format!("no event for {TIMEOUT:?}"))?;
                let Some(frame) = frame else { break };
                let frame = frame.map_err(|e| format!("stream: {e}"))?;
                let Ok(data) = frame.into_data() else { continue };
                let in_window = window.contains(Instant::now());
                let mut on_message = |d: &[u8]| -> Result<(), String> {
                    let r = Reply::parse(d)?;
                    if r.method.as_deref() == Some("notifications/progress") {
                        let v = r.params.and_then(|p| p.progress).unwrap_or(0.0) as u64;
                        events += 1;
                        if in_window {
                            tally.events += 1;
                            tally.done += v.saturating_sub(value);
                        }
                        value = value.max(v);
                    } else if r.answers(id) {
                        r.ok()?;
                        answered = true;
                    }
                    Ok(())
                };
                reader.feed(&data, &mut on_message)?;
            }
            trail.push(format!("{} notifications", events - before));
            if answered {
                break;
            }
            let Some(last) = reader.last_id.clone() else { return Err("the stream ended without a response".into()) };
            // The server drops a stream its client does not drain fast enough; resuming is the
            // client's job. Give up only when resuming stops making progress.
            stalled = if events == before { stalled + 1 } else { 0 };
            tally.resumed += 1;
            if stalled >= 3 || trail.len() > 30_000 {
                trail.drain(..trail.len().saturating_sub(12));
                return Err(format!("the stream kept ending without a response: …, {}", trail.join(", ")));
            }
            trail.push(format!("resume after {last}"));
            reader = SseReader { last_id: Some(last.clone()), ..Default::default() };
            resp = cl.send(Method::GET, Bytes::new(), Some(&last)).await?;
        }
        let t1 = Instant::now();
        // The final value must arrive before the result, coalescing or not.
        if value < steps {
            tally.lost += 1;
        }
        if t0 >= window.start && t1 <= window.end {
            tally.record(t1 - t0);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Hosted tasks (HTTP)
// ---------------------------------------------------------------------------------------

/// A message as the tasks cases read it: the envelope and the parts of the results they check
/// (`CreateTaskResult`, `tasks/get`'s task, `tasks/result`'s tool result).
#[derive(Deserialize)]
struct TaskReply {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<TaskResult>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct TaskResult {
    /// `CreateTaskResult`.
    #[serde(default)]
    task: Option<TaskInfo>,
    /// `tasks/get`.
    #[serde(default)]
    status: Option<String>,
    /// `tasks/result`: the echo's tool result.
    #[serde(default)]
    content: Vec<Content>,
}

#[derive(Deserialize)]
struct TaskInfo {
    #[serde(rename = "taskId")]
    task_id: String,
    status: String,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    text: Option<String>,
}

/// The start of a body, for error messages (results can be long).
fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    if s.len() <= 300 { s.into_owned() } else { format!("{}…", &s[..s.floor_char_boundary(300)]) }
}

/// The result of the response to `id` in a body (JSON or an event stream). An error response
/// is an error here; -32004 is the gateway refusing (store or session full) and says so.
fn task_answer(sse: bool, body: &[u8], id: u64, what: &str) -> Result<TaskResult, String> {
    let mut found = None;
    let mut take = |data: &[u8]| -> Result<(), String> {
        let r: TaskReply =
            serde_json::from_slice(data).map_err(|e| format!("{what}: unreadable message {}: {e}", snippet(data)))?;
        if r.method.is_none() && r.id.as_ref().and_then(serde_json::Value::as_u64) == Some(id) {
            found = Some(r);
        }
        Ok(())
    };
    if sse {
        SseReader::default().feed(body, &mut take)?;
    } else {
        take(body)?;
    }
    let r = found.ok_or_else(|| format!("{what}: no response to {id} in {}", snippet(body)))?;
    match (r.result, r.error) {
        (Some(res), None) => Ok(res),
        (_, Some(e)) if e.get("code").and_then(serde_json::Value::as_i64) == Some(-32004) => {
            Err(format!("{what}: REFUSED by the gateway (-32004): {e}"))
        }
        (_, Some(e)) => Err(format!("{what}: error response: {e}")),
        _ => Err(format!("{what}: a response with neither result nor error")),
    }
}

/// One task: its id, and what its round trip looked like.
struct RoundTrip {
    task_id: String,
    /// Responses (of the two) that came as an event stream.
    sse: u64,
    /// The `CreateTaskResult` status was not `working`.
    not_working: bool,
    /// Size of the `tasks/result` body.
    result_bytes: usize,
}

/// The GET streams of a run's sessions: what they received, and any that ended.
#[derive(Default)]
struct GetStreams {
    /// `notifications/tasks/status` received (inside the window, if there is one).
    status_notes: std::sync::atomic::AtomicU64,
    ended: std::sync::Mutex<Vec<String>>,
    drains: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl GetStreams {
    fn notes(&self) -> u64 {
        self.status_notes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the drains; reports streams the gateway ended before that.
    fn stop(&self) {
        for d in self.drains.lock().unwrap().drain(..) {
            d.abort();
        }
        for e in self.ended.lock().unwrap().iter() {
            println!("  WARNING: a GET stream ended during the run: {e}");
        }
    }
}

impl HttpClient {
    /// POSTs a request and returns its result (checked by [`task_answer`]), whether it came as
    /// an event stream, and the body's size.
    async fn rpc(&mut self, body: String, id: u64, what: &str) -> Result<(TaskResult, bool, usize), String> {
        let (status, sse, body) = self.post(body).await?;
        if status != StatusCode::OK {
            return Err(format!("{what}: HTTP {status}: {}", snippet(&body)));
        }
        Ok((task_answer(sse, &body, id, what)?, sse, body.len()))
    }

    /// Creates a task (`tools/call echo` with `task`) and fetches its result, which must be
    /// the echo of `text`.
    async fn task_round_trip(&mut self, text: &str) -> Result<RoundTrip, String> {
        let id = self.id();
        let (created, sse1, _) = self.rpc(task_call_request(id, text), id, "tools/call with `task`").await?;
        let task = created.task.ok_or("tools/call with `task` answered without a task (not hosted?)")?;
        let id = self.id();
        let (res, sse2, result_bytes) =
            self.rpc(task_request(id, "tasks/result", &task.task_id), id, "tasks/result").await?;
        let got = res.content.first().and_then(|c| c.text.as_deref());
        if got != Some(text) {
            return Err(format!(
                "tasks/result of {}: expected the echo of {} characters, got {:?}",
                task.task_id,
                text.len(),
                got.map(|g| snippet(g.as_bytes()))
            ));
        }
        Ok(RoundTrip {
            not_working: task.status != "working",
            task_id: task.task_id,
            sse: u64::from(sse1) + u64::from(sse2),
            result_bytes,
        })
    }

    /// Opens this session's GET stream on a connection of its own and drains it in the
    /// background, counting `notifications/tasks/status` (those inside `window`, if given).
    async fn open_get_stream(
        &self,
        window: Option<Window>,
        streams: &std::sync::Arc<GetStreams>,
    ) -> Result<(), String> {
        let mut get = HttpClient::connect(self.addr, &self.path, self.version).await?;
        get.session = self.session.clone();
        let resp = get.send(Method::GET, Bytes::new(), None).await?;
        if resp.status() != StatusCode::OK || !is_event_stream(&resp) {
            return Err(format!("GET stream: HTTP {}", resp.status()));
        }
        let shared = streams.clone();
        let drain = tokio::spawn(async move {
            // Holds the connection's sender for as long as the stream is read.
            let _conn = get;
            let mut body = resp.into_body();
            let mut reader = SseReader::default();
            let end = loop {
                let data = match body.frame().await {
                    None => break "the gateway closed it".to_string(),
                    Some(Err(e)) => break e.to_string(),
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(d) => d,
                        Err(_) => continue,
                    },
                };
                let counted = window.is_none_or(|w| w.contains(Instant::now()));
                let fed = reader.feed(&data, |d| {
                    if counted && Reply::parse(d)?.method.as_deref() == Some("notifications/tasks/status") {
                        shared.status_notes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(())
                });
                if let Err(e) = fed {
                    break e;
                }
            };
            shared.ended.lock().unwrap().push(end);
        });
        streams.drains.lock().unwrap().push(drain);
        Ok(())
    }
}

/// Sessions for the tasks cases: 2025-11-25, each with its GET stream open and drained.
async fn task_sessions(
    addr: SocketAddr,
    c: usize,
    window: Option<Window>,
) -> Result<(Vec<HttpClient>, std::sync::Arc<GetStreams>), String> {
    let clients = connect_sessions(addr, "/mcp/demo", c, TASKS_VERSION).await?;
    let streams = std::sync::Arc::new(GetStreams::default());
    for cl in &clients {
        cl.open_get_stream(window, &streams).await?;
    }
    Ok((clients, streams))
}

async fn tasks_throughput(addr: SocketAddr, c: usize, plan: Plan, gw: &Proc) -> Result<Run, String> {
    let window = Window::after_warmup(plan);
    let (clients, streams) = task_sessions(addr, c, Some(window)).await?;
    let watched = [gw.watch("gateway")];
    let work = async {
        let loops: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(task_loop(cl, window))).collect();
        let mut total = Tally::new();
        for l in loops {
            total.merge(l.await.map_err(|e| e.to_string())??);
        }
        total.events = streams.notes();
        Ok(total)
    };
    let run = measure(window, &watched, work).await;
    streams.stop();
    let run = run?;
    println!(
        "  notifications/tasks/status received on the GET streams: {:.2} per task",
        run.tally.events as f64 / run.tally.done.max(1) as f64
    );
    Ok(run)
}

/// One session's closed loop of tasks: the next is created when the last one's result is in.
async fn task_loop(mut cl: HttpClient, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let rt = cl.task_round_trip(TASK_TEXT).await?;
        let t1 = Instant::now();
        if window.contains(t1) {
            tally.done += 1;
            tally.sse += rt.sse;
            tally.not_working += u64::from(rt.not_working);
            tally.record(t1 - t0);
        }
    }
}

/// The gateway's memory around the `tasks_retained` fill.
struct RetainedRss {
    /// VmRSS (kB) of the idle gateway: sessions initialized, GET streams open, no task yet.
    idle_kb: u64,
    /// VmRSS (kB) after the same sessions' plain echo warm-up, still without a task.
    warm_kb: u64,
    /// VmRSS (kB) once every task is completed and fetched.
    filled_kb: u64,
    tasks: usize,
    /// Mean size of a `tasks/result` body, in bytes.
    result_bytes: f64,
    /// Tasks that still answered `tasks/get` with `completed` after the fill.
    verified: usize,
    /// Sessions whose first task's result was fetched again after the fill.
    refetched: usize,
}

impl RetainedRss {
    fn added_kb(&self) -> u64 {
        self.filled_kb.saturating_sub(self.idle_kb)
    }

    fn print(&self) {
        let mib = |kb: u64| kb as f64 / 1024.0;
        let mb = |kb: u64| kb as f64 * 1024.0 / 1e6;
        let verdict = |kb: u64| if mb(kb) <= RETAINED_TARGET_MB { "met" } else { "MISSED" };
        let per_task = |kb: u64| kb as f64 * 1024.0 / self.tasks.max(1) as f64;
        let tasks_kb = self.filled_kb.saturating_sub(self.warm_kb);
        let warm_kb = self.warm_kb.saturating_sub(self.idle_kb);
        println!(
            "  retained (rss_mb): VmRSS {:.1} MiB idle after initialize -> {:.1} MiB with {} completed tasks: \
             +{:.1} MiB = +{:.1} MB above idle (target <= {RETAINED_TARGET_MB} MB: {}), {:.0} bytes per task; \
             each result {:.0} bytes of JSON",
            mib(self.idle_kb),
            mib(self.filled_kb),
            self.tasks,
            mib(self.added_kb()),
            mb(self.added_kb()),
            verdict(self.added_kb()),
            per_task(self.added_kb()),
            self.result_bytes
        );
        println!(
            "  of which before any task: +{:.1} MiB after {RETAINED_WARMUP_ROUNDS} rounds of plain echo calls per \
             session (1 long + 2 short: SSE replay buffers at their bound, connection buffers); the tasks' own: \
             +{:.1} MiB = +{:.1} MB ({}), {:.0} bytes per task",
            mib(warm_kb),
            mib(tasks_kb),
            mb(tasks_kb),
            verdict(tasks_kb),
            per_task(tasks_kb)
        );
        println!(
            "  verified after the fill: {}/{} tasks answer tasks/get `completed`; {} sessions' first task result \
             fetched again",
            self.verified, self.tasks, self.refetched
        );
    }
}

/// Fills the gateway's store with [`RETAINED_TASKS`] completed tasks over `c` sessions, reads
/// its VmRSS before and after, then checks every task is still there.
async fn tasks_retained(addr: SocketAddr, c: usize, gw: &Proc) -> Result<(Run, RetainedRss), String> {
    let (clients, streams) = task_sessions(addr, c, None).await?;
    let watched = [gw.watch("gateway")];
    let text: std::sync::Arc<str> =
        "abcdefghijklmnopqrstuvwxyz0123456789".chars().cycle().take(RETAINED_TEXT_LEN).collect::<String>().into();
    let idle_kb = proc_status_kb(gw.pid(), "VmRSS:");
    let warmups: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(warm_up(cl, text.clone()))).collect();
    let mut clients = Vec::with_capacity(c);
    for w in warmups {
        clients.push(w.await.map_err(|e| e.to_string())??);
    }
    let warm_kb = proc_status_kb(gw.pid(), "VmRSS:");
    let before = Sample::take(&watched);
    let fills: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, cl)| {
            let n = RETAINED_TASKS / c + usize::from(i < RETAINED_TASKS % c);
            tokio::spawn(fill_loop(cl, n, text.clone()))
        })
        .collect();
    let mut tally = Tally::new();
    let mut sessions = Vec::new();
    let mut bytes = 0u64;
    for f in fills {
        let (cl, t, ids, b) = f.await.map_err(|e| e.to_string())??;
        tally.merge(t);
        bytes += b;
        sessions.push((cl, ids));
    }
    let after = Sample::take(&watched);
    let filled_kb = proc_status_kb(gw.pid(), "VmRSS:");
    tally.events = streams.notes();
    let run = Run::between(tally, &watched, &before, &after, idle_kb);

    let checks: Vec<_> =
        sessions.into_iter().map(|(cl, ids)| tokio::spawn(verify_retained(cl, ids, text.clone()))).collect();
    let (mut verified, mut refetched) = (0, 0);
    for ch in checks {
        let (v, r) = ch.await.map_err(|e| e.to_string())??;
        verified += v;
        refetched += usize::from(r);
    }
    streams.stop();
    let tasks = run.tally.done as usize;
    let result_bytes = bytes as f64 / tasks.max(1) as f64;
    Ok((run, RetainedRss { idle_kb, warm_kb, filled_kb, tasks, result_bytes, verified, refetched }))
}

/// [`RETAINED_WARMUP_ROUNDS`] rounds of plain echo calls: `text`, then twice a short text.
async fn warm_up(mut cl: HttpClient, text: std::sync::Arc<str>) -> Result<HttpClient, String> {
    for _ in 0..RETAINED_WARMUP_ROUNDS {
        for t in [&*text, TASK_TEXT, TASK_TEXT] {
            let id = cl.id();
            let (res, _, _) = cl.rpc(echo_text_request(id, t), id, "warm-up tools/call echo").await?;
            if res.content.first().and_then(|c| c.text.as_deref()) != Some(t) {
                return Err("warm-up tools/call echo: not the echo".into());
            }
        }
    }
    Ok(cl)
}

/// `n` tasks echoing `text`, one after the other; returns the session, the tally, the task ids
/// and the bytes of their results.
async fn fill_loop(
    mut cl: HttpClient,
    n: usize,
    text: std::sync::Arc<str>,
) -> Result<(HttpClient, Tally, Vec<String>, u64), String> {
    let mut tally = Tally::new();
    let mut ids = Vec::with_capacity(n);
    let mut bytes = 0u64;
    for _ in 0..n {
        let t0 = Instant::now();
        let rt = cl.task_round_trip(&text).await?;
        tally.record(t0.elapsed());
        tally.done += 1;
        tally.sse += rt.sse;
        tally.not_working += u64::from(rt.not_working);
        bytes += rt.result_bytes as u64;
        ids.push(rt.task_id);
    }
    Ok((cl, tally, ids, bytes))
}

/// Every task of `ids` must answer `tasks/get` with `completed`, and the first one's result
/// must still be there; returns how many were checked and whether the first was refetched.
async fn verify_retained(
    mut cl: HttpClient,
    ids: Vec<String>,
    text: std::sync::Arc<str>,
) -> Result<(usize, bool), String> {
    for (i, task_id) in ids.iter().enumerate() {
        let id = cl.id();
        let what = format!("tasks/get of the session's task #{i} after the fill");
        let (got, _, _) = cl.rpc(task_request(id, "tasks/get", task_id), id, &what).await?;
        if got.status.as_deref() != Some("completed") {
            return Err(format!("{what}: status {:?}, expected completed", got.status));
        }
    }
    let Some(first) = ids.first() else { return Ok((0, false)) };
    let id = cl.id();
    let (res, _, _) = cl.rpc(task_request(id, "tasks/result", first), id, "tasks/result of the first task").await?;
    if res.content.first().and_then(|c| c.text.as_deref()) != Some(&*text) {
        return Err("tasks/result of the first task after the fill: not its echo".into());
    }
    Ok((ids.len(), true))
}

// ---------------------------------------------------------------------------------------
// stdio load
// ---------------------------------------------------------------------------------------

type Stdout = tokio::io::BufReader<tokio::process::ChildStdout>;

/// Reads the next message line.
async fn read_reply(r: &mut Stdout, line: &mut String) -> Result<Reply, String> {
    line.clear();
    let n = tokio::time::timeout(TIMEOUT, r.read_line(line))
        .await
        .map_err(|_| format!("no line within {TIMEOUT:?}"))?
        .map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the process closed its stdout".into());
    }
    Reply::parse(line.trim_end().as_bytes())
}

/// One client on the process's stdin/stdout: `initialize`, then `c` echo calls kept in flight
/// on the pipe (a closed loop per slot). Ends by closing stdin; the process must then exit.
async fn stdio_echo(mut proc: Proc, c: usize, plan: Plan) -> Result<Run, String> {
    let stdin = proc.child.stdin.take().expect("piped");
    let stdout = proc.child.stdout.take().expect("piped");
    let mut w = tokio::process::ChildStdin::from_std(stdin).map_err(|e| e.to_string())?;
    let mut r = tokio::io::BufReader::new(tokio::process::ChildStdout::from_std(stdout).map_err(|e| e.to_string())?);
    let mut line = String::new();
    w.write_all(format!("{}\n", initialize_request(0, PROTOCOL_VERSION)).as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let reply = read_reply(&mut r, &mut line).await?;
        if reply.answers(0) {
            reply.ok()?;
            break;
        }
    }
    w.write_all(format!("{INITIALIZED}\n").as_bytes()).await.map_err(|e| e.to_string())?;

    // The gateway's upstream child, if any, is watched too.
    let mut watched = vec![proc.watch(if proc.name.starts_with("gateway") { "gateway" } else { "demo" })];
    let upstream = children_of(proc.pid());
    for child in &upstream {
        watched.push(("upstream demo".to_string(), *child));
    }
    let window = Window::after_warmup(plan);
    let work = async {
        let mut tally = Tally::new();
        let mut in_flight: HashMap<u64, Instant> = HashMap::with_capacity(c);
        let mut next_id = 1u64;
        let mut batch = String::new();
        for _ in 0..c {
            batch.push_str(&echo_request(next_id));
            batch.push('\n');
            in_flight.insert(next_id, Instant::now());
            next_id += 1;
        }
        w.write_all(batch.as_bytes()).await.map_err(|e| e.to_string())?;
        while !in_flight.is_empty() {
            let reply = read_reply(&mut r, &mut line).await?;
            let Some(id) = reply.id.as_ref().and_then(serde_json::Value::as_u64).filter(|_| reply.method.is_none())
            else {
                continue;
            };
            let t1 = Instant::now();
            let t0 = in_flight.remove(&id).ok_or_else(|| format!("a response to unknown id {id}"))?;
            reply.ok()?;
            if window.contains(t1) {
                tally.done += 1;
                tally.record(t1 - t0);
            }
            if t1 < window.end {
                let msg = format!("{}\n", echo_request(next_id));
                in_flight.insert(next_id, Instant::now());
                next_id += 1;
                w.write_all(msg.as_bytes()).await.map_err(|e| e.to_string())?;
            }
        }
        Ok(tally)
    };
    let run = measure(window, &watched, work).await;
    drop(w);
    drop(r);
    if !proc.wait_exit(Duration::from_secs(5)) {
        eprintln!("{} did not exit when its stdin closed", proc.name);
    }
    proc.stop();
    check_gone(&upstream);
    run
}
