//! Soak test: runs the real `taskgate serve` on 127.0.0.1 in front of the built-in demo, the
//! demo as a stdio child, and a scripted task-requiring upstream (in this process, over HTTP),
//! and drives mixed traffic for a set time: plain calls, progress, hosted tasks (create, get,
//! result, cancel), bridged tasks and their cancellation, session churn, and bad input. Every
//! response is checked against its request. The gateway's RSS, open fds and child processes
//! are read from /proc before, every few seconds under load, and for a while after the load
//! stops (idle); the run fails on any mismatch or on growth past the thresholds below.
//!
//! `scripts/soak [DURATION]` builds it in release and runs it; by hand:
//! `cargo run --release --example soak -- --taskgate target/release/taskgate --duration 2m --store memory`.

mod client;
mod ops;
#[path = "../../tests/common/pace.rs"]
mod pace;
#[path = "../../tests/common/proc_tree.rs"]
mod proc_tree;
mod upstream;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The gateway's request body limit in this run (the oversize case sends one byte more).
const MAX_BODY: usize = 65536;
/// After the warm-up, open fds may grow by at most this many (pooled upstream connections).
const FD_SLACK: usize = 16;
/// RSS at the end of the load may be at most this many percent above the warm figure.
const RSS_GROWTH_PCT: u64 = 20;
/// How often RSS, fds and children are read while the load runs and after it.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Stats {
    ops: Mutex<BTreeMap<&'static str, (u64, u64)>>,
    failures: Mutex<Vec<String>>,
}

impl Stats {
    fn record(&self, op: &'static str, outcome: ops::Check) {
        let mut m = self.ops.lock().unwrap();
        let e = m.entry(op).or_default();
        e.0 += 1;
        if let Err(why) = outcome {
            e.1 += 1;
            let mut f = self.failures.lock().unwrap();
            if f.len() < 20 {
                eprintln!("soak: MISMATCH in {op}: {why}");
                f.push(format!("{op}: {why}"));
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kb: u64,
    /// Of `rss_kb`, the anonymous part (the heap, stacks) and the file-backed part (mostly
    /// the binary's pages, which grow as code runs for the first time).
    anon_kb: u64,
    file_kb: u64,
    fds: usize,
    children: usize,
}

fn sample(pid: i32) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let (rss_kb, anon_kb, file_kb) = (kb("VmRSS:"), kb("RssAnon:"), kb("RssFile:"));
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    Sample { rss_kb, anon_kb, file_kb, fds, children: proc_tree::descendants(pid).len() }
}

fn print_sample(when: &str, s: Sample) {
    let mib = |kb: u64| kb as f64 / 1024.0;
    println!(
        "soak: {when:<8} rss={:.1} MiB (anon {:.1}, file {:.1}) fds={} children={}",
        mib(s.rss_kb),
        mib(s.anon_kb),
        mib(s.file_kb),
        s.fds,
        s.children
    );
}

struct Args {
    taskgate: String,
    duration: Duration,
    workers: usize,
    /// Run only these operations (to find which one a growth comes from).
    only: Option<Vec<String>>,
    /// The task store: `file` (in a temporary directory) or `memory`.
    store: String,
    /// How long RSS is watched after the load stops.
    idle: Duration,
    /// Where to write the gateway's whole log (stderr), besides keeping its tail.
    log: Option<String>,
}

const OPS: [&str; 8] =
    ["plain", "progress", "hosted", "hosted_cancel", "bridged", "bridged_cancel", "churn", "bad_input"];

/// The operation of step `n`: every one in turn, cancels and churn less often.
fn op_of(n: u64) -> &'static str {
    match n % 12 {
        0 | 6 => "plain",
        1 | 7 => "progress",
        2 | 8 => "hosted",
        3 => "hosted_cancel",
        4 | 10 => "bridged",
        5 if n % 24 == 5 => "bridged_cancel",
        5 | 11 => "churn",
        _ => "bad_input",
    }
}

fn args() -> Args {
    let mut a = Args {
        taskgate: "target/release/taskgate".into(),
        duration: Duration::from_secs(60),
        workers: 6,
        only: None,
        store: "file".into(),
        idle: Duration::from_secs(45),
        log: None,
    };
    let duration = |v: &str| taskgate::parse_duration(v).unwrap_or_else(|| panic!("bad duration {v:?}"));
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--taskgate" => a.taskgate = v,
            "--duration" => a.duration = duration(&v),
            "--idle" => a.idle = duration(&v),
            "--log" => a.log = Some(v),
            "--store" => {
                assert!(v == "file" || v == "memory", "--store file|memory");
                a.store = v;
            }
            "--workers" => a.workers = v.parse().expect("--workers N"),
            "--only" => {
                let only: Vec<String> = v.split(',').map(String::from).collect();
                assert!(only.iter().all(|o| OPS.contains(&o.as_str())), "--only takes some of {OPS:?}");
                a.only = Some(only);
            }
            _ => panic!(
                "unknown argument {k} (--taskgate PATH --duration 10m --idle 45s --store file|memory --workers N --only OP,OP --log FILE)"
            ),
        }
    }
    a
}

