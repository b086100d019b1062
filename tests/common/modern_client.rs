//! Modern (2026-07-28) clients in tests: requests with their `_meta`, the headers that mirror
//! them, and a POST's messages.

use super::*;
use serde_json::{Value, json};

pub const V: &str = "2026-07-28";

pub fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "1"},
    })
}

/// A modern request: `params` plus the `_meta` (capabilities `caps`).
pub fn request(id: Value, method: &str, mut params: Value, caps: Value) -> Value {
    params["_meta"] = meta(caps);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers that mirror a modern request's body.
pub fn mirrored(req: &Value) -> Vec<(&'static str, String)> {
    let mut h = vec![("mcp-protocol-version", V.to_string())];
    let method = req["method"].as_str().unwrap().to_string();
    let name = match method.as_str() {
        "tools/call" | "prompts/get" => req["params"]["name"].as_str(),
        "resources/read" => req["params"]["uri"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => req["params"]["taskId"].as_str(),
        _ => None,
    };
    h.push(("mcp-method", method));
    if let Some(n) = name {
        h.push(("mcp-name", n.to_string()));
    }
    h
}

pub async fn post(c: &HttpMcp, req: &Value, headers: &[(&'static str, String)]) -> RawResponse {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    c.post_raw(serde_json::to_vec(req).unwrap(), &h).await
}

/// A modern request with its proper headers; the response's one message (JSON or the last
/// of an event stream) and every message before it.
pub async fn call(c: &HttpMcp, req: &Value) -> (u16, Value, Vec<Value>) {
    let r = post(c, req, &mirrored(req)).await;
    assert!(r.headers.get("mcp-session-id").is_none(), "no session is minted for a modern client");
    let messages = messages_of(&r);
    let last = messages.last().cloned().unwrap_or_else(|| panic!("no message: {:?}", String::from_utf8_lossy(&r.body)));
    (r.status, last, messages[..messages.len() - 1].to_vec())
}

pub fn messages_of(r: &RawResponse) -> Vec<Value> {
    let sse = r.headers.get("content-type").is_some_and(|c| c.to_str().unwrap().starts_with("text/event-stream"));
    if !sse {
        return if r.body.is_empty() { vec![] } else { vec![r.json()] };
    }
    String::from_utf8_lossy(&r.body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

/// Opens a `subscriptions/listen` stream (request `req`) and reads its acknowledgement.
pub async fn listen_stream(c: &HttpMcp, req: &Value) -> (SseReader, Value) {
    let h = mirrored(req);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c.post_streaming(serde_json::to_vec(req).unwrap(), &h).await;
    assert_eq!(resp.status(), 200);
    let mut events = SseReader::new(resp.into_body());
    let (_, ack) = events.next().await.expect("the acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    (events, ack)
}
