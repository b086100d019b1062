//! Shared links (`share = true`), what review found must not cross from one session to
//! another: late server requests of a call given up on, tasks after a relink, notifications
//! sent on another session's call, answers to another's server request, tokens of any type,
//! subscriptions, and shutdown during a link's backoff. The helpers both files use are in
//! tests/common/shared_links.rs.

use crate::common;
use crate::common::shared_links as links;

use common::*;
use links::*;
use serde_json::{Value, json};
use std::sync::Arc;

// ---- review: what must not cross from one session to another ----

/// `late` notes its id and, once `$LOG.go` exists, goes on serving the call as if nobody had
/// told it to stop: it asks for sampling and logs, then answers `wait`'s call (its id in
/// `$LOG.a`). `wait` only notes its id.
const LATE_ARMS: &str = r#"
    late) echo "late $id" >> "$LOG"
        ( for _ in $(seq 1000); do [ -f "$LOG.go" ] && break; sleep 0.01; done
          printf '{"jsonrpc":"2.0","id":"s9","method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"for B only"}}],"maxTokens":5}}\n'
          printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"of B only"}}\n'
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}\n' "$(cat "$LOG.a")" ) &
        ;;
    wait) echo "$id" > "$LOG.a"; echo "wait $id" >> "$LOG" ;;
"#;

/// B's call is given up on (B cancels it, or B's session ends) while the server still serves
/// it; then A's call is the only one in flight when the server asks for B's.
async fn late_request_of_a_call_given_up_on(end_session: bool) {
    let script = StdioScript::new(LATE_ARMS);
    let log = script.path().with_file_name("log");
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "late", "arguments": {}}});
    let b_stream = b.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    eventually("B's call reached the upstream", async || log_lines(&log).iter().any(|l| l.starts_with("late"))).await;
    if end_session {
        assert_eq!(b.delete().await, 200);
    } else {
        assert_eq!(b.notify("notifications/cancelled", json!({"requestId": 2})).await, 202);
    }
    let (out, ()) = tokio::join!(a.request_owned("tools/call", json!({"name": "wait", "arguments": {}})), async {
        eventually("A's call reached the upstream", async || log_lines(&log).iter().any(|l| l.starts_with("wait")))
            .await;
        std::fs::write(log.with_extension("go"), "").unwrap();
    });
    assert_eq!(out.result()["content"], json!([]), "{}", out.response);
    assert!(out.others.is_empty(), "A is asked nothing and told nothing of B's call: {:?}", out.others);
    drop(b_stream);
}

#[tokio::test]
async fn a_server_request_for_a_cancelled_call_is_not_put_to_another_session() {
    late_request_of_a_call_given_up_on(false).await;
}

#[tokio::test]
async fn a_server_request_for_the_call_of_an_ended_session_is_not_put_to_another_session() {
    late_request_of_a_call_given_up_on(true).await;
}

/// A task server whose task ids start again with each upstream session (`task-1`, ...), as
/// a restarted server's do; `die` ends the upstream session (HTTP 404). A task's status
/// message and result name who created it.
async fn renumbering_task_server() -> Scripted {
    let owners: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    Scripted::start(move |req| {
        let task = |id: &str, msg: &str| {
            json!({"taskId": id, "status": "working", "statusMessage": msg, "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100})
        };
        let owner_of = |id: &Value| -> String {
            let n: usize = id.as_str().and_then(|s| s.strip_prefix("task-")).and_then(|n| n.parse().ok()).unwrap_or(0);
            owners.lock().unwrap().get(n.wrapping_sub(1)).cloned().unwrap_or_default()
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => {
                owners.lock().unwrap().clear();
                init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}))
            }
            "tools/list" => vec![reply(
                req,
                json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}},
                    {"name": "die", "inputSchema": {"type": "object"}}]}),
            )],
            "tools/call" if req["params"]["name"] == "die" => vec![Step::Plain(404, vec![], String::new())],
            "tools/call" => {
                let mut owners = owners.lock().unwrap();
                owners.push(req["params"]["arguments"]["who"].as_str().unwrap_or("?").to_string());
                let id = format!("task-{}", owners.len());
                vec![reply(req, json!({"task": task(&id, &format!("for {}", owners.last().unwrap()))}))]
            }
            "tasks/get" => {
                let who = owner_of(&req["params"]["taskId"]);
                vec![reply(req, task(req["params"]["taskId"].as_str().unwrap_or(""), &format!("for {who}")))]
            }
            "tasks/result" => {
                let who = owner_of(&req["params"]["taskId"]);
                vec![reply(req, json!({"content": [{"type": "text", "text": format!("result for {who}")}]}))]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

#[tokio::test]
async fn after_a_relink_a_session_cannot_reach_another_sessions_task_of_an_id_it_once_had() {
    let up = renumbering_task_server().await;
    let gw =
        start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", shared(&http_upstream("up", &up.url()))))
            .await;
    let (mut a, mut b) = (session(&gw, "2025-11-25").await, session(&gw, "2025-11-25").await);
    let job = |who: &str| json!({"name": "job", "arguments": {"who": who}, "task": {"ttl": 60000}});
    assert_eq!(a.request("tools/call", job("A")).await.result()["task"]["taskId"], "task-1");
    // The upstream session ends; the next request opens another, where ids start again.
    let died = a.request("tools/call", json!({"name": "die", "arguments": {}})).await;
    assert_eq!(died.error_code(), -32000, "{}", died.response);
    assert_eq!(b.request("tools/call", job("B")).await.result()["task"]["taskId"], "task-1");
    assert_eq!(calls_to(&up, "initialize").len(), 2, "relinked");
    // task-1 is B's now: A's was on the lost link.
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let out = a.request(method, json!({"taskId": "task-1"})).await;
        assert_eq!(out.error_code(), -32602, "{method}: A must not reach B's task: {}", out.response);
    }
    let listed = a.request("tasks/list", json!({})).await;
    assert!(!listed.response.to_string().contains("for B"), "A's listing shows B's task: {}", listed.response);
    assert_eq!(
        b.request("tasks/result", json!({"taskId": "task-1"})).await.result()["content"][0]["text"],
        "result for B"
    );
}

