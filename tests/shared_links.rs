//! Shared links (`share = true`): one upstream link serves many client sessions. Each session
//! keeps its own ids, progress tokens, server requests, subscriptions, tasks and version, and
//! nothing of one reaches another.

use crate::common;
use crate::common::proc_tree;
use crate::common::shared_links as links;

use common::*;
use links::*;
use serde_json::{Value, json};
use std::sync::Arc;

// ---- ids and progress tokens ----

#[tokio::test]
async fn sessions_with_the_same_ids_and_tokens_share_one_link_and_get_their_own_answers() {
    let up = slow_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (mut a, mut b, mut c) =
        (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let call = |who: &str| json!({"name": "slow", "arguments": {"who": who}, "_meta": {"progressToken": "p"}});
    // Each client's first call has the same id (2) and the same token.
    let (ra, rb, rc) = tokio::join!(
        a.request("tools/call", call("A")),
        b.request("tools/call", call("B")),
        c.request("tools/call", call("C"))
    );
    for (who, out) in [("A", &ra), ("B", &rb), ("C", &rc)] {
        assert_eq!(out.response["id"], 2, "{who}: its own id back");
        assert_eq!(text(out), format!("done for {who}"));
        assert_eq!(out.progress(), vec![1.0, 2.0], "{who}: its own progress, all of it: {:?}", out.others);
        assert!(
            out.others.iter().all(|m| m["params"]["progressToken"] == "p"),
            "{who}: its own token: {:?}",
            out.others
        );
    }
    let calls = calls_to(&up, "tools/call");
    assert_eq!(calls.len(), 3);
    let ids: std::collections::HashSet<String> = calls.iter().map(|m| m["id"].to_string()).collect();
    let tokens: std::collections::HashSet<String> =
        calls.iter().map(|m| m["params"]["_meta"]["progressToken"].to_string()).collect();
    assert_eq!((ids.len(), tokens.len()), (3, 3), "the upstream sees distinct ids and tokens: {calls:?}");
    assert!(!tokens.contains("\"p\""), "the clients' own token never goes up: {tokens:?}");
    assert_eq!(calls_to(&up, "initialize").len(), 1, "one link, initialized once");
    assert_eq!(calls_to(&up, "notifications/initialized").len(), 1);
    let init = &calls_to(&up, "initialize")[0];
    assert_eq!(
        init["params"]["capabilities"],
        json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}}),
        "a shared link declares everything the gateway relays"
    );
}

#[tokio::test]
async fn one_stdio_upstream_serves_every_session_and_each_sees_its_own_progress() {
    // Marked so that only this test's children are counted.
    let marker = format!("SHARED_LINKS_TEST={}", std::process::id());
    let (k, v) = marker.split_once('=').unwrap();
    let table = format!("{}env = {{ {k} = \"{v}\" }}\n", stdio_demo_upstream("up"));
    let gw = start_gateway(&shared_with("max_links = 1\n", &table)).await;
    let mut sessions = vec![];
    for _ in 0..4 {
        sessions.push(session(&gw, "2025-11-25").await);
    }
    let slow = |steps: u64| json!({"name": "slow", "arguments": {"duration_ms": 200, "steps": steps}, "_meta": {"progressToken": 7}});
    let [s3, s4, s5, s6] = &sessions[..] else { unreachable!() };
    let (r3, r4, r5, r6) = tokio::join!(
        s3.request_owned("tools/call", slow(3)),
        s4.request_owned("tools/call", slow(4)),
        s5.request_owned("tools/call", slow(5)),
        s6.request_owned("tools/call", slow(6)),
    );
    for (steps, out) in [(3, r3), (4, r4), (5, r5), (6, r6)] {
        assert_eq!(text(&out), format!("done after {steps} steps"));
        let p = out.progress();
        assert_eq!(p.last(), Some(&(steps as f64)), "its own progress under its own token: {:?}", out.others);
        assert!(out.others.iter().all(|m| m["params"]["progressToken"] == 7 && m["params"]["total"] == steps));
    }
    let children: Vec<i32> = proc_tree::descendants(std::process::id() as i32)
        .into_iter()
        .filter(|&p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|e| e.split(|&b| b == 0).any(|kv| kv == marker.as_bytes()))
        })
        .collect();
    assert_eq!(children.len(), 1, "one demo server for four sessions (and max_links = 1 holds): {children:?}");
}

// ---- server requests ----

