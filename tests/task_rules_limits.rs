//! Spec rules for tasks that the gateway once broke, each reproduced against a scripted
//! upstream: unknown cursors, task calls of tools without task support, ttl handling,
//! retention and store limits, timeouts of hosted tasks and of the gateway's own lookups,
//! cancellation clean-up, task servers with quirks, results bounded in bytes and links
//! bounded in number. Progress and the retry-as-task rule are in tests/task_rules.rs.

use crate::common;
use crate::common::task_rules as rules;

use common::*;
use rules::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    // A task made after it with the same ttl, finished at once: once it is gone, the slow
    // one's ttl has passed too.
    let quick = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "t"}, "task": {}})).await;
    let quick = quick.result()["task"]["taskId"].as_str().unwrap().to_string();
    eventually("the quick task's ttl ended", async || {
        c.request("tasks/get", json!({"taskId": quick})).await.response.get("error").is_some()
    })
    .await;
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
    // Kept: past the calls' request_timeout and their upstream's answer, no timeout cancel came.
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
    let freed = pace::until_async(Duration::from_secs(5), async || {
        let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
        first_message(&r).get("result").map(drop)
    })
    .await;
    assert!(freed.is_some(), "no link became free");
}
