//! The operator's routes: `/healthz`, `/readyz` (200 with the demo, 503 naming an upstream
//! that cannot be reached) and `/metrics` (Prometheus text, counted right).

mod common;

use bytes::Bytes;
use common::{STEP, builtin_upstream, http_upstream, start_gateway};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;

async fn get(url: &str, host: Option<&str>) -> (u16, String) {
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut b = hyper::Request::get(url);
    if let Some(h) = host {
        b = b.header("host", h);
    }
    let resp = tokio::time::timeout(STEP, client.request(b.body(Full::new(Bytes::new())).unwrap()))
        .await
        .expect("GET timed out")
        .expect("GET failed");
    let status = resp.status().as_u16();
    let body = tokio::time::timeout(STEP, resp.into_body().collect()).await.unwrap().unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn healthz_is_ok_and_readyz_too_with_the_demo() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let base = format!("http://{}", gw.addr);
    assert_eq!(get(&format!("{base}/healthz"), None).await, (200, "ok\n".to_string()));
    // Probes reach them by address, whatever Host they send.
    assert_eq!(get(&format!("{base}/healthz"), Some("10.1.2.3:8700")).await.0, 200);
    assert_eq!(get(&format!("{base}/readyz"), None).await, (200, "ok\n".to_string()));
    // Not an MCP path, and not for POST.
    let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build_http::<Full<Bytes>>();
    let req = hyper::Request::post(format!("{base}/readyz")).body(Full::new(Bytes::new())).unwrap();
    let resp = tokio::time::timeout(STEP, client.request(req)).await.unwrap().unwrap();
    assert_eq!(resp.status().as_u16(), 405);
}

#[tokio::test]
async fn readyz_names_an_upstream_that_cannot_be_reached() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let config = format!("{}{}", builtin_upstream("demo"), http_upstream("web", &format!("http://{closed}/mcp")));
    let gw = start_gateway(&config).await;
    let base = format!("http://{}", gw.addr);
    let (status, body) = get(&format!("{base}/readyz"), None).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.starts_with("unreachable upstreams:\n"), "{body}");
    assert!(body.contains(&format!("web: cannot connect to 127.0.0.1:{}", closed.port())), "{body}");
    assert!(!body.contains("demo"), "{body}");
    // The process still serves.
    assert_eq!(get(&format!("{base}/healthz"), None).await.0, 200);
}