/// Sends `b`'s call of `hang` and waits until the script has it; the call's stream, returned,
/// keeps it in flight.
async fn hang_in_flight(b: &HttpMcp, log: &std::path::Path) -> hyper::Response<hyper::body::Incoming> {
    let hang = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hang", "arguments": {}}});
    let stream = b.post_streaming(serde_json::to_vec(&hang).unwrap(), &[]).await;
    eventually("B's call reached the upstream", async || log_lines(log).len() == 1).await;
    stream
}

#[tokio::test]
async fn a_server_request_goes_to_the_session_that_caused_it_and_only_if_its_client_can_answer() {
    let up = asking_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let no_sampling = session_with(&gw, "2025-06-18", json!({"roots": {}})).await;
    let ask = |who: &str| json!({"name": "ask", "arguments": {"who": who}});
    let (ra, rb, rc) = tokio::join!(
        a.request_owned("tools/call", ask("A")),
        b.request_owned("tools/call", ask("B")),
        no_sampling.request_owned("tools/call", ask("C")),
    );
    for (who, out) in [("A", &ra), ("B", &rb)] {
        assert_eq!(text(out), "sampled", "{who}");
        let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "sampling/createMessage").collect();
        assert_eq!(asked.len(), 1, "{who} was asked once, on its own call's stream: {:?}", out.others);
    }
    // The link declared sampling for all its clients; this one has none: refused upstream.
    assert_eq!(text(&rc), "refused: -32601 the client does not support sampling/createMessage");
    assert!(rc.others.is_empty(), "{:?}", rc.others);
}

#[tokio::test]
async fn a_server_request_that_relates_to_no_session_is_refused_upstream_and_a_ping_answered() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    // A line stream says nothing of which request roots/list serves, and with B's call in
    // flight too it cannot be told by elimination: no client is asked.
    let _b_stream = hang_in_flight(&b, &log).await;
    let out = a.request("tools/call", json!({"name": "roots", "arguments": {}})).await;
    let answer = &out.result()["answer"];
    assert_eq!(answer["id"], "r1");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("shared by many clients"), "{answer}");
    assert!(out.others.is_empty(), "{:?}", out.others);
    // A ping is the gateway's to answer: it is the server's client.
    let out = a.request("tools/call", json!({"name": "ping", "arguments": {}})).await;
    assert_eq!(out.result()["answer"], json!({"jsonrpc": "2.0", "id": "p1", "result": {}}));
}

#[tokio::test]
async fn a_server_request_carrying_a_requests_token_goes_to_that_session_with_the_clients_token() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    // B's request stays in flight: with two, a line stream's server request cannot be placed
    // by elimination, only by the link's token it carries.
    let _b_stream = hang_in_flight(&b, &log).await;
    let out =
        a.request("tools/call", json!({"name": "tokask", "arguments": {}, "_meta": {"progressToken": "p"}})).await;
    let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "sampling/createMessage").collect();
    assert_eq!(asked.len(), 1, "{:?}", out.others);
    assert_eq!(asked[0]["params"]["_meta"]["progressToken"], "p", "the client sees its own token: {}", asked[0]);
    assert_eq!(out.result()["answer"]["result"]["content"]["text"], "sampled", "{}", out.response);
}

// ---- notifications tied to no request ----

#[tokio::test]
async fn list_changes_reach_every_session_and_other_unrelated_notifications_none() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let mut a_get = SseReader::new(a.get_raw(&[]).await.into_body());
    let mut b_get = SseReader::new(b.get_raw(&[]).await.into_body());
    let out = a.request("tools/call", json!({"name": "announce", "arguments": {}})).await;
    assert!(out.others.is_empty(), "not the custom notification: {:?}", out.others);
    // With no request in flight, the server logs, then changes its list.
    std::fs::write(log.with_extension("go"), "").unwrap();
    // What comes first on each GET stream is the list change: the log and the custom
    // notification before it went to nobody.
    for (who, get) in [("A", &mut a_get), ("B", &mut b_get)] {
        assert_eq!(next(get).await["method"], "notifications/tools/list_changed", "{who}");
    }
}

