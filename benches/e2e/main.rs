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
//! Every server is a separate process: the optimized `taskgate` binary that cargo builds for
//! this bench (`CARGO_BIN_EXE_taskgate`) for the gateway and the demo server, and this bench
//! binary itself, started again with [`lean::ARG`], for the lean echo upstream of the echo
//! cases. Each run starts its own processes and stops them by pid. The load generator is this
//! process: a single-threaded tokio runtime holding `c` client sessions, each initialized once
//! and then calling a tool in a closed loop.
//!
//! The echo cases (`http_echo`, `stdio_echo`) run against the lean upstream ([`lean`]), both
//! directly and behind the gateway, so that their ratio measures the gateway rather than the
//! demo server; the upstream's own CPU per request is printed beside the gateway's. The
//! progress and tasks cases need the demo's `slow` tool and hosted tasks, and keep it.
//!
//! Figures per case and side: requests/s over the measured window (after a warm-up),
//! p50/p99 latency from an HDR histogram, CPU time (user+sys from `/proc/<pid>/stat`, over the
//! measured window) per request of every process involved, their read/write-like system calls
//! per request over the same window, and peak RSS (`VmHWM`). The system calls are `syscr` +
//! `syscw` of `/proc/<pid>/io` (all the process's threads): `read`, `write`, `readv`,
//! `writev` and the like on any descriptor, but not the socket-only `recvfrom`/`sendto`/
//! `recvmsg`/`sendmsg` (Rust's `TcpStream::read` is a `recv`), nor `epoll_wait`, `futex` or
//! any other call ([`measure::rw_syscalls`]): a part of all system calls, not their total, so
//! not comparable with an strace count. A run whose `/proc/<pid>/io` cannot be read fails.
//! The last lines printed are one machine-readable line per case:
//!
//! `e2e <case> c=<n> direct_rps=<x> gateway_rps=<y> ratio=<y/x> p50_added_us=<a> p99_added_us=<b> cpu_us_per_req=<c> rss_mb=<m> cpu_x_upstream=<u> rw_syscalls_per_req=<s> cpu_x_plain=<t>`
//!
//! where `cpu_us_per_req`, `rss_mb` and `rw_syscalls_per_req` are the gateway process's
//! (MiB of VmHWM), `cpu_x_upstream` is the gateway's CPU per request divided by the
//! upstream's alone (its CPU per request on the direct side of the same run; the echo cases
//! only), `cpu_x_plain` is a task's whole lifecycle (create, get, result) over a plain call
//! through the same gateway in the same run (the `tasks` case only), and `-` stands for a
//! figure a case has no baseline for.
//!
//! Everything shares the machine's cores (2 on the project's machines): the load generator,
//! the upstream and the gateway. Each side first waits (bounded) for the machine to be idle,
//! and reports the CPU that anything else used during its window (`/proc/stat` minus the
//! watched processes); a run marked NOISY competed with another workload.
//!
//! Modules: [`cases`] runs each case's sides; [`http_load`], [`stdio_load`] and [`tasks`] are
//! the load generator's workloads, on [`mcp`]'s messages; [`procs`] starts and stops the
//! processes; [`measure`] holds the window and the `/proc` readings; [`report`] the figures.

mod cases;
mod http_load;
mod lean;
mod mcp;
mod measure;
mod procs;
mod report;
mod stdio_load;
mod tasks;

use std::time::{Duration, Instant};

/// The optimized binary cargo built for this bench target (profile `bench`).
pub(crate) const TASKGATE: &str = env!("CARGO_BIN_EXE_taskgate");
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";
/// Bound on any single request, read or process start: a run that exceeds it fails loudly.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// What to run
// ---------------------------------------------------------------------------------------

