//! A strict scripted 2026-07-28-only server (Streamable HTTP), shared by the modern-upstream
//! tests: it checks on each POST what a 2026-07-28 server checks (the `_meta` fields,
//! `MCP-Protocol-Version` equal to them, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-Region` for
//! the tool that declares it; no session id) and answers
//! -32602 or -32020 with HTTP 400 when one is wrong; `initialize` gets -32601 with HTTP 404,
//! as an unknown method does. Its tools include ones that ask for input (multi round-trip
//! requests).

use super::{Step, progress, reply};
use serde_json::{Value, json};

pub const MODERN: &str = "2026-07-28";

pub fn err(status: u16, req: &Value, code: i64, message: &str) -> Vec<Step> {
    let body = json!({"jsonrpc": "2.0", "id": req.get("id").cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message}});
    vec![Step::Plain(status, vec![("content-type", "application/json".into())], body.to_string())]
}

fn header<'a>(h: &'a hyper::HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

pub fn complete(req: &Value, mut result: Value) -> Step {
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
    // The one tool that declares an x-mcp-header: its argument must come as a header too.
    if req["method"] == "tools/call" && req["params"]["name"] == "regional" {
        let want = req["params"]["arguments"]["region"].as_str().map(header_value);
        if header(h, "mcp-param-region") != want.as_deref() {
            return Some(err(400, req, -32020, "Mcp-Param-Region disagrees with the body"));
        }
    }
    None
}

/// A value as a header carries it: plain visible ASCII as is, anything else Base64-encoded.
fn header_value(v: &str) -> String {
    use base64::Engine;
    if v.bytes().all(|b| (0x21..=0x7e).contains(&b)) && !v.starts_with("=?base64?") {
        return v.to_string();
    }
    format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(v))
}

/// `regional`'s listing: its `region` is mirrored as `Mcp-Param-Region`.
pub fn regional_tool() -> Value {
    json!({"name": "regional", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}})
}

/// What `server/discover` answers, with or without the tasks extension.
fn discover_result(extension_tasks: bool) -> Value {
    let mut capabilities =
        json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "prompts": {}, "logging": {}});
    if extension_tasks {
        capabilities["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    json!({
        "supportedVersions": [MODERN],
        "capabilities": capabilities,
        "instructions": "modern only",
        "ttlMs": 0, "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-scripted", "version": "9"}}
    })
}

/// [`modern_server`] without the tasks extension: a 2025-11-25 client's task calls are the
/// gateway's to host.
pub fn modern_server_without_tasks(req: &Value, h: &hyper::HeaderMap) -> Vec<Step> {
    if req["method"] == "server/discover" && refusal(req, h).is_none() {
        return vec![complete(req, discover_result(false))];
    }
    modern_server(req, h)
}

