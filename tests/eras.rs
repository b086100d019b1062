//! Every pair of {2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28} as client and
//! server, through one gateway: tools, resources, prompts, progress, and input requests
//! (elicitation, where both sides have it: from 2025-06-18 on, and in 2026-07-28 as multi
//! round-trip). The legacy servers are conformant scripted servers of one version each; the
//! 2026-07-28 one is the strict scripted modern server. The legacy clients initialize; the
//! modern client sends stateless requests and retries `input_required` answers.

use crate::common;

use common::modern::modern_server;
use common::modern_client::{V as MODERN, call, request};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const LEGACY: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

fn name_of(version: &str) -> String {
    format!("v{}", version.replace('-', ""))
}

fn has_elicitation(version: &str) -> bool {
    version >= "2025-06-18"
}

/// A conformant legacy server of `version`: `echo` (one progress), `ask` (an elicitation on
/// the call's stream, where its version has them), a resource and a prompt.
async fn legacy_server(version: &'static str) -> Scripted {
    Scripted::start(move |req| {
        let id = req["id"].clone();
        match req["method"].as_str().unwrap_or("") {
            "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                "serverInfo": {"name": format!("server-{version}"), "version": "1"}
            }}))],
            "server/discover" => vec![Step::Plain(400, vec![], "Bad Request: no session".into())],
            "tools/list" => vec![reply(req, json!({"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}}, {"name": "ask", "inputSchema": {"type": "object"}}]}))],
            "tools/call" if req["params"]["name"] == "ask" && has_elicitation(version) => {
                let ask_id = json!(format!("ask-{id}"));
                vec![
                    Step::Send(json!({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                        "params": {"message": "answer?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}})),
                    Step::AwaitResponse(ask_id.clone()),
                    Step::Then(Arc::new(move |got: &[Value]| {
                        let a = got.iter().find(|m| m.get("method").is_none() && m["id"] == ask_id).unwrap();
                        let text = format!("answer: {}", a["result"]["content"]["answer"].as_str().unwrap_or("none"));
                        vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}}))]
                    })),
                ]
            }
            "tools/call" => {
                let tok = req["params"]["_meta"]["progressToken"].clone();
                let mut steps = vec![];
                if !tok.is_null() {
                    steps.push(progress(&tok, 1.0));
                }
                let text = req["params"]["arguments"]["text"].clone();
                steps.push(reply(req, json!({"content": [{"type": "text", "text": text}]})));
                steps
            }
            "resources/list" => vec![reply(req, json!({"resources": [{"uri": "file:///a.txt", "name": "a"}]}))],
            "resources/read" if req["params"]["uri"] == "file:///missing" => vec![Step::Send(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": "Resource not found"}}),
            )],
            "resources/read" => vec![reply(req, json!({"contents": [{"uri": req["params"]["uri"], "text": "A"}]}))],
            "prompts/list" => vec![reply(req, json!({"prompts": [{"name": "p"}]}))],
            "prompts/get" => vec![reply(
                req,
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "a prompt"}}]}),
            )],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

/// The strict modern server, with a resource and prompt listing beside its own tools.
async fn modern_upstream() -> Scripted {
    Scripted::start_with_headers(|req: &Value, h: &hyper::HeaderMap| {
        let done = |result: Value| {
            let mut result = result;
            result["resultType"] = json!("complete");
            result["ttlMs"] = json!(0);
            result["cacheScope"] = json!("private");
            vec![reply(req, result)]
        };
        match req["method"].as_str().unwrap_or("") {
            "resources/list" => done(json!({"resources": [{"uri": "file:///a.txt", "name": "a"}]})),
            "prompts/list" => done(json!({"prompts": [{"name": "p"}]})),
            _ => modern_server(req, h),
        }
    })
    .await
}

/// What one client does with one server, whatever their versions.
struct Pair<'a> {
    at: String,
    client: &'a str,
    server: &'a str,
}

impl Pair<'_> {
    fn input_works(&self) -> bool {
        has_elicitation(self.client) && has_elicitation(self.server)
    }

    /// The tool that asks the client, and its arguments.
    fn asking_tool(&self) -> &'static str {
        if self.server == MODERN { "confirm" } else { "ask" }
    }
}