/// What a case runs; each case prints one line of the final report.
#[derive(Clone, Copy)]
pub(crate) enum Workload {
    /// `tools/call echo` over Streamable HTTP (JSON responses), `c` sessions, one keep-alive
    /// connection each. Direct: the lean HTTP upstream itself ([`lean`]); gateway: `taskgate
    /// serve` in front of the same lean upstream.
    HttpEcho,
    /// `tools/call echo` over stdio; `c` requests pipelined on the one pipe (the stdio
    /// transport has exactly one client session). Direct: the lean stdio upstream; gateway:
    /// `taskgate stdio` in front of it (the gateway starts it as its child).
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
    /// ([`tasks::RETAINED_TASKS`] in all, echo texts of [`tasks::RETAINED_TEXT_LEN`] characters, every task
    /// fetched with `tasks/result`, so completed), in a store that keeps them all (long ttl,
    /// `max_tasks` and `max_tasks_per_owner` large enough). `rss_mb` is the gateway's VmRSS
    /// after the fill minus its idle VmRSS (after initialize, see `Run::idle_rss_kb`);
    /// `gateway_rps` is tasks created (and fetched) per second during the fill. Afterwards
    /// every task must still answer `tasks/get` with `completed` and each session's first
    /// task its result: the retention is real. Between the idle reading and the fill, the
    /// sessions make plain echo calls of the same sizes ([`tasks::RETAINED_WARMUP_ROUNDS`]): the
    /// RSS read then, still without a task, is printed too, separating what every busy
    /// session holds anyway (its bounded SSE replay buffer keeps responses too) from what the
    /// retained tasks cost.
    TasksRetained,
    /// Shared against per-session links (`share`): `tools/call echo` over HTTP from `c`
    /// sessions, through `taskgate serve` in front of a stdio demo upstream, once with a child
    /// per session (`share = false`, the `direct` column of the e2e line) and once with one
    /// child for all (`share = true`, the `gateway` column). The gateway's CPU per call and its
    /// upstream processes' (summed) are printed side by side, and so is the peak RSS of the
    /// gateway and of its upstreams; the line's `rss_mb` is the shared side's gateway and
    /// upstream together.
    SharedLink,
}

pub(crate) struct Case {
    pub(crate) name: &'static str,
    pub(crate) c: usize,
    pub(crate) workload: Workload,
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
    Case { name: "shared_stdio", c: 32, workload: Workload::SharedLink },
];

#[derive(Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) warmup: Duration,
    pub(crate) measure: Duration,
    /// Steps of one `slow` call in the progress case (`duration_ms` 0: as fast as it can).
    /// (The demo on stdio no longer drops what its stdout queue cannot hold: it waits for the
    /// reader, so any number of steps arrives.)
    pub(crate) progress_steps: u64,
    /// How long each side may wait for the rest of the machine to go idle before it starts,
    /// and how long all sides together may (so that the run's duration stays bounded).
    pub(crate) quiet_wait: Duration,
    pub(crate) quiet_budget: Duration,
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
    // This binary started again as the lean upstream of the echo cases.
    if let Some(mode) = std::env::args().nth(1).as_deref().and_then(lean::mode_of_arg) {
        lean::run(mode, std::env::args().skip(2).collect());
        return;
    }
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
    lean::self_check();
    if let Err(e) = measure::rw_syscalls(std::process::id()) {
        eprintln!("e2e: {e}");
        std::process::exit(1);
    }
    let mut plan = if quick { Plan::quick() } else { Plan::full() };
    plan.warmup = warmup.unwrap_or(plan.warmup);
    plan.measure = measure.unwrap_or(plan.measure);
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("a temp dir");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");

    println!("taskgate e2e benchmark ({})", if quick { "quick" } else { "full" });
    println!("  binary: {TASKGATE}");
    println!("  lean upstream (echo cases): {} {}", lean::exe(), lean::ARG);
    println!(
        "  cores: {}, clock ticks/s: {}, warm-up {:?}, measured {:?} per side",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        measure::clock_ticks(),
        plan.warmup,
        plan.measure
    );
    println!("  load generator: this process, one thread; cpu = user+sys from /proc/<pid>/stat over the window");
    println!(
        "  rw syscalls = syscr+syscw from /proc/<pid>/io over the window, all threads: read/write/readv/writev and \
         the like; not recvfrom/sendto/recvmsg/sendmsg, epoll_wait, futex or any other call"
    );
    println!();

    let mut lines = Vec::new();
    let mut failed = false;
    let selected = |c: &&Case| {
        let id = format!("{}/{}", c.name, c.c);
        filters.is_empty() || filters.iter().any(|f| id.contains(f.as_str()))
    };
    for case in CASES.iter().filter(selected) {
        println!("{} c={}", case.name, case.c);
        match rt.block_on(cases::run_case(case, plan, tmp.path())) {
            Ok(line) => lines.push(line),
            Err(e) => {
                failed = true;
                println!("  FAILED: {e}");
                procs::dump_logs(tmp.path());
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
