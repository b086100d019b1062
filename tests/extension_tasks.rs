//! A 2026-07-28 upstream of the tasks extension (`io.modelcontextprotocol/tasks`) behind
//! legacy clients: blocking calls bridged through its tasks.
//!
//! The scripted server keeps its tasks in memory and moves one step per `tasks/get` (no
//! clock): `slow` works three steps then completes, `fails` fails with a JSON-RPC error,
//! `ask` goes `input_required` until `tasks/update` answers its `answer` key, `endless`
//! works until `tasks/cancel` (`stuck` too, never changing), `stubborn` acknowledges `tasks/cancel` and completes anyway. Each refuses a request that does not declare the extension
//! with -32021 naming it, as the extension requires; `echo` is plain.

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const MODERN: &str = "2026-07-28";
const EXT: &str = "io.modelcontextprotocol/tasks";

#[derive(Clone)]
struct Task {
    tool: String,
    steps: u32,
    status: &'static str,
    answer: Option<Value>,
    cancelled: bool,
}

#[derive(Default)]
struct Server {
    tasks: HashMap<String, Task>,
    next: u32,
}

fn declares(req: &Value) -> bool {
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
        "ask" => t.status = "input_required",
        "stuck" => {}
        _ => t.steps = (t.steps + 1).min(50),
    }
}

fn extension_server(state: Arc<Mutex<Server>>) -> impl Fn(&Value) -> Vec<Step> + Send + Sync + 'static {
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
                let tools: Vec<Value> = ["echo", "slow", "fails", "ask", "endless", "stubborn", "stuck"]
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
                if !["slow", "fails", "ask", "endless", "stubborn", "stuck"].contains(&tool.as_str()) {
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
                        complete(req, json!({}))
                    }
                    // Acknowledged, and it runs on to its end (cancellation is cooperative).
                    _ if t.tool == "stubborn" => complete(req, json!({})),
                    _ => {
                        if !matches!(t.status, "completed" | "failed") {
                            t.cancelled = true;
                            t.status = "cancelled";
                        }
                        complete(req, json!({}))
                    }
                }
            }
            _ => error(req, -32601, "method not found", None),
        }
    }
}

struct Setup {
    up: Scripted,
    state: Arc<Mutex<Server>>,
    gw: Gw,
}

async fn setup() -> Setup {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    Setup { up, state, gw }
}

fn requests(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
}

fn progress_messages(out: &Outcome) -> Vec<String> {
    out.others
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn a_blocking_call_the_upstream_serves_only_as_a_task_is_bridged() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;

    let out = c.request("tools/call", json!({"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}})).await;
    assert_eq!(
        out.result(),
        &json!({"content": [{"type": "text", "text": "slow done after 3 steps"}], "isError": false})
    );
    // Every status message became progress under the client's token, in order, rising.
    assert_eq!(
        progress_messages(&out),
        ["step 0 of 3", "step 1 of 3", "step 2 of 3", "step 3 of 3"],
        "{:?}",
        out.others
    );
    let values = out.progress();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert!(out.others.iter().all(|m| m["params"]["progressToken"] == "p"), "{:?}", out.others);

    // Sent plain first, then once declaring the extension; followed by tasks/get, declaring it.
    let calls = requests(&s.up, "tools/call");
    assert_eq!(calls.len(), 2);
    assert!(!declares(&calls[0]) && declares(&calls[1]), "{calls:?}");
    assert!(calls[1]["params"].get("task").is_none());
    let gets = requests(&s.up, "tasks/get");
    assert_eq!(gets.len(), 4, "one per step until terminal");
    assert!(gets.iter().all(|g| declares(g) && g["params"]["taskId"] == "task-1"));
    assert!(requests(&s.up, "tasks/cancel").is_empty(), "a finished task is not cancelled");

    // A plain tool stays plain: no retry, no extension.
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "hi");
    assert_eq!(requests(&s.up, "tools/call").len(), 3);
    // An unknown tool's error passes as it is.
    assert_eq!(c.request("tools/call", json!({"name": "nope", "arguments": {}})).await.error_code(), -32602);
}

#[tokio::test]
async fn a_failed_task_answers_its_inline_error() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-03-26").await;
    let out = c.request("tools/call", json!({"name": "fails", "arguments": {}})).await;
    assert_eq!(out.response["error"], json!({"code": -32000, "message": "boom"}), "{}", out.response);
    assert!(out.progress().is_empty(), "no token, no progress");
}

#[tokio::test]
async fn input_requests_reach_the_client_once_and_go_back_as_tasks_update() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "answer: forty-two", "{}", out.response);
    let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
    assert_eq!(asked.len(), 1, "the key is relayed once, though polls repeat it: {:?}", out.others);
    assert_eq!(asked[0]["params"]["message"], "colour?");
    assert!(asked[0]["params"].get("_meta").is_none(), "no related-task: the task is the gateway's");
    let updates = requests(&s.up, "tasks/update");
    assert_eq!(updates.len(), 1);
    assert!(declares(&updates[0]));
    assert_eq!(
        updates[0]["params"]["inputResponses"],
        json!({"answer": {"action": "accept", "content": {"answer": "forty-two"}}})
    );
}

