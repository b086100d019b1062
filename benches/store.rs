//! What durability costs: one task lifecycle (create → input required → working → completed
//! with a 1 KiB result → get → expire) on the memory store and on the file store, in the
//! same run.
//!
//! ```sh
//! cargo bench --bench store               # criterion timings, then the CPU ratio
//! cargo bench --bench store -- --quick
//! ```
//!
//! After criterion's timings it prints two CPU figures per lifecycle, one at a time (each
//! durable write awaited before the next step) and 64 at a time, each with its file/memory
//! ratio: the file store at its default `sync_interval` (10 ms) and at 0 (every write
//! committed and awaited at once, a new task's too), in the same run as the memory store.
//!
//! - **Store-only**: the lifecycle above on the store alone, the whole process's CPU (the
//!   writer thread and fsync's kernel time included). Three runs on the 2-core development
//!   machine, other builds running: memory 1.4–2.2 µs; file 508–543 µs one at a time
//!   (233–262×; 0: 430–542 µs), 21–39 µs 64 at a time (15–18×; 0: 22–47 µs). The floor is
//!   redb's: a durable commit costs 150–400 µs of CPU here (most of it the kernel's fsync,
//!   more when it follows an idle gap), and each 1.2 KiB row 5–8 µs more; a lifecycle of a
//!   microsecond of map operations cannot come within 2× of that.
//! - **Gateway**: what an operator pays, `taskgate stdio` in front of the builtin demo
//!   (`tools/call` of the echo with `task` → `tasks/get` → `tasks/result`, a ~1 KiB result,
//!   ttl 1 s so the sweeper removes it), the gateway process's CPU over all its threads.
//!   Same three runs: memory 108–184 µs one at a time, 88–128 µs 64 at a time; file
//!   853–1059 µs one at a time (5.3–7.9×: one fsync per task end, which costs more than the
//!   whole in-memory lifecycle; 0: 733–873 µs, two fsyncs back to back) and 132–207 µs 64 at
//!   a time (1.3–2.4×; 0: 497–595 µs, 4.7–6.4×).
//!
//! Wall time on the file store is mostly fsync waits and the sync interval, which cost no CPU.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use taskgate::{FileStore, MemoryStore, TaskRecord, TaskStatus, TaskStore};

fn outcome() -> Arc<str> {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}",
        "x".repeat(960)
    )
    .into()
}

