//! Every task record is bounded in bytes, whatever a peer sends: a tool name past
//! `max_tool_name_bytes` is refused before any task is made, an upstream's long progress
//! and error messages are cut to `max_status_message_bytes` (with a marker), and a
//! `tasks/list` page carries at most `max_list_page_bytes` of tasks.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// What a cut message ends with (`tasks::text_bounds::CUT_MARKER`).
const CUT: &str = "… [cut by the gateway]";

#[tokio::test]
async fn a_tool_name_past_its_bound_is_refused_before_any_task_is_made() {
    let gw = start_gateway(&format!("[tasks]\nmax_tool_name_bytes = 64\n{}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let call = |name: String| json!({"name": name, "arguments": {}, "task": {}});
    let out = c.request("tools/call", call("x".repeat(65))).await;
    assert_eq!(out.error_code(), -32602, "{}", out.response);
    let message = out.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_tool_name_bytes (64)"), "{message}");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"], json!([]), "no task was made");
    // At the bound, a task is made (and fails: the demo has no such tool).
    let out = c.request("tools/call", call("x".repeat(64))).await;
    let id = out.result()["task"]["taskId"].as_str().unwrap().to_string();
    let r = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(r.error_code(), -32602, "{}", r.response);
}

/// An upstream without tasks whose calls send a 100 kB progress message (`slow` runs on for
/// two seconds after it) and end with a 100 kB error message.
async fn long_winded_upstream() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => {
            let token = req["params"]["_meta"]["progressToken"].clone();
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1, "message": "p".repeat(100_000)}});
            let wait = if req["params"]["name"] == "slow" { 2000 } else { 0 };
            let error = json!({"jsonrpc": "2.0", "id": req["id"].clone(),
                "error": {"code": -32000, "message": "e".repeat(100_000)}});
            vec![Step::Send(note), Step::Sleep(wait), Step::Send(error)]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await
}

async fn make(c: &mut HttpMcp, tool: &str, token: u64) -> String {
    let params = json!({"name": tool, "arguments": {}, "task": {}, "_meta": {"progressToken": token}});
    let out = c.request("tools/call", params).await;
    out.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", out.response)).to_string()
}

#[tokio::test]
async fn an_upstreams_long_messages_are_cut_and_a_list_page_is_bounded_in_bytes() {
    let up = long_winded_upstream().await;
    let config = format!(
        "[server]\nprogress_min_interval = \"0ms\"\n[tasks]\nmax_status_message_bytes = 1000\nmax_list_page_bytes = 4096\n{}",
        http_upstream("up", &up.url())
    );
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    // While the task runs, its status message is its latest progress message, cut.
    let slow = make(&mut c, "slow", 1).await;
    let running = poll("a progress message shown", async || {
        Some(c.request("tasks/get", json!({"taskId": slow})).await.result().clone())
            .filter(|task| task["statusMessage"].is_string())
    })
    .await;
    assert_eq!(running["status"], "working", "{running}");
    let message = running["statusMessage"].as_str().unwrap();
    assert!(message.len() <= 1000 && message.starts_with("ppp") && message.ends_with(CUT), "{message}");
    // Once it failed, its status message is the upstream's error message, cut.
    let r = c.request("tasks/result", json!({"taskId": slow})).await;
    assert_eq!(r.error_code(), -32000);
    let ended = c.request("tasks/get", json!({"taskId": slow})).await.result().clone();
    assert_eq!(ended["status"], "failed");
    let message = ended["statusMessage"].as_str().unwrap();
    assert!(message.len() <= 1000 && message.starts_with("eee") && message.ends_with(CUT), "{message}");

    // A dozen more such tasks: a page holds what fits in 4096 bytes, the rest follow.
    let mut made = vec![slow];
    for n in 0..12 {
        let id = make(&mut c, "fast", 10 + n).await;
        c.request("tasks/result", json!({"taskId": id})).await;
        made.push(id);
    }
    let (mut listed, mut cursor, mut pages) = (Vec::<String>::new(), None::<Value>, 0);
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let page = c.request("tasks/list", params).await.result().clone();
        let tasks = page["tasks"].as_array().unwrap();
        assert!(!tasks.is_empty());
        assert!(serde_json::to_vec(&page["tasks"]).unwrap().len() <= 4096, "{} tasks in one page", tasks.len());
        listed.extend(tasks.iter().map(|t| t["taskId"].as_str().unwrap().to_string()));
        pages += 1;
        match page.get("nextCursor") {
            Some(next) => cursor = Some(next.clone()),
            None => break,
        }
        assert!(pages < 20, "the pages never end");
    }
    assert!(pages >= 4, "13 tasks of about 1.2 kB each take several pages, not {pages}");
    listed.sort();
    made.sort();
    assert_eq!(listed, made, "every task listed once");
}

/// An `initialize` past `max_initialize_bytes` (its params are what the session keeps for its
/// life, and the store to revive it) is refused naming the key, and no session is made; one
/// within it is served.
#[tokio::test]
async fn an_initialize_past_its_bound_is_refused_and_makes_no_session() {
    let gw = start_gateway(&format!("[server]\nmax_initialize_bytes = 4096\n{}", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    let mut params = init_params("2025-11-25");
    params["capabilities"]["experimental"] = json!({"pad": "x".repeat(5000)});
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let resp = c.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
    let out = first_message(&resp);
    assert_eq!(out["error"]["code"], -32602, "{out}");
    assert!(out["error"]["message"].as_str().unwrap().contains("max_initialize_bytes"), "names the key: {out}");
    assert!(resp.headers.get("mcp-session-id").is_none(), "no session was made: {:?}", resp.headers);
    assert_eq!(gw.server.session_count(), 0);
    // Within the bound, served.
    params["capabilities"]["experimental"] = json!({"pad": "x".repeat(2000)});
    c.initialize_with(params).await;
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

/// A task server whose task id is longer than `max_task_id_bytes`: the client's call gets
/// -32603 naming the key (a task nobody could keep track of), and the upstream is told to
/// drop the task.
#[tokio::test]
async fn an_upstream_task_id_past_its_bound_is_refused_and_cancelled() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "crunch", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}),
        )],
        "tools/call" => vec![reply(
            req,
            json!({"task": {"taskId": "i".repeat(2000), "status": "working", "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": null}}),
        )],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "crunch", "arguments": {}, "task": {}})).await;
    assert_eq!(out.error_code(), -32603, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("max_task_id_bytes"), "{}", out.response);
    eventually("the upstream is told to drop the task", async || {
        up.received
            .lock()
            .unwrap()
            .iter()
            .any(|m| m["method"] == "tasks/cancel" && m["params"]["taskId"].as_str().is_some_and(|t| t.len() == 2000))
    })
    .await;
}
