//! Inbound authentication (`[server.auth]`): bearer tokens and JWTs, the 401 that points at
//! the Protected Resource Metadata, and tasks bound to the principal that made them (another
//! principal learns nothing from their ids, whatever it asks).

use crate::common;

use common::modern_client as modern;
use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const EXT: &str = "io.modelcontextprotocol/tasks";

/// A gateway in front of the builtin demo, with bearer tokens for alice and bob (read from
/// files) and `extra` in its `[server.auth]`.
async fn bearer_gateway(dir: &tempfile::TempDir, extra: &str) -> Gw {
    for (name, token) in [("alice", ALICE), ("bob", BOB)] {
        std::fs::write(dir.path().join(name), format!("{token}\n")).unwrap();
    }
    let file = |n: &str| format!("{:?}", dir.path().join(n).display().to_string());
    start_gateway(&format!(
        "[server.auth]\nmode = \"bearer\"\n{extra}\n[[server.auth.tokens]]\nprincipal = \"alice\"\nfile = {}\n[[server.auth.tokens]]\nprincipal = \"bob\"\nfile = {}\n{}",
        file("alice"),
        file("bob"),
        builtin_upstream("demo")
    ))
    .await
}

fn client(gw: &Gw, token: Option<&str>) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = token.map(str::to_string);
    c
}

fn init_body() -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")}))
        .unwrap()
}

#[tokio::test]
async fn without_a_valid_token_the_answer_is_401_pointing_at_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let gw = bearer_gateway(&dir, "authorization_servers = [\"https://idp.example\"]\nscopes = [\"mcp\"]").await;
    let host = gw.addr.to_string();
    let url = format!("http://{host}/.well-known/oauth-protected-resource");
    for (token, error) in [(None, false), (Some("not-a-token-we-know-at-all"), true)] {
        let r = client(&gw, token).post_raw(init_body(), &[]).await;
        assert_eq!(r.status, 401, "{token:?}");
        let challenge = r.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with(&format!("Bearer resource_metadata=\"{url}\"")), "{challenge}");
        assert_eq!(challenge.contains("error=\"invalid_token\""), error, "{challenge}");
        assert!(!String::from_utf8_lossy(&r.body).contains("not-a-token"), "the token is not echoed");
    }
    // The legacy transport is guarded alike.
    let mut sse = HttpMcp::new(&format!("http://{host}/sse/demo"));
    assert_eq!(sse.get_raw(&[]).await.status(), 401);
    sse.bearer = Some(ALICE.into());
    assert_eq!(sse.get_raw(&[]).await.status(), 200);

    // The metadata is served without a token, at the root and under a served path.
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp/demo"] {
        let mut m = HttpMcp::new(&format!("http://{host}{path}"));
        m.bearer = None;
        let r = read_all(m.get_raw(&[]).await).await;
        assert_eq!(r.status, 200, "{path}");
        let doc = r.json();
        let suffix = path.strip_prefix("/.well-known/oauth-protected-resource").unwrap();
        assert_eq!(doc["resource"], format!("http://{host}{suffix}"), "{doc}");
        assert_eq!(doc["authorization_servers"], json!(["https://idp.example"]));
        assert_eq!(doc["bearer_methods_supported"], json!(["header"]));
        assert_eq!(doc["scopes_supported"], json!(["mcp"]));
    }
    // A good token gets in.
    let mut alice = client(&gw, Some(ALICE));
    alice.initialize("2025-11-25").await;
    let echoed = alice.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
    assert_eq!(echoed.result()["content"][0]["text"], "hi");
}

/// The error a principal gets for task id `id` by `method`, with the id in the message
/// replaced, so that one for an unknown id compares equal.
async fn error_for(c: &mut HttpMcp, method: &str, id: &str) -> Value {
    let out = c.request(method, json!({"taskId": id})).await;
    let mut e = out.response.get("error").cloned().unwrap_or_else(|| panic!("{method} {id}: {:?}", out.response));
    if let Some(m) = e["message"].as_str() {
        e["message"] = m.replace(id, "<id>").into();
    }
    e
}

