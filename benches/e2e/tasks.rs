//! Hosted tasks over HTTP, gateway only: the `tasks` throughput loop and the `tasks_retained`
//! fill, with the GET streams their sessions hold open.

use crate::Plan;
use crate::http_load::{HttpClient, connect_sessions, is_event_stream};
use crate::mcp::{Reply, SseReader, echo_text_request, task_call_request, task_request};
use crate::measure::{Sample, Window, measure, proc_status_kb};
use crate::procs::Proc;
use crate::report::{Run, Tally};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Method, StatusCode};
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Instant;

/// The version with (hosted) tasks: the tasks cases' sessions negotiate it.
const TASKS_VERSION: &str = "2025-11-25";
/// The echo text of the `tasks` case (one task = one create + one `tasks/result`).
const TASK_TEXT: &str = "x";
/// Completed tasks the `tasks_retained` case fills the store with, and the length of each
/// one's echo text. The workload is results of 1 KiB: the demo's echo result carries
/// the text twice (as `content[0].text` and in `structuredContent`) around ~220 bytes of
/// JSON, so 400 characters make a stored result of ~1 KiB; the printed size says exactly.
pub(crate) const RETAINED_TASKS: usize = 10_000;
pub(crate) const RETAINED_TEXT_LEN: usize = 400;
/// The target for `tasks_retained`: RSS above the idle gateway, in MB (10^6 bytes).
const RETAINED_TARGET_MB: f64 = 40.0;
/// Plain (task-less) echo rounds per session before the fill of `tasks_retained`, each one a
/// call echoing the long text and two echoing a short one, like the three messages a task
/// leaves in the session's SSE replay buffer (its two responses and a status notification):
/// more than `event_buffer` (512) events, so the buffers are at their bound before the fill.
pub(crate) const RETAINED_WARMUP_ROUNDS: usize = 180;

/// A message as the tasks cases read it: the envelope and the parts of the results they check
/// (`CreateTaskResult`, `tasks/get`'s task, `tasks/result`'s tool result).
#[derive(Deserialize)]
pub(crate) struct TaskReply {
    #[serde(default)]
    pub(crate) id: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) result: Option<TaskResult>,
    #[serde(default)]
    pub(crate) error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
pub(crate) struct TaskResult {
    /// `CreateTaskResult`.
    #[serde(default)]
    pub(crate) task: Option<TaskInfo>,
    /// `tasks/get`.
    #[serde(default)]
    pub(crate) status: Option<String>,
    /// `tasks/result`: the echo's tool result.
    #[serde(default)]
    pub(crate) content: Vec<Content>,
}

#[derive(Deserialize)]
pub(crate) struct TaskInfo {
    #[serde(rename = "taskId")]
    pub(crate) task_id: String,
    pub(crate) status: String,
}

#[derive(Deserialize)]
pub(crate) struct Content {
    #[serde(default)]
    pub(crate) text: Option<String>,
}

/// The start of a body, for error messages (results can be long).
pub(crate) fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    if s.len() <= 300 { s.into_owned() } else { format!("{}…", &s[..s.floor_char_boundary(300)]) }
}

/// The result of the response to `id` in a body (JSON or an event stream). An error response
/// is an error here; -32004 is the gateway refusing (store or session full) and says so.
pub(crate) fn task_answer(sse: bool, body: &[u8], id: u64, what: &str) -> Result<TaskResult, String> {
    let mut found = None;
    let mut take = |data: &[u8]| -> Result<(), String> {
        let r: TaskReply =
            serde_json::from_slice(data).map_err(|e| format!("{what}: unreadable message {}: {e}", snippet(data)))?;
        if r.method.is_none() && r.id.as_ref().and_then(serde_json::Value::as_u64) == Some(id) {
            found = Some(r);
        }
        Ok(())
    };
    if sse {
        SseReader::default().feed(body, &mut take)?;
    } else {
        take(body)?;
    }
    let r = found.ok_or_else(|| format!("{what}: no response to {id} in {}", snippet(body)))?;
    match (r.result, r.error) {
        (Some(res), None) => Ok(res),
        (_, Some(e)) if e.get("code").and_then(serde_json::Value::as_i64) == Some(-32004) => {
            Err(format!("{what}: REFUSED by the gateway (-32004): {e}"))
        }
        (_, Some(e)) => Err(format!("{what}: error response: {e}")),
        _ => Err(format!("{what}: a response with neither result nor error")),
    }
}

