//! Rate limits (`[upstream.limits]`, `[server.limits]`): a call past its client's bucket is
//! refused, HTTP 429 with `Retry-After` over HTTP and a JSON-RPC error with
//! `data.retryAfterMs` everywhere; nothing of it goes upstream, and other clients are
//! unaffected. (The buckets' arithmetic is checked on paused time in
//! `gateway::rate_limits`.)

use crate::common;

use common::*;
use serde_json::{Value, json};

fn echo(text: &str) -> Vec<u8> {
    let msg = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}});
    serde_json::to_vec(&msg).unwrap()
}

fn refused_data(v: &Value) -> u64 {
    assert_eq!(v["error"]["code"], -32004, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("rate limit"), "{v}");
    v["error"]["data"]["retryAfterMs"].as_u64().unwrap_or_else(|| panic!("{v}"))
}

async fn counting_upstream() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => vec![reply(req, json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "ok"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn past_its_bucket_a_call_gets_429_and_nothing_goes_upstream() {
    let up = counting_upstream().await;
    let config = format!("{}[upstream.limits]\ncalls_per_minute = 6\nburst = 2\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    for i in 0..2 {
        let r = c.post_raw(echo(&format!("{i}")), &[("accept", "application/json")]).await;
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    }
    let r = c.post_raw(echo("third"), &[("accept", "application/json")]).await;
    assert_eq!(r.status, 429, "{:?}", String::from_utf8_lossy(&r.body));
    let ms = refused_data(&r.json());
    assert!(ms > 5_000 && ms <= 10_000, "one call per 10 s: {ms}");
    assert_eq!(r.headers["retry-after"], ms.div_ceil(1000).to_string());
    assert_eq!(calls_to(&up, "tools/call").len(), 2, "the refused call never went upstream");
    // Listings are not calls; and the session is unaffected.
    let listed = c.request("tools/list", json!({})).await;
    assert!(listed.result()["tools"].is_array());

    // Another session has a bucket of its own.
    let mut other = HttpMcp::new(&gw.url("up"));
    other.initialize("2025-06-18").await;
    let ok = other.request("tools/call", json!({"name": "echo", "arguments": {}})).await;
    assert_eq!(ok.result()["content"][0]["text"], "ok");
}

#[tokio::test]
async fn the_servers_limit_spans_upstreams_and_a_principals_sessions_share_a_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let auth = bearer_tokens(&dir, &[("alice", "alice-token-0123456789"), ("bob", "bob-token-0123456789ab")]);
    let config = format!(
        "[server]\n{auth}[server.limits]\ncalls_per_minute = 60\nburst = 2\n{}{}",
        builtin_upstream("a"),
        builtin_upstream("b")
    );
    let gw = start_gateway(&config).await;
    let session = |upstream: &str, token: &str| {
        let mut c = HttpMcp::new(&gw.url(upstream));
        c.bearer = Some(token.into());
        c
    };
    let mut a = session("a", "alice-token-0123456789");
    a.initialize("2025-06-18").await;
    let mut b = session("b", "alice-token-0123456789");
    b.initialize("2025-11-25").await;
    let call = json!({"name": "echo", "arguments": {"text": "x"}});
    assert!(a.request("tools/call", call.clone()).await.response.get("result").is_some());
    assert!(b.request("tools/call", call.clone()).await.response.get("result").is_some());
    // Alice's third call, from either session, through either upstream, is past her bucket.
    let task_call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 1000}}});
    let out = b.post_raw(serde_json::to_vec(&task_call).unwrap(), &[]).await;
    assert_eq!(out.status, 429);
    refused_data(&out.json());
    let listed = b.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"], json!([]), "no task was made");
    // Bob's bucket is his own.
    let mut bob = session("a", "bob-token-0123456789ab");
    bob.initialize("2025-06-18").await;
    assert!(bob.request("tools/call", call).await.response.get("result").is_some());
}

#[tokio::test]
async fn over_stdio_the_refusal_is_a_json_rpc_error_with_retry_after() {
    let config = format!("{}[upstream.limits]\ncalls_per_minute = 1\nburst = 1\n", builtin_upstream("demo"));
    let mut c = StdioMcp::start(&config, "demo").await;
    c.initialize("2025-06-18").await;
    let first = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "1"}})).await;
    assert_eq!(first.result()["content"][0]["text"], "1");
    let second = c.request("resources/read", json!({"uri": "demo://readme"})).await;
    assert!(refused_data(&second.response) > 50_000);
    let ping = c.request("ping", json!({})).await;
    assert_eq!(ping.result(), &json!({}));
}

#[test]
fn a_burst_without_a_rate_is_refused() {
    let bad = format!("{}[upstream.limits]\nburst = 5\n", builtin_upstream("demo"));
    let err = taskgate::Config::parse(&bad, &|_| None).unwrap_err().to_string();
    assert!(err.contains("limits.burst"), "{err}");
}

#[tokio::test]
async fn a_2026_07_28_clients_address_has_a_bucket_and_gets_429() {
    use common::modern_client::{mirrored, post, request};
    let config = format!("{}[upstream.limits]\ncalls_per_minute = 60\nburst = 1\n", builtin_upstream("demo"));
    let gw = start_gateway(&config).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let call = request(json!(1), "tools/call", json!({"name": "echo", "arguments": {"text": "x"}}), json!({}));
    let first = post(&c, &call, &mirrored(&call)).await;
    assert_eq!(first.status, 200);
    let second = post(&c, &call, &mirrored(&call)).await;
    assert_eq!(second.status, 429, "{:?}", String::from_utf8_lossy(&second.body));
    // The era has no -32004: its code is -32603, the gateway's own kept as `originalCode`.
    let v = second.json();
    assert_eq!(v["error"]["code"], -32603, "{v}");
    assert_eq!(v["error"]["data"]["originalCode"], -32004);
    assert!(v["error"]["data"]["retryAfterMs"].as_u64().unwrap() <= 1000, "{v}");
    assert_eq!(second.headers["retry-after"], "1");
}