#[tokio::test]
async fn an_error_answer_to_an_input_request_cancels_the_task() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    let mut events = SseReader::new(resp.into_body());
    let mut answer = None;
    while let Some((_, m)) = events.next().await {
        if m["method"] == "elicitation/create" {
            let refusal = json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32600, "message": "no thanks"}});
            assert_eq!(c.post_raw(serde_json::to_vec(&refusal).unwrap(), &[]).await.status, 202);
        } else if m["id"] == 7 {
            answer = Some(m);
            break;
        }
    }
    let answer = answer.expect("an answer");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("no thanks"), "{answer}");
    let cancels = requests(&s.up, "tasks/cancel");
    assert_eq!(cancels.len(), 1);
    assert!(declares(&cancels[0]) && cancels[0]["params"]["taskId"] == "task-1");
    assert!(requests(&s.up, "tasks/update").is_empty());
}

#[tokio::test]
async fn cancelling_the_call_or_ending_the_session_cancels_the_task() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-06-18").await;
    let msg =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "endless", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    // Once the task exists upstream and is being followed, the client cancels.
    eventually("the task is followed", async || !requests(&s.up, "tasks/get").is_empty()).await;
    c.notify("notifications/cancelled", json!({"requestId": 9, "reason": "enough"})).await;
    eventually("the task is cancelled", async || !requests(&s.up, "tasks/cancel").is_empty()).await;
    assert_eq!(requests(&s.up, "tasks/cancel")[0]["params"]["taskId"], "task-1");
    assert_eq!(s.state.lock().unwrap().tasks["task-1"].status, "cancelled");
    drop(resp);

    // A second call, then the session ends (DELETE): its task is cancelled too.
    let msg =
        json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "endless", "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
    eventually("task-2 is followed", async || {
        requests(&s.up, "tasks/get").iter().any(|g| g["params"]["taskId"] == "task-2")
    })
    .await;
    assert_eq!(c.delete().await, 200);
    eventually("task-2 is cancelled", async || requests(&s.up, "tasks/cancel").len() == 2).await;
    assert_eq!(requests(&s.up, "tasks/cancel")[1]["params"]["taskId"], "task-2");
    drop(resp);
}

#[tokio::test]
async fn a_2025_11_25_client_calling_without_a_task_is_bridged_too() {
    let s = setup().await;
    let mut c = HttpMcp::new(&s.gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "slow", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "slow done after 3 steps");
    assert!(out.result().get("resultType").is_none() && out.result().get("_meta").is_none(), "{}", out.response);
}

// ---- a 2025-11-25 client with core tasks: translated both ways ----

const RELATED: &str = "io.modelcontextprotocol/related-task";

