//! Interop with the rmcp 3.11 task server (`tests/interop/rmcp_server`: the tasks extension
//! `io.modelcontextprotocol/tasks`, both eras, stdio and Streamable HTTP): through the
//! `taskgate` binary in front of SDK and raw clients, and directly without the gateway, the
//! wire facts the gateway's 2026-07-28 dialect relies on (recorded in
//! tests/interop/README.md, "What rmcp 3.11 sends").
//!
//! The peers are installed at pinned versions by `scripts/setup-interop`, which the test
//! command runs first. A missing peer fails the test; nothing here skips. Every process a
//! test starts is stopped with its whole tree (tests/common/interop.rs).

use crate::common::interop;
use crate::common::pace;

use interop::*;
use std::process::Command;
use std::time::{Duration, Instant};

// ---- through the gateway ----

/// The rmcp server is dual era: the probe finds it modern, and plain tools (`echo`) work
/// for a legacy client through stateless requests.
#[test]
fn the_dual_era_rmcp_server_is_spoken_to_as_modern_for_plain_tools() {
    use serde_json::json;
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let port = gw.addr.port();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, head, msgs) = http_post(port, "/mcp/rmcp", &[], &init);
    assert_eq!(status, 200, "{msgs:?}\n{}", gw.proc.output());
    let result = &msgs[0]["result"];
    assert_eq!(result["serverInfo"]["name"], "taskgate-interop-rmcp-server", "{result}");
    assert!(result["capabilities"].get("extensions").is_none(), "{result}");
    let sid = head.lines().find_map(|l| l.strip_prefix("mcp-session-id:")).unwrap().trim().to_string();
    let hs = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = http_post(port, "/mcp/rmcp", &hs, &note);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi rmcp"}}});
    let (_, _, msgs) = http_post(port, "/mcp/rmcp", &hs, &call);
    let echo = msgs.iter().find(|m| m["id"] == 2).unwrap_or_else(|| panic!("{msgs:?}"));
    assert_eq!(text_of(&echo["result"]), "hi rmcp", "{echo}");
    assert!(echo["result"].get("resultType").is_none(), "{echo}");
    let log = gw.proc.output();
    assert!(log.contains("the upstream speaks 2026-07-28"), "{log}");
}

/// The TypeScript SDK 1.32.2 client with 2025-11-25 tasks in front of the rmcp server (the
/// tasks extension): core tasks translated both ways, over HTTP and the stdio front. The
/// extension has no progress for tasks (`--min-progress 0`), and the gateway sends
/// `notifications/tasks/status` only while a `tasks/result` waits (the spec says MAY:
/// `--no-status-notifications`); every other check is the scenario's own, `stats` showing
/// rmcp saw the cancellation.
#[test]
fn ts_tasks_client_in_front_of_the_rmcp_extension_task_server() {
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let args = ["--tool", "slow", "--stats-tool", "stats", "--min-progress", "0", "--no-status-notifications"];
    run_client(&gw, "node", &tasks_scenario(&args, http(gw.url("rmcp"))));
    run_client(&gw, "node", &tasks_scenario(&args, stdio(gw.stdio_args("rmcp"))));
}

