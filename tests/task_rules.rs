//! Spec rules for tasks and progress that the gateway once broke, each reproduced against a
//! scripted upstream: passed-through task progress, the retry-as-task rule, bridged progress,
//! unknown cursors, task calls of tools without task support, ttl handling, retention and
//! store limits, timeouts of hosted tasks and of the gateway's own lookups, cancellation
//! clean-up, and task servers with quirks.

mod common;

use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TASK_CAPS: &str = r#"{"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}"#;

fn task(id: &str, status: &str, message: Option<&str>) -> Value {
    let mut t = json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100});
    if let Some(m) = message {
        t["statusMessage"] = m.into();
    }
    t
}

fn config(up: &Scripted, upstream_extra: &str, tail: &str) -> String {
    format!("[server]\nprogress_min_interval = \"0ms\"\n{}{upstream_extra}{tail}", http_upstream("up", &up.url()))
}

async fn client(gw: &Gw, version: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize(version).await;
    c
}

fn calls_to(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
}

/// Reads a GET stream until `until` matches or `wait` passes; returns what came.
async fn collect(events: &mut SseReader, wait: Duration, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut got = vec![];
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Some((_, m))) = tokio::time::timeout_at(deadline, events.next()).await {
        let stop = until(&m);
        got.push(m);
        if stop {
            break;
        }
    }
    got
}

// ---- 1. progress of a task passed through to the upstream ----

#[tokio::test]
async fn progress_of_a_passed_through_task_reaches_the_client_until_the_task_ends() {
    let token: Arc<Mutex<Value>> = Arc::new(Mutex::new(Value::Null));
    let tok = token.clone();
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}),
        )],
        "tools/call" => {
            *tok.lock().unwrap() = req["params"]["_meta"]["progressToken"].clone();
            vec![reply(req, json!({"task": task("t1", "working", None)}))]
        }
        "tasks/result" => {
            let t = tok.lock().unwrap().clone();
            let meta = json!({"io.modelcontextprotocol/related-task": {"taskId": "t1"}});
            vec![
                Step::Sleep(50),
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": 1, "total": 4, "message": "one"}})),
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": 2.5, "total": 4}})),
                Step::Sleep(50),
                reply(req, json!({"content": [{"type": "text", "text": "job done"}], "_meta": meta})),
            ]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&config(&up, "", "")).await;
    let mut c = client(&gw, "2025-11-25").await;
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());
    let out = c
        .request(
            "tools/call",
            json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}, "_meta": {"progressToken": "tp"}}),
        )
        .await;
    assert_eq!(out.result()["task"]["taskId"], "t1", "the upstream's own task: {}", out.response);
    let r = c.request("tasks/result", json!({"taskId": "t1"})).await;
    assert_eq!(r.result()["content"][0]["text"], "job done");
    let mut seen: Vec<Value> = r.others.iter().filter(|m| m["method"] == "notifications/progress").cloned().collect();
    if seen.len() < 2 {
        seen.extend(
            collect(&mut get_stream, Duration::from_secs(2), |m| m["params"]["progress"] == 2.5)
                .await
                .into_iter()
                .filter(|m| m["method"] == "notifications/progress"),
        );
    }
    let values: Vec<(Value, Value)> =
        seen.iter().map(|m| (m["params"]["progress"].clone(), m["params"]["progressToken"].clone())).collect();
    assert_eq!(values, vec![(json!(1), json!("tp")), (json!(2.5), json!("tp"))], "{seen:?}");
}

// ---- 2. the retry-as-task rule ----

