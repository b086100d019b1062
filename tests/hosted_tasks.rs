//! Hosted tasks: task semantics the gateway adds for upstreams without them.

use crate::common;

use common::*;
use serde_json::{Value, json};

async fn session(gw: &Gw, upstream: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url(upstream));
    c.initialize("2025-11-25").await;
    c
}

fn task_of(out: &Outcome) -> Value {
    out.result()["task"].clone()
}

async fn task_call(c: &mut HttpMcp, tool: &str, args: Value, extra: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": args, "task": {"ttl": 60000}});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let out = c.request("tools/call", params).await;
    let task = task_of(&out);
    assert_eq!(task["status"], "working", "{}", out.response);
    task
}

#[tokio::test]
async fn a_2025_11_25_client_sees_hosting_and_old_clients_do_not() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut new = HttpMcp::new(&gw.url("demo"));
    let init = new.initialize("2025-11-25").await;
    assert_eq!(init["capabilities"]["tasks"], json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
    let tools = new.request("tools/list", json!({})).await;
    for t in tools.result()["tools"].as_array().unwrap() {
        assert_eq!(t["execution"]["taskSupport"], "optional", "{t}");
    }
    for version in ["2024-11-05", "2025-03-26", "2025-06-18"] {
        let mut old = HttpMcp::new(&gw.url("demo"));
        let init = old.initialize(version).await;
        assert!(init["capabilities"].get("tasks").is_none(), "{version}: {init}");
        let tools = old.request("tools/list", json!({})).await;
        assert!(tools.result()["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()), "{version}");
    }
}

#[tokio::test]
async fn full_lifecycle_with_progress_status_and_result() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = session(&gw, "demo").await;
    let mut get_stream = SseReader::new(c.get_raw(&[]).await.into_body());

    let task =
        task_call(&mut c, "slow", json!({"duration_ms": 600, "steps": 3}), json!({"_meta": {"progressToken": "p-1"}}))
            .await;
    let id = task["taskId"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 32, "128-bit random id");
    assert_eq!(task["ttl"], 60000);
    assert_eq!(task["pollInterval"], 1000);
    assert!(task["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(task.get("lastUpdatedAt").is_some());

    // Progress keeps flowing after CreateTaskResult, under the client's token.
    let (_, first) = get_stream.next().await.unwrap();
    assert_eq!(first["method"], "notifications/progress");
    assert_eq!(first["params"]["progressToken"], "p-1");
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "working");
    assert!(got.result()["statusMessage"].as_str().unwrap().starts_with("step "), "{}", got.response);

    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["content"][0]["text"], "done after 3 steps");
    assert_eq!(result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());

    // The rest of the progress came on the stream of the pending tasks/result (or the GET
    // stream), then the terminal status, and nothing after.
    let mut progress = vec![first["params"]["progress"].as_f64().unwrap()];
    progress.extend(
        result
            .others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_f64().unwrap()),
    );
    loop {
        let (_, m) = get_stream.next().await.unwrap();
        if m["method"] == "notifications/tasks/status" {
            assert_eq!(m["params"]["taskId"], id.as_str());
            assert_eq!(m["params"]["status"], "completed");
            break;
        }
        progress.push(m["params"]["progress"].as_f64().unwrap());
    }
    assert_eq!(progress, vec![1.0, 2.0, 3.0]);

    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got.result()["status"], "completed");
    let list = c.request("tasks/list", json!({})).await;
    assert_eq!(list.result()["tasks"][0]["taskId"], id.as_str());

    assert_eq!(c.request("tasks/cancel", json!({"taskId": id})).await.error_code(), -32602, "terminal");
    assert_eq!(c.request("tasks/get", json!({"taskId": "0".repeat(32)})).await.error_code(), -32602);
    assert_eq!(c.request("tasks/result", json!({"taskId": "nope"})).await.error_code(), -32602);
    assert_eq!(c.request("tasks/cancel", json!({"taskId": "nope"})).await.error_code(), -32602);
    assert_eq!(c.request("tasks/list", json!({"cursor": "garbage"})).await.error_code(), -32602);
    assert_eq!(c.request("tasks/get", json!({})).await.error_code(), -32602);
}

#[tokio::test]
async fn an_error_result_makes_the_task_failed_and_is_returned_as_is() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = session(&gw, "demo").await;
    let task = task_call(&mut c, "fail", json!({"message": "boom"}), json!({})).await;
    let id = task["taskId"].as_str().unwrap();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result.result()["isError"], true);
    assert_eq!(result.result()["content"][0]["text"], "boom");
    assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "failed");
    // A JSON-RPC error from the upstream comes back as that error.
    let task = task_call(&mut c, "no-such-tool", json!({}), json!({})).await;
    let result = c.request("tasks/result", json!({"taskId": task["taskId"]})).await;
    assert_eq!(result.error_code(), -32602);
    assert_eq!(c.request("tasks/get", json!({"taskId": task["taskId"]})).await.result()["status"], "failed");
}

