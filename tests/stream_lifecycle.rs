//! Server requests tied to the one call in flight on a line stream (stdio, builtin), and the
//! life of a 2026-07-28 client's streams: a closed connection is a cancellation at once, a
//! shutdown ends a `subscriptions/listen` stream with its answer, and one client's
//! cancellation takes no other client's questions away.

use crate::common;

use common::modern_client::*;
use common::*;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A stdio upstream whose `roots` asks `roots/list` and whose `ask` asks
/// `elicitation/create`, neither tagged with anything, each answering with what it was told.
const ARMS: &str = r#"
    tools/list) reply '{"tools":[{"name":"roots","inputSchema":{"type":"object"}},{"name":"ask","inputSchema":{"type":"object"}}]}' ;;
    roots) printf '{"jsonrpc":"2.0","id":"r1","method":"roots/list"}\n'
        IFS= read -r answer; reply "{\"content\":[{\"type\":\"text\",\"text\":\"rooted\"}],\"answer\":$answer}" ;;
    ask) printf '{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{"message":"go?","requestedSchema":{"type":"object","properties":{}}}}\n'
        IFS= read -r answer; reply "{\"content\":[{\"type\":\"text\",\"text\":\"asked\"}],\"answer\":$answer}" ;;
"#;

fn tool(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

/// A legacy client with no GET stream: the server's `roots/list` comes on its call's stream
/// (it would wait for a GET stream until `request_timeout` if it belonged to no request).
#[tokio::test]
async fn a_stdio_servers_roots_list_is_its_calls_for_a_legacy_client() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&format!("{}request_timeout = \"5s\"\n", script.upstream("up"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", tool("roots")).await;
    assert_eq!(out.result()["answer"]["result"]["roots"][0]["uri"], "file:///tmp", "{}", out.response);
    assert!(out.others.iter().any(|m| m["method"] == "roots/list"), "{:?}", out.others);
}

/// A 2026-07-28 client: the server's `roots/list` is its request's input, asked with an
/// `InputRequiredResult` and answered in the retry.
#[tokio::test]
async fn a_stdio_servers_roots_list_is_input_required_for_a_modern_client() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&script.upstream("up")).await;
    let c = HttpMcp::new(&gw.url("up"));
    let caps = json!({"roots": {}});
    let (_, r, _) = call(&c, &request(json!(1), "tools/call", tool("roots"), caps.clone())).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let asked = r["result"]["inputRequests"].as_object().unwrap();
    let (key, q) = asked.iter().next().unwrap();
    assert_eq!(q["method"], "roots/list", "{r}");
    let mut retry = request(json!(2), "tools/call", tool("roots"), caps);
    retry["params"]["requestState"] = r["result"]["requestState"].clone();
    retry["params"]["inputResponses"] = json!({key.clone(): {"roots": [{"uri": "file:///srv"}]}});
    let (_, done, _) = call(&c, &retry).await;
    assert_eq!(done["result"]["answer"]["result"]["roots"][0]["uri"], "file:///srv", "{done}");
}

/// A hosted task's call on a stdio link, the only call in flight there: the server's
/// untagged question is the task's (`input_required`, asked on `tasks/result` with the
/// related task), as over HTTP.
#[tokio::test]
async fn a_stdio_servers_question_during_a_hosted_task_is_the_tasks() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&script.upstream("up")).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let created = c.request("tools/call", json!({"name": "ask", "arguments": {}, "task": {"ttl": 60000}})).await;
    let task = created.result()["task"]["taskId"].as_str().expect("a hosted task").to_string();
    eventually("the task waits for input", async || {
        c.request_owned("tasks/get", json!({"taskId": task})).await.result()["status"] == "input_required"
    })
    .await;
    let result = c.request("tasks/result", json!({"taskId": task})).await;
    let q = result.others.iter().find(|m| m["method"] == "elicitation/create").expect("asked on tasks/result");
    assert_eq!(q["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task.as_str(), "{q}");
    assert_eq!(result.result()["answer"]["result"]["action"], "accept", "{}", result.response);
}

fn ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
}

