//! Long calls for clients without tasks (`[upstream.long_calls]`): a plain call still
//! running after `defer_after` is answered with an ordinary tool result naming a task, and
//! the gateway's tools wait for it, check it and cancel it. The real SDK clients' runs are
//! in `interop_long_calls`.

use crate::common;

use common::gateway_proc::{signal, start};
use common::*;
use serde_json::{Value, json};

fn config(long_calls: &str) -> String {
    format!("{}[upstream.long_calls]\n{long_calls}\n", builtin_upstream("demo"))
}

const DEFER: &str = "defer_after = \"300ms\"\nwait_max = \"5s\"\nkeepalive = \"0ms\"";

fn slow(ms: u64, steps: u64) -> Value {
    json!({"name": "slow", "arguments": {"duration_ms": ms, "steps": steps}})
}

fn text(out: &Outcome) -> String {
    out.result()["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// A call deferred: its task id, after checking the answer's shape.
async fn deferred(c: &mut HttpMcp, call: Value) -> String {
    let out = c.request("tools/call", call).await;
    let r = out.result();
    assert!(r.get("isError").is_none(), "{}", out.response);
    let id = r["structuredContent"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", out.response)).to_string();
    assert_eq!(r["structuredContent"]["status"], "working");
    assert_eq!(r["structuredContent"]["waitTool"], "taskgate_wait");
    let said = text(&out);
    assert!(said.contains(&id) && said.contains("taskgate_wait"), "{said}");
    id
}

async fn tool(c: &mut HttpMcp, name: &str, task: &str) -> Outcome {
    c.request("tools/call", json!({"name": name, "arguments": {"taskId": task}})).await
}

#[tokio::test]
async fn a_long_call_is_deferred_and_the_wait_tool_gets_its_result_exactly() {
    let gw = start_gateway(&config(DEFER)).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let listed = c.request("tools/list", json!({})).await;
    let names: Vec<&str> =
        listed.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    for t in ["taskgate_wait", "taskgate_status", "taskgate_cancel", "slow"] {
        assert!(names.contains(&t), "{t} in {names:?}");
    }

    let started = std::time::Instant::now();
    let task = deferred(&mut c, slow(2000, 10)).await;
    assert!(started.elapsed() < std::time::Duration::from_millis(1500), "answered at defer_after");
    // The client sent no progress token; the task's status shows the upstream's progress all
    // the same (the gateway's own token).
    let shown = poll("the status tool shows progress", async || {
        let st = tool(&mut c, "taskgate_status", &task).await;
        let shown = &st.result()["structuredContent"];
        shown.get("progress").is_some().then(|| shown.clone())
    })
    .await;
    assert_eq!(shown["total"], 10, "{shown}");
    assert!(shown["message"].as_str().unwrap().starts_with("step "), "{shown}");

    let waited = tool(&mut c, "taskgate_wait", &task).await;
    assert_eq!(waited.result(), &json!({"content": [{"type": "text", "text": "done after 10 steps"}]}));
    // Kept for its retention: a second wait (a lost answer, a retry) gets the same.
    let again = tool(&mut c, "taskgate_wait", &task).await;
    assert_eq!(again.result(), waited.result());
}

#[tokio::test]
async fn a_call_that_ends_in_time_is_answered_plainly_and_leaves_no_task() {
    let dir = tempfile::tempdir().unwrap();
    let auth = bearer_tokens(&dir, &[("alice", "alice-token-0123456789")]);
    let gw = start_gateway(&format!("[server]\n{auth}{}", config(DEFER))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some("alice-token-0123456789".into());
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(
        out.result(),
        &json!({"content": [{"type": "text", "text": "hi"}], "structuredContent": {"arguments": {"text": "hi"}}})
    );
    let failed = c.request("tools/call", json!({"name": "fail", "arguments": {}})).await;
    assert_eq!(failed.result()["isError"], true, "{}", failed.response);
    let task = deferred(&mut c, slow(5_000, 5)).await;
    // Alice's tasks, as a client of hers that speaks tasks lists them: the deferred call's
    // alone; those answered with their results are gone.
    let mut tasks = HttpMcp::new(&gw.url("demo"));
    tasks.bearer = Some("alice-token-0123456789".into());
    tasks.initialize("2025-11-25").await;
    let listed = tasks.request("tasks/list", json!({})).await;
    let ids: Vec<&str> =
        listed.result()["tasks"].as_array().unwrap().iter().filter_map(|t| t["taskId"].as_str()).collect();
    assert_eq!(ids, [task.as_str()], "{}", listed.response);
}

#[tokio::test]
async fn a_wait_that_ends_first_says_it_still_runs_and_cancel_stops_it() {
    let gw = start_gateway(&config("defer_after = \"200ms\"\nwait_max = \"300ms\"")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2024-11-05").await;
    let task = deferred(&mut c, slow(30_000, 30)).await;
    let waited = tool(&mut c, "taskgate_wait", &task).await;
    assert_eq!(waited.result()["structuredContent"]["taskId"], task.as_str(), "{}", waited.response);
    assert_eq!(waited.result()["structuredContent"]["status"], "working");
    let cancelled = tool(&mut c, "taskgate_cancel", &task).await;
    assert_eq!(cancelled.result()["structuredContent"]["status"], "cancelled", "{}", cancelled.response);
    let status = tool(&mut c, "taskgate_status", &task).await;
    assert_eq!(status.result()["structuredContent"]["status"], "cancelled");
    // The call failed as a cancelled call fails; cancelling again is a tool error.
    let waited = tool(&mut c, "taskgate_wait", &task).await;
    assert!(waited.response.get("error").is_some(), "{}", waited.response);
    let again = tool(&mut c, "taskgate_cancel", &task).await;
    assert_eq!(again.result()["isError"], true, "{}", again.response);
}

#[tokio::test]
async fn another_sessions_task_is_as_unknown_as_one_that_never_was() {
    let gw = start_gateway(&config(DEFER)).await;
    let mut alice = HttpMcp::new(&gw.url("demo"));
    alice.initialize("2025-06-18").await;
    let mut bob = HttpMcp::new(&gw.url("demo"));
    bob.initialize("2025-06-18").await;
    let task = deferred(&mut alice, slow(5_000, 5)).await;
    let never = "0123456789abcdef0123456789abcdef";
    for name in ["taskgate_wait", "taskgate_status", "taskgate_cancel"] {
        let theirs = tool(&mut bob, name, &task).await;
        let unknown = tool(&mut bob, name, never).await;
        assert_eq!(theirs.result()["isError"], true, "{}", theirs.response);
        assert_eq!(text(&theirs).replace(&task, "X"), text(&unknown).replace(never, "X"));
    }
    // Bob's cancel changed nothing.
    let status = tool(&mut alice, "taskgate_status", &task).await;
    assert_eq!(status.result()["structuredContent"]["status"], "working");
    let bad = alice.request("tools/call", json!({"name": "taskgate_wait", "arguments": {"taskId": 7}})).await;
    assert_eq!(bad.result()["isError"], true, "{}", bad.response);
}

#[tokio::test]
async fn clients_that_speak_tasks_get_real_tasks_and_none_of_the_tools() {
    let gw = start_gateway(&config(DEFER)).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    let mut params = init_params("2025-11-25");
    params["capabilities"]["tasks"] = json!({"list": {}, "cancel": {}});
    c.initialize_with(params).await;
    let listed = c.request("tools/list", json!({})).await;
    assert!(!listed.response.to_string().contains("taskgate_wait"), "{}", listed.response);
    // A plain call is theirs to make: it blocks until its result.
    let out = c.request("tools/call", slow(600, 2)).await;
    assert_eq!(text(&out), "done after 2 steps");
    let unknown = tool(&mut c, "taskgate_wait", "x").await;
    assert!(unknown.response.get("error").is_some() || unknown.result()["isError"] == true);
    assert!(!unknown.response.to_string().contains("still running"), "{}", unknown.response);

    // A 2025-11-25 client that declared no tasks is a client without them.
    let mut plain = HttpMcp::new(&gw.url("demo"));
    plain.initialize("2025-11-25").await;
    let listed = plain.request("tools/list", json!({})).await;
    assert!(listed.response.to_string().contains("taskgate_wait"), "{}", listed.response);
    deferred(&mut plain, slow(2000, 2)).await;
}

#[tokio::test]
async fn a_silent_upstream_is_kept_alive_by_progress_under_the_clients_token() {
    let gw = start_gateway(&config("defer_after = \"1500ms\"\nkeepalive = \"200ms\"")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    // One step: the upstream says nothing until the end.
    let mut call = slow(5_000, 1);
    call["_meta"] = json!({"progressToken": "k"});
    let out = c.request("tools/call", call).await;
    assert!(out.result()["structuredContent"]["taskId"].is_string(), "{}", out.response);
    let progress: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert!(progress.len() >= 3, "keep-alives in 1.5 s at 200 ms: {progress:?}");
    let values: Vec<f64> = progress.iter().map(|m| m["params"]["progress"].as_f64().unwrap()).collect();
    assert!(values.windows(2).all(|w| w[1] > w[0]), "{values:?}");
    assert!(progress.iter().all(|m| m["params"]["progressToken"] == "k" && m["params"]["message"].is_string()));
}

#[tokio::test]
async fn a_deferred_task_is_still_known_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let written = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nsync_interval = \"0ms\"\n{}",
        config("defer_after = \"300ms\"\nwait_max = \"5s\"")
    );
    std::fs::write(&path, written).unwrap();
    let (gw, addr) = start(&path).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-06-18").await;
    let running = deferred(&mut c, slow(60_000, 60)).await;
    signal(gw.pid(), libc::SIGKILL);
    drop(gw);

    let (_gw, addr) = start(&path).await;
    // The same client, its session revived by its Mcp-Session-Id.
    c.url = format!("http://{addr}/mcp/demo");
    let status = tool(&mut c, "taskgate_status", &running).await;
    assert_eq!(status.result()["structuredContent"]["status"], "failed", "{}", status.response);
    assert!(text(&status).contains("restart"), "{}", status.response);
    let waited = tool(&mut c, "taskgate_wait", &running).await;
    assert!(waited.response["error"]["message"].as_str().is_some_and(|m| m.contains("restart")), "{}", waited.response);
}

#[test]
fn a_config_without_hosting_cannot_defer() {
    let text = format!(
        "{}[upstream.tasks]\nhosted = \"never\"\n[upstream.long_calls]\ndefer_after = \"1s\"\n",
        builtin_upstream("demo")
    );
    let err = taskgate::Config::parse(&text, &|_| None).unwrap_err().to_string();
    assert!(err.contains("long_calls.defer_after"), "{err}");
}

#[tokio::test]
async fn a_2026_07_28_client_without_the_extension_gets_long_calls_and_one_with_it_gets_tasks() {
    use common::modern_client::{call, request};
    let gw = start_gateway(&config(DEFER)).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let listed = call(&c, &request(json!(1), "tools/list", json!({}), json!({}))).await.1;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"taskgate_wait") && names.contains(&"slow"), "{names:?}");
    assert!(listed["result"]["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()));

    let (_, out, _) = call(&c, &request(json!(2), "tools/call", slow(2000, 4), json!({}))).await;
    assert_eq!(out["result"]["resultType"], "complete", "{out}");
    let task = out["result"]["structuredContent"]["taskId"].as_str().unwrap_or_else(|| panic!("{out}")).to_string();
    let wait = json!({"name": "taskgate_wait", "arguments": {"taskId": task}});
    let (_, waited, _) = call(&c, &request(json!(3), "tools/call", wait, json!({}))).await;
    assert_eq!(waited["result"]["content"][0]["text"], "done after 4 steps", "{waited}");
    assert_eq!(waited["result"]["resultType"], "complete");

    // Declaring the extension: a task of the extension's, and no gateway tools.
    let ext = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let listed = call(&c, &request(json!(4), "tools/list", json!({}), ext.clone())).await.1;
    assert!(!listed.to_string().contains("taskgate_wait"), "{listed}");
    let (_, out, _) = call(&c, &request(json!(5), "tools/call", slow(2000, 4), ext)).await;
    assert_eq!(out["result"]["resultType"], "task", "{out}");
}

#[tokio::test]
async fn a_question_within_the_window_goes_on_the_calls_stream() {
    let gw = start_gateway(&config("defer_after = \"3s\"")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let started = std::time::Instant::now();
    let out = c.request("tools/call", json!({"name": "ask", "arguments": {}})).await;
    assert_eq!(text(&out), "answer: forty-two", "{}", out.response);
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "answered once the question was");
    assert_eq!(out.others.len(), 1, "{:?}", out.others);
    assert_eq!(out.others[0]["method"], "elicitation/create");
}

#[tokio::test]
async fn a_2026_07_28_clients_question_within_the_window_is_an_input_round() {
    use common::modern_client::{call, request};
    let gw = start_gateway(&config(DEFER)).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let caps = json!({"elicitation": {}});
    let ask = json!({"name": "ask", "arguments": {}});
    let (_, round, _) = call(&c, &request(json!(2), "tools/call", ask, caps.clone())).await;
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    let (key, asked) = round["result"]["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    let retry = json!({"name": "ask", "arguments": {}, "requestState": round["result"]["requestState"],
        "inputResponses": {key.as_str(): {"action": "accept", "content": {"answer": "modern"}}}});
    let (_, out, _) = call(&c, &request(json!(3), "tools/call", retry, caps)).await;
    assert_eq!(out["result"]["content"][0]["text"], "answer: modern", "{out}");
    assert_eq!(out["result"]["resultType"], "complete");
}

/// An upstream with a slow tool bound by an output schema, and (`clash`) a tool of one of
/// the gateway's names.
async fn schema_upstream(clash: bool) -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => {
            let mut tools = vec![json!({"name": "report", "inputSchema": {"type": "object"},
                 "outputSchema": {"type": "object", "properties": {"rows": {"type": "integer"}}, "required": ["rows"]}})];
            if clash {
                tools.push(json!({"name": "taskgate_status", "inputSchema": {"type": "object"}}));
            }
            vec![reply(req, json!({"tools": tools}))]
        }
        "tools/call" if req["params"]["name"] == "report" => vec![
            Step::Sleep(1500),
            reply(
                req,
                json!({"content": [{"type": "text", "text": "{\"rows\":3}"}], "structuredContent": {"rows": 3}}),
            ),
        ],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "the upstream's own"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn a_schema_bound_tools_deferred_answer_has_nothing_to_check() {
    let up = schema_upstream(false).await;
    let gw = start_gateway(&format!(
        "{}[upstream.long_calls]\ndefer_after = \"300ms\"\nwait_max = \"5s\"\n",
        http_upstream("up", &up.url())
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    c.request("tools/list", json!({})).await;
    let out = c.request("tools/call", json!({"name": "report", "arguments": {}})).await;
    let r = out.result();
    assert!(r.get("structuredContent").is_none(), "{}", out.response);
    assert_eq!(r["isError"], true);
    let said = text(&out);
    assert!(said.contains("not an error of the tool") && said.contains("taskgate_wait"), "{said}");
    let task = said.split("as task ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    let waited = tool(&mut c, "taskgate_wait", &task).await;
    assert_eq!(waited.result()["structuredContent"], json!({"rows": 3}), "{}", waited.response);
}

#[tokio::test]
async fn an_upstream_tool_of_a_gateway_tools_name_is_never_shadowed_and_nothing_is_deferred() {
    let up = schema_upstream(true).await;
    let gw =
        start_gateway(&format!("{}[upstream.long_calls]\ndefer_after = \"300ms\"\n", http_upstream("up", &up.url())))
            .await;
    // Called before any listing, and after one.
    for list_first in [false, true] {
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize("2025-06-18").await;
        if list_first {
            let listed = c.request("tools/list", json!({})).await;
            let names: Vec<&str> =
                listed.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
            assert_eq!(names, ["report", "taskgate_status"], "{}", listed.response);
        }
        let own = tool(&mut c, "taskgate_status", "x").await;
        assert_eq!(text(&own), "the upstream's own", "{}", own.response);
    }
    // Its answers would name a tool that is the upstream's: the call runs to its end.
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "report", "arguments": {}})).await;
    assert_eq!(out.result()["structuredContent"], json!({"rows": 3}), "{}", out.response);
}

/// A client of a gateway in front of [`schema_upstream`] (`defer_after` 5 s) whose call of
/// `report`, request `id`, is on its way.
async fn report_pending(id: i64) -> (Scripted, Gw, HttpMcp) {
    let up = schema_upstream(false).await;
    let gw = start_gateway(&format!("{}[upstream.long_calls]\ndefer_after = \"5s\"\n", http_upstream("up", &up.url())))
        .await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let call =
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "report", "arguments": {}}});
    let pending = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    assert_eq!(pending.status(), 200);
    (up, gw, c)
}