#[tokio::test]
async fn cancelling_mid_call_reaches_the_upstream_and_sticks() {
    for upstream in [builtin_upstream("demo"), stdio_demo_upstream("demo")] {
        let gw = start_gateway(&upstream).await;
        let mut c = session(&gw, "demo").await;
        let (args, meta) = (json!({"duration_ms": 3000, "steps": 30}), json!({"_meta": {"progressToken": "p"}}));
        let task = task_call(&mut c, "slow", args, meta).await;
        let id = task["taskId"].as_str().unwrap();
        // Mid call: the upstream has reported its first step.
        eventually("the call is under way upstream", async || {
            c.request("tasks/get", json!({"taskId": id})).await.result()["statusMessage"].is_string()
        })
        .await;
        let cancelled = c.request("tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(cancelled.result()["status"], "cancelled");
        eventually("the upstream saw the cancellation", async || {
            stats_cancelled(&c.request("resources/read", json!({"uri": "demo://stats"})).await) == 1
        })
        .await;
        assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "cancelled");
        assert_eq!(c.request("tasks/result", json!({"taskId": id})).await.error_code(), -32603);
    }
}

#[tokio::test]
async fn input_required_round_trip_on_the_result_stream() {
    for upstream in [builtin_upstream("demo"), stdio_demo_upstream("demo")] {
        let gw = start_gateway(&upstream).await;
        let mut c = session(&gw, "demo").await;
        // Let the call reach the upstream before anyone waits on it.
        let task = task_call(&mut c, "ask", json!({"question": "colour?"}), json!({})).await;
        let id = task["taskId"].as_str().unwrap().to_string();
        eventually("the task waits for input", async || {
            c.request("tasks/get", json!({"taskId": id})).await.result()["status"] == "input_required"
        })
        .await;
        let result = c.request("tasks/result", json!({"taskId": id})).await;
        assert_eq!(result.result()["content"][0]["text"], "answer: forty-two");
        let elicit = result
            .others
            .iter()
            .find(|m| m["method"] == "elicitation/create")
            .expect("asked on the tasks/result stream");
        assert_eq!(elicit["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
        assert_eq!(c.request("tasks/get", json!({"taskId": id})).await.result()["status"], "completed");
    }
}

#[tokio::test]
async fn ttl_expiry_removes_task_and_result() {
    let gw =
        start_gateway(&format!("{}[upstream.tasks]\nttl = \"300ms\"\nmax_ttl = \"400ms\"\n", builtin_upstream("demo")))
            .await;
    let mut c = session(&gw, "demo").await;
    let out =
        c.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 999999}})).await;
    let task = task_of(&out);
    assert_eq!(task["ttl"], 400, "capped at max_ttl, and the applied ttl is reported");
    let id = task["taskId"].as_str().unwrap();
    assert_eq!(c.request("tasks/result", json!({"taskId": id})).await.result()["content"][0]["text"], "x");
    eventually("the task expires", async || {
        c.request("tasks/get", json!({"taskId": id})).await.response.get("error").is_some()
    })
    .await;
    let gone = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(gone.error_code(), -32602);
    assert!(gone.response["error"]["message"].as_str().unwrap().contains("not found or expired"));
    assert_eq!(c.request("tasks/result", json!({"taskId": id})).await.error_code(), -32602);
}

