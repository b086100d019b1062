//! Per-client shares of a shared link's `max_in_flight` (`max_in_flight_per_client`): one
//! principal holding its share of slow 2026-07-28 calls is refused more, with a clear
//! error, and another principal's call still goes through.

use crate::common;

use common::modern_client as modern;
use common::*;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::{Value, json};
use std::time::Duration;

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

/// The gateway in front of the demo, `max_in_flight = 4` per link and 2 per client, with
/// bearer tokens for alice and bob (their files in `dir`).
async fn gateway(dir: &tempfile::TempDir) -> Gw {
    principals(dir, "max_in_flight = 4\n", "max_in_flight_per_client = 2\n").await
}

/// The gateway with `server` keys, the demo upstream with `upstream` keys, and bearer tokens
/// for alice and bob (their files in `dir`).
async fn principals(dir: &tempfile::TempDir, server: &str, upstream: &str) -> Gw {
    let mut config = format!("[server]\n{server}");
    config.push_str(&bearer_tokens(dir, &[("alice", ALICE), ("bob", BOB)]));
    config.push_str(&builtin_upstream("demo"));
    config.push_str(upstream);
    start_gateway(&config).await
}

fn client(gw: &Gw, token: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some(token.to_string());
    c
}

fn slow(id: u64) -> Value {
    let args = json!({"name": "slow", "arguments": {"duration_ms": 60_000, "steps": 1}});
    modern::request(json!(id), "tools/call", args, json!({}))
}

fn echo(text: &str) -> Value {
    modern::request(json!("e"), "tools/call", json!({"name": "echo", "arguments": {"text": text}}), json!({}))
}

#[tokio::test]
async fn one_principal_holding_its_share_does_not_starve_another() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&dir).await;
    let alice = client(&gw, ALICE);
    // Alice asks for every place the link has: two calls go upstream (and run a minute),
    // the two past her share are refused at once.
    let reqs: Vec<Value> = (1..=4).map(slow).collect();
    let mut calls: FuturesUnordered<_> = reqs.iter().map(|r| modern::call(&alice, r)).collect();
    for _ in 0..2 {
        let (_, answer, _) = tokio::time::timeout(Duration::from_secs(20), calls.next())
            .await
            .expect("the calls past alice's share are refused at once")
            .unwrap();
        // The limit's -32004, in the code 2026-07-28 allows (-32603), the code kept in data.
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert_eq!(answer["error"]["data"]["originalCode"], -32004, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("max_in_flight_per_client"), "{message}");
    }
    // Bob's call goes through while alice's two run; hers is refused.
    let (status, answer, _) = modern::call(&client(&gw, BOB), &echo("hi bob")).await;
    assert_eq!(status, 200);
    assert_eq!(answer["result"]["content"][0]["text"], "hi bob", "{answer}");
    let (_, answer, _) = modern::call(&alice, &echo("hi alice")).await;
    assert_eq!(answer["error"]["data"]["originalCode"], -32004, "{answer}");
    // Closing alice's two responses cancels her calls, and her share comes back.
    drop(calls);
    let mut answer = Value::Null;
    let back = pace::until_async(Duration::from_secs(20), async || {
        answer = modern::call(&alice, &echo("again")).await.1;
        (answer["result"]["content"][0]["text"] == "again").then_some(())
    })
    .await;
    assert!(back.is_some(), "alice's share never came back: {answer}");
}

/// A hosted task's background call holds its creator's share as a direct call does: alice's
/// two running tasks leave her no place for a third call, and bob's call goes through.
#[tokio::test]
async fn hosted_tasks_count_against_their_creators_share() {
    let dir = tempfile::tempdir().unwrap();
    let gw = principals(&dir, "max_in_flight = 4\n", "share = true\nmax_in_flight_per_client = 2\n").await;
    let mut alice = client(&gw, ALICE);
    alice.initialize("2025-11-25").await;
    for _ in 0..2 {
        let args = json!({"name": "slow", "arguments": {"duration_ms": 60_000, "steps": 1}, "task": {}});
        let created = alice.request("tools/call", args).await;
        assert_eq!(created.result()["task"]["status"], "working", "{}", created.response);
    }
    let refused = alice.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}})).await;
    assert_eq!(refused.error_code(), -32004, "{}", refused.response);
    assert!(refused.response["error"]["message"].as_str().unwrap().contains("max_in_flight_per_client"));
    // A third task is refused as the call would be, not made to fail at once.
    let args = json!({"name": "slow", "arguments": {"duration_ms": 60_000, "steps": 1}, "task": {}});
    let refused = alice.request("tools/call", args).await;
    assert_eq!(refused.error_code(), -32004, "{}", refused.response);
    let listed = alice.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"].as_array().unwrap().len(), 2, "no third task: {}", listed.response);
    let mut bob = client(&gw, BOB);
    bob.initialize("2025-11-25").await;
    let out = bob.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi bob"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "hi bob", "{}", out.response);
}

