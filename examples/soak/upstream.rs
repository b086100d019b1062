//! The soak's task-requiring upstream: a scripted 2025-11-25 server over Streamable HTTP (plain
//! JSON replies) on 127.0.0.1, with one tool, `required` (`taskSupport: "required"`). A plain
//! call is refused; a task call creates a task that completes after `delay_ms`, answered by
//! `tasks/get`, a blocking `tasks/result` and `tasks/cancel`. It records which tasks were
//! cancelled so the soak can check that a client's cancel reached it.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Tasks are forgotten this long after they were created.
const KEEP: Duration = Duration::from_secs(120);
/// The longest a task may take.
const MAX_DELAY: Duration = Duration::from_secs(60);

struct Task {
    created: Instant,
    delay: Duration,
    tag: String,
    cancelled: bool,
    changed: Arc<Notify>,
}

#[derive(Default)]
pub struct State {
    tasks: Mutex<HashMap<String, Task>>,
    next: AtomicU64,
    /// tag → task id, for the tasks created so far.
    by_tag: Mutex<HashMap<String, String>>,
    cancelled: Mutex<HashSet<String>>,
    /// Tasks someone asked about (`tasks/get` or `tasks/result`).
    followed: Mutex<HashSet<String>>,
    pub requests: AtomicU64,
}

impl State {
    /// The task created for a call with this `tag`, if one was.
    pub fn task_for(&self, tag: &str) -> Option<String> {
        self.by_tag.lock().unwrap().get(tag).cloned()
    }

    pub fn followed(&self, task: &str) -> bool {
        self.followed.lock().unwrap().contains(task)
    }

    pub fn was_cancelled(&self, task: &str) -> bool {
        self.cancelled.lock().unwrap().contains(task)
    }

    pub fn live_tasks(&self) -> usize {
        self.tasks.lock().unwrap().len()
    }
}

/// Serves the task server on 127.0.0.1 (a free port); returns its address and state.
pub async fn start() -> (SocketAddr, Arc<State>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the task server");
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(State::default());
    let st = state.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let st = st.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    let st = st.clone();
                    async move { Ok::<_, Infallible>(handle(st, req).await) }
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
            });
        }
    });
    (addr, state)
}

fn respond(status: u16, body: Option<Value>) -> Response<Full<Bytes>> {
    let mut b = Response::builder().status(status);
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    let bytes = body.map(|v| Bytes::from(serde_json::to_vec(&v).unwrap())).unwrap_or_default();
    b.body(Full::new(bytes)).unwrap()
}

async fn handle(st: Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    match *req.method() {
        hyper::Method::POST => {}
        hyper::Method::DELETE => return respond(200, None),
        _ => return respond(405, None),
    }
    let Ok(body) = req.into_body().collect().await else { return respond(400, None) };
    let Ok(msg) = serde_json::from_slice::<Value>(&body.to_bytes()) else { return respond(400, None) };
    st.requests.fetch_add(1, Ordering::Relaxed);
    let (Some(id), Some(method)) = (msg.get("id").cloned(), msg.get("method").and_then(Value::as_str)) else {
        return respond(202, None); // a notification or a response
    };
    let answer = match answer(&st, method, &msg).await {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
    };
    respond(200, Some(answer))
}

fn task_json(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
           "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 50})
}

fn status_of(t: &Task) -> &'static str {
    if t.cancelled {
        "cancelled"
    } else if t.created.elapsed() >= t.delay {
        "completed"
    } else {
        "working"
    }
}

async fn answer(st: &State, method: &str, msg: &Value) -> Result<Value, (i64, String)> {
    let task_id = || msg.pointer("/params/taskId").and_then(Value::as_str).unwrap_or("").to_string();
    let unknown = || (-32602, "unknown task".to_string());
    if matches!(method, "tasks/get" | "tasks/result") {
        st.followed.lock().unwrap().insert(task_id());
    }
    match method {
        "initialize" => Ok(json!({
            // Like an SDK server, it speaks the version the client asked for.
            "protocolVersion": msg.pointer("/params/protocolVersion").cloned().unwrap_or(json!("2025-11-25")),
            "capabilities": {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}},
            "serverInfo": {"name": "soak-tasks", "version": "0"}
        })),
        "tools/list" => Ok(json!({"tools": [
            {"name": "required", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}
        ]})),
        "tools/call" => {
            if msg.pointer("/params/task").is_none() {
                return Err((-32601, "tool \"required\" requires task augmentation".into()));
            }
            let args = msg.pointer("/params/arguments").cloned().unwrap_or(json!({}));
            let delay = Duration::from_millis(args["delay_ms"].as_u64().unwrap_or(0)).min(MAX_DELAY);
            let tag = args["tag"].as_str().unwrap_or("").to_string();
            let id = format!("soak-{}", st.next.fetch_add(1, Ordering::Relaxed));
            {
                let mut tasks = st.tasks.lock().unwrap();
                let mut by_tag = st.by_tag.lock().unwrap();
                let mut cancelled = st.cancelled.lock().unwrap();
                let mut followed = st.followed.lock().unwrap();
                let old: Vec<(String, String)> = tasks
                    .iter()
                    .filter(|(_, t)| t.created.elapsed() > KEEP)
                    .map(|(k, t)| (k.clone(), t.tag.clone()))
                    .collect();
                for (k, tag) in old {
                    tasks.remove(&k);
                    by_tag.remove(&tag);
                    cancelled.remove(&k);
                    followed.remove(&k);
                }
                let changed = Arc::new(Notify::new());
                tasks.insert(
                    id.clone(),
                    Task { created: Instant::now(), delay, tag: tag.clone(), cancelled: false, changed },
                );
                by_tag.insert(tag, id.clone());
            }
            Ok(json!({"task": task_json(&id, "working")}))
        }
        "tasks/get" => {
            let id = task_id();
            let tasks = st.tasks.lock().unwrap();
            let t = tasks.get(&id).ok_or_else(unknown)?;
            Ok(task_json(&id, status_of(t)))
        }
        "tasks/result" => {
            let id = task_id();
            loop {
                let (status, wait, changed, tag) = {
                    let tasks = st.tasks.lock().unwrap();
                    let t = tasks.get(&id).ok_or_else(unknown)?;
                    (status_of(t), t.delay.saturating_sub(t.created.elapsed()), t.changed.clone(), t.tag.clone())
                };
                match status {
                    "completed" => {
                        return Ok(json!({"content": [{"type": "text", "text": format!("done {tag}")}],
                            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": id}}}));
                    }
                    "cancelled" => return Err((-32603, "task was cancelled".into())),
                    _ => {
                        let _ = tokio::time::timeout(wait + Duration::from_millis(1), changed.notified()).await;
                    }
                }
            }
        }
        "tasks/cancel" => {
            let id = task_id();
            let mut tasks = st.tasks.lock().unwrap();
            let t = tasks.get_mut(&id).ok_or_else(unknown)?;
            if status_of(t) != "working" {
                return Err((-32602, format!("task is already {}", status_of(t))));
            }
            t.cancelled = true;
            t.changed.notify_waiters();
            st.cancelled.lock().unwrap().insert(id.clone());
            Ok(task_json(&id, "cancelled"))
        }
        "ping" => Ok(json!({})),
        other => Err((-32601, format!("method not found: {other}"))),
    }
}