/// A task server whose tools refuse plain calls (or not) in various ways.
async fn refusing_server() -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
                {"name": "titled", "inputSchema": {"type": "object"}},
                {"name": "ts-optional", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                {"name": "rmcp-optional", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                {"name": "vague-optional", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
            ]}),
        )],
        "tools/call" => {
            let name = req["params"]["name"].as_str().unwrap();
            if req["params"].get("task").is_some() {
                return vec![reply(req, json!({"task": task("t-retry", "completed", None)}))];
            }
            let is_error =
                |text: String| reply(req, json!({"isError": true, "content": [{"type": "text", "text": text}]}));
            match name {
                // An ordinary tool error that happens to mention a task.
                "titled" => vec![is_error("Task title required".into())],
                "ts-optional" => vec![is_error(format!(
                    "MCP error -32601: Tool {name} requires task augmentation (taskSupport: 'required')"
                ))],
                "rmcp-optional" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"],
                    "error": {"code": -32601, "message": "Tool requires task-based invocation"}}))],
                _ => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"],
                    "error": {"code": -32601, "message": "this tool requires a task"}}))],
            }
        }
        "tasks/get" => vec![reply(req, task("t-retry", "completed", None))],
        "tasks/result" => vec![reply(req, json!({"content": [{"type": "text", "text": "ran as a task"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn only_unambiguous_refusals_are_retried_as_tasks() {
    let up = refusing_server().await;
    let gw = start_gateway(&config(&up, "", "")).await;
    let mut c = client(&gw, "2025-06-18").await;
    c.request("tools/list", json!({})).await;
    // A forbidden tool's error is its answer, whatever its text says; it ran once.
    for _ in 0..2 {
        let out = c.request("tools/call", json!({"name": "titled", "arguments": {}})).await;
        assert_eq!(out.result()["content"][0]["text"], "Task title required");
    }
    let titled: Vec<Value> =
        calls_to(&up, "tools/call").into_iter().filter(|m| m["params"]["name"] == "titled").collect();
    assert_eq!(titled.len(), 2, "never retried");
    assert!(titled.iter().all(|m| m["params"].get("task").is_none()), "never as a task: {titled:?}");
    // The SDKs' own refusals of an optional tool are retried once as a task.
    for name in ["ts-optional", "rmcp-optional"] {
        let out = c.request("tools/call", json!({"name": name, "arguments": {}})).await;
        assert_eq!(out.result()["content"][0]["text"], "ran as a task", "{name}");
    }
    // A refusal in words the gateway does not know is the answer, not a reason to retry.
    let out = c.request("tools/call", json!({"name": "vague-optional", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32601);
    let vague: Vec<Value> =
        calls_to(&up, "tools/call").into_iter().filter(|m| m["params"]["name"] == "vague-optional").collect();
    assert_eq!(vague.len(), 1);
}

// ---- 3. bridged progress: the upstream's own, unchanged ----

#[tokio::test]
async fn a_bridged_call_passes_the_upstreams_progress_through_unchanged() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
        )],
        "tools/call" => vec![reply(req, json!({"task": task("tb", "working", Some("starting"))}))],
        "tasks/result" => {
            let tok = json!("bp");
            let p = |v: f64| {
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": tok, "progress": v, "total": 2, "message": format!("at {v}")}}))
            };
            let status = |m: &str| {
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
                    "params": task("tb", "working", Some(m))}))
            };
            vec![
                Step::Sleep(30),
                p(0.5),
                status("halfway"),
                Step::Sleep(30),
                p(1.5),
                status("nearly"),
                Step::Sleep(30),
                reply(req, json!({"content": [{"type": "text", "text": "long done"}]})),
            ]
        }
        "tasks/get" => vec![reply(req, task("tb", "working", Some("polling")))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&config(&up, "", "")).await;
    let mut c = client(&gw, "2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "long", "arguments": {}, "_meta": {"progressToken": "bp"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "long done");
    let progress: Vec<Value> =
        out.others.iter().filter(|m| m["method"] == "notifications/progress").map(|m| m["params"].clone()).collect();
    let real: Vec<&Value> = progress.iter().filter(|p| p.get("total").is_some()).collect();
    assert_eq!(
        real.iter().map(|p| p["progress"].as_f64().unwrap()).collect::<Vec<_>>(),
        vec![0.5, 1.5],
        "the upstream's values, fractions and total included: {progress:?}"
    );
    assert!(real.iter().all(|p| p["total"] == 2));
    let values: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[1] > w[0]), "strictly rising: {values:?}");
    assert!(values.iter().all(|v| *v <= 2.0), "never past the total: {values:?}");
}

// ---- 6. tasks/list and tasks/get agree; unknown cursors ----

#[tokio::test]
async fn a_task_is_visible_only_to_the_session_that_created_it_and_unknown_cursors_are_refused() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut a = HttpMcp::new(&gw.url("demo"));
    a.initialize("2025-11-25").await;
    let mut b = HttpMcp::new(&gw.url("demo"));
    b.initialize("2025-11-25").await;
    let out = a.request("tools/call", json!({"name": "echo", "arguments": {"text": "mine"}, "task": {}})).await;
    let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let other = b.request(method, json!({"taskId": id})).await;
        assert_eq!(other.error_code(), -32602, "{method}: another session's task is unknown to it");
        let unknown = b.request(method, json!({"taskId": "f".repeat(32)})).await;
        assert_eq!(
            other.response["error"]["message"].as_str().unwrap().replace(&id, "X"),
            unknown.response["error"]["message"].as_str().unwrap().replace(&"f".repeat(32), "X"),
            "{method}: exactly as for an unknown id"
        );
    }
    assert_eq!(b.request("tasks/list", json!({})).await.result()["tasks"], json!([]));
    assert_eq!(a.request("tasks/result", json!({"taskId": id})).await.result()["content"][0]["text"], "mine");
    assert_eq!(a.request("tasks/list", json!({})).await.result()["tasks"][0]["taskId"], id.as_str());
    for cursor in ["tg:99999", "tg:1", "tg:", "up:", "nonsense"] {
        assert_eq!(a.request("tasks/list", json!({"cursor": cursor})).await.error_code(), -32602, "{cursor}");
    }
}