#[tokio::test]
async fn store_limits_refuse_new_tasks_and_change_nothing_else() {
    let gw = start_gateway(&format!(
        "[tasks]\nmax_tasks = 3\n{}[upstream.tasks]\nmax_tasks_per_owner = 2\n",
        builtin_upstream("demo")
    ))
    .await;
    let mut a = session(&gw, "demo").await;
    let mut b = session(&gw, "demo").await;
    let slow = json!({"duration_ms": 2000, "steps": 1});
    task_call(&mut a, "slow", slow.clone(), json!({})).await;
    task_call(&mut b, "slow", slow.clone(), json!({})).await;
    // Both sessions come from 127.0.0.1: one client, whose limit is 2 across its sessions.
    for c in [&mut a, &mut b] {
        let refused = c.request("tools/call", json!({"name": "slow", "arguments": slow, "task": {}})).await;
        assert_eq!(refused.error_code(), -32004);
        assert!(refused.response["error"]["message"].as_str().unwrap().contains("limit 2"), "{}", refused.response);
    }
    // A full store refuses everyone.
    let gw = start_gateway(&format!("[tasks]\nmax_tasks = 2\n{}", builtin_upstream("demo"))).await;
    let mut a = session(&gw, "demo").await;
    let mut b = session(&gw, "demo").await;
    let t1 = task_call(&mut a, "slow", slow.clone(), json!({})).await;
    task_call(&mut b, "slow", slow.clone(), json!({})).await;
    let full = b.request("tools/call", json!({"name": "slow", "arguments": slow, "task": {}})).await;
    assert_eq!(full.error_code(), -32603, "the store holds 2 running tasks");
    assert!(full.response["error"]["message"].as_str().unwrap().contains("task store is full"));
    // Nothing else changed: the existing tasks run, plain calls work.
    assert_eq!(a.request("tasks/get", json!({"taskId": t1["taskId"]})).await.result()["status"], "working");
    let echo = b.request("tools/call", json!({"name": "echo", "arguments": {"text": "fine"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "fine");
    // A finished task is kept until its ttl: the store stays full, and the result is there.
    let r = a.request("tasks/result", json!({"taskId": t1["taskId"]})).await;
    assert_eq!(r.result()["content"][0]["text"], "done after 1 steps");
    let still = b.request("tools/call", json!({"name": "echo", "arguments": {"text": "room"}, "task": {}})).await;
    assert_eq!(still.error_code(), -32603);
    assert_eq!(a.request("tasks/get", json!({"taskId": t1["taskId"]})).await.result()["status"], "completed");
}

#[tokio::test]
async fn sessions_list_and_see_only_their_own_tasks() {
    let gw = start_gateway(&format!("[tasks]\nlist_page_size = 2\n{}", builtin_upstream("demo"))).await;
    let mut a = session(&gw, "demo").await;
    let mut b = session(&gw, "demo").await;
    let mut mine = vec![];
    for i in 0..3 {
        let t = task_call(&mut a, "echo", json!({"text": format!("a{i}")}), json!({})).await;
        mine.push(t["taskId"].as_str().unwrap().to_string());
    }
    let tb = task_call(&mut b, "echo", json!({"text": "b"}), json!({})).await;
    // Paged: 2 + 1, in creation order.
    let p1 = a.request("tasks/list", json!({})).await;
    let cursor = p1.result()["nextCursor"].as_str().unwrap().to_string();
    let p2 = a.request("tasks/list", json!({"cursor": cursor})).await;
    assert!(p2.result().get("nextCursor").is_none());
    let listed: Vec<String> = [p1, p2]
        .iter()
        .flat_map(|p| {
            p.result()["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["taskId"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(listed, mine);
    let lb = b.request("tasks/list", json!({})).await;
    assert_eq!(lb.result()["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(lb.result()["tasks"][0]["taskId"], tb["taskId"]);
    // Knowing the id is not enough: to another session the task does not exist.
    assert_eq!(b.request("tasks/result", json!({"taskId": mine[0]})).await.error_code(), -32602);
    let r = a.request("tasks/result", json!({"taskId": mine[0]})).await;
    assert_eq!(r.result()["content"][0]["text"], "a0");
}

#[tokio::test]
async fn a_task_outlives_a_dropped_connection_and_the_link_lives_until_the_call_ends() {
    let gw = start_gateway(&stdio_demo_upstream("demo")).await;
    let mut a = session(&gw, "demo").await;
    let task = task_call(&mut a, "slow", json!({"duration_ms": 700, "steps": 1}), json!({})).await;
    let id = task["taskId"].as_str().unwrap().to_string();
    // The client's connection goes away; its session, and the task, stay.
    let pending = a.post_streaming(
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 90, "method": "tasks/result", "params": {"taskId": id}}))
            .unwrap(),
        &[],
    );
    drop(pending);
    let r = a.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(r.result()["content"][0]["text"], "done after 1 steps");
    // A session that ends while its task runs keeps its link until the call ends; the task
    // is then nobody else's to see.
    let task = task_call(&mut a, "slow", json!({"duration_ms": 400, "steps": 1}), json!({})).await;
    assert_eq!(a.delete().await, 200);
    let mut b = session(&gw, "demo").await;
    assert_eq!(b.request("tasks/get", json!({"taskId": task["taskId"]})).await.error_code(), -32602);
}

#[tokio::test]
async fn hosted_never_passes_task_requests_through() {
    let gw = start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", builtin_upstream("demo"))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    let init = c.initialize("2025-11-25").await;
    assert!(init["capabilities"].get("tasks").is_none());
    // The demo ignores params.task (it has no tasks): a plain result comes back.
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "plain"}, "task": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "plain");
    assert_eq!(c.request("tasks/list", json!({})).await.error_code(), -32601, "the upstream's own answer");
}

#[tokio::test]
async fn hosted_tools_globs_choose_what_is_offered() {
    let gw = start_gateway(&format!("{}[upstream.tasks]\nhosted_tools = [\"sl*\"]\n", builtin_upstream("demo"))).await;
    let mut c = session(&gw, "demo").await;
    let tools = c.request("tools/list", json!({})).await;
    for t in tools.result()["tools"].as_array().unwrap() {
        let hosted = t["name"] == "slow";
        assert_eq!(t.pointer("/execution/taskSupport").is_some(), hosted, "{t}");
    }
}
