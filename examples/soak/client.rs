//! A small Streamable HTTP MCP client for the soak: POSTs a body, reads the whole reply (plain
//! JSON or an event stream) and returns every JSON-RPC message in it.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;
use taskgate::transport::sse::Decoder;

/// The longest any one HTTP exchange may take.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(20);

pub type Http = Client<HttpConnector, Full<Bytes>>;

/// HTTP exchanges sent so far (every POST and DELETE).
pub static EXCHANGES: AtomicU64 = AtomicU64::new(0);

pub fn http_client() -> Http {
    Client::builder(hyper_util::rt::TokioExecutor::new()).pool_max_idle_per_host(64).build_http()
}

/// What one POST produced.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub session: Option<String>,
    pub messages: Vec<Value>,
}

/// The response to request `id` and the other messages that came with it.
#[derive(Debug)]
pub struct Outcome {
    pub response: Value,
    pub others: Vec<Value>,
}

impl Outcome {
    pub fn error_code(&self) -> Option<i64> {
        self.response.pointer("/error/code").and_then(Value::as_i64)
    }
}

/// One client session against one upstream route of the gateway.
#[derive(Clone)]
pub struct Mcp {
    pub url: String,
    pub session: Option<String>,
    pub version: String,
    http: Http,
    next_id: Arc<AtomicI64>,
}

impl Mcp {
    pub fn new(http: &Http, url: String, version: &str) -> Mcp {
        Mcp { url, session: None, version: version.into(), http: http.clone(), next_id: Arc::new(AtomicI64::new(1)) }
    }

    /// The same session over a connection of its own that is never reused: for requests after
    /// which the gateway closes the connection without saying so (an oversize body's 413).
    pub fn on_own_connection(&self) -> Mcp {
        let http = Client::builder(hyper_util::rt::TokioExecutor::new()).pool_max_idle_per_host(0).build_http();
        Mcp { http, ..self.clone() }
    }

    pub fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// POSTs `body` (with the session and version headers once initialized).
    pub async fn post(&self, body: Vec<u8>) -> Result<Reply, String> {
        let mut b = Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            b = b.header("mcp-session-id", s).header("mcp-protocol-version", &self.version);
        }
        let req = b.body(Full::new(Bytes::from(body))).map_err(|e| e.to_string())?;
        EXCHANGES.fetch_add(1, Ordering::Relaxed);
        let exchange = async {
            let resp = self.http.request(req).await.map_err(|e| format!("POST failed: {e}"))?;
            let status = resp.status().as_u16();
            let session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(String::from);
            let sse = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("text/event-stream"));
            let body = resp.into_body().collect().await.map_err(|e| format!("body failed: {e}"))?.to_bytes();
            Ok::<_, String>(Reply { status, session, messages: messages(&body, sse)? })
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange).await.map_err(|_| "POST timed out".to_string())?
    }

    /// Sends request `method` and returns its response; fails if none came.
    pub async fn request(&self, method: &str, params: Value) -> Result<Outcome, String> {
        let id = self.next_id();
        self.request_with_id(id, method, params).await
    }

    pub async fn request_with_id(&self, id: i64, method: &str, params: Value) -> Result<Outcome, String> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = self.post(serde_json::to_vec(&msg).unwrap()).await?;
        take_response(reply, id, method)
    }

    /// `initialize` + `notifications/initialized`; keeps the session id.
    pub async fn initialize(&mut self) -> Result<Value, String> {
        let params = json!({
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": "taskgate-soak", "version": "0"}
        });
        let reply = self
            .post(
                serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}))
                    .unwrap(),
            )
            .await?;
        let session = reply.session.clone().ok_or("initialize: no mcp-session-id")?;
        let out = take_response(reply, 0, "initialize")?;
        let got = out.response.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or("");
        if got != self.version {
            return Err(format!("initialize: negotiated {got:?}, asked {}", self.version));
        }
        self.session = Some(session);
        let ack = self.post(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec()).await?;
        if ack.status != 202 {
            return Err(format!("notifications/initialized: HTTP {}", ack.status));
        }
        Ok(out.response)
    }

    /// DELETEs the session; returns the HTTP status.
    pub async fn delete(&self) -> Result<u16, String> {
        let Some(s) = &self.session else { return Err("no session".into()) };
        let req = Request::delete(&self.url)
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", &self.version)
            .body(Full::new(Bytes::new()))
            .unwrap();
        EXCHANGES.fetch_add(1, Ordering::Relaxed);
        let resp = tokio::time::timeout(EXCHANGE_TIMEOUT, self.http.request(req))
            .await
            .map_err(|_| "DELETE timed out".to_string())?
            .map_err(|e| format!("DELETE failed: {e}"))?;
        let status = resp.status().as_u16();
        let _ = resp.into_body().collect().await;
        Ok(status)
    }
}

/// The JSON-RPC messages of a reply body.
fn messages(body: &[u8], sse: bool) -> Result<Vec<Value>, String> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    if !sse {
        return match serde_json::from_slice::<Value>(body) {
            Ok(Value::Array(items)) => Ok(items),
            Ok(v) => Ok(vec![v]),
            Err(_) => Ok(Vec::new()), // a plain-text error body (404, 413, ...)
        };
    }
    let mut d = Decoder::new(1 << 24);
    let events = d.feed(body).map_err(|_| "SSE line too long".to_string())?;
    events
        .iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| serde_json::from_str(&e.data).map_err(|err| format!("SSE data is not JSON ({err}): {}", e.data)))
        .collect()
}

/// Splits out the response to `id`: exactly one, with a matching id and `result` or `error`.
pub fn take_response(reply: Reply, id: i64, what: &str) -> Result<Outcome, String> {
    let (mut responses, others): (Vec<Value>, Vec<Value>) =
        reply.messages.into_iter().partition(|m| m.get("method").is_none() && m.get("id").is_some());
    if responses.len() != 1 {
        return Err(format!("{what}: HTTP {}, {} responses, want 1: {responses:?}", reply.status, responses.len()));
    }
    let response = responses.pop().unwrap();
    if response["id"] != id {
        return Err(format!("{what}: response id {} for request id {id}", response["id"]));
    }
    if response.get("result").is_some() == response.get("error").is_some() {
        return Err(format!("{what}: neither result nor error: {response}"));
    }
    Ok(Outcome { response, others })
}