#[tokio::test]
async fn resource_updates_reach_only_subscribers_and_the_upstream_hears_each_uri_once() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, mut b, mut c, d) = (
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
    );
    let sub = |uri: &str| json!({"uri": uri});
    for (s, uri) in [(&mut a, "file:///a"), (&mut b, "file:///b"), (&mut c, "file:///a")] {
        assert_eq!(s.request("resources/subscribe", sub(uri)).await.result(), &json!({}));
    }
    assert_eq!(c.request("resources/unsubscribe", sub("file:///a")).await.result(), &json!({}));
    assert_eq!(log_lines(&log).len(), 2, "one subscribe per uri: {:?}", log_lines(&log));
    let mut gets = vec![];
    for s in [&a, &b, &c, &d] {
        gets.push(SseReader::new(s.get_raw(&[]).await.into_body()));
    }
    a.request("tools/call", json!({"name": "touch", "arguments": {}})).await;
    let firsts: Vec<Value> = futures_util::future::join_all(gets.iter_mut().map(next)).await;
    assert_eq!(firsts[0]["params"]["uri"], "file:///a", "{}", firsts[0]);
    assert_eq!(firsts[1]["params"]["uri"], "file:///b", "{}", firsts[1]);
    for f in &firsts[2..] {
        assert_eq!(f["method"], "notifications/resources/list_changed", "no update for a non-subscriber: {f}");
    }
    for g in &mut gets[..2] {
        assert_eq!(next(g).await["method"], "notifications/resources/list_changed");
    }
    // The last subscriber of a uri leaves (its session ends): the upstream is told, once.
    assert_eq!(a.delete().await, 200);
    assert_eq!(b.delete().await, 200);
    eventually("both uris unsubscribed upstream", async || log_lines(&log).len() == 4).await;
    let lines = log_lines(&log);
    for (i, (method, uri)) in [("subscribe", "a"), ("subscribe", "b")].iter().enumerate() {
        assert!(lines[i].contains(&format!("resources/{method}")) && lines[i].contains(&format!("file:///{uri}")));
    }
    let unsubscribed: Vec<&String> = lines[2..].iter().filter(|l| l.contains("resources/unsubscribe")).collect();
    assert_eq!(unsubscribed.len(), 2, "{lines:?}");
}

// ---- tasks ----

#[tokio::test]
async fn a_session_sees_only_the_upstream_tasks_it_created() {
    let up = task_server().await;
    let gw =
        start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", shared(&http_upstream("up", &up.url()))))
            .await;
    let (mut a, mut b) = (session(&gw, "2025-11-25").await, session(&gw, "2025-11-25").await);
    let mut old = session(&gw, "2025-06-18").await;
    let mut a_get = SseReader::new(a.get_raw(&[]).await.into_body());
    let mut b_get = SseReader::new(b.get_raw(&[]).await.into_body());
    let created = a.request("tools/call", json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}})).await;
    assert_eq!(created.result()["task"]["taskId"], "task-1");
    assert_eq!(a.request("tasks/get", json!({"taskId": "task-1"})).await.result()["status"], "working");

    // Its status goes to the session that created it only.
    let first = next(&mut a_get).await;
    assert_eq!(
        (first["method"].as_str(), first["params"]["taskId"].as_str()),
        (Some("notifications/tasks/status"), Some("task-1"))
    );
    assert_eq!(next(&mut b_get).await["method"], "notifications/tools/list_changed", "B hears nothing of A's task");

    // To B, A's task does not exist.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let out = b.request(method, json!({"taskId": "task-1"})).await;
        assert_eq!(out.error_code(), -32602, "{method}: {}", out.response);
        let out = old.request(method, json!({"taskId": "task-1"})).await;
        assert_eq!(out.error_code(), -32602, "an old client's {method}: {}", out.response);
    }
    let listed = b.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"], json!([]), "{}", listed.response);

    // A sees it, in a listing served from its own tasks.
    let listed = a.request("tasks/list", json!({})).await;
    let first_page = listed.result().clone();
    let page = match first_page.get("nextCursor").and_then(Value::as_str) {
        Some(cursor) if first_page["tasks"] == json!([]) => {
            a.request("tasks/list", json!({"cursor": cursor})).await.result().clone()
        }
        _ => first_page,
    };
    let ids: Vec<&Value> = page["tasks"].as_array().unwrap().iter().map(|t| &t["taskId"]).collect();
    assert_eq!(ids, vec!["task-1"], "{page}");
    assert!(calls_to(&up, "tasks/list").is_empty(), "a shared link's tasks/list would show every session's tasks");
    assert!(calls_to(&up, "tasks/cancel").is_empty());
    assert!(calls_to(&up, "tasks/result").is_empty());
}

// ---- cancellation, session end, link death ----

