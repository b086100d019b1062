//! A scripted 2026-07-28 server of the tasks extension (`io.modelcontextprotocol/tasks`),
//! for the tests of legacy clients in front of one (`tests/extension_tasks.rs`, `tests/extension_core_tasks.rs`).
//!
//! The scripted server keeps its tasks in memory and moves one step per `tasks/get` (no
//! clock): `slow` works three steps then completes, `fails` fails with a JSON-RPC error,
//! `ask` goes `input_required` until `tasks/update` answers its `answer` key (`ask2` asks
//! two questions at once, `colour` and `size`, and completes once both are answered), `endless`
//! works until `tasks/cancel` (`stuck` too, never changing), `stubborn` acknowledges
//! `tasks/cancel` and completes anyway, `deaf` acknowledges it and works on for ever. Each
//! refuses a request that does not declare the extension with -32021 naming it, as the
//! extension requires; `echo` is plain. A `subscriptions/listen` is granted the `taskIds` it
//! knows; then come the `notifications/tasks` of every task it has (the granted ones first:
//! a careless server, which a gateway must not rely on to keep tasks apart), and a log
//! message saying they were sent.
//!
//! [`Setup`] is the gateway in front of it; [`requests`] and the like say what it heard.

use super::{Gw, Scripted, Step, http_upstream, reply, start_gateway};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const MODERN: &str = "2026-07-28";
pub const EXT: &str = "io.modelcontextprotocol/tasks";

#[derive(Clone)]
pub struct Task {
    pub tool: String,
    pub steps: u32,
    pub status: &'static str,
    pub answer: Option<Value>,
    pub cancelled: bool,
}

#[derive(Default)]
pub struct Server {
    /// By task id (`task-1`, `task-2`, … in order of creation).
    pub tasks: HashMap<String, Task>,
    next: u32,
}

pub fn declares(req: &Value) -> bool {
    req["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"].get(EXT).is_some()
}

fn error(req: &Value, code: i64, message: &str, data: Option<Value>) -> Vec<Step> {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"], "error": e}))]
}

fn missing(req: &Value) -> Vec<Step> {
    error(
        req,
        -32021,
        "Missing required client capability",
        Some(json!({"requiredCapabilities": {"extensions": {EXT: {}}}})),
    )
}

fn complete(req: &Value, mut result: Value) -> Vec<Step> {
    result["resultType"] = "complete".into();
    vec![reply(req, result)]
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}], "isError": false, "resultType": "complete"})
}