pub fn modern_server(req: &Value, h: &hyper::HeaderMap) -> Vec<Step> {
    if let Some(refused) = refusal(req, h) {
        return refused;
    }
    match req["method"].as_str().unwrap_or("") {
        "initialize" => err(404, req, -32601, "initialize: this server speaks 2026-07-28 only"),
        "server/discover" => vec![complete(req, discover_result(true))],
        "tools/list" => vec![complete(
            req,
            json!({"tools": [{"name": "echo", "title": "Echo", "inputSchema": {"type": "object"}}, regional_tool()], "ttlMs": 0, "cacheScope": "private"}),
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
            "regional" => vec![complete(
                req,
                json!({"content": [{"type": "text", "text": req["params"]["arguments"]["region"]}]}),
            )],
            "ask" => vec![reply(req, json!({"resultType": "input_required", "inputRequests": {}}))],
            "confirm" => confirm(req, 0),
            "slow-confirm" => confirm(req, 10_000),
            // Each round takes 600 ms.
            "paced-confirm" => {
                let mut steps = vec![Step::Sleep(600)];
                steps.extend(confirm(req, 0));
                steps
            }
            "two-rounds" => two_rounds(req),
            "state-only" => match req["params"]["requestState"].as_str() {
                None => vec![reply(req, json!({"resultType": "input_required", "requestState": "again"}))],
                Some("again") => vec![complete(req, json!({"content": [{"type": "text", "text": "retried"}]}))],
                Some(_) => err(200, req, -32602, "bad requestState"),
            },
            "forever" => vec![reply(req, json!({"resultType": "input_required", "requestState": "loop"}))],
            "ask-url" => match req["params"]["inputResponses"].get("u") {
                None => vec![reply(
                    req,
                    json!({"resultType": "input_required", "inputRequests": {"u": {"method": "elicitation/create",
                    "params": {"mode": "url", "message": "sign in", "url": "https://example.com/login"}}}}),
                )],
                Some(answer) => vec![complete(req, json!({"content": [{"type": "text", "text": answer["action"]}]}))],
            },
            "progress-rounds" => {
                let token = &req["params"]["_meta"]["progressToken"];
                match req["params"]["requestState"].as_str() {
                    None => vec![
                        progress(token, 1.0),
                        progress(token, 2.0),
                        reply(req, json!({"resultType": "input_required", "requestState": "p"})),
                    ],
                    _ => vec![
                        progress(token, 1.0),
                        progress(token, 3.0),
                        complete(req, json!({"content": [{"type": "text", "text": "done"}]})),
                    ],
                }
            }
            "ask-ping" => {
                vec![reply(req, json!({"resultType": "input_required", "inputRequests": {"p": {"method": "ping"}}}))]
            }
            _ => err(200, req, -32602, "unknown tool"),
        },
        "resources/read" => vec![complete(
            req,
            json!({"contents": [{"uri": req["params"]["uri"], "text": "hello"}], "ttlMs": 0, "cacheScope": "private"}),
        )],
        // Asks for the roots first, then names them.
        "prompts/get" if req["params"]["name"] == "rooted" => match req["params"]["inputResponses"].get("r") {
            None => vec![reply(
                req,
                json!({"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}),
            )],
            Some(roots) => vec![complete(
                req,
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": roots["roots"][0]["uri"]}}]}),
            )],
        },
        "prompts/get" => vec![complete(
            req,
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "a prompt"}}]}),
        )],
        _ => err(404, req, -32601, "method not found"),
    }
}

pub const ASK_FORM: &str = "Proceed?";

/// An input request for a form elicitation, as a modern server sends it.
fn form(message: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}})
}

/// A tool that asks one elicitation (progress 1 before, 2 after, under the call's token),
/// then answers with what the client said; the retry is answered after `delay_ms`.
fn confirm(req: &Value, delay_ms: u64) -> Vec<Step> {
    let p = &req["params"];
    let token = p["_meta"].get("progressToken");
    let mut steps = vec![];
    match p.get("requestState").and_then(Value::as_str) {
        None => {
            if let Some(t) = token {
                steps.push(progress(t, 1.0));
            }
            let asked = json!({"resultType": "input_required", "requestState": "st-1", "inputRequests": {"confirm": form(ASK_FORM)}});
            steps.push(reply(req, asked));
        }
        Some("st-1") => {
            if delay_ms > 0 {
                steps.push(Step::Sleep(delay_ms));
            }
            if let Some(t) = token {
                steps.push(progress(t, 2.0));
            }
            let got = p["inputResponses"]["confirm"].to_string();
            steps.push(complete(req, json!({"content": [{"type": "text", "text": got}]})));
        }
        Some(_) => return err(200, req, -32602, "bad requestState"),
    }
    steps
}

/// Round 1 asks an elicitation; round 2 a sampling and the roots; round 3 answers with
/// everything it got.
fn two_rounds(req: &Value) -> Vec<Step> {
    let p = &req["params"];
    let asked = |state: &str, requests: Value| {
        vec![reply(req, json!({"resultType": "input_required", "requestState": state, "inputRequests": requests}))]
    };
    match p.get("requestState").and_then(Value::as_str) {
        None => asked("r1", json!({"first": form("first?")})),
        Some("r1") if p["inputResponses"]["first"]["action"] == "accept" => asked(
            "r2",
            json!({
                "model": {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}},
                "roots": {"method": "roots/list"}
            }),
        ),
        Some("r2") if p["inputResponses"].get("first").is_none() => {
            vec![complete(req, json!({"content": [{"type": "text", "text": p["inputResponses"].to_string()}]}))]
        }
        _ => err(200, req, -32602, "unexpected round"),
    }
}

pub fn no_result_type(v: &Value) -> bool {
    match v {
        Value::Object(o) => !o.contains_key("resultType") && o.values().all(no_result_type),
        Value::Array(a) => a.iter().all(no_result_type),
        _ => true,
    }
}
