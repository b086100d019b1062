//! The tower layers of the HTTP front: CORS for `cors_origins` (none by default), and the
//! body limit left to `max_body_bytes` (one limit, one JSON-RPC error).

use crate::common;

use bytes::Bytes;
use common::{STEP, builtin_upstream, start_gateway};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;

async fn send(req: hyper::Request<Full<Bytes>>) -> (u16, hyper::HeaderMap, Bytes) {
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    let resp = tokio::time::timeout(STEP, client.request(req)).await.expect("timed out").expect("failed");
    let (parts, body) = resp.into_parts();
    let body = tokio::time::timeout(STEP, body.collect()).await.unwrap().unwrap().to_bytes();
    (parts.status.as_u16(), parts.headers, body)
}

fn preflight(url: &str, origin: &str) -> hyper::Request<Full<Bytes>> {
    hyper::Request::options(url)
        .header("origin", origin)
        .header("access-control-request-method", "GET")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

#[tokio::test]
async fn cors_admits_the_configured_origins_only() {
    let gw =
        start_gateway(&format!("[server]\ncors_origins = [\"https://tasks.example\"]\n{}", builtin_upstream("demo")))
            .await;
    let url = format!("http://{}/tasks", gw.addr);
    let (status, headers, _) = send(preflight(&url, "https://tasks.example")).await;
    assert_eq!(status, 200);
    assert_eq!(headers.get("access-control-allow-origin").unwrap(), "https://tasks.example");
    assert!(headers.get("access-control-allow-methods").unwrap().to_str().unwrap().contains("GET"));
    let (_, headers, _) = send(preflight(&url, "https://elsewhere.example")).await;
    assert!(headers.get("access-control-allow-origin").is_none(), "{headers:?}");
    // A simple request from the page gets the header too.
    let get = hyper::Request::get(format!("http://{}/healthz", gw.addr))
        .header("origin", "https://tasks.example")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, headers, _) = send(get).await;
    assert_eq!(status, 200);
    assert_eq!(headers.get("access-control-allow-origin").unwrap(), "https://tasks.example");
}

#[tokio::test]
async fn no_cors_by_default_and_one_body_limit() {
    let gw = start_gateway(&format!("[server]\nmax_body_bytes = 64\n{}", builtin_upstream("demo"))).await;
    let (_, headers, _) = send(preflight(&format!("http://{}/tasks", gw.addr), "http://localhost:3000")).await;
    assert!(headers.get("access-control-allow-origin").is_none(), "{headers:?}");
    let big = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#, "x".repeat(100));
    let post = hyper::Request::post(format!("http://{}/mcp/demo", gw.addr))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Full::new(Bytes::from(big)))
        .unwrap();
    let (status, _, body) = send(post).await;
    assert_eq!(status, 413);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["error"]["code"], -32600, "the limit's JSON-RPC error, not a layer's bare 413: {v}");
}