/// A 2025-06-18 client (raw JSON-RPC on `taskgate stdio`, and over HTTP) in front of the
/// rmcp server, whose `slow` and `ask` are extension tasks (-32021 without the extension):
/// the gateway retries declaring it and bridges the task. `slow`'s status messages become
/// progress; `ask`'s elicitation reaches the client as a plain request of the call and its
/// answer reaches rmcp (`answer: <text>`); `notifications/cancelled` cancels the task there.
#[test]
fn a_2025_06_18_client_is_bridged_through_rmcp_extension_tasks() {
    use serde_json::json;
    let gw = Gateway::start(&format!("[[upstream]]\nname = \"rmcp\"\ncommand = {:?}\n", rmcp_server()));
    let mut c = RawStdio::start_cmd(Command::new(&gw.stdio_args("rmcp")[0]).args(&gw.stdio_args("rmcp")[1..]));
    let init = c.result(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "raw-2025-06-18", "version": "0"}}),
    );
    assert_eq!(init["protocolVersion"], "2025-06-18", "{init}");
    assert!(init["capabilities"].get("tasks").is_none() && init["capabilities"].get("extensions").is_none(), "{init}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    let slow = c.result(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": {"progressToken": "s"}}),
    );
    assert_eq!(text_of(&slow), "slow done after 3 steps", "{slow}");
    assert!(slow.get("resultType").is_none() && slow.get("_meta").is_none(), "{slow}");
    let progress: Vec<&serde_json::Value> =
        c.notifications.iter().filter(|n| n["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "status messages become progress: {:?}", c.notifications);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "s"), "{progress:?}");
    assert!(
        progress.iter().all(|p| p["params"]["message"].as_str().is_some_and(|m| m.starts_with("step "))),
        "{progress:?}"
    );

    c.notifications.clear();
    let asked =
        c.request_answering("tools/call", json!({"name": "ask", "arguments": {"question": "colour?"}}), |req| {
            assert_eq!(req["method"], "elicitation/create", "{req}");
            json!({"action": "accept", "content": {"answer": "blue"}})
        });
    assert_eq!(text_of(&asked["result"]), "answer: blue", "{asked}");
    let elicitations: Vec<&serde_json::Value> =
        c.notifications.iter().filter(|n| n["method"] == "elicitation/create").collect();
    assert_eq!(elicitations.len(), 1, "asked once: {:?}", c.notifications);
    assert_eq!(elicitations[0]["params"]["message"], "colour?");
    assert!(elicitations[0]["params"].get("_meta").is_none(), "no related-task: {}", elicitations[0]);

    // Cancelled while it runs: rmcp counts the cancellation (its stats are the process's,
    // and the gateway's stdio front runs its own rmcp process).
    c.next_id += 1;
    let id = c.next_id;
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 30, "steps": 30}, "_meta": {"progressToken": "long"}}}));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let m = c
            .recv(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|| panic!("no progress for the long call"));
        if m["method"] == "notifications/progress" && m["params"]["progressToken"] == "long" {
            break;
        }
    }
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "enough"}}));
    let mut counts = serde_json::Value::Null;
    let cancelled = pace::until(Duration::from_secs(15), || {
        let stats = c.result("tools/call", json!({"name": "stats", "arguments": {}}));
        counts = serde_json::from_str(text_of(&stats)).unwrap();
        (counts["slow_cancelled"] == 1).then_some(())
    });
    assert!(cancelled.is_some(), "the task was not cancelled upstream: {counts}");
    assert!(
        !c.notifications.iter().any(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none()),
        "a cancelled call gets no response"
    );

    // Over HTTP too (no input: the blocking call, its progress on the POST's stream).
    let port = gw.addr.port();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, head, _) = http_post(port, "/mcp/rmcp", &[], &init);
    assert_eq!(status, 200);
    let sid = head.lines().find_map(|l| l.strip_prefix("mcp-session-id:")).unwrap().trim().to_string();
    let hs = [("mcp-session-id", sid.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let _ = http_post(port, "/mcp/rmcp", &hs, &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": {"progressToken": 5}}});
    let (_, _, msgs) = http_post(port, "/mcp/rmcp", &hs, &call);
    let answer = msgs.iter().find(|m| m["id"] == 2).unwrap_or_else(|| panic!("{msgs:?}"));
    assert_eq!(text_of(&answer["result"]), "slow done after 3 steps", "{answer}");
    assert!(
        msgs.iter().any(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == 5),
        "{msgs:?}"
    );
    let log = gw.proc.output();
    assert!(log.contains("retrying it declaring the extension"), "{log}");
}

// ---- the rmcp task server, directly, without the gateway ----

#[test]
fn rmcp_server_answers_server_discover_and_serves_extension_tasks_over_stdio() {
    let mut s = RawStdio::start();
    let ext = modern_meta("2026-07-28", true);
    let plain = modern_meta("2026-07-28", false);

    // server/discover: every version it knows, the extension declared, serverInfo in _meta.
    let discover = s.result("server/discover", serde_json::json!({"_meta": ext}));
    assert_eq!(
        discover,
        serde_json::json!({
            "resultType": "complete",
            "supportedVersions": RMCP_VERSIONS,
            "capabilities": {"extensions": {TASKS_EXT: {}}, "tools": {}},
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "taskgate-interop-rmcp-server", "version": "0.1.0"}},
        })
    );
    // Without the per-request _meta, even server/discover is refused.
    let e = s.error("server/discover", serde_json::json!({}));
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e["message"].as_str().unwrap().contains("io.modelcontextprotocol/protocolVersion"), "{e}");

    let tools = s.result("tools/list", serde_json::json!({"_meta": ext}));
    assert_eq!(tools["resultType"], "complete");
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "slow", "ask", "stats"]);
    assert!(tools["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()), "{tools}");

    // The server decides: echo is never a task, even for a client that declared the extension.
    let echo = s.result("tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": ext}));
    assert_eq!(
        echo,
        serde_json::json!({"resultType": "complete", "content": [{"type": "text", "text": "hi"}], "isError": false})
    );

    // slow: a flat CreateTaskResult.
    let created = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.6, "steps": 3}, "_meta": ext}),
    );
    assert_eq!(
        keys(&created),
        ["createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "statusMessage", "taskId", "ttlMs"],
        "{created}"
    );
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    assert_eq!(created["statusMessage"], "step 0 of 3");
    assert_eq!(created["ttlMs"], 300_000);
    assert_eq!(created["pollIntervalMs"], 250);
    assert_eq!(created["createdAt"], created["lastUpdatedAt"]);
    let task_id = created["taskId"].as_str().unwrap().to_string();
    assert_eq!(task_id.len(), 36, "a UUID: {task_id}");

    // tasks/get: a DetailedTask with resultType "complete"; the result inlined at completion.
    let polls = s.poll(&task_id, "completed", &ext);
    for got in &polls {
        assert_eq!(got["resultType"], "complete", "{got}");
        assert_eq!(got["taskId"], task_id.as_str());
        assert_eq!(got["createdAt"], created["createdAt"], "createdAt is stable: {got}");
        assert_eq!((&got["ttlMs"], &got["pollIntervalMs"]), (&created["ttlMs"], &created["pollIntervalMs"]));
        let message = got["statusMessage"].as_str().unwrap();
        assert!(message.starts_with("step ") && message.ends_with(" of 3"), "{got}");
    }
    let done = polls.last().unwrap();
    assert_eq!(done["status"], "completed", "{polls:?}");
    assert_eq!(done["statusMessage"], "step 3 of 3");
    assert!(done.get("error").is_none() && done.get("inputRequests").is_none(), "{done}");
    assert_eq!(
        done["result"],
        serde_json::json!({
            "content": [{"type": "text", "text": "slow done after 3 steps"}],
            "isError": false,
            "resultType": "complete",
        })
    );
    assert_ne!(done["lastUpdatedAt"], created["lastUpdatedAt"]);
    // No progress or task notifications on stdio for a task.
    assert!(s.notifications.is_empty(), "{:?}", s.notifications);

    // tasks/cancel: an empty ack; the running task settles as cancelled.
    let long = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 30, "steps": 30}, "_meta": ext}),
    );
    let long_id = long["taskId"].as_str().unwrap().to_string();
    let ack = s.result("tasks/cancel", serde_json::json!({"taskId": long_id, "_meta": ext}));
    assert_eq!(ack, serde_json::json!({"resultType": "complete"}));
    let cancelled = s.poll(&long_id, "cancelled", &ext).pop().unwrap();
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert!(cancelled.get("result").is_none() && cancelled.get("error").is_none(), "{cancelled}");
    // Cancelling a terminal task is acknowledged the same way, and changes nothing.
    assert_eq!(s.result("tasks/cancel", serde_json::json!({"taskId": long_id, "_meta": ext})), ack);
    assert_eq!(s.poll(&long_id, "cancelled", &ext).pop().unwrap()["status"], "cancelled");
    let stats = s.result("tools/call", serde_json::json!({"name": "stats", "arguments": {}, "_meta": ext}));
    let counters: serde_json::Value = serde_json::from_str(text_of(&stats)).unwrap();
    assert_eq!(counters, serde_json::json!({"slow_started": 2, "slow_finished": 1, "slow_cancelled": 1}));

    // Unknown task: -32602. tasks/result and tasks/list do not exist: -32601.
    let e = s.error("tasks/get", serde_json::json!({"taskId": "no-such-task", "_meta": ext}));
    assert_eq!(e, serde_json::json!({"code": -32602, "message": "unknown task: no-such-task"}));
    for method in ["tasks/result", "tasks/list"] {
        let e = s.error(method, serde_json::json!({"taskId": task_id, "_meta": ext}));
        assert_eq!(e, serde_json::json!({"code": -32601, "message": method}));
    }

    // Input during a task: input_required with inputRequests, answered by tasks/update.
    let asked = s.result(
        "tools/call",
        serde_json::json!({"name": "ask", "arguments": {"question": "Which colour?"}, "_meta": ext}),
    );
    assert_eq!(asked["resultType"], "task");
    let ask_id = asked["taskId"].as_str().unwrap().to_string();
    let waiting = s.poll(&ask_id, "input_required", &ext).pop().unwrap();
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    assert_eq!(
        waiting["inputRequests"],
        serde_json::json!({"answer": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Which colour?",
                "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
            },
        }})
    );
    let update = serde_json::json!({
        "taskId": ask_id,
        "inputResponses": {"answer": {"action": "accept", "content": {"answer": "blue"}}},
        "_meta": ext,
    });
    assert_eq!(s.result("tasks/update", update), serde_json::json!({"resultType": "complete"}));
    let answered = s.poll(&ask_id, "completed", &ext).pop().unwrap();
    assert_eq!(answered["status"], "completed", "{answered}");
    assert!(answered.get("inputRequests").is_none(), "{answered}");
    assert_eq!(text_of(&answered["result"]), "answer: blue");

    // Without the extension on the request: -32021 for slow and for tasks/*, plain results
    // for tools that are never tasks.
    let missing = serde_json::json!({
        "code": -32021,
        "message": "Missing required client capability",
        "data": {"requiredCapabilities": {"extensions": {TASKS_EXT: {}}}},
    });
    let e = s.error("tools/call", serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1}, "_meta": plain}));
    assert_eq!(e, missing);
    for method in ["tasks/get", "tasks/cancel"] {
        assert_eq!(s.error(method, serde_json::json!({"taskId": task_id, "_meta": plain})), missing, "{method}");
    }
    let e = s.error("tasks/update", serde_json::json!({"taskId": task_id, "inputResponses": {}, "_meta": plain}));
    assert_eq!(e, missing);
    let echo = s.result("tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "x"}, "_meta": plain}));
    assert_eq!(text_of(&echo), "x");

    // A version it does not know: -32022 with the supported list; no _meta: -32602; no ping.
    let e = s.error("tools/list", serde_json::json!({"_meta": modern_meta("2099-01-01", true)}));
    assert_eq!(e["code"], -32022, "{e}");
    assert_eq!(e["data"], serde_json::json!({"requested": "2099-01-01", "supported": RMCP_VERSIONS}));
    assert_eq!(s.error("tools/list", serde_json::json!({}))["code"], -32602);
    assert_eq!(
        s.error("ping", serde_json::json!({"_meta": ext})),
        serde_json::json!({"code": -32601, "message": "ping"})
    );
    assert!(s.notifications.is_empty(), "{:?}", s.notifications);

    // It exits at the end of its input.
    drop(s.stdin);
    assert!(s.proc.finish(Duration::from_secs(10)), "no clean exit at EOF:\n{}", s.proc.output());
}