// ---- 7. a task-augmented call to a tool shown without execution ----

#[tokio::test]
async fn a_task_call_to_a_tool_without_task_support_is_method_not_found() {
    let gw = start_gateway(&format!("{}[upstream.tasks]\nhosted_tools = [\"echo\"]\n", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}, "task": {}})).await;
    assert_eq!(out.error_code(), -32601, "{}", out.response);
    let plain = c.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(plain.result()["content"][0]["text"], "3");
    let hosted = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "task": {}})).await;
    assert_eq!(hosted.result()["task"]["status"], "working");
}

// ---- 8. ttl values ----

#[tokio::test]
async fn ttl_is_a_number_negative_or_other_types_are_refused_and_zero_is_clamped() {
    let gw = start_gateway(&format!(
        "{}[upstream.tasks]\nmin_ttl = \"2s\"\nmax_ttl = \"1h\"\nttl = \"10m\"\n",
        builtin_upstream("demo")
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let call = |ttl: Value| json!({"name": "echo", "arguments": {"text": "t"}, "task": {"ttl": ttl}});
    let applied = |out: &Outcome| out.result()["task"]["ttl"].clone();
    assert_eq!(applied(&c.request("tools/call", call(json!(5000.0))).await), json!(5000));
    assert_eq!(applied(&c.request("tools/call", call(json!(5000.7))).await), json!(5000));
    assert_eq!(applied(&c.request("tools/call", call(json!(0))).await), json!(2000), "clamped to min_ttl");
    assert_eq!(applied(&c.request("tools/call", call(Value::Null)).await), json!(600000), "the default");
    for bad in [json!(-1), json!("5000"), json!(true), json!({})] {
        let out = c.request("tools/call", call(bad.clone())).await;
        assert_eq!(out.error_code(), -32602, "{bad}");
    }
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {}, "task": "soon"})).await;
    assert_eq!(out.error_code(), -32602, "task must be an object");
}

// ---- 9. retention ----

