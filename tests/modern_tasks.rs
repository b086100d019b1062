//! The tasks extension (`io.modelcontextprotocol/tasks`) for modern (2026-07-28) clients in
//! front of an upstream without tasks: the gateway hosts them and speaks the extension's
//! dialect (flat `CreateTaskResult`, `tasks/get` with the outcome or the questions inline,
//! `tasks/update`, `tasks/cancel` as an acknowledgement).

use crate::common;

use common::modern_client::*;
use common::*;
use serde_json::{Value, json};

fn ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
}

/// The demo behind a gateway that makes every hosted call a task at once (these tests are
/// about the tasks themselves; `decided_as_a_server_decides` is about when there is one).
fn tasks_at_once() -> String {
    format!("{}[upstream.tasks]\nplain_within = \"0ms\"\n", builtin_upstream("demo"))
}

async fn demo() -> (Gw, HttpMcp) {
    let gw = start_gateway(&tasks_at_once()).await;
    let c = HttpMcp::new(&gw.url("demo"));
    (gw, c)
}

async fn get(c: &HttpMcp, task: &str) -> Value {
    let (_, r, _) = call(c, &request(json!("g"), "tasks/get", json!({"taskId": task}), ext())).await;
    r
}

/// Polls `tasks/get` until the task leaves `working` (bounded).
async fn settled(c: &HttpMcp, task: &str) -> Value {
    poll(&format!("task {task} leaves working"), async || {
        let r = get(c, task).await;
        (r["result"]["status"] != "working").then_some(r)
    })
    .await
}

#[tokio::test]
async fn a_hosted_task_in_the_extensions_dialect() {
    let (_gw, c) = demo().await;
    let (_, d, _) = call(&c, &request(json!(0), "server/discover", json!({}), json!({}))).await;
    assert_eq!(d["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}), "{d}");

    let slow =
        request(json!(1), "tools/call", json!({"name": "slow", "arguments": {"duration_ms": 200, "steps": 2}}), ext());
    let (status, r, _) = call(&c, &slow).await;
    assert_eq!(status, 200);
    let t = &r["result"];
    assert_eq!((t["resultType"].as_str(), t["status"].as_str()), (Some("task"), Some("working")), "{r}");
    assert!(t.get("task").is_none() && t.get("ttl").is_none(), "flat, extension field names: {t}");
    assert!(t["ttlMs"].is_u64() && t["pollIntervalMs"].is_u64(), "{t}");
    let id = t["taskId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128 random bits");

    let done = settled(&c, &id).await;
    let d = &done["result"];
    assert_eq!((d["resultType"].as_str(), d["status"].as_str()), (Some("complete"), Some("completed")), "{done}");
    assert_eq!(d["result"]["content"][0]["text"], "done after 2 steps", "the outcome inline: {done}");
    assert_eq!(d["result"]["resultType"], "complete");
    // Asked again, the same.
    assert_eq!(get(&c, &id).await["result"]["result"], d["result"]);

    // A tool result with isError is `completed` in the extension.
    let fail = request(json!(2), "tools/call", json!({"name": "fail", "arguments": {"message": "no"}}), ext());
    let (_, r, _) = call(&c, &fail).await;
    let failed = settled(&c, r["result"]["taskId"].as_str().unwrap()).await;
    assert_eq!(failed["result"]["status"], "completed", "{failed}");
    assert_eq!(failed["result"]["result"]["isError"], true);

    // Without the extension declared: the blocking call.
    let plain = request(
        json!(3),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 50, "steps": 1}}),
        json!({}),
    );
    let (_, r, _) = call(&c, &plain).await;
    assert_eq!(r["result"]["content"][0]["text"], "done after 1 steps", "{r}");
}

