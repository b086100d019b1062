//! The live task page (`/tasks`) over the real binary: the page is served without a token,
//! its data routes are not; each principal sees its own tasks and an operator all of them; a
//! cancel needs its header, finds only what the caller sees, and refuses a finished task;
//! `max_viewers` bounds the streams; and the stream shows a task's progress rise and its end.
//! The same page in a real browser is `task_page_browser.rs`.

use crate::common;

use common::gateway_proc::{Proc, start};
use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const CAROL: &str = "carol-token-0123456789abcdef";

/// A gateway process in front of the builtin demo with `server` in its `[server]` table; with
/// `auth`, bearer tokens for alice, bob and carol (an operator of the task page).
async fn gateway(dir: &tempfile::TempDir, server: &str, auth: bool) -> (Proc, String) {
    // With auth carol is an operator, in the `[server.task_page]` table `server` may open.
    let server = match (auth, server.contains("[server.task_page]")) {
        (true, true) => server.replace("[server.task_page]", "[server.task_page]\noperators = [\"carol\"]"),
        (true, false) => format!("{server}\n[server.task_page]\noperators = [\"carol\"]"),
        (false, _) => server.to_string(),
    };
    let mut text = format!("[server]\nlisten = \"127.0.0.1:0\"\n{server}\n");
    if auth {
        text.push_str(&bearer_tokens(dir, &[("alice", ALICE), ("bob", BOB), ("carol", CAROL)]));
    }
    text.push_str("[tasks]\nstore = \"memory\"\n");
    text.push_str(&builtin_upstream("demo"));
    let path = dir.path().join("taskgate.toml");
    std::fs::write(&path, text).unwrap();
    start(&path).await
}

fn at(addr: &str, path: &str, token: Option<&str>) -> HttpMcp {
    let mut c = HttpMcp::new(&format!("http://{addr}{path}"));
    c.bearer = token.map(str::to_string);
    c
}

async fn mcp(addr: &str, token: Option<&str>) -> HttpMcp {
    let mut c = at(addr, "/mcp/demo", token);
    c.initialize("2025-11-25").await;
    c
}

/// Starts a slow task (a minute, unless cancelled) with a progress token; returns its id.
async fn slow_task(c: &mut HttpMcp, duration_ms: u64, steps: u64) -> String {
    let params = json!({
        "name": "slow", "arguments": {"duration_ms": duration_ms, "steps": steps},
        "task": {"ttl": 60000}, "_meta": {"progressToken": "page-1"}
    });
    let out = c.request("tools/call", params).await;
    out.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{}", out.response)).to_string()
}

/// The stream of snapshots the caller with `token` sees.
async fn events(addr: &str, token: Option<&str>) -> SseReader {
    let resp = at(addr, "/tasks/events", token).get_raw(&[]).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    SseReader::new(resp.into_body())
}

async fn snapshot(r: &mut SseReader) -> Value {
    r.next().await.expect("the stream ended").1
}

fn ids(snap: &Value) -> Vec<&str> {
    snap["tasks"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect()
}

async fn cancel(addr: &str, id: &str, token: Option<&str>, header: bool) -> RawResponse {
    let headers: &[(&str, &str)] = if header { &[("x-taskgate-page", "cancel")] } else { &[] };
    at(addr, &format!("/tasks/{id}/cancel"), token).post_raw(Vec::new(), headers).await
}

async fn status_of(c: &mut HttpMcp, id: &str) -> Value {
    let out = c.request("tasks/get", json!({"taskId": id})).await;
    out.result()["status"].clone()
}

#[tokio::test]
async fn the_page_is_served_without_a_token_and_its_data_only_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "", true).await;
    let page = read_all(at(&addr, "/tasks", None).get_raw(&[]).await).await;
    assert_eq!(page.status, 200);
    assert!(page.headers["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(String::from_utf8_lossy(&page.body).contains("/tasks/page.js"));
    assert!(page.headers["content-security-policy"].to_str().unwrap().contains("connect-src 'self'"));
    let js = read_all(at(&addr, "/tasks/page.js", None).get_raw(&[]).await).await;
    assert_eq!(js.status, 200);
    assert!(String::from_utf8_lossy(&js.body).contains("textContent"));

    let url = format!("http://{addr}/.well-known/oauth-protected-resource");
    for token in [None, Some("not-a-token-we-know")] {
        let r = read_all(at(&addr, "/tasks/events", token).get_raw(&[]).await).await;
        assert_eq!(r.status, 401, "{token:?}");
        let challenge = r.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with(&format!("Bearer resource_metadata=\"{url}\"")), "{challenge}");
        let r = cancel(&addr, "0123456789abcdef0123456789abcdef", token, true).await;
        assert_eq!(r.status, 401, "{token:?}");
        assert!(r.headers.contains_key("www-authenticate"));
    }
    // An unknown path under /tasks, and a wrong method.
    assert_eq!(read_all(at(&addr, "/tasks/nothing", Some(ALICE)).get_raw(&[]).await).await.status, 404);
    assert_eq!(at(&addr, "/tasks/events", Some(ALICE)).post_raw(Vec::new(), &[]).await.status, 405);
}

