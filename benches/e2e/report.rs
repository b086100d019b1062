//! The figures: what a run's workers tally, one side's run, and the machine-readable line of
//! a case.

use crate::Case;
use crate::measure::{Sample, proc_status_kb};
use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::time::Duration;

/// What the workers of one run collected inside the measured window.
pub(crate) struct Tally {
    /// Requests (or notifications, for progress) completed in the window.
    pub(crate) done: u64,
    /// Latency in nanoseconds of the requests completed in the window.
    pub(crate) hist: Histogram<u64>,
    /// Responses that came as an event stream rather than plain JSON.
    pub(crate) sse: u64,
    /// Progress calls whose final progress value never arrived.
    pub(crate) lost: u64,
    /// Progress notifications that arrived in the window.
    pub(crate) events: u64,
    /// Event streams that ended before their response and were resumed (`Last-Event-ID`).
    pub(crate) resumed: u64,
    /// Tasks whose `CreateTaskResult` had a status other than `working`.
    pub(crate) not_working: u64,
}

impl Tally {
    pub(crate) fn new() -> Tally {
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

    pub(crate) fn record(&mut self, d: Duration) {
        self.hist.saturating_record(d.as_nanos().max(1) as u64);
    }

    pub(crate) fn merge(&mut self, o: Tally) {
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
pub(crate) struct Run {
    pub(crate) tally: Tally,
    pub(crate) secs: f64,
    /// CPU µs over the window, per watched process; the first is the server under test.
    pub(crate) cpu_us: Vec<(String, f64)>,
    /// Read/write-like system calls over the window, per watched process, in the same order
    /// (see [`crate::measure::rw_syscalls`] for which calls these are).
    pub(crate) rw_syscalls: Vec<(String, u64)>,
    /// CPU µs of this process (the load generator) over the window.
    pub(crate) loadgen_cpu_us: f64,
    /// Peak RSS (VmHWM, kB) per watched process, read at the end of the run.
    pub(crate) hwm_kb: Vec<(String, u64)>,
    /// RSS (kB) of the server under test right after its sessions were set up, before load.
    pub(crate) idle_rss_kb: u64,
    /// The watched processes' roles and pids.
    pub(crate) pids: String,
    /// CPU the rest of the machine used during the window, in cores: anything above ~0.05
    /// means another workload competed with this run and its figures are suspect.
    pub(crate) background_cores: f64,
}

impl Run {
    /// The run whose span `before`..`after` did `tally`'s work.
    pub(crate) fn between(
        tally: Tally,
        watched: &[(String, u32)],
        before: &Sample,
        after: &Sample,
        idle_rss_kb: u64,
    ) -> Run {
        let secs = (after.at - before.at).as_secs_f64();
        let cpu_us: Vec<(String, f64)> = watched
            .iter()
            .zip(before.watched.iter().zip(&after.watched))
            .map(|((n, _), (b, a))| (n.clone(), a - b))
            .collect();
        let rw_syscalls = watched
            .iter()
            .zip(before.rw_syscalls.iter().zip(&after.rw_syscalls))
            .map(|((n, _), (b, a))| (n.clone(), a.saturating_sub(*b)))
            .collect();
        let loadgen_cpu_us = after.me - before.me;
        let ours: f64 = cpu_us.iter().map(|(_, us)| us).sum::<f64>() + loadgen_cpu_us;
        let hwm_kb = watched.iter().map(|(n, pid)| (n.clone(), proc_status_kb(*pid, "VmHWM:"))).collect();
        let pids = watched.iter().map(|(n, pid)| format!("{n} {pid}")).collect::<Vec<_>>().join(", ");
        let background_cores = ((after.machine - before.machine - ours) / 1e6 / secs).max(0.0);
        Run { tally, secs, cpu_us, rw_syscalls, loadgen_cpu_us, hwm_kb, idle_rss_kb, pids, background_cores }
    }

    pub(crate) fn rate(&self) -> f64 {
        self.tally.done as f64 / self.secs
    }

    pub(crate) fn quantile_us(&self, q: f64) -> f64 {
        self.tally.hist.value_at_quantile(q) as f64 / 1000.0
    }

    pub(crate) fn cpu_per(&self, i: usize) -> f64 {
        self.cpu_us.get(i).map(|(_, us)| us / self.tally.done.max(1) as f64).unwrap_or(0.0)
    }

    /// Read/write-like system calls per request of the `i`th watched process.
    pub(crate) fn rw_syscalls_per(&self, i: usize) -> f64 {
        self.rw_syscalls.get(i).map(|(_, n)| *n as f64 / self.tally.done.max(1) as f64).unwrap_or(0.0)
    }

    pub(crate) fn print(&self, side: &str, unit: &str) {
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
        let calls: Vec<String> = self.rw_syscalls.iter().map(|(n, c)| format!("{n} {:.1}", *c as f64 / per)).collect();
        println!("  {:<8} rw syscalls/{unit} (read/write-like only, /proc/<pid>/io): {}", "", calls.join(", "));
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
pub(crate) struct Line {
    pub(crate) case: &'static str,
    pub(crate) c: usize,
    pub(crate) direct_rps: Option<f64>,
    pub(crate) gateway_rps: f64,
    pub(crate) p50_added_us: Option<f64>,
    pub(crate) p99_added_us: Option<f64>,
    pub(crate) cpu_us_per_req: f64,
    pub(crate) rss_mb: f64,
    /// The gateway's CPU per request over the upstream's alone (the direct side's), for the
    /// cases whose direct side is that upstream by itself (the echo cases).
    pub(crate) cpu_x_upstream: Option<f64>,
    /// The gateway process's read/write-like system calls per request.
    pub(crate) rw_syscalls_per_req: f64,
    /// For the `tasks` case: the gateway's CPU per task lifecycle (create, get, result) over
    /// its CPU per plain call in front of the same upstream, in the same run.
    pub(crate) cpu_x_plain: Option<f64>,
}

impl Line {
    pub(crate) fn compare(case: &Case, direct: &Run, gateway: &Run) -> Line {
        Line {
            case: case.name,
            c: case.c,
            direct_rps: Some(direct.rate()),
            gateway_rps: gateway.rate(),
            p50_added_us: Some(gateway.quantile_us(0.50) - direct.quantile_us(0.50)),
            p99_added_us: Some(gateway.quantile_us(0.99) - direct.quantile_us(0.99)),
            cpu_us_per_req: gateway.cpu_per(0),
            rss_mb: gateway.hwm_kb.first().map(|(_, kb)| *kb as f64 / 1024.0).unwrap_or(0.0),
            cpu_x_upstream: None,
            rw_syscalls_per_req: gateway.rw_syscalls_per(0),
            cpu_x_plain: None,
        }
    }

    /// A case with no direct baseline. Its latency figures are the gateway's own, not added
    /// latency, so the line's `p50_added_us`/`p99_added_us` are `-` rather than an absolute
    /// figure under an "added" name that a reader or script would compare with the others;
    /// the absolute p50/p99 are in the case's human-readable lines.
    pub(crate) fn gateway_only(case: &Case, gateway: &Run) -> Line {
        Line {
            case: case.name,
            c: case.c,
            direct_rps: None,
            gateway_rps: gateway.rate(),
            p50_added_us: None,
            p99_added_us: None,
            cpu_us_per_req: gateway.cpu_per(0),
            rss_mb: gateway.hwm_kb.first().map(|(_, kb)| *kb as f64 / 1024.0).unwrap_or(0.0),
            cpu_x_upstream: None,
            rw_syscalls_per_req: gateway.rw_syscalls_per(0),
            cpu_x_plain: None,
        }
    }

    pub(crate) fn render(&self) -> String {
        let opt = |v: Option<f64>, prec: usize| v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "-".into());
        let ratio = self.direct_rps.filter(|d| *d > 0.0).map(|d| self.gateway_rps / d);
        format!(
            "e2e {} c={} direct_rps={} gateway_rps={:.0} ratio={} p50_added_us={} p99_added_us={} cpu_us_per_req={:.1} rss_mb={:.1} \
             cpu_x_upstream={} rw_syscalls_per_req={:.1} cpu_x_plain={}",
            self.case,
            self.c,
            opt(self.direct_rps, 0),
            self.gateway_rps,
            opt(ratio, 3),
            opt(self.p50_added_us, 1),
            opt(self.p99_added_us, 1),
            self.cpu_us_per_req,
            self.rss_mb,
            opt(self.cpu_x_upstream, 2),
            self.rw_syscalls_per_req,
            opt(self.cpu_x_plain, 2)
        )
    }
}