#[tokio::test]
async fn a_cancel_of_the_call_within_the_window_cancels_its_task_upstream() {
    let (up, _gw, c) = report_pending(77).await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 77})).await, 202);
    let cancelled =
        poll("the upstream hears the cancel", async || calls_to(&up, "notifications/cancelled").into_iter().next())
            .await;
    assert!(cancelled["params"]["requestId"].is_number(), "{cancelled}");
}

#[tokio::test]
async fn a_cancelled_wait_is_not_answered_and_its_task_goes_on() {
    let gw = start_gateway(&config(DEFER)).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let task = deferred(&mut c, slow(1500, 3)).await;
    let wait = json!({"jsonrpc": "2.0", "id": 91, "method": "tools/call",
        "params": {"name": "taskgate_wait", "arguments": {"taskId": task}}});
    let pending = c.post_streaming(serde_json::to_vec(&wait).unwrap(), &[]).await;
    assert_eq!(pending.status(), 200);
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 91})).await, 202);
    // The wait's stream ends without an answer to it.
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), read_all(pending)).await.unwrap();
    assert!(!String::from_utf8_lossy(&got.body).contains("\"id\":91"), "{:?}", got.body);
    let waited = tool(&mut c, "taskgate_wait", &task).await;
    assert_eq!(text(&waited), "done after 3 steps", "{}", waited.response);
}

