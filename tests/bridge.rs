//! Bridged tasks and shaped listings: old clients in front of a server that requires tasks.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the scripted server refuses a plain call of a task-only tool.
#[derive(Clone, Copy)]
enum Refusal {
    MethodNotFound,
    InvalidRequest,
    IsErrorText,
}

/// A scripted server with tasks: `research` is `required` (four 100 ms stages with status
/// messages; with `ambiguous` it asks the client through elicitation tagged with the task),
/// `sneaky` is listed `optional` but refuses plain calls in an SDK's words, `plain` is an
/// ordinary tool.
async fn task_server(refusal: Refusal) -> Scripted {
    task_server_counting(refusal).await.0
}

/// [`task_server`], and the count of the `tasks/result` answers it has sent: each one a
/// bridged call's end.
async fn task_server_counting(refusal: Refusal) -> (Scripted, Arc<AtomicUsize>) {
    let created: Arc<Mutex<Vec<(String, Instant, Value)>>> = Arc::new(Mutex::new(Vec::new()));
    let results = Arc::new(AtomicUsize::new(0));
    let sent = results.clone();
    let up = Scripted::start(move |req| {
        let method = req["method"].as_str().unwrap();
        let refuse = |req: &Value| -> Vec<Step> {
            let m = format!("Tool {} requires task augmentation (taskSupport: 'required')", req["params"]["name"].as_str().unwrap());
            vec![Step::Send(match refusal {
                Refusal::MethodNotFound => json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": m}}),
                Refusal::InvalidRequest => json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32600, "message": "Tool requires task-based invocation"}}),
                Refusal::IsErrorText => json!({"jsonrpc": "2.0", "id": req["id"], "result": {"isError": true, "content": [{"type": "text", "text": format!("MCP error -32601: {m}")}]}}),
            })]
        };
        match method {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})),
            "tools/list" => vec![reply(req, json!({"tools": [
                {"name": "plain", "inputSchema": {"type": "object"}},
                {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}},
                {"name": "sneaky", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}
            ]}))],
            "tools/call" => {
                let name = req["params"]["name"].as_str().unwrap();
                if name == "plain" {
                    let wait = req["params"]["arguments"]["sleep_ms"].as_u64().unwrap_or(0);
                    let tok = req["params"]["_meta"]["progressToken"].clone();
                    let mut steps = vec![];
                    let mut left = wait;
                    while left > 0 {
                        let d = left.min(100);
                        steps.push(Step::Sleep(d));
                        left -= d;
                        if !tok.is_null() && req["params"]["arguments"]["progress"] == true {
                            steps.push(progress(&tok, (wait - left) as f64));
                        }
                    }
                    steps.push(reply(req, json!({"content": [{"type": "text", "text": "plain done"}]})));
                    return steps;
                }
                if req["params"].get("task").is_none() {
                    return refuse(req);
                }
                let id = format!("task-{}", created.lock().unwrap().len() + 1);
                created.lock().unwrap().push((id.clone(), Instant::now(), req["params"]["arguments"].clone()));
                // Like an SDK server, it announces the task before answering the call.
                let task = json!({"taskId": id, "status": "working", "statusMessage": "stage 1 of 4",
                    "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100});
                vec![
                    Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task})),
                    reply(req, json!({"task": task})),
                ]
            }
            "tasks/get" => {
                let id = req["params"]["taskId"].as_str().unwrap();
                let c = created.lock().unwrap();
                let Some((_, t0, _)) = c.iter().find(|(i, _, _)| i == id) else {
                    return vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32602, "message": "unknown task"}}))];
                };
                let stage = (t0.elapsed().as_millis() / 100).min(4) as usize;
                let (status, msg) = if stage >= 4 { ("completed", "done".to_string()) } else { ("working", format!("stage {} of 4", stage + 1)) };
                vec![reply(req, json!({"taskId": id, "status": status, "statusMessage": msg, "createdAt": "2026-01-01T00:00:00Z",
                    "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100}))]
            }
            "tasks/result" => {
                let id = req["params"]["taskId"].as_str().unwrap().to_string();
                let (t0, args) = {
                    let c = created.lock().unwrap();
                    let (_, t0, a) = c.iter().find(|(i, _, _)| *i == id).unwrap();
                    (*t0, a.clone())
                };
                let left = 450u64.saturating_sub(t0.elapsed().as_millis() as u64);
                let mut steps = vec![Step::Sleep(left)];
                let meta = json!({"io.modelcontextprotocol/related-task": {"taskId": id}});
                if args["ambiguous"] == true {
                    let ask_id = json!(format!("ask-{id}"));
                    steps.push(Step::Send(json!({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create", "params": {
                        "message": "which one?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}},
                        "_meta": meta}})));
                    steps.push(Step::AwaitResponse(ask_id.clone()));
                    let (req_id, task_id) = (req["id"].clone(), id.clone());
                    steps.push(Step::Then(Arc::new(move |got: &[Value]| {
                        let answer = got.iter().find(|m| m.get("method").is_none() && m["id"] == ask_id).unwrap();
                        let text = match answer.pointer("/result/content/answer") {
                            Some(a) => format!("report for {}", a.as_str().unwrap()),
                            None => format!("elicitation refused: {}", answer["error"]["message"]),
                        };
                        vec![Step::Send(json!({"jsonrpc": "2.0", "id": req_id, "result": {"content": [{"type": "text", "text": text}],
                            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": task_id}}}}))]
                    })));
                } else {
                    steps.push(Step::Send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
                        "content": [{"type": "text", "text": format!("report on {}", args["topic"].as_str().unwrap_or("?"))}],
                        "_meta": meta}})));
                    let sent = sent.clone();
                    steps.push(Step::Then(Arc::new(move |_: &[Value]| {
                        sent.fetch_add(1, Ordering::SeqCst);
                        vec![]
                    })));
                }
                steps
            }
            "tasks/cancel" => vec![reply(req, json!({"taskId": req["params"]["taskId"], "status": "cancelled",
                "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000}))],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    (up, results)
}

fn gateway_config(up: &Scripted, extra: &str) -> String {
    format!("[server]\nprogress_min_interval = \"0ms\"\n{}{extra}", http_upstream("up", &up.url()))
}

async fn client(gw: &Gw, version: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize(version).await;
    c
}

fn tool<'a>(list: &'a Outcome, name: &str) -> Option<&'a Value> {
    list.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == name)
}

#[tokio::test]
async fn listings_are_shaped_per_version_and_policy() {
    let up = task_server(Refusal::MethodNotFound).await;
    for policy in ["bridge", "hide"] {
        let gw = start_gateway(&gateway_config(&up, &format!("[upstream.tasks]\nrequired = \"{policy}\"\n"))).await;
        for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
            let mut c = client(&gw, version).await;
            let init_caps = {
                let mut raw = HttpMcp::new(&gw.url("up"));
                raw.initialize(version).await["capabilities"].clone()
            };
            let list = c.request("tools/list", json!({})).await;
            let research = tool(&list, "research");
            if version == "2025-11-25" {
                assert!(init_caps.get("tasks").is_some());
                let want = if policy == "bridge" { "optional" } else { "required" };
                assert_eq!(research.unwrap()["execution"]["taskSupport"], want, "{policy} {version}");
            } else {
                assert!(init_caps.get("tasks").is_none(), "{version}: {init_caps}");
                assert!(
                    list.result()["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()),
                    "{version}"
                );
                assert_eq!(research.is_some(), policy == "bridge", "{policy} {version}");
                if policy == "hide" {
                    let out = c.request("tools/call", json!({"name": "research", "arguments": {}})).await;
                    assert_eq!(out.error_code(), -32601);
                    assert!(
                        out.response["error"]["message"].as_str().unwrap().contains("task support"),
                        "{}",
                        out.response
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn an_old_client_calls_a_required_tool_and_sees_progress() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut c = client(&gw, version).await;
        c.request("tools/list", json!({})).await;
        let out = c
            .request(
                "tools/call",
                json!({"name": "research", "arguments": {"topic": "otters"}, "_meta": {"progressToken": "rq"}}),
            )
            .await;
        assert_eq!(out.result()["content"][0]["text"], "report on otters", "{version}");
        assert!(out.result().get("_meta").is_none(), "no task _meta on a plain call's result");
        let p = out.progress();
        assert!(p.len() >= 2, "status messages became progress: {:?}", out.others);
        assert!(p.windows(2).all(|w| w[1] > w[0]), "strictly increasing: {p:?}");
        if version != "2024-11-05" {
            let messages: Vec<&str> = out.others.iter().filter_map(|m| m["params"]["message"].as_str()).collect();
            assert_eq!(
                messages.first(),
                Some(&"stage 1 of 4"),
                "the first status, from CreateTaskResult: {messages:?}"
            );
            let mut unique = messages.clone();
            unique.dedup();
            assert_eq!(unique, messages, "each status message once");
        } else {
            assert!(
                out.others.iter().all(|m| m["params"].get("message").is_none()),
                "2024-11-05 progress has no message"
            );
        }
        assert!(
            out.others.iter().all(|m| m["method"] != "notifications/tasks/status"),
            "the gateway's task is not the client's"
        );
    }
    let methods = up.received_methods();
    assert!(methods.contains(&"tasks/result".to_string()) && methods.contains(&"tasks/get".to_string()), "{methods:?}");
    let calls: Vec<Value> =
        up.received.lock().unwrap().iter().filter(|m| m["method"] == "tools/call").cloned().collect();
    assert!(calls.iter().all(|m| m["params"]["task"]["ttl"].is_u64()), "went upstream as tasks");
}

#[tokio::test]
async fn input_requests_are_relayed_without_task_meta() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    for version in ["2025-06-18", "2025-11-25"] {
        let mut c = client(&gw, version).await;
        c.request("tools/list", json!({})).await;
        let out =
            c.request("tools/call", json!({"name": "research", "arguments": {"topic": "x", "ambiguous": true}})).await;
        assert_eq!(out.result()["content"][0]["text"], "report for forty-two");
        let ask = out.others.iter().find(|m| m["method"] == "elicitation/create").expect("the client was asked");
        assert!(ask["params"].get("_meta").is_none(), "{version}: the task is the gateway's, not the client's: {ask}");
    }
}

#[tokio::test]
async fn a_2025_11_25_clients_own_task_passes_through() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    let mut c = client(&gw, "2025-11-25").await;
    let out = c
        .request("tools/call", json!({"name": "research", "arguments": {"topic": "own"}, "task": {"ttl": 1000}}))
        .await;
    let task_id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("task-"), "the upstream's own task: {}", out.response);
    let got = c.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.result()["taskId"], task_id.as_str());
    let r = c.request("tasks/result", json!({"taskId": task_id})).await;
    assert_eq!(r.result()["content"][0]["text"], "report on own");
    assert_eq!(r.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task_id.as_str());
}

#[tokio::test]
async fn a_client_without_elicitation_makes_the_task_fail_cleanly() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bare", "version": "0"}}});
    let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    c.session = Some(r.headers["mcp-session-id"].to_str().unwrap().to_string());
    c.version = Some("2025-06-18".into());
    c.notify("notifications/initialized", json!({})).await;
    c.request("tools/list", json!({})).await;
    let out =
        c.request("tools/call", json!({"name": "research", "arguments": {"topic": "x", "ambiguous": true}})).await;
    assert!(out.others.iter().all(|m| m["method"] != "elicitation/create"), "the client was not asked");
    let text = out.result()["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("elicitation refused"), "{text}");
}

#[tokio::test]
async fn cancelling_a_bridged_call_cancels_the_task() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    let c = client(&gw, "2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "research", "arguments": {"topic": "x"}}});
    let pending = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    eventually("the task is followed", async || up.received_methods().contains(&"tasks/result".to_string())).await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 77})).await, 202);
    eventually("the task is cancelled", async || up.received_methods().contains(&"tasks/cancel".to_string())).await;
    // The call's stream ends, with nothing for the cancelled id.
    let body = read_all(pending).await;
    let text = String::from_utf8_lossy(&body.body).to_string();
    assert!(!text.contains("\"id\":77"), "nothing for a cancelled call: {text}");
}