#[tokio::test]
async fn a_running_task_outlives_its_ttl_and_a_full_store_refuses_instead_of_evicting() {
    let gw = start_gateway(&format!(
        "[tasks]\nmax_tasks = 2\n{}[upstream.tasks]\nttl = \"300ms\"\nmin_ttl = \"100ms\"\nmax_ttl = \"300ms\"\n",
        builtin_upstream("demo")
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let out = c
        .request("tools/call", json!({"name": "slow", "arguments": {"duration_ms": 900, "steps": 1}, "task": {}}))
        .await;
    let slow = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        c.request("tasks/get", json!({"taskId": slow})).await.result()["status"],
        "working",
        "ttl passed, still running"
    );
    let r = c.request("tasks/result", json!({"taskId": slow})).await;
    assert_eq!(r.result()["content"][0]["text"], "done after 1 steps", "the call was not cancelled");

    // Two finished tasks fill the store: a third is refused, and neither is evicted.
    let gw = start_gateway(&format!("[tasks]\nmax_tasks = 2\n{}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let mut ids = vec![];
    for i in 0..2 {
        let out =
            c.request("tools/call", json!({"name": "echo", "arguments": {"text": format!("{i}")}, "task": {}})).await;
        let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
        c.request("tasks/result", json!({"taskId": id})).await;
        ids.push(id);
    }
    let full = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "2"}, "task": {}})).await;
    assert_eq!(full.error_code(), -32603);
    assert!(full.response["error"]["message"].as_str().unwrap().contains("task store is full"), "{}", full.response);
    for (i, id) in ids.iter().enumerate() {
        let r = c.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(r.result()["content"][0]["text"], format!("{i}"));
    }
}

#[tokio::test]
async fn a_bridged_task_is_created_with_a_ttl_covering_max_request_time() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
        )],
        "tools/call" => vec![reply(req, json!({"task": task("tt", "working", None)}))],
        "tasks/result" => vec![reply(req, json!({"content": [{"type": "text", "text": "ok"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&config(&up, "max_request_time = \"2h\"\n", "[upstream.tasks]\nttl = \"10m\"\n")).await;
    let mut c = client(&gw, "2025-06-18").await;
    c.request("tools/list", json!({})).await;
    assert_eq!(
        c.request("tools/call", json!({"name": "long", "arguments": {}})).await.result()["content"][0]["text"],
        "ok"
    );
    let ttl = calls_to(&up, "tools/call")[0]["params"]["task"]["ttl"].as_u64().unwrap();
    assert!(ttl >= 2 * 3600 * 1000, "ttl {ttl} ms is shorter than max_request_time");
}

// ---- 10. hosted tasks obey request_timeout and max_request_time ----

#[tokio::test]
async fn a_hung_hosted_call_fails_its_task_at_request_timeout_and_the_upstream_is_told() {
    for (limits, args, which) in [
        ("request_timeout = \"300ms\"\n", json!({"duration_ms": 5000, "steps": 1}), "request_timeout"),
        (
            "request_timeout = \"300ms\"\nmax_request_time = \"700ms\"\n",
            json!({"duration_ms": 5000, "steps": 50}),
            "max_request_time",
        ),
    ] {
        let gw = start_gateway(&format!("{}{limits}", builtin_upstream("demo"))).await;
        let mut c = HttpMcp::new(&gw.url("demo"));
        c.initialize("2025-11-25").await;
        let start = Instant::now();
        let out = c
            .request(
                "tools/call",
                json!({"name": "slow", "arguments": args, "task": {}, "_meta": {"progressToken": "k"}}),
            )
            .await;
        let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
        let r = c.request("tasks/result", json!({"taskId": id})).await;
        assert!(start.elapsed() < Duration::from_secs(3), "{which}: took {:?}", start.elapsed());
        assert_eq!(r.error_code(), -32001, "{which}: {}", r.response);
        let got = c.request("tasks/get", json!({"taskId": id})).await;
        assert_eq!(got.result()["status"], "failed");
        assert!(got.result()["statusMessage"].as_str().unwrap().contains(which), "{}", got.response);
        let stats = c.request("resources/read", json!({"uri": "demo://stats"})).await;
        let text = stats.result()["contents"][0]["text"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(text).unwrap()["cancelled"], 1, "{which}: the upstream was told");
    }
}

// ---- 11. the gateway's own lookups time out ----

#[tokio::test]
async fn a_tools_list_that_never_comes_fails_the_call_instead_of_hanging() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![Step::Sleep(30_000)],
        _ => vec![reply(req, json!({"content": []}))],
    })
    .await;
    let gw = start_gateway(&config(&up, "request_timeout = \"300ms\"\n", "")).await;
    for (version, params) in [
        ("2025-11-25", json!({"name": "x", "arguments": {}, "task": {}})),
        ("2025-06-18", json!({"name": "x", "arguments": {}})),
    ] {
        let mut c = client(&gw, version).await;
        let start = Instant::now();
        let out = c.request("tools/call", params).await;
        assert!(start.elapsed() < Duration::from_secs(3), "{version}: {:?}", start.elapsed());
        assert_eq!(out.error_code(), -32001, "{version}: {}", out.response);
        assert!(out.response["error"]["message"].as_str().unwrap().contains("tools/list"), "{}", out.response);
    }
}

// ---- 12. cancelled requests are cleaned up ----

#[tokio::test]
async fn a_cancelled_request_frees_its_slot_closes_its_stream_and_is_cancelled_upstream_once() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => {
            let ms = req["params"]["arguments"]["ms"].as_u64().unwrap_or(0);
            vec![Step::Sleep(ms), reply(req, json!({"content": [{"type": "text", "text": "late"}]}))]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!(
        "[server]\nmax_in_flight = 2\n[[upstream]]\nname = \"up\"\nurl = \"{}\"\nrequest_timeout = \"700ms\"\n",
        up.url()
    ))
    .await;
    let mut c = client(&gw, "2025-06-18").await;
    let mut streams = vec![];
    for id in [10, 11] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "s", "arguments": {"ms": 1500}}});
        let resp = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
        streams.push(resp);
    }
    eventually("both calls reached the upstream", async || calls_to(&up, "tools/call").len() == 2).await;
    for id in [10, 11] {
        assert_eq!(
            c.notify("notifications/cancelled", json!({"requestId": id, "reason": "changed my mind"})).await,
            202
        );
    }
    // The streams end without a response.
    for resp in streams {
        let body = read_all(resp).await;
        let text = String::from_utf8_lossy(&body.body).to_string();
        assert!(!text.contains("\"result\"") && !text.contains("\"error\""), "nothing for a cancelled id: {text}");
    }
    // The slots are free.
    let out = c.request("tools/call", json!({"name": "s", "arguments": {"ms": 0}})).await;
    assert_eq!(out.result()["content"][0]["text"], "late");
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let cancels = calls_to(&up, "notifications/cancelled");
    assert_eq!(cancels.len(), 2, "one cancel per request, none from a timeout: {cancels:?}");
    assert!(cancels.iter().all(|m| m["params"]["reason"] == "changed my mind"));
}