/// Without authentication, a 2026-07-28 client's requests (each a session of its own) count
/// against the share of its address: past it, refused at once, naming the key.
#[tokio::test]
async fn anonymous_modern_requests_share_their_address() {
    let config = format!("[server]\nmax_in_flight = 4\n{}max_in_flight_per_client = 2\n", builtin_upstream("demo"));
    let gw = start_gateway(&config).await;
    let anonymous = HttpMcp::new(&gw.url("demo"));
    let reqs: Vec<Value> = (1..=3).map(slow).collect();
    let mut calls: FuturesUnordered<_> = reqs.iter().map(|r| modern::call(&anonymous, r)).collect();
    let (_, answer, _) = tokio::time::timeout(Duration::from_secs(20), calls.next())
        .await
        .expect("the call past the address's share is refused at once")
        .unwrap();
    assert_eq!(answer["error"]["data"]["originalCode"], -32004, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("max_in_flight_per_client"), "{answer}");
}

/// One principal cannot hold every session or every upstream link: past
/// `max_sessions_per_client` its initialize gets 429, and past `max_links_per_client` (links
/// its deleted sessions' hosted tasks still run on included) -32004, each naming the key;
/// another principal is served.
#[tokio::test]
async fn one_principal_cannot_hold_every_link() {
    let dir = tempfile::tempdir().unwrap();
    let gw = principals(&dir, "max_sessions = 4\nmax_links = 4\n", "").await;
    // Bob's two sessions each start an hour-long hosted task, then are deleted: their links
    // stay open for the tasks.
    for _ in 0..2 {
        let mut bob = client(&gw, BOB);
        bob.initialize("2025-11-25").await;
        let args = json!({"name": "slow", "arguments": {"duration_ms": 3_600_000, "steps": 1}, "task": {}});
        let created = bob.request("tools/call", args).await;
        assert_eq!(created.result()["task"]["status"], "working", "{}", created.response);
        assert_eq!(bob.delete().await, 200);
    }
    let bob = client(&gw, BOB);
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    let refused = bob.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
    let out = first_message(&refused);
    assert_eq!(out["error"]["code"], -32004, "{out}");
    assert!(out["error"]["message"].as_str().unwrap().contains("max_links_per_client"), "{out}");
    // Alice is served.
    let mut alice = client(&gw, ALICE);
    alice.initialize("2025-11-25").await;
}

#[tokio::test]
async fn one_principal_cannot_hold_every_session() {
    let dir = tempfile::tempdir().unwrap();
    let gw = principals(&dir, "max_sessions = 4\nmax_links = 8\n", "").await;
    for _ in 0..2 {
        client(&gw, BOB).initialize("2025-11-25").await;
    }
    let bob = client(&gw, BOB);
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    let refused = bob.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
    assert_eq!(refused.status, 429, "{:?}", String::from_utf8_lossy(&refused.body));
    assert!(String::from_utf8_lossy(&refused.body).contains("max_sessions_per_client"));
    // Alice is served, twice.
    for _ in 0..2 {
        client(&gw, ALICE).initialize("2025-11-25").await;
    }
    assert_eq!(gw.server.session_count(), 4);
}

/// A listen holds a connection as long as its client wants: past `max_listens_per_client`
/// (half of `max_connections` with authentication) a principal's next listen gets 429 naming
/// the key, and another principal listens.
#[tokio::test]
async fn one_principal_cannot_hold_every_listen_stream() {
    let dir = tempfile::tempdir().unwrap();
    let gw = principals(&dir, "max_connections = 8\n", "").await;
    let alice = client(&gw, ALICE);
    let listen = |id: u64| {
        modern::request(
            json!(id),
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
            json!({}),
        )
    };
    let mut held = Vec::new();
    for id in 1..=4 {
        held.push(modern::listen_stream(&alice, &listen(id)).await);
    }
    let (status, answer, _) = modern::call(&alice, &listen(5)).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["data"]["originalCode"], -32004, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("max_listens_per_client"), "{answer}");
    let _bob = modern::listen_stream(&client(&gw, BOB), &listen(6)).await;
    drop(held);
}