#[tokio::test]
async fn each_principal_sees_its_own_tasks_an_operator_all_and_cancels_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "", true).await;
    let mut alice = mcp(&addr, Some(ALICE)).await;
    let mut bob = mcp(&addr, Some(BOB)).await;
    let a = slow_task(&mut alice, 60_000, 60).await;
    let b = slow_task(&mut bob, 60_000, 60).await;

    let seen = snapshot(&mut events(&addr, Some(ALICE)).await).await;
    assert_eq!(ids(&seen), [a.as_str()], "{seen}");
    let row = &seen["tasks"][0];
    assert_eq!((&row["tool"], &row["owner"], &row["upstream"]), (&json!("slow"), &json!("alice"), &json!("demo")));
    assert_eq!(row["status"], "working");
    assert_eq!(row["ttlMs"], 60000);
    assert!(row["createdAt"].as_u64().unwrap() > 0 && row["expiresAt"].is_null(), "{row}");
    assert_eq!(seen["viewer"], json!({"principal": "alice", "operator": false, "auth": true}));
    assert!(!seen.to_string().contains("principal:"), "no owner key is shown: {seen}");
    let seen = snapshot(&mut events(&addr, Some(BOB)).await).await;
    assert_eq!(ids(&seen), [b.as_str()], "{seen}");
    let seen = snapshot(&mut events(&addr, Some(CAROL)).await).await;
    assert_eq!(ids(&seen), [a.as_str(), b.as_str()], "the operator sees every task: {seen}");
    assert_eq!(seen["viewer"]["operator"], true);

    // Bob cannot cancel alice's task: it is as unknown as an id that never was.
    let theirs = cancel(&addr, &a, Some(BOB), true).await;
    let unknown = cancel(&addr, "0123456789abcdef0123456789abcdef", Some(BOB), true).await;
    assert_eq!((theirs.status, unknown.status), (404, 404));
    assert_eq!(theirs.body, unknown.body, "the same answer as for an unknown id");
    assert_eq!(status_of(&mut alice, &a).await, "working", "alice's task still runs");
    // Without the page's header, not even alice's own.
    let r = cancel(&addr, &a, Some(ALICE), false).await;
    assert_eq!(r.status, 403);
    assert!(r.json()["error"].as_str().unwrap().contains("x-taskgate-page"), "{}", r.json());
    assert_eq!(status_of(&mut alice, &a).await, "working");
    // Alice cancels her own; again, it is finished.
    let r = cancel(&addr, &a, Some(ALICE), true).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let row = r.json();
    assert_eq!((&row["id"], &row["status"]), (&json!(a), &json!("cancelled")));
    assert_eq!(row["statusMessage"], "cancelled from the task page by alice");
    assert!(row["expiresAt"].as_u64().is_some(), "{row}");
    assert_eq!(status_of(&mut alice, &a).await, "cancelled");
    let again = cancel(&addr, &a, Some(ALICE), true).await;
    assert_eq!(again.status, 409);
    assert!(again.json()["error"].as_str().unwrap().contains("already cancelled"));
    // The operator cancels bob's.
    let r = cancel(&addr, &b, Some(CAROL), true).await;
    assert_eq!((r.status, &r.json()["statusMessage"]), (200, &json!("cancelled from the task page by carol")));
    assert_eq!(status_of(&mut bob, &b).await, "cancelled");
}