#[tokio::test]
async fn past_the_clients_share_of_tasks_a_call_goes_up_plain() {
    let gw = start_gateway(&format!(
        "{}[upstream.tasks]\nmax_tasks_per_owner = 1\n[upstream.long_calls]\n{DEFER}\n",
        builtin_upstream("demo")
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    deferred(&mut c, slow(5_000, 5)).await;
    // Its share is held by the deferred task: this one is not deferrable, and is answered.
    let out = c.request("tools/call", slow(600, 2)).await;
    assert_eq!(text(&out), "done after 2 steps", "{}", out.response);
}

#[tokio::test]
async fn waits_that_end_at_once_leave_nothing_behind() {
    let gw = start_gateway(&format!("[server]\nmax_in_flight = 4\n{}", config(DEFER))).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let task = deferred(&mut c, slow(400, 2)).await;
    // Many more waits than the session may hold in flight, each answered at once.
    for _ in 0..12 {
        let waited = tool(&mut c, "taskgate_wait", &task).await;
        assert_eq!(text(&waited), "done after 2 steps", "{}", waited.response);
    }
}

#[tokio::test]
async fn a_progress_token_used_again_after_a_deferred_answer_is_the_new_calls() {
    let gw = start_gateway(&config(DEFER)).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let mut first = slow(3_000, 3);
    first["_meta"] = json!({"progressToken": "p"});
    let task = deferred(&mut c, first).await;
    let mut second = slow(250, 2);
    second["_meta"] = json!({"progressToken": "p"});
    let out = c.request("tools/call", second).await;
    assert_eq!(text(&out), "done after 2 steps", "{}", out.response);
    let progress: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "the second call's own progress reaches it: {:?}", out.others);
    assert!(progress.iter().all(|m| m["params"]["progressToken"] == "p" && m["params"]["total"] == 2), "{progress:?}");
    // The first call's task shows its own steps.
    let mut c2 = HttpMcp::new(&gw.url("demo"));
    c2.session = c.session.clone();
    c2.version = c.version.clone();
    let shown = poll("the first call's progress", async || {
        let status = tool(&mut c2, "taskgate_status", &task).await;
        let shown = status.result()["structuredContent"].clone();
        shown.get("total").is_some().then_some(shown)
    })
    .await;
    assert_eq!(shown["total"], 3, "{shown}");
}

#[tokio::test]
async fn a_session_ended_within_the_window_cancels_its_call_upstream() {
    let (up, _gw, c) = report_pending(5).await;
    poll("the call reaches the upstream", async || (!calls_to(&up, "tools/call").is_empty()).then_some(())).await;
    assert_eq!(c.delete().await, 200);
    poll("the upstream hears the cancel", async || calls_to(&up, "notifications/cancelled").into_iter().next()).await;
}

#[tokio::test]
async fn another_principals_task_is_as_unknown_as_one_that_never_was_and_ones_own_is_known_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let auth = bearer_tokens(&dir, &[("alice", "alice-token-0123456789"), ("bob", "bob-token-0123456789ab")]);
    let gw = start_gateway(&format!("[server]\n{auth}{}", config(DEFER))).await;
    let session = async |token: &str| {
        let mut c = HttpMcp::new(&gw.url("demo"));
        c.bearer = Some(token.into());
        c.initialize("2025-06-18").await;
        c
    };
    let mut alice = session("alice-token-0123456789").await;
    let task = deferred(&mut alice, slow(1_500, 3)).await;
    let mut bob = session("bob-token-0123456789ab").await;
    let never = "0123456789abcdef0123456789abcdef";
    let theirs = tool(&mut bob, "taskgate_wait", &task).await;
    let unknown = tool(&mut bob, "taskgate_wait", never).await;
    assert_eq!(text(&theirs).replace(&task, "X"), text(&unknown).replace(never, "X"));
    // Alice's other session waits on it: the task is the principal's.
    let mut again = session("alice-token-0123456789").await;
    let waited = tool(&mut again, "taskgate_wait", &task).await;
    assert_eq!(text(&waited), "done after 3 steps", "{}", waited.response);
}