#[tokio::test]
async fn input_through_tasks_get_and_update_and_cancellation() {
    let (_gw, c) = demo().await;
    let ask = request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "colour?"}}), ext());
    let (_, r, _) = call(&c, &ask).await;
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = settled(&c, &id).await;
    let w = &waiting["result"];
    assert_eq!(w["status"], "input_required", "{waiting}");
    let requests = w["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{w}");
    let (key, asked) = requests.iter().next().unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "colour?");
    assert!(
        asked["params"].get("_meta").is_none_or(|m| m.get("io.modelcontextprotocol/related-task").is_none()),
        "{asked}"
    );

    // A key that is not outstanding is ignored; the right one answers.
    let update = |responses: Value| {
        request(json!("u"), "tasks/update", json!({"taskId": id, "inputResponses": responses}), ext())
    };
    let (_, r, _) = call(&c, &update(json!({"no-such-key": {"action": "decline"}}))).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    assert_eq!(get(&c, &id).await["result"]["status"], "input_required");
    let (_, r, _) = call(&c, &update(json!({key: {"action": "accept", "content": {"answer": "blue"}}}))).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}));
    let done = settled(&c, &id).await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "answer: blue", "{done}");

    // Cancelled: acknowledged, and the task says so; a second cancel is acknowledged too.
    let slow = request(
        json!(2),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 30000, "steps": 30}}),
        ext(),
    );
    let (_, r, _) = call(&c, &slow).await;
    let long = r["result"]["taskId"].as_str().unwrap().to_string();
    let cancel = request(json!("c"), "tasks/cancel", json!({"taskId": long}), ext());
    let (_, r, _) = call(&c, &cancel).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    assert_eq!(get(&c, &long).await["result"]["status"], "cancelled");
    let (_, r, _) = call(&c, &cancel).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}));

    // Unknown ids, and a client that did not declare the extension.
    let r = get(&c, "no-such-task").await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let undeclared = request(json!(3), "tasks/get", json!({"taskId": id}), json!({}));
    let (status, r, _) = call(&c, &undeclared).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (400, Some(-32021)), "{r}");
    let (_, r, _) = call(&c, &request(json!(4), "tasks/get", json!({"taskId": 7}), ext())).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// The same over stdio.
#[tokio::test]
async fn hosted_extension_tasks_over_stdio() {
    let mut c = StdioMcp::start(&tasks_at_once(), "demo").await;
    c.send(&request(
        json!(1),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 100, "steps": 2}}),
        ext(),
    ))
    .await;
    let r = c.wait_response(1).await;
    assert_eq!(r.result()["resultType"], "task", "{:?}", r.response);
    let id = r.result()["taskId"].as_str().unwrap().to_string();
    let mut n = 100;
    let last = poll("the task completes", async || {
        n += 1;
        c.send(&request(json!(n), "tasks/get", json!({"taskId": id}), ext())).await;
        let last = c.wait_response(n).await.response;
        (last["result"]["status"] == "completed").then_some(last)
    })
    .await;
    assert_eq!(last["result"]["result"]["content"][0]["text"], "done after 2 steps", "{last}");
}

/// A 2025-11-25 task server: `job` runs as a task whose status the test sets (`done` once
/// `tasks/get` has been asked three times), with its result from `tasks/result`.
async fn core_task_server() -> Scripted {
    let gets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Scripted::start(move |req| {
        let task = |id: &Value, status: &str| {
            json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100})
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}})),
            "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
            "tools/list" => vec![reply(
                req,
                json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                    {"name": "plain", "inputSchema": {"type": "object"}}]}),
            )],
            "tools/call" if req["params"]["name"] == "job" => {
                assert!(req["params"]["task"].is_object(), "called as a task: {req}");
                assert!(req["params"].get("_meta").is_none_or(|m| m.get("io.modelcontextprotocol/protocolVersion").is_none()));
                vec![reply(req, json!({"task": task(&json!("up-1"), "working")}))]
            }
            "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "plain"}]}))],
            "tasks/get" => {
                let n = gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let status = if n >= 2 { "completed" } else { "working" };
                vec![reply(req, task(&req["params"]["taskId"], status))]
            }
            "tasks/result" => vec![reply(req, json!({"content": [{"type": "text", "text": "job done"}]}))],
            "tasks/cancel" => vec![reply(req, task(&req["params"]["taskId"], "cancelled"))],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

