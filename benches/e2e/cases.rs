//! Each case's sides: which processes to start, in front of what, and what load to put on them.

use crate::http_load::{UPSTREAM, http_echo, progress};
use crate::lean::{self, Mode};
use crate::measure::wait_for_quiet;
use crate::procs::{path_str, report_log_warnings, spawn_listening, spawn_stdio, write_config};
use crate::report::{Line, Run};
use crate::stdio_load::stdio_echo;
use crate::tasks::{RETAINED_TASKS, RETAINED_TEXT_LEN, tasks_retained, tasks_throughput};
use crate::{Case, Plan, TASKGATE, Workload};
use std::path::Path;

/// Runs both sides of a case (or the gateway side alone) and returns its report line.
pub(crate) async fn run_case(case: &Case, plan: Plan, dir: &Path) -> Result<Line, String> {
    match case.workload {
        Workload::HttpEcho => {
            let (lean_exe, lean_args) = (lean::exe(), lean::args(Mode::Http));
            let direct = {
                wait_for_quiet(plan).await;
                let (up, addr) = spawn_listening("lean-direct", &lean_exe, &[&lean_args], dir)?;
                let run = http_echo(addr, "/mcp", case.c, plan, &[("lean upstream", &up)], None).await;
                up.stop();
                run?
            };
            direct.print("direct", "req");
            let gateway = {
                wait_for_quiet(plan).await;
                let (up, up_addr) = spawn_listening("lean-upstream", &lean_exe, &[&lean_args], dir)?;
                let config = write_config(dir, "http", &format!("url = \"http://{up_addr}/mcp\"\n"))?;
                let (gw, addr) =
                    spawn_listening("gateway-http", TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
                let run =
                    http_echo(addr, "/mcp/demo", case.c, plan, &[("gateway", &gw), ("lean upstream", &up)], None).await;
                gw.stop();
                up.stop();
                run?
            };
            gateway.print("gateway", "req");
            let mut line = Line::compare(case, &direct, &gateway);
            line.cpu_x_upstream = Some(upstream_share(&direct, &gateway));
            Ok(line)
        }
        Workload::StdioEcho => {
            let (lean_exe, lean_args) = (lean::exe(), lean::args(Mode::Stdio));
            let direct = {
                wait_for_quiet(plan).await;
                let up = spawn_stdio("lean-stdio", &lean_exe, &[&lean_args], dir)?;
                stdio_echo(up, "lean upstream", case.c, plan).await?
            };
            direct.print("direct", "req");
            let gateway = {
                wait_for_quiet(plan).await;
                let config = write_config(dir, "stdio", &format!("command = {lean_exe:?}\nargs = [{lean_args:?}]\n"))?;
                let gw = spawn_stdio(
                    "gateway-stdio",
                    TASKGATE,
                    &["stdio", "--config", path_str(&config), "--upstream", "demo"],
                    dir,
                )?;
                stdio_echo(gw, "gateway", case.c, plan).await?
            };
            gateway.print("gateway", "req");
            let mut line = Line::compare(case, &direct, &gateway);
            line.cpu_x_upstream = Some(upstream_share(&direct, &gateway));
            Ok(line)
        }
        Workload::Progress => {
            let steps = plan.progress_steps;
            println!(
                "  `slow` steps={steps} duration_ms=0 over HTTP (SSE); rate = progress steps/s (upstream notifications \
                 absorbed, coalescing included); latency = one whole call"
            );
            let direct = {
                wait_for_quiet(plan).await;
                let (demo, addr) = spawn_listening("demo-direct", TASKGATE, &["demo-server"], dir)?;
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
                let (gw, addr) =
                    spawn_listening("gateway-http", TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
                let run = progress(addr, "/mcp/demo", steps, plan, &[("gateway", &gw)], Some(&gw)).await;
                // Stops the demo child too, and says so if it outlived the gateway.
                gw.stop();
                run?
            };
            gateway.print("gateway", "step");
            Ok(Line::compare(case, &direct, &gateway))
        }
        Workload::Tasks => {
            println!(
                "  hosted tasks, gateway only (no direct baseline: the demo has no tasks): `tools/call echo` with \
                 `task`, `tasks/get`, then `tasks/result`; rate = tasks/s; p50/p99 = one whole task round trip \
                 (create + get + result), ABSOLUTE, not added (the e2e line prints `-` for them); first, plain \
                 `tools/call echo` through the same gateway, whose CPU per call the line's `cpu_x_plain` divides by"
            );
            wait_for_quiet(plan).await;
            // The client asks for a ttl of 60 s; `max_ttl` caps it at 2 s, so finished tasks
            // expire long before the roomy store could fill. The memory store: this case is
            // the hosting's own cost; the file store's durable commit per task end (the
            // default of `serve --config`: an fsync a lone client waits for, up to
            // `sync_interval`) is what `cargo bench --bench store` measures.
            let config = write_config(dir, "tasks", &tasks_config("2s", 1_000_000, Some("memory")))?;
            let (gw, addr) =
                spawn_listening("gateway-tasks", TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
            let plain = http_echo(addr, "/mcp/demo", case.c, plan, &[("gateway", &gw)], None).await;
            let run = match plain {
                Ok(plain) => {
                    wait_for_quiet(plan).await;
                    tasks_throughput(addr, case.c, plan, &gw).await.map(|run| (plain, run))
                }
                Err(e) => Err(e),
            };
            gw.stop();
            let (plain, run) = run?;
            plain.print("plain call", "req");
            run.print("gateway", "task");
            report_log_warnings(dir, "gateway-tasks");
            let mut line = Line::gateway_only(case, &run);
            line.cpu_x_plain = Some(run.cpu_per(0) / plain.cpu_per(0));
            Ok(line)
        }
        Workload::SharedLink => {
            println!(
                "  `tools/call echo` over HTTP in front of a stdio demo upstream (`taskgate demo-server`): a child per \
                 session (share = false) against one child for all sessions (share = true); cpu and rss of the \
                 upstream processes summed"
            );
            let mut sides = Vec::new();
            for (label, share) in [("per-session", false), ("shared", true)] {
                wait_for_quiet(plan).await;
                let transport = format!("command = {TASKGATE:?}\nargs = [\"demo-server\"]\nshare = {share}\n");
                let config = write_config(dir, label, &transport)?;
                let name = format!("gateway-{label}");
                let (gw, addr) = spawn_listening(&name, TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
                let run = http_echo(addr, "/mcp/demo", case.c, plan, &[("gateway", &gw)], Some(&gw)).await;
                // Stops the demo children too, and says so if one outlived the gateway.
                gw.stop();
                let mut run = run?;
                let upstreams = collapse_upstreams(&mut run);
                run.print(label, "req");
                report_log_warnings(dir, &name);
                sides.push((run, upstreams));
            }
            let [(per_session, n0), (shared, n1)] = &sides[..] else { unreachable!("two sides") };
            for (label, run, n) in [("per-session", per_session, n0), ("shared", shared, n1)] {
                println!(
                    "  {label:<11} gateway {:.1} µs/req + {n} upstream process(es) {:.1} µs/req; peak rss gateway {:.1} + \
                     upstreams {:.1} = {:.1} MiB",
                    run.cpu_per(0),
                    run.cpu_per(1),
                    run.hwm_kb[0].1 as f64 / 1024.0,
                    run.hwm_kb.get(1).map_or(0, |h| h.1) as f64 / 1024.0,
                    total_rss_mb(run)
                );
            }
            // The line's `direct` side is the per-session gateway, its `gateway` side the shared
            // one; its rss is the shared side's gateway and upstream together.
            let mut line = Line::compare(case, per_session, shared);
            line.rss_mb = total_rss_mb(shared);
            Ok(line)
        }
        Workload::TasksRetained => {
            println!(
                "  hosted tasks, gateway only: {RETAINED_TASKS} tasks echoing {RETAINED_TEXT_LEN} characters, each \
                 fetched with `tasks/result` (completed) and all retained; rate = tasks created/s during the fill; \
                 p50/p99 = one whole task round trip, absolute; rss = VmRSS increase over the idle gateway"
            );
            wait_for_quiet(plan).await;
            // Exactly room for them all: one task evicted, whatever the reason, fails the check.
            let config = write_config(dir, "tasks-retained", &tasks_config("1h", RETAINED_TASKS, None))?;
            let (gw, addr) =
                spawn_listening("gateway-tasks-retained", TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
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
/// `max_ttl`, a store (and per-session share) of `max_tasks`, and the `store` kind if given
/// (else the default of a config file: `file`, in the run's directory).
fn tasks_config(max_ttl: &str, max_tasks: usize, store: Option<&str>) -> String {
    let store = store.map(|kind| format!("store = {kind:?}\n")).unwrap_or_default();
    format!(
        "builtin = \"demo\"\n\n[upstream.tasks]\nttl = \"{max_ttl}\"\nmax_ttl = \"{max_ttl}\"\n\
         max_tasks_per_owner = {max_tasks}\n\n[tasks]\nmax_tasks = {max_tasks}\n{store}"
    )
}

/// Folds the watched upstream processes of a run into one entry (CPU, system calls and peak
/// RSS summed, after the gateway's); returns how many there were.
fn collapse_upstreams(run: &mut Run) -> usize {
    let n = run.cpu_us.iter().filter(|(role, _)| role == UPSTREAM).count();
    let cpu: f64 = run.cpu_us.iter().filter(|(role, _)| role == UPSTREAM).map(|(_, us)| us).sum();
    let hwm: u64 = run.hwm_kb.iter().filter(|(role, _)| role == UPSTREAM).map(|(_, kb)| kb).sum();
    let calls: u64 = run.rw_syscalls.iter().filter(|(role, _)| role == UPSTREAM).map(|(_, n)| n).sum();
    run.cpu_us.retain(|(role, _)| role != UPSTREAM);
    run.hwm_kb.retain(|(role, _)| role != UPSTREAM);
    run.rw_syscalls.retain(|(role, _)| role != UPSTREAM);
    let role = format!("{n} upstream(s)");
    run.cpu_us.push((role.clone(), cpu));
    run.hwm_kb.push((role.clone(), hwm));
    run.rw_syscalls.push((role.clone(), calls));
    let others: Vec<&str> = run.pids.split(", ").filter(|p| !p.starts_with(UPSTREAM)).collect();
    run.pids = format!("{}, {role}", others.join(", "));
    n
}

/// Peak RSS of a run's processes together (gateway and upstreams), MiB.
fn total_rss_mb(run: &Run) -> f64 {
    run.hwm_kb.iter().map(|(_, kb)| *kb as f64).sum::<f64>() / 1024.0
}

/// What the lean upstream costs per request by itself (its CPU over the direct window) and
/// what the gateway costs beside it (the gateway side's first process); returns the gateway's
/// CPU per request over the upstream's alone, the `e2e` line's `cpu_x_upstream`.
fn upstream_share(direct: &Run, gateway: &Run) -> f64 {
    let upstream = direct.cpu_per(0);
    let behind = gateway.cpu_us.iter().position(|(n, _)| n.starts_with("lean")).map(|i| gateway.cpu_per(i));
    let gw = gateway.cpu_per(0);
    let ratio = gw / upstream.max(f64::MIN_POSITIVE);
    println!(
        "  cpu µs/req: lean upstream alone {upstream:.1} (direct), {} behind the gateway; gateway {gw:.1} = {ratio:.2}x the upstream alone",
        behind.map(|b| format!("{b:.1}")).unwrap_or_else(|| "-".into()),
    );
    ratio
}
