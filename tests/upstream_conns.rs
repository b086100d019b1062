//! The connections of an HTTP upstream session: kept alive and reused, replaced when the
//! server closes them, and a slow answer (a long event stream) never holds up the next
//! request, over either downstream transport.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// A scripted upstream: `slow` answers on an event stream after 1.5 s, anything else at
/// once with plain JSON.
async fn slow_and_fast() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" if req["params"]["name"] == "slow" => vec![Step::Sleep(1500), reply(req, json!({"slow": true}))],
        _ => vec![Step::Plain(
            200,
            vec![("content-type", "application/json".into())],
            json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {"fast": true}}).to_string(),
        )],
    })
    .await
}

#[tokio::test]
async fn a_long_event_stream_does_not_hold_up_the_next_request_over_http() {
    let up = slow_and_fast().await;
    let (_gw, c) = session_through_gateway(&up.url()).await;
    let c = Arc::new(c);
    let slow_client = c.clone();
    let slow = tokio::spawn(async move { slow_client.request_owned("tools/call", json!({"name": "slow"})).await });
    eventually("the slow call reached the upstream", async || {
        up.received.lock().unwrap().iter().any(|m| m["params"]["name"] == "slow")
    })
    .await;
    for _ in 0..3 {
        let out = c.request_owned("tools/call", json!({"name": "fast"})).await;
        assert_eq!(out.result()["fast"], true, "{}", out.response);
    }
    assert!(!slow.is_finished(), "the fast calls were answered while the slow one still runs");
    let out = tokio::time::timeout(STEP, slow).await.unwrap().unwrap();
    assert_eq!(out.result()["slow"], true, "{}", out.response);
}

#[tokio::test]
async fn a_long_event_stream_does_not_hold_up_the_next_request_over_stdio() {
    // `taskgate stdio` reads its next line only once the last one is handled: the slow call
    // must move out of its way.
    let up = slow_and_fast().await;
    let mut c = StdioMcp::start(&http_upstream("up", &up.url()), "up").await;
    c.initialize("2025-06-18").await;
    c.send(&json!({"jsonrpc": "2.0", "id": 1001, "method": "tools/call", "params": {"name": "slow"}})).await;
    c.send(&json!({"jsonrpc": "2.0", "id": 1002, "method": "tools/call", "params": {"name": "fast"}})).await;
    let first = c.recv().await;
    assert_eq!(first["id"], 1002, "the fast call is answered first: {first}");
    let out = c.wait_response(1001).await;
    assert_eq!(out.result()["slow"], true, "{}", out.response);
}