/// One 2026-07-28 client cancels its hosted task; another's question on the same line-stream
/// link still reaches it (as an `InputRequiredResult`), over builtin and stdio alike.
#[tokio::test]
async fn one_modern_clients_cancel_takes_no_others_questions_away() {
    for cfg in [builtin_upstream("demo"), stdio_demo_upstream("demo")] {
        let gw = start_gateway(&cfg).await;
        let (a, b) = (HttpMcp::new(&gw.url("demo")), HttpMcp::new(&gw.url("demo")));
        let slow = json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}});
        let (_, r, _) = call(&a, &request(json!(1), "tools/call", slow, ext())).await;
        let task = r["result"]["taskId"].as_str().expect("a hosted task").to_string();
        let (_, r, _) = call(&a, &request(json!(3), "tasks/cancel", json!({"taskId": task}), ext())).await;
        assert!(r.get("result").is_some(), "{r}");
        eventually("the demo counts the cancelled call", async || {
            let stats = request(json!(9), "resources/read", json!({"uri": "demo://stats"}), json!({}));
            let (_, r, _) = call(&a, &stats).await;
            r["result"]["contents"][0]["text"].as_str().is_some_and(|t| t.contains("\"cancelled\":1"))
        })
        .await;
        let ask = json!({"name": "ask", "arguments": {"question": "colour?"}});
        let (_, r, _) = call(&b, &request(json!(4), "tools/call", ask, json!({"elicitation": {}}))).await;
        assert_eq!(r["result"]["resultType"], "input_required", "{cfg}: {r}");
    }
}

/// What a scripted legacy HTTP server behind the gateway received of `method`.
fn received(up: &Scripted, method: &str) -> Vec<Value> {
    up.received.lock().unwrap().iter().filter(|m| m["method"] == method).cloned().collect()
}

/// Waits for `cond` for at most `within` (shorter than the keep-alive: what is waited for
/// must not need the gateway's next write to the closed connection).
async fn within(within: Duration, what: &str, cond: impl Fn() -> bool) {
    let held = pace::until_async(within, async || cond().then_some(())).await;
    assert!(held.is_some(), "not within {within:?}: {what}");
}

/// A modern POST of `req` on a connection of its own, read up to the end of the response's
/// head; dropping the stream closes the connection.
async fn open_modern_post(gw: &Gw, upstream: &str, req: &Value) -> tokio::net::TcpStream {
    open_modern_post_then(gw, upstream, req, b"").await
}

/// As [`open_modern_post`], the request followed at once by `after` on the same connection
/// (a stray CRLF, the next request pipelined): bytes the server has read but not yet used
/// when the client hangs up.
async fn open_modern_post_then(gw: &Gw, upstream: &str, req: &Value, after: &[u8]) -> tokio::net::TcpStream {
    let body = serde_json::to_string(req).unwrap();
    let mut head = format!(
        "POST /mcp/{upstream} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in mirrored(req) {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let mut tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(&[format!("{head}\r\n{body}").as_bytes(), after].concat()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(STEP, tcp.read(&mut buf)).await.expect("the response's head").unwrap();
        assert!(n > 0, "closed before the head: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200") && text.contains("text/event-stream"), "{text}");
    tcp
}

/// A legacy HTTP server whose `hang` never answers and that takes resource subscriptions.
async fn hanging_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}, "resources": {"subscribe": true}})),
        "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
        "tools/call" => vec![Step::Sleep(60_000)],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

const KEEPALIVE: &str = "[server]\nsse_keepalive = \"30s\"\n";
const WELL_BEFORE: Duration = Duration::from_secs(5);

/// Once the call has reached the upstream, the client's connection closes: the upstream is
/// told to stop that call well before any keep-alive would have noticed.
async fn hang_up_and_see_the_call_cancelled(up: &Scripted, tcp: tokio::net::TcpStream) {
    eventually("the call reached the upstream", async || !received(up, "tools/call").is_empty()).await;
    let up_id = received(up, "tools/call")[0]["id"].clone();
    drop(tcp);
    within(WELL_BEFORE, "the upstream was told to stop", || {
        received(up, "notifications/cancelled").iter().any(|m| m["params"]["requestId"] == up_id)
    })
    .await;
}