async fn lifecycle(s: &dyn TaskStore, i: u64, outcome: &Arc<str>) {
    let id = format!("{i:032x}");
    let rec = TaskRecord::new(
        id.clone(),
        "owner".into(),
        "owner".into(),
        "up".into(),
        Duration::ZERO,
        Duration::from_secs(1),
    );
    s.insert(rec, usize::MAX).await.unwrap();
    s.update(&id, &mut |r| r.status = TaskStatus::InputRequired).await.unwrap();
    s.update(&id, &mut |r| r.status = TaskStatus::Working).await.unwrap();
    s.update(&id, &mut |r| {
        r.status = TaskStatus::Completed;
        r.outcome = Some(outcome.clone());
        r.last_updated_at = SystemTime::now();
    })
    .await
    .unwrap();
    black_box(s.get(&id).await.unwrap());
    // A ttl of zero: gone once the reap grace has passed.
    let later = SystemTime::now() + Duration::from_secs(2);
    assert!(s.remove_if_expired(&id, later).await.is_some());
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn stores() -> (tempfile::TempDir, MemoryStore, FileStore) {
    let dir = tempfile::tempdir().unwrap();
    let file = FileStore::open(dir.path(), usize::MAX, usize::MAX).unwrap();
    (dir, MemoryStore::new(usize::MAX, usize::MAX), file)
}

fn store_lifecycle(c: &mut Criterion) {
    let rt = runtime();
    let (_dir, mem, file) = stores();
    let out = outcome();
    let mut n = 0u64;
    let mut g = c.benchmark_group("task_lifecycle");
    g.bench_function("memory", |b| {
        b.iter(|| {
            n += 1;
            rt.block_on(lifecycle(&mem, n, &out))
        })
    });
    g.bench_function("file", |b| {
        b.iter(|| {
            n += 1;
            rt.block_on(lifecycle(&file, n, &out))
        })
    });
    g.finish();
}

/// The process's CPU time so far (all threads).
fn cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// CPU per lifecycle, `n` lifecycles, `at_once` of them at a time.
fn cpu_per_lifecycle(rt: &tokio::runtime::Runtime, s: &dyn TaskStore, n: u64, at_once: u64, base: u64) -> Duration {
    let out = outcome();
    let start = cpu();
    rt.block_on(async {
        for batch in 0..n / at_once {
            let runs = (0..at_once).map(|k| lifecycle(s, base + batch * at_once + k, &out));
            futures_util::future::join_all(runs).await;
        }
    });
    (cpu() - start) / n as u32
}

/// Store-only CPU per lifecycle: memory, then the file store at its default sync interval
/// and with `sync_interval = 0`, one at a time and 64 at a time.
fn ratio(_: &mut Criterion) {
    let rt = runtime();
    let (_dir, mem, file) = stores();
    let strict_dir = tempfile::tempdir().unwrap();
    let strict = FileStore::open_synced(strict_dir.path(), usize::MAX, usize::MAX, Duration::ZERO).unwrap();
    let n = 2000;
    for at_once in [1, 64] {
        let m = cpu_per_lifecycle(&rt, &mem, n, at_once, 0);
        let f = cpu_per_lifecycle(&rt, &file, n, at_once, 10_000_000 * at_once);
        let z = cpu_per_lifecycle(&rt, &strict, n, at_once, 10_000_000 * at_once);
        println!(
            "store-only lifecycle CPU, {at_once} at a time: memory {:.1} µs, file {:.1} µs ({:.1}×), file with sync_interval 0 {:.1} µs ({:.1}×)",
            us(m),
            us(f),
            us(f) / us(m),
            us(z),
            us(z) / us(m)
        );
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `taskgate stdio` in front of the builtin demo, with `tasks` as its `[tasks]` table; stopped
/// by its pid when dropped.
struct Gateway {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
    next_id: u64,
    _dir: tempfile::TempDir,
}

impl Gateway {
    fn start(tasks: &str) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.toml");
        let data = dir.path().join("data");
        // Finished tasks are kept for their ttl (1 s, the least): room for them all.
        let text = format!(
            "[tasks]\nmax_tasks = 1000000\n{}\n[[upstream]]\nname = \"demo\"\nbuiltin = \"demo\"\n[upstream.tasks]\nmax_tasks_per_owner = 1000000\n",
            tasks.replace("DATA", &format!("{data:?}"))
        );
        std::fs::write(&config, text).unwrap();
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_taskgate"))
            .args(["stdio", "--config", config.to_str().unwrap(), "--upstream", "demo"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut g = Gateway { child, input, output, next_id: 0, _dir: dir };
        let init = serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}});
        g.round("initialize", vec![init]);
        g.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        g
    }

    fn send(&mut self, msg: &serde_json::Value) {
        use std::io::Write;
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.input.write_all(&line).unwrap();
    }

    /// Sends one `method` request per params, all at once, and returns their results in order.
    fn round(&mut self, method: &str, params: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
        use std::io::BufRead;
        let first = self.next_id;
        for p in &params {
            self.next_id += 1;
            let id = self.next_id;
            self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": p}));
        }
        let mut results = vec![serde_json::Value::Null; params.len()];
        let mut left = params.len();
        let mut line = String::new();
        while left > 0 {
            line.clear();
            assert!(self.output.read_line(&mut line).unwrap() > 0, "the gateway closed its output");
            let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
            let Some(id) = msg.get("id").and_then(|i| i.as_u64()).filter(|_| msg.get("method").is_none()) else {
                continue;
            };
            let result = msg.get("result").unwrap_or_else(|| panic!("{method}: {msg}"));
            results[(id - first - 1) as usize] = result.clone();
            left -= 1;
        }
        results
    }

    /// The gateway's CPU time so far, all its threads (each thread's scheduler run time).
    fn cpu(&self) -> Duration {
        let mut ns = 0u64;
        for t in std::fs::read_dir(format!("/proc/{}/task", self.child.id())).unwrap() {
            let stat = std::fs::read_to_string(t.unwrap().path().join("schedstat")).unwrap_or_default();
            ns += stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
        Duration::from_nanos(ns)
    }

    /// `n` lifecycles, `at_once` at a time: `tools/call` with `task` (the echo of 400
    /// characters, a stored result of ~1 KiB) with a ttl of 1 s, `tasks/get`, `tasks/result`;
    /// the gateway's sweeper removes the task a second later. The gateway's CPU per lifecycle.
    fn lifecycles(&mut self, n: usize, at_once: usize) -> Duration {
        let text = "x".repeat(400);
        let start = self.cpu();
        for _ in 0..n / at_once {
            let calls =
                vec![serde_json::json!({"name": "echo", "arguments": {"text": text}, "task": {"ttl": 1000}}); at_once];
            let ids: Vec<serde_json::Value> = self
                .round("tools/call", calls)
                .iter()
                .map(|r| serde_json::json!({"taskId": r["task"]["taskId"]}))
                .collect();
            self.round("tasks/get", ids.clone());
            for r in self.round("tasks/result", ids) {
                assert_eq!(r["content"][0]["text"].as_str().map(str::len), Some(400), "{r}");
            }
        }
        (self.cpu() - start) / n as u32
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// The gateway's CPU per task lifecycle through the real request path, memory vs file store
/// (the default sync interval, 0, and `durability = "interval"`), in the same run.
fn gateway_ratio(_: &mut Criterion) {
    let mut mem = Gateway::start("store = \"memory\"");
    let mut file = Gateway::start("store = \"file\"\npath = DATA");
    let mut strict = Gateway::start("store = \"file\"\npath = DATA\nsync_interval = \"0ms\"");
    let mut interval = Gateway::start("store = \"file\"\npath = DATA\ndurability = \"interval\"");
    for (at_once, n) in [(1, 1000), (64, 6400)] {
        // Warm-up: connections, allocator, the demo's first call.
        for g in [&mut mem, &mut file, &mut strict, &mut interval] {
            g.lifecycles(at_once, at_once);
        }
        let m = mem.lifecycles(n, at_once);
        let f = file.lifecycles(n, at_once);
        let z = strict.lifecycles(n, at_once);
        let i = interval.lifecycles(n, at_once);
        println!(
            "gateway lifecycle CPU (stdio, demo echo), {at_once} at a time: memory {:.1} µs, file {:.1} µs ({:.2}×), file with sync_interval 0 {:.1} µs ({:.2}×), file with durability interval {:.1} µs ({:.2}×)",
            us(m),
            us(f),
            us(f) / us(m),
            us(z),
            us(z) / us(m),
            us(i),
            us(i) / us(m)
        );
    }
}

criterion_group! {
    name = store;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    targets = store_lifecycle, ratio, gateway_ratio
}
criterion_main!(store);