#[tokio::test]
async fn another_principals_tasks_are_as_unknown_ids_whatever_it_asks() {
    let dir = tempfile::tempdir().unwrap();
    let gw = bearer_gateway(&dir, "").await;
    let mut alice = client(&gw, Some(ALICE));
    alice.initialize("2025-11-25").await;
    let done = alice.request("tools/call", json!({"name": "echo", "arguments": {"text": "mine"}, "task": {}})).await;
    let done = done.result()["task"]["taskId"].as_str().unwrap().to_string();
    let slow = json!({"name": "slow", "arguments": {"duration_ms": 60000, "steps": 60}, "task": {}});
    let running = alice.request("tools/call", slow).await.result()["task"]["taskId"].as_str().unwrap().to_string();
    // A task made by alice as a 2026-07-28 client, too.
    let caps = json!({"extensions": {EXT: {}}});
    let call = modern::request(
        json!(7),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 60000}}),
        caps.clone(),
    );
    let (status, created, _) = modern::call(&alice, &call).await;
    assert_eq!(status, 200, "{created}");
    let modern_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();

    let mut bob = client(&gw, Some(BOB));
    bob.initialize("2025-11-25").await;
    let unknown = "0123456789abcdef0123456789abcdef";
    let mut tried = 0;
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let expected = error_for(&mut bob, method, unknown).await;
        assert_eq!(expected["code"], -32602, "{expected}");
        for id in [&done, &running, &modern_id] {
            assert_eq!(error_for(&mut bob, method, id).await, expected, "{method} of alice's {id}");
            tried += 1;
        }
    }
    assert_eq!(tried, 9);
    let listed = bob.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"], json!([]), "{:?}", listed.response);
    // Bob as a 2026-07-28 client: the same.
    for method in ["tasks/get", "tasks/cancel"] {
        let ask = |id: &str| modern::request(json!(9), method, json!({"taskId": id}), caps.clone());
        let (_, expected, _) = modern::call(&bob, &ask(unknown)).await;
        assert!(expected.get("error").is_some(), "{expected}");
        for id in [&done, &running, &modern_id] {
            let (_, got, _) = modern::call(&bob, &ask(id)).await;
            let norm = |v: &Value, id: &str| v["error"].to_string().replace(id, "<id>");
            assert_eq!(norm(&got, id), norm(&expected, unknown), "{method} of alice's {id} as a modern client");
        }
    }
    // Bob cannot use alice's session, with his own token.
    let mut intruder = client(&gw, Some(BOB));
    intruder.session = alice.session.clone();
    intruder.version = alice.version.clone();
    let get =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"taskId": done}}))
            .unwrap();
    assert_eq!(intruder.post_raw(get, &[]).await.status, 404);
    assert_eq!(intruder.get_raw(&[]).await.status(), 404);
    assert_eq!(intruder.delete().await, 404);

    // Alice's tasks are untouched, and every session of hers sees them.
    let got = alice.request("tasks/get", json!({"taskId": running})).await;
    assert_eq!(got.result()["status"], "working", "{:?}", got.response);
    let mut again = client(&gw, Some(ALICE));
    again.initialize("2025-11-25").await;
    let listed = again.request("tasks/list", json!({})).await;
    let ids: Vec<&str> =
        listed.result()["tasks"].as_array().unwrap().iter().filter_map(|t| t["taskId"].as_str()).collect();
    for id in [&done, &running, &modern_id] {
        assert!(ids.contains(&id.as_str()), "{id} listed for alice's other session: {ids:?}");
    }
    let result = again.request("tasks/result", json!({"taskId": done})).await;
    assert_eq!(result.result()["content"][0]["text"], "mine", "{:?}", result.response);
    let cancelled = again.request("tasks/cancel", json!({"taskId": running})).await;
    assert_eq!(cancelled.result()["status"], "cancelled", "{:?}", cancelled.response);
}
