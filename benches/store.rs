//! What durability costs: one task lifecycle (create → input required → working → completed
//! with a 1 KiB result → get → expire) on the memory store and on the file store, in the
//! same run.
//!
//! ```sh
//! cargo bench --bench store               # criterion timings, then the CPU ratio
//! cargo bench --bench store -- --quick
//! ```
//!
//! After criterion's timings it prints the CPU time per lifecycle of each store (the whole
//! process's, so the file store's writer thread counts), run one after another (each durable
//! write awaited before the next step, the worst case for group commit) and 64 at a time,
//! and the file/memory ratio. Wall time on the file store is mostly fsync waits, which cost
//! no CPU: the ratio is the figure the issue's target (≤ 2×) is about.

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

fn ratio(_: &mut Criterion) {
    let rt = runtime();
    let (_dir, mem, file) = stores();
    let n = 2000;
    for at_once in [1, 64] {
        let m = cpu_per_lifecycle(&rt, &mem, n, at_once, 0);
        let f = cpu_per_lifecycle(&rt, &file, n, at_once, 10_000_000 * at_once);
        println!(
            "task lifecycle CPU, {at_once} at a time: memory {:.1} µs, file {:.1} µs, file/memory {:.2}×",
            m.as_secs_f64() * 1e6,
            f.as_secs_f64() * 1e6,
            f.as_secs_f64() / m.as_secs_f64()
        );
    }
}

criterion_group! {
    name = store;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    targets = store_lifecycle, ratio
}
criterion_main!(store);