/// An upstream that answers every POST with plain JSON over HTTP/1.1, written by hand so
/// that a test sees its connections: it counts them (all, and those still open), and with
/// `close` it closes each one after its first answer (without saying so in the headers).
/// A `tools/call` of `hang` is never answered: its connection waits for the client to close.
struct JsonUpstream {
    addr: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    hanging: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JsonUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl JsonUpstream {
    async fn start(close: bool) -> JsonUpstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let hanging = Arc::new(AtomicUsize::new(0));
        let (count, open2, hanging2) = (connections.clone(), open.clone(), hanging.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                count.fetch_add(1, Ordering::SeqCst);
                open2.fetch_add(1, Ordering::SeqCst);
                let (open, hanging) = (open2.clone(), hanging2.clone());
                tokio::spawn(async move {
                    serve_json(tcp, close, &hanging).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        JsonUpstream { addr, connections, open, hanging, task }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Waits (boundedly) until `f` holds of the counts (open, hanging); false if it never does.
    async fn wait_for(&self, f: impl Fn(usize, usize) -> bool) -> bool {
        let counts = || (self.open.load(Ordering::SeqCst), self.hanging.load(Ordering::SeqCst));
        pace::until_async(Duration::from_secs(15), async || f(counts().0, counts().1).then_some(())).await.is_some()
    }
}

/// Serves one connection: at most 100 requests, each answered at once (but `hang`).
async fn serve_json(tcp: tokio::net::TcpStream, close: bool, hanging: &AtomicUsize) {
    let (rd, mut wr) = tcp.into_split();
    let mut rd = BufReader::new(rd);
    for _ in 0..100 {
        let (mut method, mut length) = (String::new(), 0usize);
        let mut line = String::new();
        loop {
            line.clear();
            if rd.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if method.is_empty() {
                method = l.split(' ').next().unwrap_or("").to_string();
            } else if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        if rd.read_exact(&mut body).await.is_err() {
            return;
        }
        let msg: Value = if method == "POST" { serde_json::from_slice(&body).unwrap() } else { Value::Null };
        if msg["params"]["name"] == "hang" {
            hanging.fetch_add(1, Ordering::SeqCst);
            let _ = rd.read(&mut [0; 1]).await;
            hanging.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let answer = match msg["method"].as_str() {
            _ if method != "POST" => "HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n".to_string(),
            Some(_) if msg.get("id").is_none() => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_string(),
            Some(m) => {
                let result = match m {
                    "initialize" => json!({"protocolVersion": msg["params"]["protocolVersion"].clone(),
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "json", "version": "0"}}),
                    _ => json!({"method": m}),
                };
                let body = json!({"jsonrpc": "2.0", "id": msg["id"].clone(), "result": result}).to_string();
                // `tools/call` of `sse`: the answer as the one event of a stream that ends with it.
                let (content_type, body) = match msg["params"]["name"] == "sse" {
                    true => ("text/event-stream", format!("id: 1\ndata: {body}\n\n")),
                    false => ("application/json", body),
                };
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
            None => "HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_string(),
        };
        if wr.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        if close {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

#[tokio::test]
async fn a_session_keeps_its_connection_alive() {
    let up = JsonUpstream::start(false).await;
    let (_gw, mut c) = session_through_gateway(&up.url()).await;
    for _ in 0..20 {
        let out = c.request("tools/list", json!({})).await;
        assert_eq!(out.result()["method"], "tools/list", "{}", out.response);
    }
    // initialize, notifications/initialized, the GET (405) and 20 calls, one after another:
    // one connection carries them (two if the GET ran beside a call).
    assert!(up.connections() <= 2, "{} connections", up.connections());
}

#[tokio::test]
async fn an_event_stream_that_ends_with_its_answer_keeps_its_connection() {
    let up = JsonUpstream::start(false).await;
    let (_gw, mut c) = session_through_gateway(&up.url()).await;
    for _ in 0..20 {
        let out = c.request("tools/call", json!({"name": "sse"})).await;
        assert_eq!(out.result()["method"], "tools/call", "{}", out.response);
    }
    assert!(up.connections() <= 2, "{} connections", up.connections());
}

#[tokio::test]
async fn a_connection_the_server_closes_is_replaced() {
    let up = JsonUpstream::start(true).await;
    let (_gw, mut c) = session_through_gateway(&up.url()).await;
    for i in 0..10 {
        // Some calls at once, some once the server has closed the last connection.
        if i % 3 == 0 {
            assert!(up.wait_for(|open, _| open == 0).await, "the server did not close its connection");
        }
        let out = c.request("tools/list", json!({})).await;
        assert_eq!(out.result()["method"], "tools/list", "call {i}: {}", out.response);
    }
    assert!(up.connections() >= 10, "{} connections", up.connections());
}

#[tokio::test]
async fn a_request_still_running_when_its_session_ends_is_stopped() {
    let up = JsonUpstream::start(false).await;
    let (_gw, c) = session_through_gateway(&up.url()).await;
    let c = Arc::new(c);
    let caller = c.clone();
    let hang = tokio::spawn(async move { caller.request_owned("tools/call", json!({"name": "hang"})).await });
    assert!(up.wait_for(|_, hanging| hanging == 1).await, "the call reached the upstream");
    assert_eq!(c.delete().await, 200);
    // The session is gone: nothing of it stays open upstream, the call's connection included.
    assert!(up.wait_for(|open, _| open == 0).await, "{} connections still open", up.open.load(Ordering::SeqCst));
    hang.abort();
}

/// A gateway in front of the upstream at `url`, and an initialized client session through it.
async fn session_through_gateway(url: &str) -> (Gw, HttpMcp) {
    let gw = start_gateway(&http_upstream("up", url)).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    (gw, c)
}

/// Answers go nowhere: for a session used without a link above it.
struct NoSink;

impl taskgate::InboundSink for NoSink {
    fn message(&self, _: taskgate::jsonrpc::Message, _: Option<taskgate::jsonrpc::Id>) {}
    fn request_failed(&self, _: taskgate::jsonrpc::Id, _: taskgate::TransportError) {}
    fn closed(&self, _: taskgate::TransportError) {}
}

#[tokio::test]
async fn an_upstream_session_dropped_without_closing_stops_what_runs_for_it() {
    use taskgate::{HttpClient, HttpConn, HttpSettings};
    let up = JsonUpstream::start(false).await;
    let http = HttpClient::new(1 << 20, Duration::from_secs(5));
    let settings = HttpSettings {
        name: "up".into(),
        url: up.url(),
        headers: vec![],
        connect_timeout: Duration::from_secs(5),
        max_request_time: Duration::from_secs(3600),
        max_in_flight: 16,
        max_batch: 64,
        credential: None,
    };
    let conn = HttpConn::new(&http, &settings, Arc::new(NoSink)).unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang"}});
    conn.send(taskgate::jsonrpc::Message::made(call)).await.unwrap();
    assert!(up.wait_for(|_, hanging| hanging == 1).await, "the call reached the upstream");
    drop(conn);
    assert!(up.wait_for(|open, _| open == 0).await, "{} connections still open", up.open.load(Ordering::SeqCst));
}

/// A call the client cancels stops upstream too: its connection closes (the server ignores
/// the cancellation and would hold it until max_request_time), and the session goes on.
#[tokio::test]
async fn a_cancelled_request_frees_its_upstream_connection() {
    let up = JsonUpstream::start(false).await;
    let (_gw, c) = session_through_gateway(&up.url()).await;
    let c = Arc::new(c);
    let caller = c.clone();
    let hang = tokio::spawn(async move {
        caller
            .post_raw(
                serde_json::to_vec(
                    &json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "hang"}}),
                )
                .unwrap(),
                &[],
            )
            .await
    });
    assert!(up.wait_for(|_, hanging| hanging == 1).await, "the call reached the upstream");
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41, "reason": "no"}});
    assert_eq!(c.post_raw(serde_json::to_vec(&cancel).unwrap(), &[]).await.status, 202);
    assert!(up.wait_for(|_, hanging| hanging == 0).await, "the cancelled call still holds its upstream connection");
    let out = c.request_owned("tools/list", json!({})).await;
    assert_eq!(out.result()["method"], "tools/list", "{}", out.response);
    hang.abort();
}