#[tokio::main]
async fn main() {
    let args = args();
    let (task_addr, tasks) = upstream::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("soak.toml");
    // Every worker connects from 127.0.0.1, which makes them one client (one task owner) to
    // the gateway: the per-owner task limit must hold all the workers' tasks within their ttl.
    std::fs::write(
        &config,
        format!(
            "[server]\nmax_body_bytes = {MAX_BODY}\nsession_idle_timeout = \"2m\"\n\n\
             [tasks]\nstore = {:?}\nmax_tasks = 5000\n\n\
             [[upstream]]\nname = \"demo\"\nbuiltin = \"demo\"\n\n[upstream.tasks]\nttl = \"3s\"\nmax_ttl = \"5s\"\nmax_tasks_per_owner = 5000\n\n\
             [[upstream]]\nname = \"stdio\"\ncommand = {:?}\nargs = [\"demo-server\"]\n\n\
             [[upstream]]\nname = \"tasky\"\nurl = \"http://{task_addr}/mcp\"\n\n[upstream.tasks]\nttl = \"30s\"\n",
            args.store, args.taskgate
        ),
    )
    .unwrap();

    let mut cmd = Command::new(&args.taskgate);
    cmd.args(["serve", "--config", config.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut gateway = proc_tree::own_group(&mut cmd).spawn().expect("start taskgate serve");
    let pid = gateway.id() as i32;
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let log_tail = Arc::new(Mutex::new(std::collections::VecDeque::<String>::new()));
    {
        let stderr = gateway.stderr.take().unwrap();
        let log_tail = log_tail.clone();
        let mut log = args.log.as_ref().map(|p| std::fs::File::create(p).expect("create the --log file"));
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(f) = log.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = addr_tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                let mut t = log_tail.lock().unwrap();
                if t.len() == 40 {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }
    let Ok(addr) = addr_rx.recv_timeout(Duration::from_secs(30)) else {
        proc_tree::stop_tree(&mut gateway, Duration::from_secs(5));
        panic!("taskgate did not start: {:?}", log_tail.lock().unwrap());
    };
    println!(
        "soak: taskgate pid {pid} on {addr}, task upstream on {task_addr}, {} workers, {:?}, {} store",
        args.workers, args.duration, args.store
    );
    let start = sample(pid);
    print_sample("start", start);

    let env = Arc::new(ops::Env { base: format!("http://{addr}"), http: client::http_client(), tasks: tasks.clone() });
    let stats = Arc::new(Stats::default());
    let began = Instant::now();
    let deadline = began + args.duration;
    let mut workers = Vec::new();
    for w in 0..args.workers {
        workers.push(tokio::spawn(worker(env.clone(), stats.clone(), w as u64, deadline, args.only.clone())));
    }
    let warmup = (args.duration / 5).min(Duration::from_secs(60));
    tokio::time::sleep(warmup).await;
    let warm = sample(pid);
    print_sample("warm", warm);
    let mut peak = warm;
    let mut last = warm;
    while Instant::now() < deadline {
        tokio::time::sleep(SAMPLE_EVERY.min(deadline.saturating_duration_since(Instant::now()))).await;
        let s = sample(pid);
        last = s;
        print_sample(&format!("{}s", began.elapsed().as_secs()), s);
        if s.rss_kb > peak.rss_kb {
            (peak.rss_kb, peak.anon_kb, peak.file_kb) = (s.rss_kb, s.anon_kb, s.file_kb);
        }
        peak.fds = peak.fds.max(s.fds);
        peak.children = peak.children.max(s.children);
        if proc_tree::alive(pid) && gateway.try_wait().ok().flatten().is_none() {
            continue;
        }
        stats.record("gateway", Err(format!("taskgate exited: {:?}", log_tail.lock().unwrap())));
        break;
    }
    for w in workers {
        if let Err(e) = w.await {
            stats.record("worker", Err(format!("a worker panicked: {e}")));
        }
    }
    let ran = began.elapsed();
    // The last sample under load; then the gateway idles (hosted tasks expire after their
    // 3-5 s ttl, idle pooled connections stay) and RSS is watched for `--idle`.
    let loaded = last;
    let idle_from = Instant::now();
    let mut end = sample(pid);
    while idle_from.elapsed() < args.idle {
        tokio::time::sleep(SAMPLE_EVERY.min(args.idle.saturating_sub(idle_from.elapsed()))).await;
        end = sample(pid);
        print_sample(&format!("idle {}s", idle_from.elapsed().as_secs()), end);
    }
    print_sample("start", start);
    print_sample("warm", warm);
    print_sample("peak", peak);
    print_sample("loaded", loaded);
    print_sample("idle", end);
    println!(
        "soak: rss_mib store={} start={:.1} warm={:.1} peak={:.1} end_of_load={:.1} idle_{}s={:.1}",
        args.store,
        start.rss_kb as f64 / 1024.0,
        warm.rss_kb as f64 / 1024.0,
        peak.rss_kb as f64 / 1024.0,
        loaded.rss_kb as f64 / 1024.0,
        args.idle.as_secs(),
        end.rss_kb as f64 / 1024.0
    );

    let requests = client::EXCHANGES.load(Ordering::Relaxed);
    let total_ops: u64 = stats.ops.lock().unwrap().values().map(|(n, _)| n).sum();
    for (op, (n, failed)) in stats.ops.lock().unwrap().iter() {
        println!("soak: {op:<15} {n:>8} ops {failed:>4} failed");
    }
    println!(
        "soak: {total_ops} operations, {requests} HTTP requests in {:.0} s ({:.0} req/s); task upstream served {} requests, holds {} tasks",
        ran.as_secs_f64(),
        requests as f64 / ran.as_secs_f64(),
        tasks.requests.load(Ordering::Relaxed),
        tasks.live_tasks()
    );

    let mut problems: Vec<String> = stats.failures.lock().unwrap().clone();
    if end.children > start.children {
        problems.push(format!("child processes: {} at start, {} at the end", start.children, end.children));
    }
    if end.fds > warm.fds + FD_SLACK {
        problems.push(format!("open fds: {} after warm-up, {} at the end (> +{FD_SLACK})", warm.fds, end.fds));
    }
    let rss_limit = warm.rss_kb + warm.rss_kb * RSS_GROWTH_PCT / 100;
    for (when, s) in [("at the end of the load", loaded), ("after idling", end)] {
        if s.rss_kb > rss_limit {
            problems.push(format!(
                "RSS: {} KiB after warm-up, {} KiB {when} (limit {rss_limit} KiB, +{RSS_GROWTH_PCT} %)",
                warm.rss_kb, s.rss_kb
            ));
        }
    }
    if total_ops == 0 {
        problems.push("no operation completed".into());
    }
    let left = proc_tree::stop_tree(&mut gateway, Duration::from_secs(5));
    if !left.is_empty() {
        problems.push(format!("processes left after stopping taskgate: {left:?}"));
    }
    if problems.is_empty() {
        println!("soak: PASS");
    } else {
        for p in &problems {
            eprintln!("soak: FAIL {p}");
        }
        eprintln!(
            "soak: gateway log tail:\n{}",
            log_tail.lock().unwrap().iter().cloned().collect::<Vec<_>>().join("\n")
        );
        std::process::exit(1);
    }
}

/// One closed-loop client: a 2025-11-25 session on the demo and a 2025-06-18 session on the
/// task upstream, cycling through every operation until the deadline; then both sessions end.
async fn worker(env: Arc<ops::Env>, stats: Arc<Stats>, w: u64, deadline: Instant, only: Option<Vec<String>>) {
    let mut demo = env.mcp("demo", "2025-11-25");
    let mut old = env.mcp("tasky", "2025-06-18");
    if let Err(e) = demo.initialize().await {
        return stats.record("initialize", Err(e));
    }
    if let Err(e) = old.initialize().await {
        return stats.record("initialize", Err(e));
    }
    let mut n = w * 1_000_000_000;
    while Instant::now() < deadline {
        n += 1;
        let op = op_of(n);
        if only.as_ref().is_some_and(|o| !o.iter().any(|x| x == op)) {
            continue;
        }
        let outcome = match op {
            "plain" => ops::plain(&demo, n).await,
            "progress" => ops::progress(&demo, n).await,
            "hosted" => ops::hosted(&demo, n).await,
            "hosted_cancel" => ops::hosted_cancel(&demo).await,
            "bridged" => ops::bridged(&old, n).await,
            "bridged_cancel" => ops::bridged_cancel(&env, &old, n).await,
            "churn" => ops::churn(&env, if n % 4 == 1 { "stdio" } else { "demo" }, n).await,
            _ => ops::bad_input(&demo, n, MAX_BODY).await,
        };
        stats.record(op, outcome);
    }
    for s in [&demo, &old] {
        match s.delete().await {
            Ok(200 | 204) => stats.record("delete", Ok(())),
            // With --only, a session no operation uses idles out (session_idle_timeout).
            Ok(404) if only.is_some() => stats.record("delete", Ok(())),
            other => stats.record("delete", Err(format!("DELETE at the end: {other:?}"))),
        }
    }
}