/// The task as the extension shows it (`DetailedTask`), after one more step of work.
fn detailed(id: &str, t: &Task) -> Value {
    let mut v = json!({"taskId": id, "status": t.status, "createdAt": "2026-12-01T10:00:00.000Z",
        "lastUpdatedAt": format!("2026-12-01T10:00:{:02}.000Z", t.steps), "ttlMs": 60000, "pollIntervalMs": 100});
    match (t.tool.as_str(), t.status) {
        (_, "working") => v["statusMessage"] = format!("step {} of 3", t.steps).into(),
        ("slow", "completed") => {
            v["statusMessage"] = "step 3 of 3".into();
            v["result"] = text("slow done after 3 steps");
        }
        ("ask", "completed") => {
            let a = t.answer.as_ref().and_then(|a| a.pointer("/content/answer")).cloned().unwrap_or(Value::Null);
            v["result"] = text(&format!("answer: {}", a.as_str().unwrap_or("?")));
        }
        ("ask2", "completed") => {
            let a = |k: &str| t.answer.as_ref().and_then(|a| a[k].pointer("/content/answer")).cloned();
            let (c, z) = (a("colour").unwrap_or(Value::Null), a("size").unwrap_or(Value::Null));
            v["result"] = text(&format!("colour: {}, size: {}", c.as_str().unwrap_or("?"), z.as_str().unwrap_or("?")));
        }
        ("ask2", "input_required") => {
            let q = |m: &str| {
                json!({"method": "elicitation/create", "params": {"message": m, "mode": "form",
                "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}})
            };
            v["inputRequests"] = json!({"colour": q("colour?"), "size": q("size?")});
        }
        ("ask", "input_required") => {
            v["statusMessage"] = "waiting for an answer".into();
            v["inputRequests"] = json!({"answer": {"method": "elicitation/create", "params": {"message": "colour?",
                "mode": "form", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}});
        }
        ("fails", "failed") => v["error"] = json!({"code": -32000, "message": "boom"}),
        ("stubborn", "completed") => v["result"] = text("done anyway"),
        _ => {}
    }
    v
}

fn advance(t: &mut Task) {
    if t.cancelled || matches!(t.status, "completed" | "failed" | "cancelled") {
        return;
    }
    match t.tool.as_str() {
        "slow" if t.steps < 3 => t.steps += 1,
        "slow" => t.status = "completed",
        "fails" if t.steps < 1 => t.steps += 1,
        "stubborn" if t.steps < 2 => t.steps += 1,
        "stubborn" => t.status = "completed",
        "fails" => t.status = "failed",
        "ask" if t.answer.is_some() => t.status = "completed",
        "ask2" if t.answer.as_ref().is_some_and(|a| a.get("colour").is_some() && a.get("size").is_some()) => {
            t.status = "completed"
        }
        "ask2" => t.status = "input_required",
        "ask" => t.status = "input_required",
        "stuck" | "deaf" => {}
        _ => t.steps = (t.steps + 1).min(50),
    }
}

pub fn extension_server(state: Arc<Mutex<Server>>) -> impl Fn(&Value) -> Vec<Step> + Send + Sync + 'static {
    move |req: &Value| {
        if req.get("id").is_none() {
            return vec![];
        }
        let mut s = state.lock().unwrap();
        let method = req["method"].as_str().unwrap_or("");
        match method {
            "server/discover" => complete(
                req,
                json!({"supportedVersions": [MODERN], "capabilities": {"tools": {}, "extensions": {EXT: {}}},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ext-scripted", "version": "1"}}}),
            ),
            "tools/list" => {
                let tools: Vec<Value> =
                    ["echo", "slow", "fails", "ask", "ask2", "endless", "stubborn", "stuck", "deaf"]
                        .iter()
                        .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
                        .collect();
                complete(req, json!({"tools": tools}))
            }
            "tools/call" => {
                let tool = req["params"]["name"].as_str().unwrap_or("").to_string();
                if tool == "echo" {
                    return complete(
                        req,
                        json!({"content": [{"type": "text", "text": req["params"]["arguments"]["text"]}]}),
                    );
                }
                if !["slow", "fails", "ask", "ask2", "endless", "stubborn", "stuck", "deaf"].contains(&tool.as_str()) {
                    return error(req, -32602, "unknown tool", None);
                }
                if !declares(req) {
                    return missing(req);
                }
                s.next += 1;
                let id = format!("task-{}", s.next);
                let t = Task { tool, steps: 0, status: "working", answer: None, cancelled: false };
                let mut created = detailed(&id, &t);
                created["resultType"] = "task".into();
                s.tasks.insert(id, t);
                vec![reply(req, created)]
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" => {
                if !declares(req) {
                    return missing(req);
                }
                let id = req["params"]["taskId"].as_str().unwrap_or("").to_string();
                let Some(t) = s.tasks.get_mut(&id) else { return error(req, -32602, "unknown task", None) };
                match method {
                    "tasks/get" => {
                        advance(t);
                        complete(req, detailed(&id, t))
                    }
                    "tasks/update" => {
                        if let Some(a) = req["params"]["inputResponses"].get("answer") {
                            t.answer = Some(a.clone());
                            t.status = "working";
                        }
                        if t.tool == "ask2"
                            && let Some(given) = req["params"]["inputResponses"].as_object()
                        {
                            let answers = t.answer.get_or_insert_with(|| json!({}));
                            for (k, a) in given {
                                answers[k] = a.clone();
                            }
                        }
                        complete(req, json!({}))
                    }
                    // Acknowledged, and it runs on to its end (cancellation is cooperative).
                    _ if t.tool == "stubborn" || t.tool == "deaf" => complete(req, json!({})),
                    _ => {
                        if !matches!(t.status, "completed" | "failed") {
                            t.cancelled = true;
                            t.status = "cancelled";
                        }
                        complete(req, json!({}))
                    }
                }
            }
            "subscriptions/listen" => {
                let asked = req["params"]["notifications"]["taskIds"].as_array().cloned();
                if asked.is_some() && !declares(req) {
                    return missing(req);
                }
                // Granted: the ids it knows; each granted task's state follows at once.
                let granted: Vec<Value> = asked
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|t| t.as_str().is_some_and(|t| s.tasks.contains_key(t)))
                    .collect();
                let meta = json!({"io.modelcontextprotocol/subscriptionId": req["id"]});
                let mut steps =
                    vec![Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                    "params": {"notifications": {"taskIds": granted}, "_meta": meta}}))];
                // Carelessly, every task it has (granted first): a gateway must not rely on it.
                let mut all: Vec<&String> = s.tasks.keys().filter(|t| !granted.iter().any(|g| g == *t)).collect();
                all.sort();
                let granted_ids = granted.iter().filter_map(Value::as_str);
                for t in granted_ids.chain(all.into_iter().map(String::as_str)) {
                    let mut params = detailed(t, &s.tasks[t]);
                    params["_meta"] = meta.clone();
                    steps
                        .push(Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})));
                }
                // Then a log line that says so (a test's reader knows the notes are all in),
                // and the stream stays open a while, as a listen's does.
                steps.push(Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "granted tasks sent", "_meta": meta}})));
                steps.push(Step::Sleep(10_000));
                steps
            }
            _ => error(req, -32601, "method not found", None),
        }
    }
}

// ---- the gateway in front of it, and what the server heard ----

/// The gateway in front of the scripted server.
pub struct Setup {
    pub up: Scripted,
    pub state: Arc<Mutex<Server>>,
    pub gw: Gw,
}

pub async fn setup() -> Setup {
    setup_with("").await
}

/// The gateway in front of the scripted server, with `config` before the upstream's table
/// (e.g. `[tasks]` keys).
pub async fn setup_with(config: &str) -> Setup {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{config}{}", http_upstream("up", &up.url()))).await;
    Setup { up, state, gw }
}

pub fn requests(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
}

/// The `tasks/get` the upstream has had for task `id`.
pub fn gets_of(up: &Scripted, id: &str) -> usize {
    requests(up, "tasks/get").iter().filter(|g| g["params"]["taskId"] == id).count()
}

/// The ids of the tasks the upstream was asked to cancel, in order.
pub fn cancelled_ids(up: &Scripted) -> Vec<String> {
    requests(up, "tasks/cancel").iter().map(|c| c["params"]["taskId"].as_str().unwrap_or("").to_string()).collect()
}

/// The `notifications/tasks/status` among `msgs`, by status.
pub fn statuses(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m["method"] == "notifications/tasks/status")
        .map(|m| m["params"]["status"].as_str().unwrap_or("").to_string())
        .collect()
}