#[tokio::test]
async fn an_extension_client_in_front_of_a_core_task_server() {
    let up = core_task_server().await;
    let gw = start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", http_upstream("up", &up.url()))).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (_, d, _) = call(&c, &request(json!(0), "server/discover", json!({}), json!({}))).await;
    assert_eq!(d["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}), "{d}");
    assert!(d["result"]["capabilities"].get("tasks").is_none(), "{d}");

    let job = request(json!(1), "tools/call", json!({"name": "job", "arguments": {}}), ext());
    let (_, r, _) = call(&c, &job).await;
    let t = &r["result"];
    assert_eq!((t["resultType"].as_str(), t["ttlMs"].as_u64()), (Some("task"), Some(60000)), "{r}");
    assert_eq!(t["pollIntervalMs"], 100);
    // The client knows the task by an id of the gateway's, not the upstream's guessable one.
    let ours = t["taskId"].as_str().unwrap().to_string();
    assert!(ours != "up-1" && ours.len() == 32, "{r}");
    assert_eq!(get(&c, "up-1").await["error"]["code"], -32602, "the upstream's own id is not a client's");
    let working = get(&c, &ours).await;
    assert_eq!(
        (working["result"]["status"].as_str(), working["result"]["taskId"].as_str()),
        (Some("working"), Some(ours.as_str())),
        "{working}"
    );
    let done = settled(&c, &ours).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], "job done");
    assert_eq!(done["result"]["resultType"], "complete");
    let cancel = request(json!("c"), "tasks/cancel", json!({"taskId": ours}), ext());
    let (_, r, _) = call(&c, &cancel).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");

    // A tool the server does not run as a task is called plainly; ids the gateway did not
    // hand out are not asked about.
    let plain = request(json!(2), "tools/call", json!({"name": "plain", "arguments": {}}), ext());
    let (_, r, _) = call(&c, &plain).await;
    assert_eq!(r["result"]["content"][0]["text"], "plain", "{r}");
    let before = up.received_methods().iter().filter(|m| *m == "tasks/get").count();
    assert_eq!(get(&c, "up-2").await["error"]["code"], -32602);
    let after = up.received_methods().iter().filter(|m| *m == "tasks/get").count();
    assert_eq!(before, after, "not passed upstream");
}

/// A modern client that did not declare the extension gets a tool the upstream requires as a
/// task bridged, as a legacy client does.
#[tokio::test]
async fn a_required_tool_is_bridged_for_a_modern_client_without_the_extension() {
    let up = Scripted::start(|req| {
        let task = |status: &str| {
            json!({"taskId": "up-9", "status": status, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 50})
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
            "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
            "tools/list" => vec![reply(
                req,
                json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
            )],
            "tools/call" if req["params"].get("task").is_none() => vec![Step::Send(
                json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "job must run as a task"}}),
            )],
            "tools/call" => vec![reply(req, json!({"task": task("working")}))],
            "tasks/get" => vec![reply(req, task("completed"))],
            "tasks/result" => vec![reply(req, json!({"content": [{"type": "text", "text": "bridged"}]}))],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (status, r, _) =
        call(&c, &request(json!(1), "tools/call", json!({"name": "job", "arguments": {}}), json!({}))).await;
    assert_eq!((status, r["result"]["content"][0]["text"].as_str()), (200, Some("bridged")), "{r}");
    assert_eq!(r["result"]["resultType"], "complete");
    // The 2025-11-25 upstream got the task-augmented call without the modern client's
    // per-request `_meta`, as a forwarded request has none.
    let calls = calls_to(&up, "tools/call");
    let as_task = calls.iter().find(|c| c["params"].get("task").is_some()).expect("the bridged call");
    let meta = as_task["params"].get("_meta").cloned().unwrap_or(json!({}));
    assert!(meta.as_object().unwrap().keys().all(|k| !k.starts_with("io.modelcontextprotocol/")), "{as_task}");
}

/// A hosted task of a client that declared the extension but not elicitation never asks the
/// upstream's question, and answers that are not objects are ignored.
#[tokio::test]
async fn a_hosted_task_asks_only_what_its_client_declared() {
    let (_gw, c) = demo().await;
    let only_ext = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let ask = request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "q"}}), only_ext);
    let (_, r, _) = call(&c, &ask).await;
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let done = settled(&c, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let text = done["result"]["result"]["content"][0]["text"].as_str().unwrap().to_string();
    assert!(text.contains("did not declare"), "refused upstream: {text}");

    let ask2 = request(json!(2), "tools/call", json!({"name": "ask", "arguments": {"question": "q2"}}), ext());
    let (_, r, _) = call(&c, &ask2).await;
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = settled(&c, &id).await;
    let key = waiting["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let update =
        request(json!("u"), "tasks/update", json!({"taskId": id, "inputResponses": {key.clone(): "garbage"}}), ext());
    let (_, r, _) = call(&c, &update).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}));
    assert_eq!(get(&c, &id).await["result"]["status"], "input_required", "not taken as an answer");
}