#[tokio::test]
async fn past_max_viewers_a_viewer_gets_503() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "[server.task_page]\nmax_viewers = 2", false).await;
    let mut first = events(&addr, None).await;
    let mut second = events(&addr, None).await;
    assert_eq!(snapshot(&mut first).await["tasks"], json!([]));
    assert_eq!(snapshot(&mut second).await["tasks"], json!([]));
    let third = read_all(at(&addr, "/tasks/events", None).get_raw(&[]).await).await;
    assert_eq!(third.status, 503);
    assert!(third.json()["error"].as_str().unwrap().contains("max_viewers"));
}

#[tokio::test]
async fn one_principal_cannot_take_every_viewers_place() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "[server.task_page]\nmax_viewers = 4\nmax_viewers_per_principal = 1", true).await;
    let mut first = events(&addr, Some(ALICE)).await;
    assert_eq!(snapshot(&mut first).await["tasks"], json!([]));
    let second = read_all(at(&addr, "/tasks/events", Some(ALICE)).get_raw(&[]).await).await;
    assert_eq!(second.status, 503);
    assert!(second.json()["error"].as_str().unwrap().contains("max_viewers_per_principal"));
    // Bob still has a place; and alice gets hers back once her stream ends.
    let mut bob = events(&addr, Some(BOB)).await;
    assert_eq!(snapshot(&mut bob).await["tasks"], json!([]));
    drop(first);
    eventually("alice's place is given back", async || {
        let r = at(&addr, "/tasks/events", Some(ALICE)).get_raw(&[]).await;
        r.status() == 200
    })
    .await;
}

#[tokio::test]
async fn the_stream_shows_progress_rising_then_the_cancel() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "[server.task_page]\nrefresh = \"50ms\"", false).await;
    let mut c = mcp(&addr, None).await;
    let id = slow_task(&mut c, 20_000, 200).await;
    let mut stream = events(&addr, None).await;
    let mut seen: Vec<f64> = Vec::new();
    // Bounded: 200 steps of 100 ms; three different values are enough.
    for _ in 0..400 {
        let snap = snapshot(&mut stream).await;
        let row = &snap["tasks"][0];
        assert_eq!((&row["id"], &row["status"]), (&json!(id), &json!("working")), "{snap}");
        if let Some(p) = row["progress"].as_f64() {
            assert_eq!(row["total"], 200.0);
            assert!(row["owner"].as_str().unwrap().starts_with("session "), "{row}");
            if seen.last() != Some(&p) {
                seen.push(p);
            }
        }
        if seen.len() >= 3 {
            break;
        }
    }
    assert!(seen.len() >= 3 && seen.windows(2).all(|w| w[0] < w[1]), "progress rises: {seen:?}");
    let r = cancel(&addr, &id, None, true).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["statusMessage"], "cancelled from the task page by the operator");
    let mut ended = None;
    for _ in 0..100 {
        let snap = snapshot(&mut stream).await;
        if snap["tasks"][0]["status"] != "working" {
            ended = Some(snap);
            break;
        }
    }
    let snap = ended.expect("the stream shows the end");
    assert_eq!(snap["tasks"][0]["status"], "cancelled", "{snap}");
    assert_eq!(status_of(&mut c, &id).await, "cancelled");
    eventually("the upstream saw the cancellation", async || {
        let stats = c.request("resources/read", json!({"uri": "demo://stats"})).await;
        stats.result()["contents"][0]["text"] == r#"{"cancelled":1}"#
    })
    .await;
}

#[tokio::test]
async fn a_viewers_stream_ends_when_the_gateway_begins_to_drain() {
    let dir = tempfile::tempdir().unwrap();
    let (mut gw, addr) = gateway(&dir, "drain_timeout = \"20s\"", false).await;
    let mut stream = events(&addr, None).await;
    assert_eq!(snapshot(&mut stream).await["tasks"], json!([]));
    // A plain call in flight keeps the gateway draining: its first progress says it runs.
    let c = mcp(&addr, None).await;
    let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "slow", "arguments": {"duration_ms": 4000, "steps": 4}, "_meta": {"progressToken": "drain"}}});
    let resp = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    let mut answer = SseReader::new(resp.into_body());
    assert_eq!(answer.next().await.unwrap().1["method"], "notifications/progress");
    common::gateway_proc::signal(gw.pid(), libc::SIGTERM);
    // The viewer's stream ends first; the call, which the drain waits for, is answered after.
    let mut ended = false;
    let last = loop {
        tokio::select! {
            e = stream.next(), if !ended => {
                assert!(e.is_none(), "no snapshot after the drain began: {e:?}");
                ended = true;
            }
            m = answer.next() => {
                let (_, m) = m.expect("the call is answered");
                if m.get("id").is_some() {
                    break m;
                }
            }
        }
    };
    assert!(ended, "the viewer's stream ended before the call in flight was answered");
    assert_eq!(last["result"]["content"][0]["text"], "done after 4 steps", "{last}");
    let exited = tokio::time::timeout(STEP, gw.0.wait()).await.expect("the gateway exited").unwrap();
    assert!(exited.success(), "{exited:?}");
}