/// One task: its id, and what its round trip looked like.
pub(crate) struct RoundTrip {
    pub(crate) task_id: String,
    /// Responses (of the two) that came as an event stream.
    pub(crate) sse: u64,
    /// The `CreateTaskResult` status was not `working`.
    pub(crate) not_working: bool,
    /// Size of the `tasks/result` body.
    pub(crate) result_bytes: usize,
}

/// The GET streams of a run's sessions: what they received, and any that ended.
#[derive(Default)]
pub(crate) struct GetStreams {
    /// `notifications/tasks/status` received (inside the window, if there is one).
    pub(crate) status_notes: std::sync::atomic::AtomicU64,
    pub(crate) ended: std::sync::Mutex<Vec<String>>,
    pub(crate) drains: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl GetStreams {
    pub(crate) fn notes(&self) -> u64 {
        self.status_notes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the drains; reports streams the gateway ended before that.
    pub(crate) fn stop(&self) {
        for d in self.drains.lock().unwrap().drain(..) {
            d.abort();
        }
        for e in self.ended.lock().unwrap().iter() {
            println!("  WARNING: a GET stream ended during the run: {e}");
        }
    }
}

impl HttpClient {
    /// POSTs a request and returns its result (checked by [`task_answer`]), whether it came as
    /// an event stream, and the body's size.
    pub(crate) async fn rpc(&mut self, body: String, id: u64, what: &str) -> Result<(TaskResult, bool, usize), String> {
        let (status, sse, body) = self.post(body).await?;
        if status != StatusCode::OK {
            return Err(format!("{what}: HTTP {status}: {}", snippet(&body)));
        }
        Ok((task_answer(sse, &body, id, what)?, sse, body.len()))
    }

    /// Creates a task (`tools/call echo` with `task`), asks for its status once if `get`
    /// (the whole lifecycle: create, get, result), and fetches its result, which must be the
    /// echo of `text`.
    pub(crate) async fn task_round_trip(&mut self, text: &str, get: bool) -> Result<RoundTrip, String> {
        let id = self.id();
        let (created, sse1, _) = self.rpc(task_call_request(id, text), id, "tools/call with `task`").await?;
        let task = created.task.ok_or("tools/call with `task` answered without a task (not hosted?)")?;
        if get {
            let id = self.id();
            let (got, _, _) = self.rpc(task_request(id, "tasks/get", &task.task_id), id, "tasks/get").await?;
            match got.status.as_deref() {
                Some("working" | "completed") => {}
                other => return Err(format!("tasks/get of {}: status {other:?}", task.task_id)),
            }
        }
        let id = self.id();
        let (res, sse2, result_bytes) =
            self.rpc(task_request(id, "tasks/result", &task.task_id), id, "tasks/result").await?;
        let got = res.content.first().and_then(|c| c.text.as_deref());
        if got != Some(text) {
            return Err(format!(
                "tasks/result of {}: expected the echo of {} characters, got {:?}",
                task.task_id,
                text.len(),
                got.map(|g| snippet(g.as_bytes()))
            ));
        }
        Ok(RoundTrip {
            not_working: task.status != "working",
            task_id: task.task_id,
            sse: u64::from(sse1) + u64::from(sse2),
            result_bytes,
        })
    }

    /// Opens this session's GET stream on a connection of its own and drains it in the
    /// background, counting `notifications/tasks/status` (those inside `window`, if given).
    pub(crate) async fn open_get_stream(
        &self,
        window: Option<Window>,
        streams: &std::sync::Arc<GetStreams>,
    ) -> Result<(), String> {
        let mut get = HttpClient::connect(self.addr, &self.path, self.version).await?;
        get.session = self.session.clone();
        let resp = get.send(Method::GET, Bytes::new(), None).await?;
        if resp.status() != StatusCode::OK || !is_event_stream(&resp) {
            return Err(format!("GET stream: HTTP {}", resp.status()));
        }
        let shared = streams.clone();
        let drain = tokio::spawn(async move {
            // Holds the connection's sender for as long as the stream is read.
            let _conn = get;
            let mut body = resp.into_body();
            let mut reader = SseReader::default();
            let end = loop {
                let data = match body.frame().await {
                    None => break "the gateway closed it".to_string(),
                    Some(Err(e)) => break e.to_string(),
                    Some(Ok(frame)) => match frame.into_data() {
                        Ok(d) => d,
                        Err(_) => continue,
                    },
                };
                let counted = window.is_none_or(|w| w.contains(Instant::now()));
                let fed = reader.feed(&data, |d| {
                    if counted && Reply::parse(d)?.method.as_deref() == Some("notifications/tasks/status") {
                        shared.status_notes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Ok(())
                });
                if let Err(e) = fed {
                    break e;
                }
            };
            shared.ended.lock().unwrap().push(end);
        });
        streams.drains.lock().unwrap().push(drain);
        Ok(())
    }
}

/// Sessions for the tasks cases: 2025-11-25, each with its GET stream open and drained.
pub(crate) async fn task_sessions(
    addr: SocketAddr,
    c: usize,
    window: Option<Window>,
) -> Result<(Vec<HttpClient>, std::sync::Arc<GetStreams>), String> {
    let clients = connect_sessions(addr, "/mcp/demo", c, TASKS_VERSION).await?;
    let streams = std::sync::Arc::new(GetStreams::default());
    for cl in &clients {
        cl.open_get_stream(window, &streams).await?;
    }
    Ok((clients, streams))
}

pub(crate) async fn tasks_throughput(addr: SocketAddr, c: usize, plan: Plan, gw: &Proc) -> Result<Run, String> {
    let window = Window::after_warmup(plan);
    let (clients, streams) = task_sessions(addr, c, Some(window)).await?;
    let watched = [gw.watch("gateway")];
    let work = async {
        let loops: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(task_loop(cl, window))).collect();
        let mut total = Tally::new();
        for l in loops {
            total.merge(l.await.map_err(|e| e.to_string())??);
        }
        total.events = streams.notes();
        Ok(total)
    };
    let run = measure(window, &watched, work).await;
    streams.stop();
    let run = run?;
    println!(
        "  notifications/tasks/status received on the GET streams: {:.2} per task",
        run.tally.events as f64 / run.tally.done.max(1) as f64
    );
    Ok(run)
}

/// One session's closed loop of tasks: the next is created when the last one's result is in.
pub(crate) async fn task_loop(mut cl: HttpClient, window: Window) -> Result<Tally, String> {
    let mut tally = Tally::new();
    loop {
        let t0 = Instant::now();
        if t0 >= window.end {
            return Ok(tally);
        }
        let rt = cl.task_round_trip(TASK_TEXT, true).await?;
        let t1 = Instant::now();
        if window.contains(t1) {
            tally.done += 1;
            tally.sse += rt.sse;
            tally.not_working += u64::from(rt.not_working);
            tally.record(t1 - t0);
        }
    }
}

/// The gateway's memory around the `tasks_retained` fill.
pub(crate) struct RetainedRss {
    /// VmRSS (kB) of the idle gateway: sessions initialized, GET streams open, no task yet.
    pub(crate) idle_kb: u64,
    /// VmRSS (kB) after the same sessions' plain echo warm-up, still without a task.
    pub(crate) warm_kb: u64,
    /// VmRSS (kB) once every task is completed and fetched.
    pub(crate) filled_kb: u64,
    pub(crate) tasks: usize,
    /// Mean size of a `tasks/result` body, in bytes.
    pub(crate) result_bytes: f64,
    /// Tasks that still answered `tasks/get` with `completed` after the fill.
    pub(crate) verified: usize,
    /// Sessions whose first task's result was fetched again after the fill.
    pub(crate) refetched: usize,
}

impl RetainedRss {
    pub(crate) fn added_kb(&self) -> u64 {
        self.filled_kb.saturating_sub(self.idle_kb)
    }

    pub(crate) fn print(&self) {
        let mib = |kb: u64| kb as f64 / 1024.0;
        let mb = |kb: u64| kb as f64 * 1024.0 / 1e6;
        let verdict = |kb: u64| if mb(kb) <= RETAINED_TARGET_MB { "met" } else { "MISSED" };
        let per_task = |kb: u64| kb as f64 * 1024.0 / self.tasks.max(1) as f64;
        let tasks_kb = self.filled_kb.saturating_sub(self.warm_kb);
        let warm_kb = self.warm_kb.saturating_sub(self.idle_kb);
        println!(
            "  retained (rss_mb): VmRSS {:.1} MiB idle after initialize -> {:.1} MiB with {} completed tasks: \
             +{:.1} MiB = +{:.1} MB above idle (target <= {RETAINED_TARGET_MB} MB: {}), {:.0} bytes per task; \
             each result {:.0} bytes of JSON",
            mib(self.idle_kb),
            mib(self.filled_kb),
            self.tasks,
            mib(self.added_kb()),
            mb(self.added_kb()),
            verdict(self.added_kb()),
            per_task(self.added_kb()),
            self.result_bytes
        );
        println!(
            "  of which before any task: +{:.1} MiB after {RETAINED_WARMUP_ROUNDS} rounds of plain echo calls per \
             session (1 long + 2 short: SSE replay buffers at their bound, connection buffers); the tasks' own: \
             +{:.1} MiB = +{:.1} MB ({}), {:.0} bytes per task",
            mib(warm_kb),
            mib(tasks_kb),
            mb(tasks_kb),
            verdict(tasks_kb),
            per_task(tasks_kb)
        );
        println!(
            "  verified after the fill: {}/{} tasks answer tasks/get `completed`; {} sessions' first task result \
             fetched again",
            self.verified, self.tasks, self.refetched
        );
    }
}

/// Fills the gateway's store with [`RETAINED_TASKS`] completed tasks over `c` sessions, reads
/// its VmRSS before and after, then checks every task is still there.
pub(crate) async fn tasks_retained(addr: SocketAddr, c: usize, gw: &Proc) -> Result<(Run, RetainedRss), String> {
    let (clients, streams) = task_sessions(addr, c, None).await?;
    let watched = [gw.watch("gateway")];
    let text: std::sync::Arc<str> =
        "abcdefghijklmnopqrstuvwxyz0123456789".chars().cycle().take(RETAINED_TEXT_LEN).collect::<String>().into();
    let idle_kb = proc_status_kb(gw.pid(), "VmRSS:");
    let warmups: Vec<_> = clients.into_iter().map(|cl| tokio::spawn(warm_up(cl, text.clone()))).collect();
    let mut clients = Vec::with_capacity(c);
    for w in warmups {
        clients.push(w.await.map_err(|e| e.to_string())??);
    }
    let warm_kb = proc_status_kb(gw.pid(), "VmRSS:");
    let before = Sample::take(&watched)?;
    let fills: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, cl)| {
            let n = RETAINED_TASKS / c + usize::from(i < RETAINED_TASKS % c);
            tokio::spawn(fill_loop(cl, n, text.clone()))
        })
        .collect();
    let mut tally = Tally::new();
    let mut sessions = Vec::new();
    let mut bytes = 0u64;
    for f in fills {
        let (cl, t, ids, b) = f.await.map_err(|e| e.to_string())??;
        tally.merge(t);
        bytes += b;
        sessions.push((cl, ids));
    }
    let after = Sample::take(&watched)?;
    let filled_kb = proc_status_kb(gw.pid(), "VmRSS:");
    tally.events = streams.notes();
    let run = Run::between(tally, &watched, &before, &after, idle_kb);