/// `subscriptions/listen` with `taskIds`: the client's hosted tasks' status changes, each as
/// the whole task; a task of another owner (a legacy session's) is not granted, and nothing
/// of it reaches the stream.
#[tokio::test]
async fn a_listen_stream_carries_the_status_of_the_hosted_tasks_it_may_see() {
    let (gw, c) = demo().await;
    let ask = request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "colour?"}}), ext());
    let (_, r, _) = call(&c, &ask).await;
    let mine = r["result"]["taskId"].as_str().unwrap().to_string();
    let waiting = settled(&c, &mine).await;
    let key = waiting["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();

    let mut legacy = HttpMcp::new(&gw.url("demo"));
    legacy.initialize("2025-11-25").await;
    let slow = json!({"name": "slow", "arguments": {"duration_ms": 100, "steps": 1}, "task": {"ttl": 60000}});
    let theirs = legacy.request("tools/call", slow).await.result()["task"]["taskId"].as_str().unwrap().to_string();

    let listen = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [mine, theirs, "no-such-task"]}}),
        ext(),
    );
    let (mut events, ack) = listen_stream(&c, &listen).await;
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [mine]}), "only what this client may see: {ack}");

    // The other owner's task ends while the stream is open; then this client's is answered.
    eventually("the other owner's task completes", async || {
        legacy.request("tasks/get", json!({"taskId": theirs})).await.result()["status"] == "completed"
    })
    .await;
    let update = request(
        json!("u"),
        "tasks/update",
        json!({"taskId": mine, "inputResponses": {key: {"action": "accept", "content": {"answer": "blue"}}}}),
        ext(),
    );
    assert_eq!(call(&c, &update).await.1["result"], json!({"resultType": "complete"}));
    loop {
        let (_, note) = events.next().await.expect("a task notification");
        assert_eq!(note["method"], "notifications/tasks", "{note}");
        let p = &note["params"];
        assert_eq!(p["taskId"], mine.as_str(), "only the granted task: {note}");
        assert_eq!(p["_meta"]["io.modelcontextprotocol/subscriptionId"], "L", "{note}");
        assert!(p.get("resultType").is_none() && p["ttlMs"].is_u64(), "a DetailedTask: {note}");
        if p["status"] == "completed" {
            assert_eq!(p["result"]["content"][0]["text"], "answer: blue", "the outcome inline: {note}");
            break;
        }
        assert_eq!(p["status"], "working", "{note}");
    }
}

/// A tool of `task_tools` is a task at once however quickly it ends or asks, while the
/// others are still decided by `plain_within`.
#[tokio::test]
async fn task_tools_are_a_task_at_once() {
    let gw = start_gateway(&format!("{}[upstream.tasks]\ntask_tools = [\"as?\"]\n", builtin_upstream("demo"))).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let ask = json!({"name": "ask", "arguments": {"question": "colour?"}});
    let (_, r, _) = call(&c, &request(json!(1), "tools/call", ask, ext())).await;
    assert_eq!(
        (r["result"]["resultType"].as_str(), r["result"]["status"].as_str()),
        (Some("task"), Some("working")),
        "a task, not an input round: {r}"
    );
    let echo = json!({"name": "echo", "arguments": {"text": "hi"}});
    let (_, r, _) = call(&c, &request(json!(2), "tools/call", echo, ext())).await;
    assert_eq!(r["result"]["resultType"], "complete", "not named, so plain: {r}");
}