async fn legacy_client(gw: &Gw, pair: &Pair<'_>) {
    let at = &pair.at;
    let mut c = HttpMcp::new(&gw.url(&name_of(pair.server)));
    let init = c.initialize(pair.client).await;
    assert_eq!(init["protocolVersion"], pair.client, "{at}");
    let tools = c.request("tools/list", json!({})).await;
    assert!(
        tools.result()["tools"].as_array().unwrap().iter().any(|t| t["name"] == "echo"),
        "{at}: {:?}",
        tools.response
    );
    let echo = c
        .request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p"}}))
        .await;
    assert_eq!(echo.result()["content"][0]["text"], "hi", "{at}: {:?}", echo.response);
    assert!(!echo.progress().is_empty(), "{at}: progress {:?}", echo.others);
    assert!(echo.result().get("resultType").is_none(), "{at}: a legacy result");
    let res = c.request("resources/list", json!({})).await;
    assert_eq!(res.result()["resources"][0]["uri"], "file:///a.txt", "{at}: {:?}", res.response);
    let read = c.request("resources/read", json!({"uri": "file:///a.txt"})).await;
    assert!(read.result()["contents"][0]["text"].is_string(), "{at}: {:?}", read.response);
    if pair.server != MODERN {
        let missing = c.request("resources/read", json!({"uri": "file:///missing"})).await;
        assert_eq!(missing.error_code(), -32002, "{at}: a legacy client keeps the legacy code");
    }
    let prompts = c.request("prompts/list", json!({})).await;
    assert!(prompts.result()["prompts"].as_array().is_some_and(|p| !p.is_empty()), "{at}: {:?}", prompts.response);
    let prompt = c.request("prompts/get", json!({"name": "p"})).await;
    assert!(prompt.result()["messages"][0]["content"]["text"].is_string(), "{at}: {:?}", prompt.response);
    if pair.input_works() {
        let ask = c.request("tools/call", json!({"name": pair.asking_tool(), "arguments": {}})).await;
        let text = ask.result()["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert!(text.contains("forty-two"), "{at}: {:?}", ask.response);
        assert!(ask.others.iter().any(|m| m["method"] == "elicitation/create"), "{at}: asked as a server request");
    }
    assert_eq!(c.delete().await, 200, "{at}");
}

async fn modern_client(gw: &Gw, pair: &Pair<'_>) {
    let at = &pair.at;
    let c = HttpMcp::new(&gw.url(&name_of(pair.server)));
    let caps = json!({"elicitation": {}});
    let ask = |id: i64, method: &str, params: Value| request(json!(id), method, params, caps.clone());
    let (_, d, _) = call(&c, &ask(1, "server/discover", json!({}))).await;
    assert!(d["result"]["supportedVersions"].as_array().unwrap().iter().any(|v| v == MODERN), "{at}: {d}");
    let (_, tools, _) = call(&c, &ask(2, "tools/list", json!({}))).await;
    assert_eq!(tools["result"]["resultType"], "complete", "{at}: {tools}");
    assert!(tools["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "echo"), "{at}: {tools}");
    let mut echo = ask(3, "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    echo["params"]["_meta"]["progressToken"] = json!("p");
    let (_, r, before) = call(&c, &echo).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi", "{at}: {r}");
    assert!(before.iter().any(|m| m["method"] == "notifications/progress"), "{at}: {before:?}");
    for (id, method, params, want) in [
        (4, "resources/list", json!({}), "/result/resources/0/uri"),
        (5, "resources/read", json!({"uri": "file:///a.txt"}), "/result/contents/0/uri"),
        (6, "prompts/list", json!({}), "/result/prompts/0/name"),
        (7, "prompts/get", json!({"name": "p"}), "/result/messages/0/role"),
    ] {
        let (_, r, _) = call(&c, &ask(id, method, params)).await;
        assert!(r.pointer(want).is_some(), "{at}: {method}: {r}");
        assert_eq!(r["result"]["resultType"], "complete", "{at}: {method}: {r}");
    }
    if pair.server != MODERN {
        // A legacy server's "resource not found" (-32002) is the era's -32602.
        let (_, r, _) = call(&c, &ask(10, "resources/read", json!({"uri": "file:///missing"}))).await;
        assert_eq!(r["error"]["code"], -32602, "{at}: {r}");
    }
    if pair.input_works() {
        let first = ask(8, "tools/call", json!({"name": pair.asking_tool(), "arguments": {}}));
        let (_, r, _) = call(&c, &first).await;
        assert_eq!(r["result"]["resultType"], "input_required", "{at}: {r}");
        let keys: Vec<String> = r["result"]["inputRequests"].as_object().unwrap().keys().cloned().collect();
        let answers: serde_json::Map<String, Value> =
            keys.iter().map(|k| (k.clone(), json!({"action": "accept", "content": {"answer": "forty-two"}}))).collect();
        let mut retry = first.clone();
        retry["id"] = json!(9);
        retry["params"]["inputResponses"] = Value::Object(answers);
        retry["params"]["requestState"] = r["result"]["requestState"].clone();
        let (_, r, _) = call(&c, &retry).await;
        let text = r["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string();
        assert!(text.contains("forty-two"), "{at}: {r}");
    }
}

#[tokio::test]
async fn every_pair_of_versions_and_eras_works_through_the_gateway() {
    let mut config = String::new();
    let mut servers = vec![];
    for v in LEGACY {
        let s = legacy_server(v).await;
        config += &http_upstream(&name_of(v), &s.url());
        servers.push(s);
    }
    let modern = modern_upstream().await;
    config += &http_upstream(&name_of(MODERN), &modern.url());
    let gw = start_gateway(&config).await;
    let all: Vec<&str> = LEGACY.iter().copied().chain([MODERN]).collect();
    for server in &all {
        for client in &all {
            let pair = Pair { at: format!("client {client}, server {server}"), client, server };
            if *client == MODERN {
                modern_client(&gw, &pair).await;
            } else {
                legacy_client(&gw, &pair).await;
            }
        }
    }
    // The legacy servers never saw the modern era's fields, nor the modern server a session.
    for s in &servers {
        let got = s.received.lock().unwrap().clone();
        for m in got.iter().filter(|m| m["method"] != "server/discover") {
            let meta = m.pointer("/params/_meta");
            assert!(meta.is_none_or(|m| m.get("io.modelcontextprotocol/protocolVersion").is_none()), "{m}");
            assert!(m.pointer("/params/inputResponses").is_none(), "{m}");
        }
    }
    assert!(!modern.received_methods().iter().any(|m| m == "initialize"), "no initialize reaches the modern server");
}