/// The next message on a GET stream, if one comes within 5 s.
async fn within(events: &mut SseReader) -> Option<Value> {
    tokio::time::timeout(std::time::Duration::from_secs(5), next(events)).await.ok()
}

/// `change` tells, on the call's own stream, that the tools changed and that file:///a was
/// updated, then answers.
async fn changing_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}})),
        "tools/call" => vec![
            Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            Step::Send(
                json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///a"}}),
            ),
            reply(req, json!({"content": []})),
        ],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn list_changes_and_resource_updates_sent_on_one_sessions_call_reach_the_sessions_they_are_for() {
    let up = changing_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (mut a, mut b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    assert_eq!(b.request("resources/subscribe", json!({"uri": "file:///a"})).await.result(), &json!({}));
    let mut b_get = SseReader::new(b.get_raw(&[]).await.into_body());
    let out = a.request("tools/call", json!({"name": "change", "arguments": {}})).await;
    assert!(
        !out.others.iter().any(|m| m["method"] == "notifications/resources/updated"),
        "A did not subscribe to file:///a: {:?}",
        out.others
    );
    let first = within(&mut b_get).await;
    assert_eq!(
        first.as_ref().map(|m| m["method"].clone()),
        Some(json!("notifications/tools/list_changed")),
        "B hears the list change"
    );
    let second = within(&mut b_get).await;
    assert_eq!(
        second.as_ref().map(|m| m["params"]["uri"].clone()),
        Some(json!("file:///a")),
        "B, the subscriber, hears the update"
    );
}

#[tokio::test]
async fn a_session_that_ends_leaves_no_server_request_of_its_unanswered_upstream() {
    let up = asking_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let a = session(&gw, "2025-06-18").await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask", "arguments": {"who": "A"}}});
    let a_stream = a.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    let mut events = SseReader::new(a_stream.into_body());
    assert_eq!(next(&mut events).await["method"], "sampling/createMessage");
    // A's client goes away without answering.
    assert_eq!(a.delete().await, 200);
    eventually("the upstream's sampling request answered", async || {
        up.received.lock().unwrap().iter().any(|m| m.get("method").is_none() && m["id"] == "ask-A")
    })
    .await;
    let answer = up.received.lock().unwrap().iter().find(|m| m.get("method").is_none() && m["id"] == "ask-A").cloned();
    assert!(answer.unwrap().get("error").is_some(), "refused: nobody can answer it now");
}

#[tokio::test]
async fn shutdown_does_not_wait_out_the_backoff_of_a_shared_link_that_keeps_dying() {
    let (seen, _default) = common::spans::Seen::install();
    let (script, log) = script();
    let gw = start_gateway(&shared_with("drain_timeout = \"200ms\"\n", &table(&script, &log))).await;
    let mut a = session(&gw, "2025-06-18").await;
    // Each death within 30 s of the last doubles the wait before the next link: 100 ms, then
    // 200, ... 3.2 s before the seventh.
    for _ in 0..6 {
        assert_eq!(a.request("tools/call", json!({"name": "die", "arguments": {}})).await.error_code(), -32000);
    }
    let waiting =
        tokio::spawn(async move { a.request_owned("tools/call", json!({"name": "pid", "arguments": {}})).await });
    // The seventh call is being served: it waits for the link, in the backoff.
    eventually("the seventh call reached its session", async || seen.count("rpc_request", "method=tools/call") == 7)
        .await;
    // Past drain_timeout, shutdown is the sessions' end: not the rest of the backoff, and no
    // new link opened to be closed at once.
    let started = std::time::Instant::now();
    gw.server.shutdown().await;
    assert!(started.elapsed() < std::time::Duration::from_millis(1500), "shutdown took {:?}", started.elapsed());
    // The request fails, or its connection closed with the gateway: no new link opened.
    if let Ok(out) = waiting.await {
        assert!(out.response.get("error").is_some(), "no new link during shutdown: {}", out.response);
    }
}

#[tokio::test]
async fn a_subscription_the_upstream_refuses_is_held_by_no_session() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"resources": {"subscribe": true}})),
        "resources/subscribe" => vec![
            Step::Sleep(300),
            Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(),
                "error": {"code": -32602, "message": "no such resource"}})),
        ],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (mut a, mut b, mut c) =
        (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let sub = json!({"uri": "file:///nope"});
    // B subscribes while the upstream has not yet answered A's subscribe, which it refuses.
    let (ra, rb) = tokio::join!(a.request("resources/subscribe", sub.clone()), async {
        eventually("A's subscribe reached the upstream", async || calls_to(&up, "resources/subscribe").len() == 1)
            .await;
        b.request("resources/subscribe", sub.clone()).await
    });
    assert_eq!(ra.error_code(), -32602, "{}", ra.response);
    assert_eq!(rb.error_code(), -32602, "B is not told it holds what the upstream refused: {}", rb.response);
    // Nobody holds it: the next subscriber asks the upstream again.
    let rc = c.request("resources/subscribe", sub).await;
    assert_eq!(rc.error_code(), -32602, "{}", rc.response);
    assert_eq!(calls_to(&up, "resources/subscribe").len(), 3);
}