#[test]
fn rmcp_server_is_dual_era_an_initialize_opens_a_legacy_session_over_stdio() {
    // initialize answers every legacy version it is asked for, and 2025-11-25 for anything
    // else (2026-07-28 has no handshake). It declares the extension in legacy sessions too.
    for (asked, answered) in
        RMCP_VERSIONS.iter().zip(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2025-11-25"])
    {
        let mut s = RawStdio::start();
        let init = s.result(
            "initialize",
            serde_json::json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert_eq!(
            init,
            serde_json::json!({
                "protocolVersion": answered,
                "capabilities": {"extensions": {TASKS_EXT: {}}, "tools": {}},
                "serverInfo": {"name": "taskgate-interop-rmcp-server", "version": "0.1.0"},
            }),
            "initialize at {asked}"
        );
    }

    let mut s = RawStdio::start();
    // A server/discover first does not choose the era; the initialize after it does.
    let discover = s.result("server/discover", serde_json::json!({"_meta": modern_meta("2026-07-28", true)}));
    assert_eq!(discover["supportedVersions"], serde_json::json!(RMCP_VERSIONS));
    s.result(
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    s.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

    // Legacy results carry no resultType.
    let tools = s.result("tools/list", serde_json::json!({}));
    assert!(tools.get("resultType").is_none(), "{tools}");
    assert_eq!(tools["tools"].as_array().unwrap().len(), 4);
    assert_eq!(s.result("ping", serde_json::json!({})), serde_json::json!({}));

    // slow in a legacy session: a plain call with progress per step.
    let slow = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.3, "steps": 3}, "_meta": {"progressToken": "p1"}}),
    );
    assert_eq!(
        slow,
        serde_json::json!({"content": [{"type": "text", "text": "slow done after 3 steps"}], "isError": false})
    );
    let progress: Vec<serde_json::Value> = std::mem::take(&mut s.notifications);
    assert_eq!(
        progress,
        (1..=3)
            .map(|i| serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                "progressToken": "p1", "progress": f64::from(i), "total": 3.0, "message": format!("step {i} of 3"),
            }}))
            .collect::<Vec<_>>()
    );
    // A 2025-11-25 task-augmented call is served plainly: rmcp has no 2025-11-25 tasks.
    let augmented = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1, "steps": 1}, "task": {"ttl": 60000}}),
    );
    assert_eq!(text_of(&augmented), "slow done after 1 steps");
    assert!(augmented.get("task").is_none(), "{augmented}");
    // tasks/*: -32021 for a session whose initialize did not declare the extension;
    // tasks/result and tasks/list: -32601.
    let e = s.error("tasks/get", serde_json::json!({"taskId": "x"}));
    assert_eq!(e["code"], -32021, "{e}");
    assert_eq!(s.error("tasks/result", serde_json::json!({"taskId": "x"}))["code"], -32601);
    assert_eq!(s.error("tasks/list", serde_json::json!({}))["code"], -32601);
    let ask = s.result("tools/call", serde_json::json!({"name": "ask", "arguments": {"question": "q"}}));
    assert_eq!(ask["isError"], true, "{ask}");

    // notifications/cancelled stops a plain call: no response, no more progress.
    s.next_id += 1;
    let id = s.next_id;
    s.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"seconds": 20, "steps": 20}, "_meta": {"progressToken": "p2"},
    }}));
    let first = s.recv(Duration::from_secs(10)).expect("a first progress");
    assert_eq!(first["params"]["progressToken"], "p2", "{first}");
    s.send(&serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}));
    let mut after = Vec::new();
    while let Some(m) = s.recv(Duration::from_millis(1500)) {
        after.push(m);
    }
    // At most a progress already in flight when the cancellation arrived.
    assert!(after.len() <= 1 && after.iter().all(|m| m["method"] == "notifications/progress"), "{after:?}");
    let stats = s.result("tools/call", serde_json::json!({"name": "stats", "arguments": {}}));
    let counters: serde_json::Value = serde_json::from_str(text_of(&stats)).unwrap();
    assert_eq!(counters["slow_cancelled"], 1, "{counters}");

    // In a legacy session, a request whose own _meta names 2026-07-28 is served as modern.
    let modern = s.result(
        "tools/call",
        serde_json::json!({"name": "slow", "arguments": {"seconds": 0.1, "steps": 1}, "_meta": modern_meta("2026-07-28", true)}),
    );
    assert_eq!(modern["resultType"], "task", "{modern}");
}