#[tokio::test]
async fn a_disconnect_is_not_a_cancellation_but_the_end_of_the_session_is() {
    let (up, results) = task_server_counting(Refusal::MethodNotFound).await;
    let gw = start_gateway(&gateway_config(&up, "")).await;
    let c = client(&gw, "2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "research", "arguments": {"topic": "seals"}, "_meta": {"progressToken": 1}}});
    let resp = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    let mut events = SseReader::new(resp.into_body());
    let (first_id, _) = events.next().await.unwrap();
    drop(events);
    // The task runs to its end with nobody connected (its result sent ~450 ms after it
    // began), and no cancellation came meanwhile.
    eventually("the task's result was sent", async || results.load(Ordering::SeqCst) == 1).await;
    assert!(!up.received_methods().contains(&"tasks/cancel".to_string()));
    // The result waited in the session's buffer.
    let resumed = c.get_raw(&[("last-event-id", first_id.as_deref().unwrap())]).await;
    let mut events = SseReader::new(resumed.into_body());
    loop {
        let (_, m) = events.next().await.unwrap();
        if m["id"] == 5 {
            assert_eq!(m["result"]["content"][0]["text"], "report on seals");
            break;
        }
    }
    // A call still running when the session ends has its task cancelled.
    let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "research", "arguments": {"topic": "x"}}});
    let _pending = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    let followed = || up.received_methods().iter().filter(|m| *m == "tasks/result").count();
    eventually("the second task is followed", async || followed() == 2).await;
    assert_eq!(c.delete().await, 200);
    eventually("the task is cancelled", async || up.received_methods().contains(&"tasks/cancel".to_string())).await;
}