#[tokio::test]
async fn a_cancel_reaches_only_the_cancelling_sessions_request() {
    let up = slow_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (a, mut b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"who": "A", "ms": 400}}});
    let a_stream = a.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    let b_call = b.request("tools/call", json!({"name": "slow", "arguments": {"who": "B", "ms": 400}}));
    let cancel = async {
        eventually("both calls reached the upstream", async || calls_to(&up, "tools/call").len() == 2).await;
        assert_eq!(a.notify("notifications/cancelled", json!({"requestId": 2, "reason": "no longer"})).await, 202);
    };
    let (b_out, ()) = tokio::join!(b_call, cancel);
    assert_eq!(b_out.response["id"], 2);
    assert_eq!(text(&b_out), "done for B", "B's request of the same id runs on");
    let body = String::from_utf8_lossy(&read_all(a_stream).await.body).to_string();
    assert!(!body.contains("\"result\""), "nothing more for A's cancelled call: {body}");
    let a_up = calls_to(&up, "tools/call").into_iter().find(|m| m["params"]["arguments"]["who"] == "A").unwrap();
    let cancels = calls_to(&up, "notifications/cancelled");
    assert_eq!(cancels.len(), 1, "{cancels:?}");
    assert_eq!(cancels[0]["params"]["requestId"], a_up["id"], "A's call, by the link's id");
}

#[tokio::test]
async fn a_session_that_ends_leaves_the_link_to_the_others() {
    let up = slow_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (a, mut b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    // A ends with a call in flight: that call is cancelled upstream, and nothing else is.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"who": "A", "ms": 5000}}});
    let _a_stream = a.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    eventually("A's call reached the upstream", async || calls_to(&up, "tools/call").len() == 1).await;
    assert_eq!(a.delete().await, 200);
    let a_up = calls_to(&up, "tools/call")[0]["id"].clone();
    eventually("A's call cancelled upstream", async || {
        calls_to(&up, "notifications/cancelled").iter().any(|m| m["params"]["requestId"] == a_up)
    })
    .await;
    let out = b.request("tools/call", json!({"name": "slow", "arguments": {"who": "B", "ms": 0}})).await;
    assert_eq!(text(&out), "done for B");
    assert_eq!(calls_to(&up, "notifications/cancelled").len(), 1);
    let mut c = session(&gw, "2025-06-18").await;
    assert_eq!(
        text(&c.request("tools/call", json!({"name": "slow", "arguments": {"who": "C", "ms": 0}})).await),
        "done for C"
    );
    assert_eq!(calls_to(&up, "initialize").len(), 1);
    assert!(!up.received_http().contains(&"DELETE".to_string()), "the upstream session lives on");
    // Until the gateway shuts down.
    gw.server.shutdown().await;
    assert_eq!(up.received_http().iter().filter(|m| *m == "DELETE").count(), 1);
}

#[tokio::test]
async fn a_link_that_dies_fails_every_sessions_requests_and_the_next_request_relinks() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, b, c) =
        (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let pid = text(&a.request("tools/call", json!({"name": "pid", "arguments": {}})).await);
    let hang = json!({"name": "hang", "arguments": {}});
    let (ra, rb, rc) =
        tokio::join!(a.request_owned("tools/call", hang.clone()), b.request_owned("tools/call", hang), async {
            eventually("both calls reached the upstream", async || log_lines(&log).len() == 2).await;
            c.request_owned("tools/call", json!({"name": "die", "arguments": {}})).await
        });
    for (who, out) in [("A", &ra), ("B", &rb), ("C", &rc)] {
        assert_eq!(out.error_code(), -32000, "{who}: {}", out.response);
        assert!(out.response["error"]["message"].as_str().unwrap().contains("upstream 'up'"), "{}", out.response);
    }
    let again = text(&a.request("tools/call", json!({"name": "pid", "arguments": {}})).await);
    assert!(!again.is_empty() && again != pid, "a fresh child: {pid} then {again}");
    let mut b = b;
    assert_eq!(text(&b.request("tools/call", json!({"name": "pid", "arguments": {}})).await), again, "shared again");
}

// ---- versions ----

#[tokio::test]
async fn clients_of_different_versions_on_one_shared_link_each_get_their_own() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": "t", "title": "The Tool", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}, "icons": [{"src": "https://example.com/t.png"}],
            "outputSchema": {"type": "object"}}]}),
        )],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let mut clients = vec![];
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize(v).await;
        assert_eq!(init["protocolVersion"], v);
        clients.push((v, c));
    }
    for (v, c) in &mut clients {
        let list = c.request("tools/list", json!({})).await;
        let tool = &list.result()["tools"][0];
        assert_eq!(tool.get("annotations").is_some(), *v >= "2025-03-26", "{v}: {tool}");
        assert_eq!(tool.get("title").is_some(), *v >= "2025-06-18", "{v}: {tool}");
        assert_eq!(tool.get("icons").is_some(), *v >= "2025-11-25", "{v}: {tool}");
    }
    let inits = calls_to(&up, "initialize");
    assert_eq!(inits.len(), 1);
    assert_eq!(inits[0]["params"]["protocolVersion"], "2025-11-25");
}

