//! Spec rules for tasks and progress that the gateway once broke, each reproduced against a
//! scripted upstream: passed-through task progress, the retry-as-task rule, bridged progress,
//! progress of hosted tasks, where a stdio upstream's input request goes, and what review
//! found of these. The store's rules (listing, ttl, retention, timeouts, clean-up, quirky
//! servers, limits) are in tests/task_rules_limits.rs.

use crate::common;
use crate::common::task_rules as rules;

use common::*;
use rules::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---- 1. progress of a task passed through to the upstream ----

#[tokio::test]
async fn progress_of_a_passed_through_task_reaches_the_client_until_the_task_ends() {
    let token: Arc<Mutex<Value>> = Arc::new(Mutex::new(Value::Null));
    let tok = token.clone();
    let up = task_server(vec![tool("job", Some("optional"))], move |req| match req["method"].as_str().unwrap() {
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
    let tools = vec![
        tool("titled", None),
        tool("ts-optional", Some("optional")),
        tool("rmcp-optional", Some("optional")),
        tool("vague-optional", Some("optional")),
    ];
    task_server(tools, move |req| match req["method"].as_str().unwrap() {
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

/// A task server whose required tool `long` runs as task `tb`: its `tasks/result` plays
/// `before`, then answers "long done"; its `tasks/get` says `poll_message`.
async fn long_task_server(before: Vec<Step>, poll_message: &'static str) -> Scripted {
    task_server(vec![tool("long", Some("required"))], move |req| match req["method"].as_str().unwrap() {
        "tools/call" => vec![reply(req, json!({"task": task("tb", "working", Some("starting"))}))],
        "tasks/result" => {
            let mut steps = before.clone();
            steps.push(reply(req, json!({"content": [{"type": "text", "text": "long done"}]})));
            steps
        }
        "tasks/get" => vec![reply(req, task("tb", "working", Some(poll_message)))],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

/// The upstream's progress notification under the client's token "bp", saying "at <value>".
fn bp_progress(value: f64, total: u64) -> Step {
    Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress",
        "params": {"progressToken": "bp", "progress": value, "total": total, "message": format!("at {value}")}}))
}

/// Calls `long` through a gateway in front of `up` with the token "bp", checks that it
/// completed, and returns the params of the progress that came with it.
async fn call_long(up: &Scripted) -> Vec<Value> {
    let gw = start_gateway(&config(up, "", "")).await;
    let mut c = client(&gw, "2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "long", "arguments": {}, "_meta": {"progressToken": "bp"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "long done");
    out.progress_params()
}

#[tokio::test]
async fn a_bridged_call_passes_the_upstreams_progress_through_unchanged() {
    let status = |m: &str| {
        Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/tasks/status",
            "params": task("tb", "working", Some(m))}))
    };
    let steps = vec![
        Step::Sleep(30),
        bp_progress(0.5, 2),
        status("halfway"),
        Step::Sleep(30),
        bp_progress(1.5, 2),
        status("nearly"),
        Step::Sleep(30),
    ];
    let up = long_task_server(steps, "polling").await;
    let progress = call_long(&up).await;
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
    eventually("the task completed", async || {
        c.request("tasks/get", json!({"taskId": id})).await.result()["status"] == "completed"
    })
    .await;
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

// ---- found by review ----

/// Upstream progress that starts later than 200 ms after creation, on a 0..1 scale.
#[tokio::test]
async fn upstream_progress_that_starts_late_still_passes_unchanged() {
    let steps = vec![Step::Sleep(400), bp_progress(0.25, 1), Step::Sleep(30), bp_progress(0.75, 1), Step::Sleep(30)];
    let up = long_task_server(steps, "starting").await;
    let progress = call_long(&up).await;
    let real: Vec<f64> =
        progress.iter().filter(|p| p.get("total").is_some()).map(|p| p["progress"].as_f64().unwrap()).collect();
    assert_eq!(real, vec![0.25, 0.75], "upstream's own progress, unchanged: {progress:?}");
}

/// A bridged call cancelled while the upstream has not yet answered the task-augmented call.
#[tokio::test]
async fn a_bridged_call_cancelled_while_its_task_is_created_frees_its_slot_and_is_cancelled_upstream() {
    let tools = vec![tool("long", Some("required")), tool("plain", None)];
    let up = task_server(tools, move |req| match req["method"].as_str().unwrap() {
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
    let mut c = client(&gw, "2025-06-18").await;
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
    let gw = start_gateway(&config(&up, "", "")).await;
    let mut c = client(&gw, "2025-11-25").await;
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
    let tools = vec![tool("job", Some("optional")), tool("slow", None)];
    let up = task_server(tools, move |req| match req["method"].as_str().unwrap() {
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
    let mut c = client(&gw, "2025-11-25").await;
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
