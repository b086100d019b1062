//! Tracing spans: one per HTTP request and one per JSON-RPC request (upstream, method, id,
//! session), seen by an in-process subscriber layer; and, with the `otlp` feature, exported
//! over OTLP/HTTP to a collector of the test's own on 127.0.0.1.

use crate::common;

use common::spans::Seen;
use common::{builtin_upstream, start_gateway};
use serde_json::json;

#[tokio::test]
async fn each_http_request_and_each_rpc_request_has_a_span() {
    // The test's runtime is this thread's: every task of the gateway runs under it.
    let (seen, _default) = Seen::install();
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut mcp = common::HttpMcp::new(&gw.url("demo"));
    mcp.initialize("2025-06-18").await;
    let listed = mcp.request("tools/list", json!({})).await;
    assert!(listed.response["result"]["tools"].is_array());

    let spans = seen.spans();
    let rpc = spans
        .iter()
        .find(|(name, f)| name == "rpc_request" && f.contains(&"method=tools/list".to_string()))
        .unwrap_or_else(|| panic!("no rpc_request span for tools/list in {spans:?}"));
    assert!(rpc.1.contains(&"upstream=demo".to_string()), "{rpc:?}");
    assert!(rpc.1.iter().any(|f| f.starts_with("id=")) && rpc.1.iter().any(|f| f.starts_with("session=")), "{rpc:?}");
    let http = spans.iter().filter(|(name, f)| name == "http_request" && f.contains(&"path=/mcp/demo".to_string()));
    assert!(http.count() >= 3, "initialize, initialized and tools/list each have one: {spans:?}");
}

#[cfg(feature = "otlp")]
#[tokio::test]
async fn spans_are_exported_to_the_otlp_collector() {
    use bytes::Bytes;
    use common::gateway_proc::{signal, start};
    use http_body_util::{BodyExt, Full};
    use std::sync::{Arc, Mutex};

    // A collector that keeps every body posted to /v1/traces.
    type Posted = Arc<Mutex<Vec<(String, Bytes)>>>;
    let posted: Posted = Default::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = listener.local_addr().unwrap();
    let keep = posted.clone();
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let keep = keep.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let keep = keep.clone();
                    async move {
                        let path = req.uri().path().to_string();
                        let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        keep.lock().unwrap().push((path, body));
                        let resp = hyper::Response::builder()
                            .header("content-type", "application/x-protobuf")
                            .body(Full::new(Bytes::new()))
                            .unwrap();
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n[server.otlp]\nendpoint = \"http://{collector}\"\nservice_name = \"tg-test\"\n[tasks]\nstore = \"memory\"\n{}",
            builtin_upstream("demo")
        ),
    )
    .unwrap();
    let (mut gw, addr) = start(&cfg).await;
    let mut mcp = common::HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    mcp.initialize("2025-06-18").await;
    assert!(mcp.request("tools/list", json!({})).await.response["result"]["tools"].is_array());

    // Shutdown flushes what is batched.
    signal(gw.pid(), libc::SIGTERM);
    let exited = tokio::time::timeout(common::STEP, gw.0.wait()).await.expect("the gateway exits").unwrap();
    assert!(exited.success());
    let posted = posted.lock().unwrap().clone();
    server.abort();
    assert!(
        posted.iter().all(|(path, _)| path == "/v1/traces"),
        "{:?}",
        posted.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let all: Vec<u8> = posted.iter().flat_map(|(_, b)| b.to_vec()).collect();
    let has = |s: &str| all.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(has("rpc_request") && has("tools/list"), "no span of tools/list among {} exports", posted.len());
    assert!(has("tg-test"), "the service name is the configured one");
}