// ---- 13. task servers with quirks ----

/// A task server in the manner of rmcp up to 2.2: `"tasks": {}`, the request id as task id,
/// `ttl: null`, `createdAt` that changes on every poll, -32002 for an unknown task.
async fn quirky_server() -> Scripted {
    let polls = Arc::new(Mutex::new(0u32));
    Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}, "tasks": {}})),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "crunch", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
        )],
        "tools/call" => {
            if req["params"].get("task").is_none() {
                return vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"],
                    "error": {"code": -32601, "message": "Tool requires task-based invocation"}}))];
            }
            let id = req["id"].to_string();
            vec![reply(req, json!({"task": {"taskId": id, "status": "working", "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": null}}))]
        }
        "tasks/get" => {
            let mut n = polls.lock().unwrap();
            *n += 1;
            let at = format!("2026-01-01T00:00:{:02}Z", *n);
            let status = if *n >= 2 { "completed" } else { "working" };
            vec![reply(req, json!({"taskId": req["params"]["taskId"], "status": status, "createdAt": at, "lastUpdatedAt": at, "ttl": null}))]
        }
        "tasks/result" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"],
            "result": {"content": [{"type": "text", "text": "crunched"}]}}))],
        _ => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32002, "message": "task not found"}}))],
    })
    .await
}