#[test]
fn rmcp_server_over_streamable_http_serves_stateless_task_requests_and_legacy_sessions() {
    let mut p = Proc::spawn(Command::new(rmcp_server()).args(["--http", "0"]));
    let port: u16 = p.wait_for("listening ").split_whitespace().last().unwrap().parse().unwrap();
    let ext = modern_meta("2026-07-28", true);
    let modern = |method: &'static str, name: Option<&'static str>| {
        let mut h = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
        if let Some(n) = name {
            h.push(("mcp-name", n));
        }
        h
    };
    let call = |id: i64, method: &str, params: serde_json::Value| serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});

    // Stateless 2026-07-28: each POST answered on an event stream with the response alone,
    // no session id.
    let (status, head, messages) = rmcp_http_post(
        port,
        &modern("server/discover", None),
        &call(1, "server/discover", serde_json::json!({"_meta": ext})),
    );
    assert_eq!(status, 200, "{head}");
    assert!(head.contains("content-type: text/event-stream") && !head.contains("mcp-session-id"), "{head}");
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["result"]["capabilities"]["extensions"], serde_json::json!({TASKS_EXT: {}}));

    let slow = serde_json::json!({"name": "slow", "arguments": {"seconds": 0.3, "steps": 2}, "_meta": ext});
    let (status, _, messages) = rmcp_http_post(port, &modern("tools/call", Some("slow")), &call(2, "tools/call", slow));
    assert_eq!(status, 200);
    assert_eq!(messages[0]["result"]["resultType"], "task", "{messages:?}");
    let task_id = messages[0]["result"]["taskId"].as_str().unwrap().to_string();
    // The task outlives its request: later POSTs (new connections) find it.
    let mut last = serde_json::Value::Null;
    let done = pace::until(Duration::from_secs(10), || {
        let get = call(3, "tasks/get", serde_json::json!({"taskId": task_id, "_meta": ext}));
        let mut headers = modern("tasks/get", None);
        headers.push(("mcp-name", &task_id));
        let (status, _, messages) = rmcp_http_post(port, &headers, &get);
        assert_eq!(status, 200, "{messages:?}");
        last = messages[0]["result"].clone();
        (last["status"] == "completed").then(|| last.clone())
    });
    let done = done.unwrap_or_else(|| panic!("not completed within 10 s: {last}"));
    assert_eq!(text_of(&done["result"]), "slow done after 2 steps");

    // Header checks: HTTP 400 with a JSON-RPC -32020 body.
    let echo = call(4, "tools/call", serde_json::json!({"name": "echo", "arguments": {"text": "a"}, "_meta": ext}));
    for (headers, message) in [
        (vec![], "request _meta protocolVersion requires MCP-Protocol-Version header"),
        (vec![("mcp-protocol-version", "2026-07-28")], "missing required Mcp-Method header"),
        (modern("tools/call", Some("slow")), "Mcp-Name header `slow` does not match body value `echo`"),
        (
            vec![("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/call"), ("mcp-name", "echo")],
            "MCP-Protocol-Version header (2025-11-25) does not match request _meta protocolVersion (2026-07-28)",
        ),
    ] {
        let (status, head, messages) = rmcp_http_post(port, &headers, &echo);
        assert_eq!(status, 400, "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(messages[0]["error"], serde_json::json!({"code": -32020, "message": message}));
    }

    // initialize opens a legacy session (Mcp-Session-Id) on the same endpoint.
    let init = call(
        5,
        "initialize",
        serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let (status, head, messages) = rmcp_http_post(port, &[], &init);
    assert_eq!(status, 200);
    assert!(head.contains("mcp-session-id: "), "{head}");
    assert_eq!(messages[0]["result"]["protocolVersion"], "2025-11-25", "{messages:?}");
    p.stop();
}
