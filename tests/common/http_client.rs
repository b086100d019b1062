//! A Streamable HTTP MCP client that records everything it receives, and an SSE reader.

use super::{Outcome, STEP, answer, init_params};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use taskgate::sse;

pub struct HttpMcp {
    pub url: String,
    pub session: Option<String>,
    pub version: Option<String>,
    /// Sent as `Authorization: Bearer` on every request, if set.
    pub bearer: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
    next_id: i64,
}

pub struct RawResponse {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

impl HttpMcp {
    pub fn new(url: &str) -> HttpMcp {
        HttpMcp {
            url: url.to_string(),
            session: None,
            version: None,
            bearer: None,
            client: Client::builder(hyper_util::rt::TokioExecutor::new()).build_http(),
            next_id: 1,
        }
    }

    pub fn next_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn builder(&self, method: &str) -> hyper::http::request::Builder {
        let mut b = Request::builder().method(method).uri(&self.url);
        if let Some(s) = &self.session {
            b = b.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            b = b.header("mcp-protocol-version", v);
        }
        if let Some(t) = &self.bearer {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        b
    }

    /// Sends a raw POST with extra headers and returns the response still streaming.
    pub async fn post_streaming(&self, body: Vec<u8>, extra: &[(&str, &str)]) -> Response<Incoming> {
        let mut b = self.builder("POST");
        for (k, v) in [("content-type", "application/json"), ("accept", "application/json, text/event-stream")] {
            if !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(k)) {
                b = b.header(k, v);
            }
        }
        let headers = b.headers_mut().unwrap();
        for (k, v) in extra {
            headers.insert(hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        let req = b.body(Full::new(Bytes::from(body))).unwrap();
        tokio::time::timeout(STEP, self.client.request(req)).await.expect("POST timed out").expect("POST failed")
    }

    /// Sends a raw POST and reads the whole response.
    pub async fn post_raw(&self, body: Vec<u8>, extra: &[(&str, &str)]) -> RawResponse {
        let resp = self.post_streaming(body, extra).await;
        read_all(resp).await
    }

    pub async fn get_raw(&self, extra: &[(&str, &str)]) -> Response<Incoming> {
        let mut b = self.builder("GET").header("accept", "text/event-stream");
        for (k, v) in extra {
            b = b.header(*k, *v);
        }
        let req = b.body(Full::new(Bytes::new())).unwrap();
        tokio::time::timeout(STEP, self.client.request(req)).await.expect("GET timed out").expect("GET failed")
    }

    pub async fn delete(&self) -> u16 {
        let req = self.builder("DELETE").body(Full::new(Bytes::new())).unwrap();
        let resp = tokio::time::timeout(STEP, self.client.request(req)).await.unwrap().unwrap();
        resp.status().as_u16()
    }

    /// initialize + notifications/initialized; returns the initialize result.
    pub async fn initialize(&mut self, version: &str) -> Value {
        self.initialize_with(init_params(version)).await
    }

    /// [`HttpMcp::initialize`] with these `initialize` params.
    pub async fn initialize_with(&mut self, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
        let resp = self.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
        assert_eq!(resp.status, 200, "initialize failed: {:?}", String::from_utf8_lossy(&resp.body));
        self.session = Some(resp.headers.get("mcp-session-id").expect("session id").to_str().unwrap().to_string());
        let v = first_message(&resp);
        let result = v["result"].clone();
        self.version = Some(result["protocolVersion"].as_str().unwrap().to_string());
        let n = self.notify("notifications/initialized", json!({})).await;
        assert_eq!(n, 202);
        result
    }

    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await.status
    }

    /// A request; server requests that arrive on its stream are answered with [`answer`].
    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        let id = self.next_id();
        self.request_with_id(id, method, params).await
    }

    /// Like `request`, callable concurrently (ids are drawn from a shared counter).
    pub async fn request_owned(&self, method: &str, params: Value) -> Outcome {
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1_000_000);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.request_with_id(id, method, params).await
    }

    async fn request_with_id(&self, id: i64, method: &str, params: Value) -> Outcome {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.post_streaming(serde_json::to_vec(&msg).unwrap(), &[]).await;
        assert_eq!(resp.status(), 200, "{method} got HTTP {}", resp.status());
        let sse = resp.headers().get("content-type").unwrap().to_str().unwrap().starts_with("text/event-stream");
        if !sse {
            let raw = read_all(resp).await;
            return Outcome { response: raw.json(), others: vec![] };
        }
        let mut out = Outcome::default();
        let mut events = SseReader::new(resp.into_body());
        while let Some((_, m)) = events.next().await {
            if m.get("method").is_some() && m.get("id").is_some() {
                let reply = answer(&m);
                let r = self.post_raw(serde_json::to_vec(&reply).unwrap(), &[]).await;
                assert_eq!(r.status, 202);
                out.others.push(m);
            } else if m.get("method").is_none() && m["id"] == json!(id) {
                out.response = m;
                return out;
            } else {
                out.others.push(m);
            }
        }
        panic!("stream ended without a response to {method}; got {:?}", out.others);
    }
}

pub async fn read_all(resp: Response<Incoming>) -> RawResponse {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body =
        tokio::time::timeout(STEP, resp.into_body().collect()).await.expect("body timed out").unwrap().to_bytes();
    RawResponse { status, headers, body }
}

/// The first JSON-RPC message of a JSON or SSE response.
pub fn first_message(resp: &RawResponse) -> Value {
    let ct = resp.headers.get("content-type").map(|v| v.to_str().unwrap()).unwrap_or("");
    if ct.starts_with("text/event-stream") {
        let mut d = sse::Decoder::new(1 << 20);
        let evs = d.feed(&resp.body).unwrap();
        serde_json::from_str(&evs.iter().find(|e| !e.data.is_empty()).unwrap().data).unwrap()
    } else {
        resp.json()
    }
}

/// Reads SSE events (id, message) from a body, with a timeout per event.
pub struct SseReader {
    body: Incoming,
    decoder: sse::Decoder,
    ready: std::collections::VecDeque<(Option<String>, Value)>,
}

impl SseReader {
    pub fn new(body: Incoming) -> SseReader {
        SseReader { body, decoder: sse::Decoder::new(1 << 22), ready: Default::default() }
    }

    pub async fn next(&mut self) -> Option<(Option<String>, Value)> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            let frame = tokio::time::timeout(STEP, self.body.frame()).await.expect("SSE event timed out")?;
            let Ok(data) = frame.ok()?.into_data() else { continue };
            for ev in self.decoder.feed(&data).unwrap() {
                if !ev.data.is_empty() {
                    self.ready.push_back((ev.id.clone(), serde_json::from_str(&ev.data).unwrap()));
                }
            }
        }
    }
}