#[tokio::test]
async fn a_listing_cursor_past_every_task_gets_an_empty_page() {
    let up = task_server().await;
    let gw =
        start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", shared(&http_upstream("up", &up.url()))))
            .await;
    let mut a = session(&gw, "2025-11-25").await;
    let created = a.request("tools/call", json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}})).await;
    assert_eq!(created.result()["task"]["taskId"], "task-1");
    for cursor in [format!("up:{}", usize::MAX), format!("up:{}", usize::MAX - 1)] {
        let out = a.request("tasks/list", json!({"cursor": cursor})).await;
        assert_eq!(out.result(), &json!({"tasks": []}), "{cursor}: {}", out.response);
    }
    assert_eq!(a.request("tasks/list", json!({"cursor": "up:x"})).await.error_code(), -32602);
}

/// `mktask` answers a task-augmented call with a task (`t-<id>`) and notes the link's token
/// it carried in `$LOG.tok`; `asklater` notes its id, and once `$LOG.go` exists asks for
/// sampling under that token (the task's, as a server may while the task runs), then
/// answers the call.
const TOKEN_ARMS: &str = r#"
    mktask) sed -n 's/.*"progressToken":"\([^"]*\)".*/\1/p' <<<"$line" > "$LOG.tok"
        reply "{\"task\":{\"taskId\":\"t-$id\",\"status\":\"working\",\"createdAt\":\"2026-01-01T00:00:00Z\",\"lastUpdatedAt\":\"2026-01-01T00:00:00Z\",\"ttl\":60000}}" ;;
    asklater) echo "$id" > "$LOG.a"; echo "asklater $id" >> "$LOG"
        ( for _ in $(seq 1000); do [ -f "$LOG.go" ] && break; sleep 0.01; done
          printf '{"jsonrpc":"2.0","id":"s7","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"_meta":{"progressToken":"%s"}}}\n' "$(cat "$LOG.tok")"
          printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}\n' "$(cat "$LOG.a")" ) &
        ;;
"#;