#[tokio::test]
async fn a_quirky_task_server_is_recognized() {
    let up = quirky_server().await;
    let gw = start_gateway(&config(&up, "", "")).await;
    let mut old = client(&gw, "2025-06-18").await;
    old.request("tools/list", json!({})).await;
    let out = old.request("tools/call", json!({"name": "crunch", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "crunched", "bridged: {}", out.response);
    let mut new = client(&gw, "2025-11-25").await;
    let list = new.request("tools/list", json!({})).await;
    assert_eq!(list.result()["tools"][0]["execution"]["taskSupport"], "optional");
    let out = new.request("tools/call", json!({"name": "crunch", "arguments": {}, "task": {}})).await;
    assert!(out.result()["task"]["taskId"].is_string(), "the upstream's own task: {}", out.response);
    let plain = new.request("tools/call", json!({"name": "crunch", "arguments": {}})).await;
    assert_eq!(plain.result()["content"][0]["text"], "crunched", "bridged for a 2025-11-25 plain call too");
}

// ---- 4. progress of a hosted task stops at its terminal status ----

#[tokio::test]
async fn progress_queued_for_a_hosted_task_is_dropped_when_the_task_ends() {
    let gw = start_gateway(&format!("[server]\nprogress_min_interval = \"0ms\"\n{}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    // No GET stream and no tasks/result: the progress has nowhere to go but the queue.
    let out = c
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 300, "steps": 3}, "task": {}, "_meta": {"progressToken": "q"}}),
        )
        .await;
    let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    for _ in 0..50 {
        if c.request("tasks/get", json!({"taskId": id})).await.result()["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());
    let got =
        collect(&mut get_stream, Duration::from_millis(500), |m| m["method"] == "notifications/tasks/status").await;
    assert!(got.iter().all(|m| m["method"] != "notifications/progress"), "no progress after the end: {got:?}");
    assert!(got.iter().any(|m| m["params"]["status"] == "completed"), "the terminal status is still told: {got:?}");
}

// ---- 5. a stdio upstream's input request goes where the message says, never to another request ----

#[tokio::test]
async fn an_ambiguous_input_request_never_goes_on_another_requests_stream() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let slow = json!({"jsonrpc": "2.0", "id": 500, "method": "tools/call", "params": {"name": "slow", "arguments": {"duration_ms": 600, "steps": 2}}});
    let slow_resp = c.post_streaming(serde_json::to_vec(&slow).unwrap(), &[]).await;
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {"question": "which?"}, "task": {}})).await;
    let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    let body = read_all(slow_resp).await;
    let text = String::from_utf8_lossy(&body.body).to_string();
    assert!(text.contains("done after 2 steps"), "{text}");
    assert!(!text.contains("elicitation/create"), "the plain call's stream carries only what is its own: {text}");
    // It waited for the session's stream.
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());
    let got = collect(&mut get_stream, Duration::from_secs(5), |m| m["method"] == "elicitation/create").await;
    let ask = got.iter().find(|m| m["method"] == "elicitation/create").expect("asked on the session's stream");
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(ask)).unwrap(), &[]).await.status, 202);
    let r = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(r.result()["content"][0]["text"], "answer: forty-two");
}

// ---- 16. results are bounded in bytes ----

