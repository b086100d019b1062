//! The operator's routes: `/healthz`, `/readyz` (200 with the demo, 503 naming an upstream
//! that cannot be reached) and `/metrics` (Prometheus text, counted right).

use crate::common;

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

/// The value of `metric` with exactly these labels in a scrape (0 if absent).
fn sample(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus_parse::Value;
    let found = scrape.samples.iter().find(|s| {
        s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)) && s.labels.len() == labels.len()
    });
    match found.map(|s| &s.value) {
        None => 0.0,
        Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => *v,
        Some(other) => panic!("{metric}: not a single value: {other:?}"),
    }
}

async fn scrape(base: &str) -> prometheus_parse::Scrape {
    let (status, text) = get(&format!("{base}/metrics"), None).await;
    assert_eq!(status, 200);
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("Prometheus text")
}

#[tokio::test]
async fn metrics_count_requests_latency_sessions_and_bytes() {
    let gw = start_gateway(&builtin_upstream("metered")).await;
    let base = format!("http://{}", gw.addr);
    let calls = [("upstream", "metered"), ("method", "tools/call"), ("outcome", "ok")];
    let timed = [("upstream", "metered"), ("method", "tools/call")];
    let before = scrape(&base).await;
    assert_eq!(sample(&before, "taskgate_requests_total", &calls), 0.0, "a series of every known method, from 0");
    assert_eq!(sample(&before, "taskgate_sessions", &[("transport", "streamable_http")]), 0.0);

    let mut mcp = common::HttpMcp::new(&gw.url("metered"));
    mcp.initialize("2025-06-18").await;
    for i in 0..3 {
        let out =
            mcp.request("tools/call", serde_json::json!({"name": "echo", "arguments": {"text": format!("{i}")}})).await;
        assert!(out.response.get("result").is_some(), "{:?}", out.response);
    }
    let unknown = mcp.request("vendor/unknown", serde_json::json!({})).await;
    assert_eq!(unknown.error_code(), -32601);

    let after = scrape(&base).await;
    assert_eq!(sample(&after, "taskgate_requests_total", &calls), 3.0);
    assert_eq!(sample(&after, "taskgate_request_duration_seconds_count", &timed), 3.0);
    let other = [("upstream", "metered"), ("method", "other"), ("outcome", "invalid")];
    assert_eq!(sample(&after, "taskgate_requests_total", &other), 1.0, "an unknown method counts as other");
    let init = [("upstream", "metered"), ("method", "initialize"), ("outcome", "ok")];
    assert_eq!(sample(&after, "taskgate_requests_total", &init), 1.0);
    assert_eq!(sample(&after, "taskgate_sessions", &[("transport", "streamable_http")]), 1.0);
    let connects = [("upstream", "metered"), ("outcome", "ok")];
    assert_eq!(sample(&after, "taskgate_upstream_connects_total", &connects), 1.0);
    let bytes_in = [("direction", "in")];
    assert!(
        sample(&after, "taskgate_http_body_bytes_total", &bytes_in)
            > sample(&before, "taskgate_http_body_bytes_total", &bytes_in)
    );

    assert_eq!(mcp.delete().await, 200);
    let ended = scrape(&base).await;
    assert_eq!(sample(&ended, "taskgate_sessions", &[("transport", "streamable_http")]), 0.0);
}

/// The `THP_enabled` line of `/proc/<pid>/status` (`self` for the test process).
fn thp_enabled(pid: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|l| l.starts_with("THP_enabled:")).expect("a THP_enabled line").to_string()
}

/// The gateway binary turns transparent huge pages off for its own process (khugepaged
/// kept the allocator's sparse regions resident after a load: docs/performance.md), and the
/// upstream processes it starts have the setting it was started with.
#[tokio::test]
async fn huge_pages_are_off_for_the_gateway_and_as_started_for_its_upstreams() {
    use common::gateway_proc::{listening, serve_command};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("thp");
    let config = dir.path().join("config.toml");
    let script = format!("grep THP_enabled /proc/self/status > {}; exec {} demo-server", log.display(), common::bin());
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\nstore = \"memory\"\n[[upstream]]\nname = \"up\"\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    );
    std::fs::write(&config, text).unwrap();
    let mut cmd = serve_command(&config);
    cmd.env_remove("MIMALLOC_ALLOW_THP");
    let (gw, addr) = listening(cmd.spawn().unwrap()).await;
    assert_eq!(thp_enabled(&gw.pid().to_string()), "THP_enabled:\t0");
    let mut c = common::HttpMcp::new(&format!("http://{addr}/mcp/up"));
    c.initialize("2025-11-25").await;
    common::eventually("the upstream started", async || std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty()))
        .await;
    let upstream = std::fs::read_to_string(&log).unwrap();
    assert_eq!(upstream.trim(), thp_enabled("self"), "as the gateway was started (by this test)");
}
