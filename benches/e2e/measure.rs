//! The measured window and the `/proc` readings around it: CPU time per process and for the
//! whole machine, read/write-like system calls per process, memory, and the wait for a quiet
//! machine before each side.

use crate::Plan;
use crate::report::{Run, Tally};
use std::time::{Duration, Instant};

#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub(crate) start: Instant,
    pub(crate) end: Instant,
}

impl Window {
    pub(crate) fn after_warmup(plan: Plan) -> Window {
        let start = Instant::now() + plan.warmup;
        Window { start, end: start + plan.measure }
    }

    pub(crate) fn contains(&self, t: Instant) -> bool {
        t >= self.start && t < self.end
    }
}

/// Runs `work` (which stops by itself at the window's end) while reading the CPU time (and
/// the read/write-like system calls) of the watched processes and of this process at the
/// window's start and end.
pub(crate) async fn measure(
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
    let (tally, before, after) = (tally?, before?, after?);
    if tally.done == 0 {
        return Err("nothing completed in the measured window".into());
    }
    Ok(Run::between(tally, watched, &before, &after, idle_rss_kb))
}

/// Readings at one instant: CPU (µs) of each watched process, of this process and of the
/// whole machine, and the read/write-like system calls of each watched process.
pub(crate) struct Sample {
    pub(crate) at: Instant,
    pub(crate) watched: Vec<f64>,
    pub(crate) rw_syscalls: Vec<u64>,
    pub(crate) me: f64,
    pub(crate) machine: f64,
}

impl Sample {
    /// Fails if a watched process's `/proc/<pid>/io` cannot be read: a run without its
    /// system call counts is not reported with zeros.
    pub(crate) fn take(watched: &[(String, u32)]) -> Result<Sample, String> {
        let rw_syscalls = watched
            .iter()
            .map(|(role, pid)| rw_syscalls(*pid).map_err(|e| format!("{role}: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Sample {
            at: Instant::now(),
            watched: watched.iter().map(|(_, pid)| cpu_us(&pid.to_string())).collect(),
            rw_syscalls,
            me: cpu_us("self"),
            machine: machine_busy_us(),
        })
    }
}

/// Waits, at most `plan.quiet_wait`, until the machine is idle (nothing of this bench runs
/// between sides), so that a run does not start while another workload holds the cores.
pub(crate) async fn wait_for_quiet(plan: Plan) {
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

pub(crate) fn clock_ticks() -> u64 {
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

/// Read-like plus write-like system calls a process has made so far, over all its threads
/// (and the threads that have ended): `syscr` + `syscw` of `/proc/<pid>/io`. The kernel
/// counts there the calls of its file read/write paths: `read`, `readv`, `pread64`,
/// `preadv`, `write`, `writev`, `pwrite64`, `pwritev`, `sendfile`, `copy_file_range`, on any
/// descriptor (a socket, a pipe, an eventfd). Not counted: the socket-only calls (`recvfrom`,
/// `recvmsg`, `sendto`, `sendmsg`; Rust's `TcpStream::read` is a `recv`, i.e. `recvfrom`),
/// nor `epoll_wait`, `futex`, `accept4`, `close` or any other. A part of all system calls,
/// not their total.
pub(crate) fn rw_syscalls(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/io");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {path} ({e}): the e2e bench counts system calls there (syscr, syscw)"))?;
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("{path} has no {key} line: {text:?}"))
    };
    Ok(field("syscr:")? + field("syscw:")?)
}

/// A `kB` line of `/proc/<pid>/status` (`VmHWM:`, `VmRSS:`).
pub(crate) fn proc_status_kb(pid: u32, key: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return 0 };
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