#[tokio::test]
async fn an_oversized_result_fails_its_task_and_the_store_is_bounded_in_bytes() {
    // Whole records count (about 350 bytes each here, their outcomes apart): three tasks
    // and the first two outcomes fit in 1700 bytes, the third's result (about 900 bytes,
    // the text twice) does not.
    let gw = start_gateway(&format!(
        "[tasks]\nmax_result_bytes = 1000\nmax_store_bytes = 1700\n{}",
        builtin_upstream("demo")
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let run = |text: String| json!({"name": "echo", "arguments": {"text": text}, "task": {}});
    let fetch = async |c: &mut HttpMcp, text: String| {
        let out = c.request("tools/call", run(text)).await;
        let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
        let r = c.request("tasks/result", json!({"taskId": id})).await;
        let status = c.request("tasks/get", json!({"taskId": id})).await.result()["status"].clone();
        (r, status)
    };
    let (r, status) = fetch(&mut c, "x".repeat(1100)).await;
    assert_eq!(r.error_code(), -32603);
    assert!(r.response["error"]["message"].as_str().unwrap().contains("max_result_bytes"), "{}", r.response);
    assert_eq!(status, "failed");
    let (r, status) = fetch(&mut c, "y".repeat(10)).await;
    assert_eq!(r.result()["content"][0]["text"], "y".repeat(10));
    assert_eq!(status, "completed");
    let (r, status) = fetch(&mut c, "z".repeat(400)).await;
    assert!(r.response["error"]["message"].as_str().unwrap().contains("task store is full"), "{}", r.response);
    assert_eq!(status, "failed");
}

// ---- 17. links are bounded, also those that outlive their sessions ----

#[tokio::test]
async fn links_kept_open_by_running_tasks_count_against_max_links() {
    let gw = start_gateway(&format!("[server]\nmax_sessions = 2\n{}", stdio_demo_upstream("demo"))).await;
    for _ in 0..2 {
        let mut c = HttpMcp::new(&gw.url("demo"));
        c.initialize("2025-11-25").await;
        let out = c
            .request("tools/call", json!({"name": "slow", "arguments": {"duration_ms": 1200, "steps": 1}, "task": {}}))
            .await;
        assert_eq!(out.result()["task"]["status"], "working");
        assert_eq!(c.delete().await, 200);
    }
    // Both children still run their tasks: a third link is refused, with a clear error.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    let c = HttpMcp::new(&gw.url("demo"));
    let refused = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    let body = first_message(&refused);
    assert_eq!(body["error"]["code"], -32004, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("max_links"), "{body}");
    // Once the tasks have ended, their links close and room is made.
    let start = Instant::now();
    loop {
        let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
        if first_message(&r).get("result").is_some() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no link became free");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- found by review ----

/// Upstream progress that starts later than 200 ms after creation, on a 0..1 scale.
#[tokio::test]
async fn upstream_progress_that_starts_late_still_passes_unchanged() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
        )],
        "tools/call" => vec![reply(req, json!({"task": task("tb", "working", Some("starting"))}))],
        "tasks/result" => {
            let p = |v: f64| {
                Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": "bp", "progress": v, "total": 1, "message": format!("at {v}")}}))
            };
            vec![
                Step::Sleep(400),
                p(0.25),
                Step::Sleep(30),
                p(0.75),
                Step::Sleep(30),
                reply(req, json!({"content": [{"type": "text", "text": "long done"}]})),
            ]
        }
        "tasks/get" => vec![reply(req, task("tb", "working", Some("starting")))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw =
        start_gateway(&format!("[server]\nprogress_min_interval = \"0ms\"\n{}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "long", "arguments": {}, "_meta": {"progressToken": "bp"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "long done");
    let progress: Vec<Value> =
        out.others.iter().filter(|m| m["method"] == "notifications/progress").map(|m| m["params"].clone()).collect();
    let real: Vec<f64> =
        progress.iter().filter(|p| p.get("total").is_some()).map(|p| p["progress"].as_f64().unwrap()).collect();
    assert_eq!(real, vec![0.25, 0.75], "upstream's own progress, unchanged: {progress:?}");
}

/// A bridged call cancelled while the upstream has not yet answered the task-augmented call.
#[tokio::test]
async fn a_bridged_call_cancelled_while_its_task_is_created_frees_its_slot_and_is_cancelled_upstream() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
                {"name": "long", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
                {"name": "plain", "inputSchema": {"type": "object"}}]}),
        )],
        "tools/call" if req["params"]["name"] == "long" => {
            vec![Step::Sleep(8000), reply(req, json!({"task": task("tb", "working", None)}))]
        }
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "plain ok"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!(
        "[server]\nmax_in_flight = 2\n[[upstream]]\nname = \"up\"\nurl = \"{}\"\nrequest_timeout = \"1s\"\n",
        up.url()
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let mut streams = vec![];
    for id in [10, 11] {
        let call =
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "long", "arguments": {}}});
        streams.push(c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await);
    }
    eventually("both calls reached the upstream", async || calls_to(&up, "tools/call").len() == 2).await;
    for id in [10, 11] {
        c.notify("notifications/cancelled", json!({"requestId": id, "reason": "nvm"})).await;
    }
    drop(streams);
    // Given up at request_timeout and cancelled upstream, they hold no slot any more.
    eventually("the calls are given up", async || calls_to(&up, "notifications/cancelled").len() >= 2).await;
    let out = c.request("tools/call", json!({"name": "plain", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "plain ok", "slots were freed: {}", out.response);
    let cancels = calls_to(&up, "notifications/cancelled");
    assert_eq!(cancels.len(), 2, "each unanswered task call was cancelled upstream: {cancels:?}");
}

/// An upstream without the tasks capability whose listing marks a tool `optional`.
#[tokio::test]
async fn a_server_that_marks_tools_without_declaring_tasks_gets_hosted_tasks_in_any_order() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "x", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}),
        )],
        // A server without the capability MUST ignore `task` and run the call normally.
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "plain"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw =
        start_gateway(&format!("[server]\nprogress_min_interval = \"0ms\"\n{}", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let before = c.request("tools/call", json!({"name": "x", "arguments": {}, "task": {}})).await;
    assert!(before.result().get("task").is_some(), "a task call gets a CreateTaskResult: {}", before.response);
    c.request("tools/list", json!({})).await;
    let after = c.request("tools/call", json!({"name": "x", "arguments": {}, "task": {}})).await;
    assert!(after.result().get("task").is_some(), "and after the listing too: {}", after.response);
    assert!(
        calls_to(&up, "tools/call").iter().all(|m| m["params"].get("task").is_none()),
        "hosted: plain calls upstream"
    );
}

/// A progress token used first by a task call that failed, later by a plain call.
#[tokio::test]
async fn a_token_reused_after_a_passed_through_task_failed_carries_the_new_calls_progress() {
    let up = Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
                {"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                {"name": "slow", "inputSchema": {"type": "object"}}]}),
        )],
        "tools/call" if req["params"]["name"] == "job" => {
            vec![reply(req, json!({"task": task("t1", "working", None)}))]
        }
        "tools/call" => {
            let t = req["params"]["_meta"]["progressToken"].clone();
            let mut steps = vec![];
            for i in 1..=6 {
                steps.push(Step::Sleep(300));
                steps.push(Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": t, "progress": i, "total": 6}})));
            }
            steps.push(reply(req, json!({"content": [{"type": "text", "text": "slow done"}]})));
            steps
        }
        // The task failed: tasks/result carries the call's JSON-RPC error.
        "tasks/result" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32603, "message": "job failed"}}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!(
        "[server]\nprogress_min_interval = \"0ms\"\n[[upstream]]\nname = \"up\"\nurl = \"{}\"\nrequest_timeout = \"1s\"\n",
        up.url()
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    c.request("tools/list", json!({})).await;
    let t = c
        .request("tools/call", json!({"name": "job", "arguments": {}, "task": {}, "_meta": {"progressToken": "p"}}))
        .await;
    assert_eq!(t.result()["task"]["taskId"], "t1");
    assert_eq!(c.request("tasks/result", json!({"taskId": "t1"})).await.error_code(), -32603);
    let out = c.request("tools/call", json!({"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "slow done", "its progress kept it alive: {}", out.response);
    assert_eq!(out.progress(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
}

/// stdio: a server request naming another task, while a hosted task's call is the only one in flight.
#[tokio::test]
async fn a_stdio_input_request_naming_another_task_is_not_given_to_the_running_hosted_task() {
    let script = StdioScript::new(
        r#"h) printf '%s\n' '{"jsonrpc":"2.0","id":900,"method":"elicitation/create","params":{"message":"for up-9","requestedSchema":{"type":"object","properties":{}},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-9"}}}}'; sleep 1; reply '{"content":[]}' ;;
"#,
    );
    let gw = start_gateway(&script.upstream("s")).await;
    let mut c = HttpMcp::new(&gw.url("s"));
    c.initialize("2025-11-25").await;
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());
    let out = c.request("tools/call", json!({"name": "h", "arguments": {}, "task": {}})).await;
    let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    let mut got = vec![];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(800);
    while let Ok(Some((_, m))) = tokio::time::timeout_at(deadline, get_stream.next()).await {
        got.push(m);
    }
    let st = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(st.result()["status"], "working", "not the hosted task's question");
    let ask = got.iter().find(|m| m["method"] == "elicitation/create").expect("asked");
    assert_eq!(ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], "up-9", "{ask}");
}