async fn core_client(s: &Setup) -> HttpMcp {
    let mut c = HttpMcp::new(&s.gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    let tasks = &init["capabilities"]["tasks"];
    assert!(tasks["list"].is_object() && tasks["cancel"].is_object(), "{init}");
    assert!(tasks["requests"]["tools"]["call"].is_object(), "{init}");
    assert!(init["capabilities"].get("extensions").is_none(), "{init}");
    c
}

fn task_call(name: &str) -> Value {
    json!({"name": name, "arguments": {}, "task": {"ttl": 60000}})
}

#[tokio::test]
async fn core_tasks_become_extension_tasks_and_back() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let tools = c.request("tools/list", json!({})).await;
    let tools = tools.result()["tools"].as_array().unwrap().clone();
    assert!(tools.iter().all(|t| t["execution"]["taskSupport"] == "optional"), "{tools:?}");

    let created = c.request("tools/call", task_call("slow")).await;
    let task = &created.result()["task"];
    assert_eq!(task["taskId"], "task-1", "ids pass unchanged: {}", created.response);
    assert_eq!(
        (task["status"].as_str(), task["ttl"].as_u64(), task["pollInterval"].as_u64()),
        (Some("working"), Some(60000), Some(100))
    );
    assert!(task.get("ttlMs").is_none() && created.result().get("resultType").is_none(), "{}", created.response);
    let call = requests(&s.up, "tools/call").pop().unwrap();
    assert!(declares(&call) && call["params"].get("task").is_none(), "{call}");

    let got = c.request("tasks/get", json!({"taskId": "task-1"})).await;
    assert_eq!(got.result()["status"], "working");
    assert_eq!(got.result()["statusMessage"], "step 1 of 3");
    assert!(got.result().get("resultType").is_none() && got.result().get("pollIntervalMs").is_none());

    // tasks/result blocks until the task ends, then answers the tool's result, tagged.
    let result = c.request("tasks/result", json!({"taskId": "task-1"})).await;
    assert_eq!(result.result()["content"][0]["text"], "slow done after 3 steps", "{}", result.response);
    assert_eq!(result.result()["_meta"][RELATED], json!({"taskId": "task-1"}));
    assert!(result.result().get("resultType").is_none());
    let statuses: Vec<&Value> = result.others.iter().filter(|m| m["method"] == "notifications/tasks/status").collect();
    assert_eq!(statuses.last().map(|n| n["params"]["status"].clone()), Some(json!("working")), "{:?}", result.others);
    let gets_then = requests(&s.up, "tasks/get").len();
    // Asked again: the same, from what the gateway kept.
    let again = c.request("tasks/result", json!({"taskId": "task-1"})).await;
    assert_eq!(again.response["result"], result.response["result"]);
    let done = c.request("tasks/get", json!({"taskId": "task-1"})).await;
    assert_eq!(done.result()["status"], "completed");
    assert_eq!(requests(&s.up, "tasks/get").len(), gets_then, "a finished task is not asked about again");

    // A failed one: its error is tasks/result's.
    let failed = c.request("tools/call", task_call("fails")).await;
    let id = failed.result()["task"]["taskId"].as_str().unwrap().to_string();
    let err = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(err.response["error"], json!({"code": -32000, "message": "boom"}));

    let list = c.request("tasks/list", json!({})).await;
    let listed: Vec<(Value, Value)> =
        list.result()["tasks"].as_array().unwrap().iter().map(|t| (t["taskId"].clone(), t["status"].clone())).collect();
    assert_eq!(listed, vec![(json!("task-1"), json!("completed")), (json!("task-2"), json!("failed"))]);
    assert_eq!(c.request("tasks/list", json!({"cursor": "nope"})).await.error_code(), -32602);
}

#[tokio::test]
async fn a_core_cancel_is_answered_at_once_and_sticks() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", task_call("stubborn")).await;
    let id = created.result()["task"]["taskId"].clone();
    let cancelled = c.request("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled.result()["status"], "cancelled", "{}", cancelled.response);
    assert_eq!(cancelled.result()["taskId"], id);
    let cancels = requests(&s.up, "tasks/cancel");
    assert_eq!(cancels.len(), 1);
    assert!(declares(&cancels[0]));
    // The server completes it anyway; for this client it stays cancelled.
    for _ in 0..3 {
        assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "cancelled");
    }
    assert_eq!(c.request("tasks/result", json!({"taskId": id})).await.error_code(), -32603);
    assert_eq!(c.request("tasks/cancel", json!({"taskId": id})).await.error_code(), -32602, "terminal");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"][0]["status"], "cancelled");

    // Unknown ids, and another session's task.
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(c.request(m, json!({"taskId": "nope"})).await.error_code(), -32602, "{m}");
    }
    let mut other = core_client(&s).await;
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(other.request(m, json!({"taskId": id})).await.error_code(), -32602, "{m}");
    }
    assert_eq!(other.request("tasks/list", json!({})).await.result()["tasks"], json!([]));
}

#[tokio::test]
async fn a_plain_answer_to_a_task_call_is_a_hosted_task_already_done() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}, "task": {}})).await;
    let task = &created.result()["task"];
    assert_eq!(task["status"], "completed", "{}", created.response);
    let id = task["taskId"].as_str().unwrap().to_string();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "hi");
    assert!(result.result().get("resultType").is_none(), "{}", result.response);
    assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "completed");
    assert!(requests(&s.up, "tasks/get").is_empty(), "the gateway's own task");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"][0]["taskId"], id.as_str());
}

#[tokio::test]
async fn a_core_client_answers_input_on_its_tasks_result_stream() {
    let s = setup().await;
    let mut c = core_client(&s).await;
    let created = c.request("tools/call", task_call("ask")).await;
    let id = created.result()["task"]["taskId"].clone();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "answer: forty-two", "{}", result.response);
    let asked: Vec<&Value> = result.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
    assert_eq!(asked.len(), 1, "{:?}", result.others);
    assert_eq!(asked[0]["params"]["_meta"][RELATED], json!({"taskId": id}));
    let updates = requests(&s.up, "tasks/update");
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0]["params"]["inputResponses"]["answer"]["content"]["answer"], "forty-two");
    assert!(
        result
            .others
            .iter()
            .any(|m| m["method"] == "notifications/tasks/status" && m["params"]["status"] == "input_required")
    );
}