// ---- hosted and bridged tasks over a shared link ----

#[tokio::test]
async fn hosted_tasks_run_on_a_shared_link_each_with_its_own_progress() {
    let gw = start_gateway(&shared(&builtin_upstream("up"))).await;
    let (mut a, mut b) = (session(&gw, "2025-11-25").await, session(&gw, "2025-11-25").await);
    let run = async |c: &mut HttpMcp, steps: u64| {
        let call = json!({"name": "slow", "arguments": {"duration_ms": 300, "steps": steps}, "task": {"ttl": 60000},
            "_meta": {"progressToken": "p"}});
        let created = c.request("tools/call", call).await;
        let id = created.result()["task"]["taskId"].clone();
        let result = c.request("tasks/result", json!({"taskId": id})).await;
        (created, result)
    };
    let ((ca, ra), (cb, rb)) = tokio::join!(run(&mut a, 3), run(&mut b, 4));
    assert_ne!(ca.result()["task"]["taskId"], cb.result()["task"]["taskId"]);
    for (steps, out) in [(3, ra), (4, rb)] {
        assert_eq!(text(&out), format!("done after {steps} steps"));
        let progress: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "notifications/progress").collect();
        assert!(
            progress.iter().all(|m| m["params"]["progressToken"] == "p" && m["params"]["total"] == steps),
            "{progress:?}"
        );
        let want: Vec<f64> = (1..=steps).map(|i| i as f64).collect();
        assert_eq!(out.progress(), want, "all of its own, on its tasks/result stream");
    }
}

/// A server with tasks whose `research` must run as one: `tasks/result` sends progress
/// under the token the task's call carried, then the report on the call's topic.
async fn required_task_server() -> Scripted {
    let calls: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    Scripted::start(move |req| {
        let task = |id: &str, status: &str| {
            json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100})
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
            "tools/list" => vec![reply(
                req,
                json!({"tools": [{"name": "research", "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "required"}}]}),
            )],
            "tools/call" if req["params"].get("task").is_some() => {
                let mut calls = calls.lock().unwrap();
                calls.push(req.clone());
                vec![reply(req, json!({"task": task(&format!("task-{}", calls.len()), "working")}))]
            }
            "tasks/get" => vec![reply(req, task(req["params"]["taskId"].as_str().unwrap(), "working"))],
            "tasks/result" => {
                let n: usize = req["params"]["taskId"].as_str().unwrap()[5..].parse().unwrap();
                let call = calls.lock().unwrap()[n - 1].clone();
                let tok = call["params"]["_meta"]["progressToken"].clone();
                let topic = call["params"]["arguments"]["topic"].as_str().unwrap().to_string();
                vec![
                    progress(&tok, 1.0),
                    Step::Sleep(100),
                    progress(&tok, 2.0),
                    reply(req, json!({"content": [{"type": "text", "text": format!("report on {topic}")}]})),
                ]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

#[tokio::test]
async fn bridged_calls_run_on_a_shared_link_each_with_its_own_progress() {
    let up = required_task_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (mut a, mut b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let call =
        |topic: &str| json!({"name": "research", "arguments": {"topic": topic}, "_meta": {"progressToken": "p"}});
    let (ra, rb) = tokio::join!(a.request("tools/call", call("otters")), b.request("tools/call", call("owls")));
    for (topic, out) in [("otters", ra), ("owls", rb)] {
        assert_eq!(text(&out), format!("report on {topic}"));
        assert_eq!(
            out.progress(),
            vec![1.0, 2.0],
            "the upstream's progress, under the client's token: {:?}",
            out.others
        );
        assert!(out.others.iter().all(|m| m["params"]["progressToken"] == "p"));
    }
    let tokens: Vec<Value> =
        calls_to(&up, "tools/call").iter().map(|m| m["params"]["_meta"]["progressToken"].clone()).collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1], "the upstream sees two tokens: {tokens:?}");
}

#[tokio::test]
async fn the_stdio_front_serves_its_one_client_over_a_shared_link() {
    let mut c = StdioMcp::start(&shared(&stdio_demo_upstream("up")), "up").await;
    c.initialize("2025-06-18").await;
    let out = c
        .request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 1}}))
        .await;
    assert_eq!(text(&out), "hi");
}