#[tokio::test]
async fn a_refused_plain_call_is_retried_as_a_task_once_and_remembered() {
    for refusal in [Refusal::MethodNotFound, Refusal::InvalidRequest, Refusal::IsErrorText] {
        let up = task_server(refusal).await;
        let gw = start_gateway(&gateway_config(&up, "")).await;
        let mut c = client(&gw, "2025-06-18").await;
        for _ in 0..2 {
            let out = c.request("tools/call", json!({"name": "sneaky", "arguments": {"topic": "y"}})).await;
            assert_eq!(out.result()["content"][0]["text"], "report on y");
        }
        let calls: Vec<bool> = up
            .received
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .map(|m| m["params"].get("task").is_some())
            .collect();
        assert_eq!(calls, vec![false, true, true], "one plain try, then tasks only");
    }
}

#[tokio::test]
async fn request_timeout_resets_on_progress_and_max_request_time_does_not() {
    let up = task_server(Refusal::MethodNotFound).await;
    let gw = start_gateway(&format!(
        "[server]\nprogress_min_interval = \"0ms\"\n[[upstream]]\nname = \"up\"\nurl = \"{}\"\nrequest_timeout = \"300ms\"\nmax_request_time = \"900ms\"\n",
        up.url()
    ))
    .await;
    let mut c = client(&gw, "2025-06-18").await;
    // No progress for 600 ms: request_timeout.
    let start = Instant::now();
    let out = c.request("tools/call", json!({"name": "plain", "arguments": {"sleep_ms": 600}})).await;
    assert_eq!(out.error_code(), -32001);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("request_timeout"));
    assert!(start.elapsed() < Duration::from_millis(550));
    // Progress every 100 ms keeps it alive past request_timeout...
    let out = c
        .request(
            "tools/call",
            json!({"name": "plain", "arguments": {"sleep_ms": 500, "progress": true}, "_meta": {"progressToken": "k"}}),
        )
        .await;
    assert_eq!(out.result()["content"][0]["text"], "plain done");
    // ...but not past max_request_time.
    let out = c.request("tools/call", json!({"name": "plain", "arguments": {"sleep_ms": 2000, "progress": true}, "_meta": {"progressToken": "k2"}})).await;
    assert_eq!(out.error_code(), -32001);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("max_request_time"));
    let cancels = || up.received.lock().unwrap().iter().filter(|m| m["method"] == "notifications/cancelled").count();
    eventually("the upstream was told to stop both", async || cancels() == 2).await;
}

