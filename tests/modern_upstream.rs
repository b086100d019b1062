//! Modern (2026-07-28) upstreams: a scripted modern-only server behind legacy clients of
//! every version, the probe's fallback for a legacy-only server, and `era = "legacy"`.
//!
//! The modern server is strict: it checks on each POST what a 2026-07-28 server checks (the
//! `_meta` fields, `MCP-Protocol-Version` equal to them, `Mcp-Method`, `Mcp-Name`; no session
//! id) and answers -32602 or -32020 with HTTP 400 when one is wrong; `initialize` gets -32601
//! with HTTP 404, as an unknown method does.

mod common;

use common::*;
use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";

fn err(status: u16, req: &Value, code: i64, message: &str) -> Vec<Step> {
    let body = json!({"jsonrpc": "2.0", "id": req.get("id").cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message}});
    vec![Step::Plain(status, vec![("content-type", "application/json".into())], body.to_string())]
}

fn header<'a>(h: &'a hyper::HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

fn complete(req: &Value, mut result: Value) -> Step {
    result["resultType"] = "complete".into();
    reply(req, result)
}

/// What a strict modern server says about a request's headers and `_meta`, if anything.
fn refusal(req: &Value, h: &hyper::HeaderMap) -> Option<Vec<Step>> {
    let meta = &req["params"]["_meta"];
    if header(h, "mcp-session-id").is_some() {
        return Some(err(400, req, -32602, "a session id on a stateless request"));
    }
    let Some(version) = header(h, "mcp-protocol-version") else {
        return Some(err(400, req, -32020, "MCP-Protocol-Version is required"));
    };
    // A notification carries no `_meta` of its own to check.
    req.get("id")?;
    if meta["io.modelcontextprotocol/protocolVersion"] != MODERN
        || !meta["io.modelcontextprotocol/clientCapabilities"].is_object()
    {
        return Some(err(400, req, -32602, "request _meta is missing required fields"));
    }
    if version != MODERN {
        return Some(err(400, req, -32020, "MCP-Protocol-Version disagrees with _meta"));
    }
    if meta["io.modelcontextprotocol/clientInfo"]["name"] != "taskgate" {
        return Some(err(400, req, -32602, "expected the gateway's clientInfo"));
    }
    if header(h, "mcp-method") != req["method"].as_str() {
        return Some(err(400, req, -32020, "Mcp-Method disagrees with the body"));
    }
    let name = match req["method"].as_str() {
        Some("tools/call" | "prompts/get") => req["params"]["name"].as_str(),
        Some("resources/read") => req["params"]["uri"].as_str(),
        _ => None,
    };
    if name.is_some() && header(h, "mcp-name") != name {
        return Some(err(400, req, -32020, "Mcp-Name disagrees with the body"));
    }
    None
}

fn modern_server(req: &Value, h: &hyper::HeaderMap) -> Vec<Step> {
    if let Some(refused) = refusal(req, h) {
        return refused;
    }
    match req["method"].as_str().unwrap_or("") {
        "initialize" => err(404, req, -32601, "initialize: this server speaks 2026-07-28 only"),
        "server/discover" => vec![complete(
            req,
            json!({
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {}, "logging": {},
                    "extensions": {"io.modelcontextprotocol/tasks": {}}},
                "instructions": "modern only",
                "ttlMs": 0, "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-scripted", "version": "9"}}
            }),
        )],
        "tools/list" => vec![complete(
            req,
            json!({"tools": [{"name": "echo", "title": "Echo", "inputSchema": {"type": "object"}}], "ttlMs": 0, "cacheScope": "private"}),
        )],
        "tools/call" => match req["params"]["name"].as_str().unwrap_or("") {
            "echo" => {
                let mut steps = vec![];
                if let Some(token) = req["params"]["_meta"].get("progressToken") {
                    steps.push(progress(token, 1.0));
                    steps.push(progress(token, 2.0));
                }
                let text = req["params"]["arguments"]["text"].clone();
                steps.push(complete(req, json!({"content": [{"type": "text", "text": text}], "isError": false})));
                steps
            }
            "needs-tasks" => err(400, req, -32021, "Missing required client capability"),
            "ask" => vec![reply(req, json!({"resultType": "input_required", "inputRequests": {}}))],
            _ => err(200, req, -32602, "unknown tool"),
        },
        "resources/read" => vec![complete(
            req,
            json!({"contents": [{"uri": req["params"]["uri"], "text": "hello"}], "ttlMs": 0, "cacheScope": "private"}),
        )],
        "prompts/get" => vec![complete(
            req,
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "a prompt"}}]}),
        )],
        _ => err(404, req, -32601, "method not found"),
    }
}

fn no_result_type(v: &Value) -> bool {
    match v {
        Value::Object(o) => !o.contains_key("resultType") && o.values().all(no_result_type),
        Value::Array(a) => a.iter().all(no_result_type),
        _ => true,
    }
}

