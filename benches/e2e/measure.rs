//! The measured window and the `/proc` readings around it: CPU time per process and for the
//! whole machine, memory, and the wait for a quiet machine before each side.

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

/// Runs `work` (which stops by itself at the window's end) while reading the CPU time of the
/// watched processes and of this process at the window's start and end.
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
    let tally = tally?;
    if tally.done == 0 {
        return Err("nothing completed in the measured window".into());
    }
    Ok(Run::between(tally, watched, &before, &after, idle_rss_kb))
}

/// CPU readings at one instant: each watched process, this process, the whole machine (µs).
pub(crate) struct Sample {
    pub(crate) at: Instant,
    pub(crate) watched: Vec<f64>,
    pub(crate) me: f64,
    pub(crate) machine: f64,
}

impl Sample {
    pub(crate) fn take(watched: &[(String, u32)]) -> Sample {
        Sample {
            at: Instant::now(),
            watched: watched.iter().map(|(_, pid)| cpu_us(&pid.to_string())).collect(),
            me: cpu_us("self"),
            machine: machine_busy_us(),
        }
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

/// A `kB` line of `/proc/<pid>/status` (`VmHWM:`, `VmRSS:`).
pub(crate) fn proc_status_kb(pid: u32, key: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return 0 };
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l[key.len()..].split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