#[tokio::test]
async fn a_server_request_carrying_a_tasks_token_goes_to_that_session_even_with_one_other_call_in_flight() {
    let script = StdioScript::new(TOKEN_ARMS);
    let log = script.path().with_file_name("log");
    let gw = start_gateway(&format!("{}[upstream.tasks]\nhosted = \"never\"\n", shared(&table(&script, &log)))).await;
    let (a, mut b) = (session(&gw, "2025-11-25").await, session(&gw, "2025-11-25").await);
    let mut b_get = SseReader::new(b.get_raw(&[]).await.into_body());
    let call = json!({"name": "mktask", "arguments": {}, "task": {"ttl": 60000}, "_meta": {"progressToken": "b"}});
    assert!(b.request("tools/call", call).await.result()["task"]["taskId"].is_string());
    // B's task keeps its token; A's call is the only request in flight when the server asks
    // under B's token.
    let (out, ()) = tokio::join!(a.request_owned("tools/call", json!({"name": "asklater", "arguments": {}})), async {
        eventually("A's call reached the upstream", async || !log_lines(&log).is_empty()).await;
        std::fs::write(log.with_extension("go"), "").unwrap();
    });
    assert_eq!(out.result()["content"], json!([]), "{}", out.response);
    assert!(out.others.is_empty(), "A is not asked under B's token: {:?}", out.others);
    let asked = within(&mut b_get).await.expect("B is asked");
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    assert_eq!(asked["params"]["_meta"]["progressToken"], "b", "under B's own token: {asked}");
}

#[tokio::test]
async fn tokens_of_any_type_and_of_the_links_own_form_stay_each_sessions_own() {
    let up = slow_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (a, b, c, d) = (
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
        session(&gw, "2025-06-18").await,
    );
    // The link's tokens are "tg-<its request id>": these are what some of them will be.
    let tokens = [json!(7), json!("7"), json!("tg-1"), json!("tg-3")];
    let call =
        |who: &str, tok: &Value| json!({"name": "slow", "arguments": {"who": who}, "_meta": {"progressToken": tok}});
    let (ra, rb, rc, rd) = tokio::join!(
        a.request_owned("tools/call", call("A", &tokens[0])),
        b.request_owned("tools/call", call("B", &tokens[1])),
        c.request_owned("tools/call", call("C", &tokens[2])),
        d.request_owned("tools/call", call("D", &tokens[3])),
    );
    for ((who, out), tok) in [("A", ra), ("B", rb), ("C", rc), ("D", rd)].into_iter().zip(&tokens) {
        assert_eq!(text(&out), format!("done for {who}"));
        assert_eq!(out.progress(), vec![1.0, 2.0], "{who}: {:?}", out.others);
        assert!(out.others.iter().all(|m| &m["params"]["progressToken"] == tok), "{who}: {:?}", out.others);
    }
}

#[tokio::test]
async fn subscribing_twice_and_unsubscribing_what_one_does_not_hold_change_nothing_upstream() {
    let (script, log) = script();
    let gw = start_gateway(&shared(&table(&script, &log))).await;
    let (mut a, mut b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let sub = json!({"uri": "file:///a"});
    for _ in 0..2 {
        assert_eq!(a.request("resources/subscribe", sub.clone()).await.result(), &json!({}));
    }
    assert_eq!(b.request("resources/unsubscribe", sub.clone()).await.result(), &json!({}));
    assert_eq!(b.request("resources/unsubscribe", json!({"uri": "file:///never"})).await.result(), &json!({}));
    assert_eq!(log_lines(&log).len(), 1, "one subscribe, no unsubscribe: {:?}", log_lines(&log));
    let bad = a.request("resources/subscribe", json!({"uri": 3})).await;
    assert_eq!(bad.error_code(), -32602, "{}", bad.response);
    // A held it once: its one unsubscribe lets go, upstream too.
    assert_eq!(a.request("resources/unsubscribe", sub).await.result(), &json!({}));
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[1].contains("resources/unsubscribe"), "{lines:?}");
}

#[tokio::test]
async fn a_client_cannot_answer_a_server_request_sent_to_another() {
    let up = asking_server().await;
    let gw = start_gateway(&shared(&http_upstream("up", &up.url()))).await;
    let (a, b) = (session(&gw, "2025-06-18").await, session(&gw, "2025-06-18").await);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask", "arguments": {"who": "A"}}});
    let mut events = SseReader::new(a.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await.into_body());
    let asked = next(&mut events).await;
    assert_eq!(asked["method"], "sampling/createMessage");
    // B answers the id A was asked under (B's own numbering would give it the same id).
    let forged = json!({"jsonrpc": "2.0", "id": asked["id"].clone(), "result": {"role": "assistant",
        "content": {"type": "text", "text": "forged by B"}, "model": "b"}});
    assert_eq!(b.post_raw(serde_json::to_vec(&forged).unwrap(), &[]).await.status, 202);
    let r = a.post_raw(serde_json::to_vec(&answer(&asked)).unwrap(), &[]).await;
    assert_eq!(r.status, 202);
    let resp = next(&mut events).await;
    assert_eq!(resp["result"]["content"][0]["text"], "sampled", "A's own answer reached the upstream: {resp}");
}