/// The task page's listings so far (`taskgate_task_page_listings`).
async fn listings(addr: &str) -> f64 {
    let text = read_all(at(addr, "/metrics", None).get_raw(&[]).await).await;
    let text = String::from_utf8_lossy(&text.body).to_string();
    let line = text.lines().find(|l| l.starts_with("taskgate_task_page_listings_total ")).expect("the metric");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn every_viewer_is_served_from_one_listing_per_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let (_gw, addr) = gateway(&dir, "[server.task_page]\nrefresh = \"100ms\"\nmax_viewers = 8", false).await;
    let mut viewers = Vec::new();
    for _ in 0..8 {
        let mut v = events(&addr, None).await;
        assert_eq!(snapshot(&mut v).await["tasks"], json!([]));
        viewers.push(v);
    }
    // Ten listings take at least nine refreshes, however many watch: the listings are
    // shared (each of eight viewers listing on its own would make ten in two refreshes).
    let (from, start) = (listings(&addr).await, std::time::Instant::now());
    let ten = async || (listings(&addr).await >= from + 10.0).then_some(());
    assert!(pace::until_async(std::time::Duration::from_secs(30), ten).await.is_some(), "the page stopped listing");
    let took = start.elapsed();
    assert!(took >= std::time::Duration::from_millis(900), "ten listings within {took:?}: one per viewer per refresh");
    // With nobody watching, nothing is listed: once the viewers' streams have ended, the
    // lister finds nobody, and refreshes (100 ms) go by without a listing.
    drop(viewers);
    let refresh = std::time::Duration::from_millis(100);
    let mut last = (listings(&addr).await, std::time::Instant::now());
    let idle = poll("three refreshes without a listing once the viewers went", async || {
        let now = listings(&addr).await;
        if now != last.0 {
            last = (now, std::time::Instant::now());
        }
        (last.1.elapsed() > 3 * refresh).then_some(now)
    })
    .await;
    // Kept: that nothing more is listed can only be seen over a window (five refreshes).
    tokio::time::sleep(5 * refresh).await;
    assert_eq!(listings(&addr).await, idle, "listed with nobody watching");
}

#[tokio::test]
async fn a_viewer_that_does_not_read_is_dropped_and_its_place_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let page = "[server.task_page]\nrefresh = \"50ms\"\nmax_viewers = 1\nunread_timeout = \"500ms\"";
    let (_gw, addr) = gateway(&dir, page, false).await;
    // Tasks whose progress changes every refresh: each snapshot differs from the last.
    let mut c = mcp(&addr, None).await;
    for _ in 0..30 {
        slow_task(&mut c, 60_000, 1200).await;
    }
    // A viewer that asks for the stream and never reads it, on a small receive buffer.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!("GET /tasks/events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut stalled, request.as_bytes()).await.unwrap();
    // It reads its response's head, and nothing after.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        let n = tokio::io::AsyncReadExt::read(&mut stalled, &mut byte).await.unwrap();
        assert_eq!(n, 1, "the stream ended: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    // Its place is the only one; it is given back once the viewer's buffers are full and
    // it has taken nothing for unread_timeout.
    let first = at(&addr, "/tasks/events", None).get_raw(&[]).await;
    assert_eq!(first.status(), 503, "the viewer that does not read holds the place");
    let given_back = pace::until_async(std::time::Duration::from_secs(60), async || {
        let r = at(&addr, "/tasks/events", None).get_raw(&[]).await;
        assert!(r.status() == 200 || r.status() == 503, "{}", r.status());
        (r.status() == 200).then_some(())
    })
    .await;
    assert!(given_back.is_some(), "the viewer that does not read keeps its place");
    drop(stalled);
}
