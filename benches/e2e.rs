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
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const ECHO_TEXT: &str = "hello from the taskgate load generator";
/// Bound on any single request, read or process start: a run that exceeds it fails loudly.
const TIMEOUT: Duration = Duration::from_secs(10);

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
    // Hosted tasks go here: task-augmented `tools/call` through the gateway (create, then
    // `tasks/result`) per second, direct_rps=- (the demo has no tasks), and the gateway's RSS
    // with 10 000 completed tasks of 1 KiB results retained (reported against the idle
    // gateway's RSS, see `Run::idle_rss_kb`). Add a variant, a `CASES` entry, and an arm in
    // `run_case` that returns a `Line` (with `direct_rps: None` where there is no baseline).
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
];

#[derive(Clone, Copy)]
struct Plan {
    warmup: Duration,
    measure: Duration,
    /// Steps of one `slow` call in the progress case (`duration_ms` 0: as fast as it can).
    /// At most ~1000: the demo on stdio queues at most 1024 messages for its stdout and drops
    /// what does not fit (`src/demo.rs`, "stdout is not keeping up"), the final response
    /// included, so one call must not emit more at once.
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
    }
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
        let t0 = Instant::now();
        let before: Vec<f64> = watched.iter().map(|(_, pid)| cpu_us(&pid.to_string())).collect();
        let me0 = cpu_us("self");
        let machine0 = machine_busy_us();
        tokio::time::sleep_until(window.end.into()).await;
        let secs = t0.elapsed().as_secs_f64();
        let after: Vec<f64> = watched.iter().map(|(_, pid)| cpu_us(&pid.to_string())).collect();
        let me = cpu_us("self") - me0;
        let machine = machine_busy_us() - machine0;
        (secs, before, after, me, machine)
    };
    let (tally, (secs, before, after, loadgen_cpu_us, machine_us)) = tokio::join!(work, sampler);
    let tally = tally?;
    if tally.done == 0 {
        return Err("nothing completed in the measured window".into());
    }
    let cpu_us: Vec<(String, f64)> =
        watched.iter().zip(before.iter().zip(&after)).map(|((n, _), (b, a))| (n.clone(), a - b)).collect();
    let ours: f64 = cpu_us.iter().map(|(_, us)| us).sum::<f64>() + loadgen_cpu_us;
    let hwm_kb = watched.iter().map(|(n, pid)| (n.clone(), proc_status_kb(*pid, "VmHWM:"))).collect();
    let pids = watched.iter().map(|(n, pid)| format!("{n} {pid}")).collect::<Vec<_>>().join(", ");
    let background_cores = ((machine_us - ours) / 1e6 / secs).max(0.0);
    Ok(Run { tally, secs, cpu_us, loadgen_cpu_us, hwm_kb, idle_rss_kb, pids, background_cores })
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

fn initialize_request(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"taskgate-e2e-bench","version":"0.1.0"}}}}}}"#
    )
}

const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

fn echo_request(id: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{ECHO_TEXT}"}}}}}}"#
    )
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
    host: HeaderValue,
    path: String,
    session: Option<HeaderValue>,
    next_id: u64,
}

impl HttpClient {
    async fn connect(addr: SocketAddr, path: &str) -> Result<HttpClient, String> {
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
            host: HeaderValue::from_str(&addr.to_string()).expect("an address is a valid header"),
            path: path.to_string(),
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
            b = b.header(SESSION_HEADER, s.clone()).header(VERSION_HEADER, PROTOCOL_VERSION);
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
        let (status, sse, body) = self.post(initialize_request(id)).await?;
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

async fn connect_sessions(addr: SocketAddr, path: &str, c: usize) -> Result<Vec<HttpClient>, String> {
    let mut clients = Vec::with_capacity(c);
    for _ in 0..c {
        let mut cl = HttpClient::connect(addr, path).await?;
        cl.initialize().await?;
        clients.push(cl);
    }
    Ok(clients)
}

async fn http_echo(addr: SocketAddr, path: &str, c: usize, plan: Plan, watch: &[(&str, &Proc)]) -> Result<Run, String> {
    let clients = connect_sessions(addr, path, c).await?;
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
    let mut clients = connect_sessions(addr, path, 1).await?;
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
    w.write_all(format!("{}\n", initialize_request(0)).as_bytes()).await.map_err(|e| e.to_string())?;
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