/// A hosted call of a client that declared the extension is answered as the extension's
/// servers decide (`plain_within`, 500 ms by default): plainly when it ends in time, with its
/// input round when it asks first (the retry's answers go to the task it runs in), and as a
/// task only when it runs on.
#[tokio::test]
async fn decided_as_a_server_decides() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let quick =
        request(json!(1), "tools/call", json!({"name": "slow", "arguments": {"duration_ms": 50, "steps": 1}}), ext());
    let (_, r, _) = call(&c, &quick).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "done after 1 steps", "{r}");
    assert!(r["result"].get("taskId").is_none(), "{r}");

    let long = request(
        json!(2),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 30000, "steps": 30}}),
        ext(),
    );
    let (_, r, _) = call(&c, &long).await;
    assert_eq!(
        (r["result"]["resultType"].as_str(), r["result"]["status"].as_str()),
        (Some("task"), Some("working")),
        "{r}"
    );
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let (_, r, _) = call(&c, &request(json!("c"), "tasks/cancel", json!({"taskId": id}), ext())).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");

    // It asks first: its input round, no task named.
    let params = json!({"name": "ask", "arguments": {"question": "colour?"}});
    let (_, r, _) = call(&c, &request(json!(3), "tools/call", params.clone(), ext())).await;
    let round = &r["result"];
    assert_eq!(round["resultType"], "input_required", "{r}");
    assert!(round.get("taskId").is_none(), "{r}");
    let (key, asked) = round["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(
        (asked["method"].as_str(), asked["params"]["message"].as_str()),
        (Some("elicitation/create"), Some("colour?"))
    );
    let state = round["requestState"].as_str().unwrap().to_string();
    // The retry answers it, and the call then ends in time: its result.
    let mut retry = params.clone();
    retry["inputResponses"] = json!({key.clone(): {"action": "accept", "content": {"answer": "blue"}}});
    retry["requestState"] = json!(state);
    let (_, r, _) = call(&c, &request(json!(4), "tools/call", retry.clone(), ext())).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "answer: blue", "{r}");
    // A state the gateway never gave out is refused, and nothing runs.
    retry["requestState"] = json!("taskgate-hosted-task:0123456789abcdef0123456789abcdef");
    let (_, r, _) = call(&c, &request(json!(5), "tools/call", retry, ext())).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// In front of a 2026-07-28 upstream without the tasks extension the gateway hosts as it