#[tokio::test]
async fn a_modern_only_server_serves_legacy_clients_of_every_version() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize(version).await;
        assert_eq!(init["protocolVersion"], version);
        assert_eq!(init["serverInfo"], json!({"name": "modern-scripted", "version": "9"}));
        assert_eq!(init["instructions"], "modern only");
        let caps = &init["capabilities"];
        assert!(caps["tools"].is_object() && caps["prompts"].is_object(), "{caps}");
        assert!(caps.get("extensions").is_none(), "{caps}");
        assert!(caps["tools"].get("listChanged").is_none() && caps["resources"].get("subscribe").is_none(), "{caps}");

        let tools = c.request("tools/list", json!({})).await;
        assert_eq!(tools.result()["tools"][0]["name"], "echo", "{version}");
        assert!(no_result_type(tools.result()) && tools.result().get("ttlMs").is_none(), "{:?}", tools.result());
        if version < "2025-06-18" {
            assert!(tools.result()["tools"][0].get("title").is_none(), "translated for {version}");
        }

        let call = c
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p"}}),
            )
            .await;
        assert_eq!(call.result()["content"][0]["text"], "hi", "{version}");
        assert!(no_result_type(call.result()));
        assert_eq!(call.progress(), vec![1.0, 2.0]);

        let read = c.request("resources/read", json!({"uri": "mem://a b"})).await;
        assert_eq!(read.result()["contents"][0]["text"], "hello");
        assert!(no_result_type(read.result()) && read.result().get("cacheScope").is_none());
        let prompt = c.request("prompts/get", json!({"name": "p"})).await;
        assert_eq!(prompt.result()["messages"][0]["content"]["text"], "a prompt");

        // The era's errors pass as they are; a shape a legacy client cannot read fails.
        assert_eq!(c.request("tools/call", json!({"name": "nope", "arguments": {}})).await.error_code(), -32602);
        assert_eq!(c.request("tools/call", json!({"name": "needs-tasks", "arguments": {}})).await.error_code(), -32021);
        assert_eq!(c.request("tools/call", json!({"name": "ask", "arguments": {}})).await.error_code(), -32603);

        // What 2026-07-28 removed.
        assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
        assert_eq!(c.request("resources/subscribe", json!({"uri": "mem://a"})).await.error_code(), -32601);
        c.notify("notifications/roots/list_changed", json!({})).await;
    }
    let methods = up.received_methods();
    assert!(!methods.iter().any(|m| m == "initialize" || m == "ping" || m.starts_with("resources/sub")), "{methods:?}");
    assert!(!methods.iter().any(|m| m == "notifications/roots/list_changed"), "{methods:?}");
    assert_eq!(methods.iter().filter(|m| *m == "server/discover").count(), 4, "one probe per session's link");
    assert!(up.received_http().is_empty(), "no GET, no DELETE: {:?}", up.received_http());
}

#[tokio::test]
async fn log_level_travels_in_each_request_meta() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    c.request("tools/list", json!({})).await;
    assert_eq!(c.request("logging/setLevel", json!({"level": "warning"})).await.result(), &json!({}));
    assert_eq!(c.request("logging/setLevel", json!({"level": "loud"})).await.error_code(), -32602);
    c.request("tools/list", json!({})).await;
    let received = up.received.lock().unwrap().clone();
    let lists: Vec<&Value> = received.iter().filter(|m| m["method"] == "tools/list").collect();
    assert_eq!(lists.len(), 2);
    assert!(lists[0]["params"]["_meta"].get("io.modelcontextprotocol/logLevel").is_none());
    assert_eq!(lists[1]["params"]["_meta"]["io.modelcontextprotocol/logLevel"], "warning");
    assert!(!received.iter().any(|m| m["method"] == "logging/setLevel"));
}

/// A legacy server that answers `server/discover` as most SDKs do before a session.
fn legacy_server(req: &Value) -> Vec<Step> {
    match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(400, vec![], "Bad Request: No valid session ID provided".into())],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "legacy"}]}))],
        _ => vec![reply(req, json!({}))],
    }
}

#[tokio::test]
async fn a_legacy_server_is_initialized_after_the_probe() {
    let up = Scripted::start(legacy_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    assert_eq!(init["serverInfo"]["name"], "scripted");
    let call = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(call.result()["content"][0]["text"], "legacy");
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    let methods = up.received_methods();
    assert_eq!(methods[..3], ["server/discover", "initialize", "notifications/initialized"], "{methods:?}");
    assert!(methods.contains(&"ping".to_string()), "a legacy server gets its pings");
}

#[tokio::test]
async fn era_legacy_sends_no_probe_and_era_modern_sends_no_initialize() {
    let up = Scripted::start(legacy_server).await;
    let cfg = format!("{}era = \"legacy\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    assert_eq!(up.received_methods()[..2], ["initialize", "notifications/initialized"]);

    let cfg = format!("{}era = \"modern\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let c = HttpMcp::new(&gw.url("up"));
    let before = up.received_methods().len();
    let out = c.request_owned("initialize", init_params("2025-06-18")).await;
    assert_eq!(out.error_code(), -32000, "no modern server behind it");
    assert_eq!(up.received_methods()[before..], ["server/discover"]);
}