/// A bridged call whose task shows no sign of life is answered -32001 at request_timeout,
/// and the task is cancelled upstream. (The timing, on tokio's paused clock, is tested
/// against an upstream in memory: `src/tasks/bridge/timeouts.rs`.)
#[tokio::test]
async fn a_bridged_task_without_signs_of_life_times_out_and_is_cancelled_upstream() {
    let up = Scripted::start(|req| {
        let task = json!({"taskId": "t-1", "status": "working", "statusMessage": "started",
            "createdAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100});
        match req["method"].as_str().unwrap() {
            "initialize" => {
                init_result(req, json!({"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}))
            }
            "tools/list" => vec![reply(
                req,
                json!({"tools": [
                {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
            )],
            "tools/call" => vec![reply(req, json!({"task": task}))],
            "tasks/get" => vec![reply(req, task)],
            "tasks/result" => vec![Step::Sleep(60_000)],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&format!("{}request_timeout = \"300ms\"\n", http_upstream("up", &up.url()))).await;
    let mut c = client(&gw, "2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "research", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    let msg = out.response["error"]["message"].as_str().unwrap();
    assert!(msg.contains("no progress or status change within request_timeout"), "{msg}");
    assert!(up.received_methods().contains(&"tasks/cancel".to_string()), "cancelled before the answer");
}
