//! Each case's sides: which processes to start, in front of what, and what load to put on them.

use crate::http_load::{http_echo, progress};
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
                let run = http_echo(addr, "/mcp", case.c, plan, &[("lean upstream", &up)]).await;
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
                let run = http_echo(addr, "/mcp/demo", case.c, plan, &[("gateway", &gw), ("lean upstream", &up)]).await;
                gw.stop();
                up.stop();
                run?
            };
            gateway.print("gateway", "req");
            print_upstream_share(&direct, &gateway);
            Ok(Line::compare(case, &direct, &gateway))
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
            print_upstream_share(&direct, &gateway);
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
                 `task`, then `tasks/result`; rate = tasks/s; p50/p99 = one whole task round trip (create + result), \
                 ABSOLUTE, not added (the e2e line prints `-` for them)"
            );
            wait_for_quiet(plan).await;
            // The client asks for a ttl of 60 s; `max_ttl` caps it at 2 s, so finished tasks
            // expire (swept every 250 ms) long before the roomy store could fill.
            let config = write_config(dir, "tasks", &tasks_config("2s", 1_000_000))?;
            let (gw, addr) =
                spawn_listening("gateway-tasks", TASKGATE, &["serve", "--config", path_str(&config)], dir)?;
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
/// `max_ttl`, and a store (and per-session share) of `max_tasks`.
fn tasks_config(max_ttl: &str, max_tasks: usize) -> String {
    format!(
        "builtin = \"demo\"\n\n[upstream.tasks]\nttl = \"{max_ttl}\"\nmax_ttl = \"{max_ttl}\"\n\
         max_tasks_per_owner = {max_tasks}\n\n[tasks]\nmax_tasks = {max_tasks}\n"
    )
}

/// What the lean upstream costs per request by itself (its CPU over the direct window) and
/// what the gateway costs beside it (the gateway side's first process); the `e2e` line keeps
/// only the gateway's figure.
fn print_upstream_share(direct: &Run, gateway: &Run) {
    let upstream = direct.cpu_per(0);
    let behind = gateway.cpu_us.iter().position(|(n, _)| n.starts_with("lean")).map(|i| gateway.cpu_per(i));
    let gw = gateway.cpu_per(0);
    println!(
        "  cpu µs/req: lean upstream alone {upstream:.1} (direct), {} behind the gateway; gateway {gw:.1} = {:.2}x the upstream alone",
        behind.map(|b| format!("{b:.1}")).unwrap_or_else(|| "-".into()),
        gw / upstream.max(f64::MIN_POSITIVE)
    );
}