/// A 2026-07-28 client's connection closes while its call, which sends nothing, runs: the
/// upstream is told to stop at once, not at the gateway's next keep-alive.
#[tokio::test]
async fn a_closed_modern_call_is_cancelled_at_once() {
    let up = hanging_server().await;
    let gw = start_gateway(&format!("{KEEPALIVE}{}", http_upstream("up", &up.url()))).await;
    let tcp = open_modern_post(&gw, "up", &request(json!(1), "tools/call", tool("hang"), json!({}))).await;
    hang_up_and_see_the_call_cancelled(&up, tcp).await;
}

/// A closed listen stream lets go of what it held upstream at once.
#[tokio::test]
async fn a_closed_listen_stream_unsubscribes_at_once() {
    let up = hanging_server().await;
    let gw = start_gateway(&format!("{KEEPALIVE}{}", http_upstream("up", &up.url()))).await;
    let listen = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["file:///a"]}}),
        json!({}),
    );
    let tcp = open_modern_post(&gw, "up", &listen).await;
    eventually("subscribed upstream", async || !received(&up, "resources/subscribe").is_empty()).await;
    drop(tcp);
    within(WELL_BEFORE, "unsubscribed upstream", || !received(&up, "resources/unsubscribe").is_empty()).await;
}

/// A pipelined request after the call (and a stray CRLF after a listen) sits unread in the
/// server's buffer: the hang-up is still seen at once, not at the next keep-alive's write.
#[tokio::test]
async fn a_hang_up_after_bytes_not_yet_read_is_seen_at_once() {
    let up = hanging_server().await;
    let gw = start_gateway(&format!("{KEEPALIVE}{}", http_upstream("up", &up.url()))).await;
    let ping = b"POST /mcp/up HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\n\r\n";
    let tcp = open_modern_post_then(&gw, "up", &request(json!(1), "tools/call", tool("hang"), json!({})), ping).await;
    hang_up_and_see_the_call_cancelled(&up, tcp).await;
    let listen = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": ["file:///a"]}}),
        json!({}),
    );
    let tcp = open_modern_post_then(&gw, "up", &listen, b"\r\n").await;
    eventually("subscribed upstream", async || !received(&up, "resources/subscribe").is_empty()).await;
    drop(tcp);
    within(WELL_BEFORE, "unsubscribed upstream", || !received(&up, "resources/unsubscribe").is_empty()).await;
}

/// Shutdown ends a listen stream at once with its answer (the empty result, tagged with
/// its subscriptionId), and does not wait for `drain_timeout` because of it.
#[tokio::test]
async fn shutdown_ends_a_listen_stream_with_its_answer() {
    let gw = start_gateway(&format!("[server]\ndrain_timeout = \"120s\"\n{}", builtin_upstream("demo"))).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let listen =
        request(json!("L7"), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
    let (mut events, _ack) = listen_stream(&c, &listen).await;
    let server = gw.server.clone();
    let shutdown = tokio::spawn(async move { server.shutdown().await });
    let (_, end) = events.next().await.expect("the listen's answer");
    assert_eq!(end["id"], "L7", "{end}");
    assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L7", "{end}");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert!(events.next().await.is_none(), "the stream ends after it");
    tokio::time::timeout(STEP, shutdown).await.expect("shutdown does not wait for drain_timeout").unwrap();
}

/// The stdio front too: on SIGTERM a listen ends with its answer before the process exits.
#[tokio::test]
async fn sigterm_ends_a_stdio_listen_with_its_answer() {
    let mut s = StdioMcp::start(&builtin_upstream("demo"), "demo").await;
    let listen =
        request(json!("L9"), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
    s.send(&listen).await;
    let ack = s.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    let pid = s.child.id().expect("running") as libc::pid_t;
    // SAFETY: kill(2) on the process this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let end = s.recv().await;
    assert_eq!(end["id"], "L9", "{end}");
    assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L9", "{end}");
    let status = tokio::time::timeout(STEP, s.child.wait()).await.expect("exits").unwrap();
    assert!(status.success(), "{status}");
}