/// One link for every session (`share = true`): a session's extension tasks are its own, and
/// bridged calls of two sessions at once each get their own answer.
#[tokio::test]
async fn on_a_shared_link_tasks_stay_with_their_session() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}share = true\n", http_upstream("up", &up.url()))).await;
    let s = Setup { up, state, gw };
    let mut a = core_client(&s).await;
    let mut b = core_client(&s).await;
    let created = a.request("tools/call", task_call("slow")).await;
    let id = created.result()["task"]["taskId"].clone();
    for m in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(b.request(m, json!({"taskId": id})).await.error_code(), -32602, "{m}");
    }
    assert_eq!(b.request("tasks/list", json!({})).await.result()["tasks"], json!([]));
    assert_eq!(
        a.request("tasks/result", json!({"taskId": id})).await.result()["content"][0]["text"],
        "slow done after 3 steps"
    );

    let mut old = HttpMcp::new(&s.gw.url("up"));
    old.initialize("2025-06-18").await;
    let (one, two) = tokio::join!(
        old.request_owned("tools/call", json!({"name": "slow", "arguments": {}})),
        a.request_owned("tools/call", json!({"name": "ask", "arguments": {}})),
    );
    assert_eq!(one.result()["content"][0]["text"], "slow done after 3 steps");
    assert_eq!(two.result()["content"][0]["text"], "answer: forty-two");
}

/// A bridged task that shows no change for `request_timeout` fails the call with -32001, and
/// is cancelled upstream.
#[tokio::test]
async fn a_bridged_task_without_change_times_out_and_is_cancelled() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}request_timeout = \"600ms\"\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "stuck", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("request_timeout"), "{}", out.response);
    eventually("the task is cancelled", async || !requests(&up, "tasks/cancel").is_empty()).await;
    assert_eq!(state.lock().unwrap().tasks["task-1"].status, "cancelled");
}

/// SEP-1391 operations (`[upstream.dialects] sep1391`) in front of an extension server: each
/// runs on the server's own task, declared from the start, and the client polls by token.
#[tokio::test]
async fn sep1391_operations_run_on_extension_tasks() {
    let state = Arc::new(Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&format!("{}[upstream.dialects]\nsep1391 = true\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let mut params = init_params("2025-06-18");
    params["capabilities"]["experimental"] = json!({"sep-1391": {}});
    c.initialize_with(params).await;
    let op = |tool: &str, token: &str| json!({"name": tool, "arguments": {}, "operation": {"token": token}});
    let status = async |c: &HttpMcp, token: &str| {
        let out = c.request_owned("tools/async/status", json!({"token": token})).await;
        out.response.pointer("/result/status").and_then(Value::as_str).unwrap_or("").to_string()
    };

    let started = c.request("tools/call", op("slow", "s1")).await;
    assert_eq!(started.result()["operation"]["status"], "working", "{}", started.response);
    eventually("s1 completes", async || status(&c, "s1").await == "completed").await;
    let got = c.request("tools/async/result", json!({"token": "s1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "slow done after 3 steps", "{}", got.response);
    let calls = requests(&up, "tools/call");
    assert_eq!(calls.len(), 1, "declared from the start, never refused: {calls:?}");
    assert!(declares(&calls[0]));

    // Its question reaches the client's GET stream with the operation's token.
    c.request("tools/call", op("ask", "a1")).await;
    let mut events = SseReader::new(c.get_raw(&[]).await.into_body());
    let (_, question) = tokio::time::timeout(STEP, events.next()).await.unwrap().unwrap();
    assert_eq!(question["params"]["_operation"]["token"], "a1", "{question}");
    assert_eq!(status(&c, "a1").await, "input_required");
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await.status, 202);
    eventually("a1 completes", async || status(&c, "a1").await == "completed").await;
    let got = c.request("tools/async/result", json!({"token": "a1"})).await;
    assert_eq!(got.result()["result"]["content"][0]["text"], "answer: forty-two");

    // A cancel of the original call cancels the upstream task.
    let call = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": op("endless", "e1")});
    c.post_raw(serde_json::to_vec(&call).unwrap(), &[]).await;
    eventually("e1 is followed", async || requests(&up, "tasks/get").iter().any(|g| g["params"]["taskId"] == "task-3"))
        .await;
    c.notify("notifications/cancelled", json!({"requestId": 500})).await;
    assert_eq!(status(&c, "e1").await, "canceled");
    eventually("the upstream task is cancelled", async || {
        requests(&up, "tasks/cancel").iter().any(|r| r["params"]["taskId"] == "task-3")
    })
    .await;
}