/// does in front of a legacy one: its discover declares the extension, a declaring client's
/// call is hosted, and ids it never gave out are -32602, as the extension says.
#[tokio::test]
async fn a_modern_upstream_without_the_extension_gets_hosted_tasks() {
    let up = Scripted::start_with_headers(common::modern::modern_server_without_tasks).await;
    let config = format!("{}[upstream.tasks]\nplain_within = \"0ms\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (_, d, _) = call(&c, &request(json!(0), "server/discover", json!({}), json!({}))).await;
    assert_eq!(d["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}), "{d}");
    let echo = request(json!(1), "tools/call", json!({"name": "echo", "arguments": {"text": "hosted"}}), ext());
    let (_, r, _) = call(&c, &echo).await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    let id = r["result"]["taskId"].as_str().unwrap().to_string();
    let done = settled(&c, &id).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], "hosted", "{done}");
    let r = get(&c, "up-never-given").await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(calls_to(&up, "tasks/get").is_empty(), "not asked upstream");
}

/// What a plain answer leaves: nothing the owner's task limit counts (the client never
/// learned those tasks); and a retry must repeat its round's tool.
#[tokio::test]
async fn plain_answers_take_no_task_place_and_a_retry_repeats_its_round() {
    let config = format!("{}[upstream.tasks]\nmax_tasks_per_owner = 2\n", builtin_upstream("demo"));
    let gw = start_gateway(&config).await;
    let c = HttpMcp::new(&gw.url("demo"));
    for n in 0..5 {
        let echo = request(json!(n), "tools/call", json!({"name": "echo", "arguments": {"text": "quick"}}), ext());
        let (_, r, _) = call(&c, &echo).await;
        assert_eq!(r["result"]["content"][0]["text"], "quick", "call {n}: {r}");
    }
    let ask = json!({"name": "ask", "arguments": {"question": "colour?"}});
    let (_, r, _) = call(&c, &request(json!(9), "tools/call", ask, ext())).await;
    let state = r["result"]["requestState"].as_str().unwrap().to_string();
    let other = json!({"name": "echo", "arguments": {"text": "x"}, "requestState": state, "inputResponses": {}});
    let (_, r, _) = call(&c, &request(json!(10), "tools/call", other, ext())).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

/// A gateway behind this one hosts the tasks: its input rounds' `requestState` passes through
/// this gateway both ways, and the retry reaches it.
#[tokio::test]
async fn a_hosted_round_of_a_gateway_behind_passes_through() {
    let back = start_gateway(&builtin_upstream("demo")).await;
    let front = start_gateway(&http_upstream("back", &back.url("demo"))).await;
    let c = HttpMcp::new(&front.url("back"));
    let params = json!({"name": "ask", "arguments": {"question": "colour?"}});
    let (_, r, _) = call(&c, &request(json!(1), "tools/call", params.clone(), ext())).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let key = r["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let mut retry = params;
    retry["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "green"}}});
    retry["requestState"] = r["result"]["requestState"].clone();
    let (_, r, _) = call(&c, &request(json!(2), "tools/call", retry, ext())).await;
    assert_eq!(r["result"]["content"][0]["text"], "answer: green", "{r}");
}

/// A 2026-07-28 client that did not declare the tasks extension, in front of a server of it
/// whose tool runs only as a task: the call is bridged, as a legacy client's is, and the
/// client gets the task's result as the call's. A task that asks for input asks it in the
/// call's answer (an input round, as MRTR has it): the retry's answer goes to the task, and
/// the retry gets the task's result. A client that cannot answer gets an error at once.
#[tokio::test]
async fn a_modern_client_without_the_extension_gets_an_extension_task_bridged() {
    use common::ext_server::{Server, extension_server};
    let state = std::sync::Arc::new(std::sync::Mutex::new(Server::default()));
    let up = Scripted::start(extension_server(state.clone())).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let slow = request(json!(1), "tools/call", json!({"name": "slow", "arguments": {}}), json!({}));
    let (status, r, _) = call(&c, &slow).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "slow done after 3 steps", "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let plain = request(json!(2), "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}), json!({}));
    let (_, r, _) = call(&c, &plain).await;
    assert!(r.get("result").is_some(), "a plain tool answers as it is: {r}");

    let params = json!({"name": "ask", "arguments": {}});
    let ask = request(json!(3), "tools/call", params.clone(), json!({"elicitation": {}}));
    let (_, r, _) = tokio::time::timeout(STEP, call(&c, &ask)).await.expect("an input round");
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let requests = r["result"]["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{r}");
    let (key, asked) = requests.iter().next().unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{r}");
    assert_eq!(asked["params"]["message"], "colour?", "{r}");
    let mut retry = params.clone();
    retry["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "teal"}}});
    retry["requestState"] = r["result"]["requestState"].clone();
    let retry = request(json!(4), "tools/call", retry, json!({"elicitation": {}}));
    let (_, r, _) = tokio::time::timeout(STEP, call(&c, &retry)).await.expect("the task's result");
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "answer: teal", "{r}");
    assert!(state.lock().unwrap().tasks.values().any(|t| t.answer.is_some()), "the answer reached the task");

    // A task that asks two questions at once asks both in one round.
    let params = json!({"name": "ask2", "arguments": {}});
    let ask = request(json!(6), "tools/call", params.clone(), json!({"elicitation": {}}));
    let (_, r, _) = tokio::time::timeout(STEP, call(&c, &ask)).await.expect("an input round");
    let requests = r["result"]["inputRequests"].as_object().expect("input requests");
    let mut messages: Vec<&str> = requests.values().filter_map(|q| q["params"]["message"].as_str()).collect();
    messages.sort();
    assert_eq!(messages, ["colour?", "size?"], "both in the first round: {r}");
    let answer = |q: &Value| {
        let a = if q["params"]["message"] == "colour?" { "teal" } else { "large" };
        json!({"action": "accept", "content": {"answer": a}})
    };
    let mut retry = params.clone();
    retry["inputResponses"] = requests.iter().map(|(k, q)| (k.clone(), answer(q))).collect();
    retry["requestState"] = r["result"]["requestState"].clone();
    let retry = request(json!(7), "tools/call", retry, json!({"elicitation": {}}));
    let (_, r, _) = tokio::time::timeout(STEP, call(&c, &retry)).await.expect("the task's result");
    assert_eq!(r["result"]["content"][0]["text"], "colour: teal, size: large", "{r}");

    // Without the elicitation capability it cannot be asked: an error at once.
    let params = json!({"name": "ask", "arguments": {}});
    let ask = request(json!(5), "tools/call", params, json!({}));
    let (_, r, _) = tokio::time::timeout(STEP, call(&c, &ask)).await.expect("at once");
    assert!(r["error"]["message"].as_str().unwrap_or("").contains("elicitation"), "{r}");
}