    let checks: Vec<_> =
        sessions.into_iter().map(|(cl, ids)| tokio::spawn(verify_retained(cl, ids, text.clone()))).collect();
    let (mut verified, mut refetched) = (0, 0);
    for ch in checks {
        let (v, r) = ch.await.map_err(|e| e.to_string())??;
        verified += v;
        refetched += usize::from(r);
    }
    streams.stop();
    let tasks = run.tally.done as usize;
    let result_bytes = bytes as f64 / tasks.max(1) as f64;
    Ok((run, RetainedRss { idle_kb, warm_kb, filled_kb, tasks, result_bytes, verified, refetched }))
}

/// [`RETAINED_WARMUP_ROUNDS`] rounds of plain echo calls: `text`, then twice a short text.
pub(crate) async fn warm_up(mut cl: HttpClient, text: std::sync::Arc<str>) -> Result<HttpClient, String> {
    for _ in 0..RETAINED_WARMUP_ROUNDS {
        for t in [&*text, TASK_TEXT, TASK_TEXT] {
            let id = cl.id();
            let (res, _, _) = cl.rpc(echo_text_request(id, t), id, "warm-up tools/call echo").await?;
            if res.content.first().and_then(|c| c.text.as_deref()) != Some(t) {
                return Err("warm-up tools/call echo: not the echo".into());
            }
        }
    }
    Ok(cl)
}

