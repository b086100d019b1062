//! Load over stdio: one client on a process's stdin/stdout, `c` calls pipelined.

use crate::mcp::{INITIALIZED, Reply, echo_request, initialize_request};
use crate::measure::{Window, measure};
use crate::procs::{Proc, check_gone, children_of};
use crate::report::{Run, Tally};
use crate::{PROTOCOL_VERSION, Plan, TIMEOUT};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

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
/// `role` names the process in the figures; a child it started (a gateway's upstream) is
/// watched too, as the lean upstream.
pub(crate) async fn stdio_echo(mut proc: Proc, role: &str, c: usize, plan: Plan) -> Result<Run, String> {
    let stdin = proc.child.stdin.take().expect("piped");
    let stdout = proc.child.stdout.take().expect("piped");
    let mut w = tokio::process::ChildStdin::from_std(stdin).map_err(|e| e.to_string())?;
    let mut r = tokio::io::BufReader::new(tokio::process::ChildStdout::from_std(stdout).map_err(|e| e.to_string())?);
    let mut line = String::new();
    w.write_all(format!("{}\n", initialize_request(0, PROTOCOL_VERSION)).as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    loop {
        let reply = read_reply(&mut r, &mut line).await?;
        if reply.answers(0) {
            reply.ok()?;
            break;
        }
    }
    w.write_all(format!("{INITIALIZED}\n").as_bytes()).await.map_err(|e| e.to_string())?;

    // The gateway's upstream child, if any, is watched too.
    let mut watched = vec![proc.watch(role)];
    let upstream = children_of(proc.pid());
    for child in &upstream {
        watched.push(("lean upstream".to_string(), *child));
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