/// `n` tasks echoing `text`, one after the other; returns the session, the tally, the task ids
/// and the bytes of their results.
pub(crate) async fn fill_loop(
    mut cl: HttpClient,
    n: usize,
    text: std::sync::Arc<str>,
) -> Result<(HttpClient, Tally, Vec<String>, u64), String> {
    let mut tally = Tally::new();
    let mut ids = Vec::with_capacity(n);
    let mut bytes = 0u64;
    for _ in 0..n {
        let t0 = Instant::now();
        let rt = cl.task_round_trip(&text, false).await?;
        tally.record(t0.elapsed());
        tally.done += 1;
        tally.sse += rt.sse;
        tally.not_working += u64::from(rt.not_working);
        bytes += rt.result_bytes as u64;
        ids.push(rt.task_id);
    }
    Ok((cl, tally, ids, bytes))
}

/// Every task of `ids` must answer `tasks/get` with `completed`, and the first one's result
/// must still be there; returns how many were checked and whether the first was refetched.
pub(crate) async fn verify_retained(
    mut cl: HttpClient,
    ids: Vec<String>,
    text: std::sync::Arc<str>,
) -> Result<(usize, bool), String> {
    for (i, task_id) in ids.iter().enumerate() {
        let id = cl.id();
        let what = format!("tasks/get of the session's task #{i} after the fill");
        let (got, _, _) = cl.rpc(task_request(id, "tasks/get", task_id), id, &what).await?;
        if got.status.as_deref() != Some("completed") {
            return Err(format!("{what}: status {:?}, expected completed", got.status));
        }
    }
    let Some(first) = ids.first() else { return Ok((0, false)) };
    let id = cl.id();
    let (res, _, _) = cl.rpc(task_request(id, "tasks/result", first), id, "tasks/result of the first task").await?;
    if res.content.first().and_then(|c| c.text.as_deref()) != Some(&*text) {
        return Err("tasks/result of the first task after the fill: not its echo".into());
    }
    Ok((ids.len(), true))
}
