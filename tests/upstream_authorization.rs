//! Whether a client's `Authorization` reaches an HTTP upstream (`authorization`): never by
//! default, where the upstream gets its configured headers only; with `"pass"`, each
//! session's own link carries its client's latest token, and a 2026-07-28 client's request
//! goes on a link of its own that carries the token of that request.

use crate::common;

use common::modern::modern_server;
use common::modern_client::{self as mc};
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// What the upstream heard: each message's method (or HTTP method), the text argument of a
/// call, and the `Authorization` it came with.
type Heard = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

fn heard_by(heard: &Heard, req: &Value, h: &hyper::HeaderMap) {
    let what = req["method"].as_str().or(req["http"].as_str()).unwrap_or("response").to_string();
    let text = req["params"]["arguments"]["text"].as_str().unwrap_or("").to_string();
    // Every value, so that a second header (the client's beside the configured one) shows.
    let all: Vec<&str> = h.get_all("authorization").iter().map(|v| v.to_str().unwrap()).collect();
    let auth = (!all.is_empty()).then(|| all.join(", "));
    heard.lock().unwrap().push((what, text, auth));
}

/// A 2025-11-25 upstream that echoes and notes the `Authorization` of everything it gets.
async fn legacy_upstream() -> (Scripted, Heard) {
    let heard: Heard = Default::default();
    let h2 = heard.clone();
    let up = Scripted::start_with_headers(move |req, h| {
        heard_by(&h2, req, h);
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}})),
            "tools/list" => vec![reply(req, json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}))],
            "tools/call" => {
                let text = req["params"]["arguments"]["text"].clone();
                vec![reply(req, json!({"content": [{"type": "text", "text": text}]}))]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    (up, heard)
}

fn auths_of(heard: &Heard, method: &str, text: &str) -> Vec<Option<String>> {
    heard.lock().unwrap().iter().filter(|(m, t, _)| m == method && t == text).map(|(_, _, a)| a.clone()).collect()
}

fn all_auths(heard: &Heard) -> Vec<Option<String>> {
    heard.lock().unwrap().iter().map(|(_, _, a)| a.clone()).collect()
}

/// A gateway whose upstream `up` receives the client's own `Authorization`.
async fn pass_gateway(up: &Scripted) -> Gw {
    start_gateway(&format!("{}authorization = \"pass\"\n", http_upstream("up", &up.url()))).await
}

/// What the upstream heard once, with this bearer token.
fn bearer(token: &str) -> Vec<Option<String>> {
    vec![Some(format!("Bearer {token}"))]
}

async fn session(gw: &Gw, bearer: Option<&str>) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.bearer = bearer.map(str::to_string);
    c.initialize("2025-11-25").await;
    c
}

async fn echo(c: &mut HttpMcp, text: &str) {
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": text}})).await;
    assert_eq!(out.result()["content"][0]["text"], text, "{:?}", out.response);
}

#[tokio::test]
async fn by_default_an_upstream_gets_its_configured_headers_and_never_the_clients_token() {
    let (up, heard) = legacy_upstream().await;
    let config = format!("{}headers = {{ Authorization = \"Bearer configured\" }}\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = session(&gw, Some("client-secret")).await;
    echo(&mut c, "hello").await;
    assert_eq!(c.delete().await, 200);

    let auths = all_auths(&heard);
    assert!(auths.len() >= 3, "initialize, initialized, the call: {auths:?}");
    assert!(auths.iter().all(|a| a.as_deref() == Some("Bearer configured")), "{auths:?}");
}

#[tokio::test]
async fn pass_sends_each_session_its_own_clients_latest_token() {
    let (up, heard) = legacy_upstream().await;
    let gw = pass_gateway(&up).await;
    let mut alice = session(&gw, Some("alice-1")).await;
    let mut bob = session(&gw, Some("bob-1")).await;
    let mut nobody = session(&gw, None).await;
    echo(&mut alice, "from alice").await;
    echo(&mut bob, "from bob").await;
    echo(&mut nobody, "from nobody").await;

    let inits = auths_of(&heard, "initialize", "");
    assert_eq!(inits.len(), 3);
    for want in [Some("Bearer alice-1"), Some("Bearer bob-1"), None] {
        assert!(inits.iter().any(|a| a.as_deref() == want), "{want:?} initialized its own upstream session: {inits:?}");
    }
    assert_eq!(auths_of(&heard, "tools/call", "from alice"), bearer("alice-1"));
    assert_eq!(auths_of(&heard, "tools/call", "from bob"), bearer("bob-1"));
    assert_eq!(auths_of(&heard, "tools/call", "from nobody"), vec![None]);

    // A refreshed token is what the session's next request carries upstream.
    alice.bearer = Some("alice-2".into());
    echo(&mut alice, "alice again").await;
    assert_eq!(auths_of(&heard, "tools/call", "alice again"), bearer("alice-2"));
    assert_eq!(auths_of(&heard, "tools/call", "from bob").len(), 1, "bob's session was not touched");
}

/// A 2026-07-28 upstream, noting the `Authorization` of each request.
async fn modern_upstream() -> (Scripted, Heard) {
    let heard: Heard = Default::default();
    let h2 = heard.clone();
    let up = Scripted::start_with_headers(move |req, h| {
        heard_by(&h2, req, h);
        modern_server(req, h)
    })
    .await;
    (up, heard)
}

async fn modern_echo(gw: &Gw, bearer: Option<&str>, text: &str) {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.bearer = bearer.map(str::to_string);
    let req = mc::request(json!(1), "tools/call", json!({"name": "echo", "arguments": {"text": text}}), json!({}));
    let (status, resp, _) = mc::call(&c, &req).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["result"]["content"][0]["text"], text, "{resp}");
}

/// A 2026-07-28 call each from alice and bob, each heard upstream with its own token.
async fn alice_and_bob_each_with_their_own(gw: &Gw, heard: &Heard) {
    modern_echo(gw, Some("m-alice"), "modern alice").await;
    modern_echo(gw, Some("m-bob"), "modern bob").await;
    assert_eq!(auths_of(heard, "tools/call", "modern alice"), bearer("m-alice"));
    assert_eq!(auths_of(heard, "tools/call", "modern bob"), bearer("m-bob"));
}

#[tokio::test]
async fn a_modern_clients_request_carries_its_own_token_only_with_pass() {
    let (up, heard) = modern_upstream().await;
    let gw = pass_gateway(&up).await;
    alice_and_bob_each_with_their_own(&gw, &heard).await;
    modern_echo(&gw, None, "modern nobody").await;
    assert_eq!(auths_of(&heard, "tools/call", "modern nobody"), vec![None]);

    let (up, heard) = modern_upstream().await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    modern_echo(&gw, Some("m-alice"), "replaced").await;
    let auths = all_auths(&heard);
    assert!(!auths.is_empty() && auths.iter().all(Option::is_none), "{auths:?}");
}

#[tokio::test]
async fn a_modern_client_in_front_of_a_legacy_upstream_with_pass_gets_a_session_of_its_own_token() {
    let (up, heard) = legacy_upstream().await;
    let gw = pass_gateway(&up).await;
    alice_and_bob_each_with_their_own(&gw, &heard).await;
    let inits = auths_of(&heard, "initialize", "");
    assert!(
        inits.contains(&Some("Bearer m-alice".into())) && inits.contains(&Some("Bearer m-bob".into())),
        "{inits:?}"
    );
    // Each request's upstream session ends with it.
    let deletes = || up.received_http().iter().filter(|m| *m == "DELETE").count();
    eventually("both upstream sessions deleted", async || deletes() == 2).await;
}

/// With `"pass"`, an upstream's 401 to one client's token is that client's answer: the
/// client hears it, and `/readyz` neither turns 503 nor shows the upstream's words.
#[tokio::test]
async fn a_clients_refused_token_is_not_the_upstreams_health() {
    let up = Scripted::start_with_headers(|req, h| {
        if h.get("authorization").is_none() {
            return vec![Step::Plain(
                401,
                vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())],
                "secret-detail".into(),
            )];
        }
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}})),
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = pass_gateway(&up).await;
    let c = HttpMcp::new(&gw.url("up"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    let refused = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    let text = String::from_utf8_lossy(&refused.body).into_owned();
    assert!(text.contains("401"), "the client hears the upstream refused it: {text}");

    let (status, body) = common::gateway_proc::readyz(&gw.addr.to_string()).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("secret-detail"), "{body}");

    // With a token the same upstream serves the client.
    let mut ok = HttpMcp::new(&gw.url("up"));
    ok.bearer = Some("good".into());
    ok.initialize("2025-11-25").await;
}

/// An HTTP server on 127.0.0.1 that answers every request 401, echoing the request's
/// headers in its body and its challenge; stopped when dropped.
async fn echoing_refuser() -> (String, AbortOnDrop) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let echoed: Vec<String> =
                        req.headers().iter().map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or(""))).collect();
                    let resp = hyper::Response::builder()
                        .status(401)
                        .header("www-authenticate", format!("Bearer realm=\"{}\"", echoed.join("; ")))
                        .body(http_body_util::Full::new(bytes::Bytes::from(echoed.join("\n"))))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(resp)
                });
                let io = hyper_util::rt::TokioIo::new(tcp);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    (url, AbortOnDrop(task))
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An upstream that refuses with 401 and echoes the request's headers in its body and
/// challenge: the configured secrets reach neither the client's error nor `/readyz` (which
/// needs no token and shows no upstream text at all), over Streamable HTTP and legacy
/// HTTP+SSE.
#[tokio::test]
async fn configured_secrets_are_masked_in_upstream_text_and_kept_off_readyz() {
    let (url, _server) = echoing_refuser().await;
    let secret = "up-secret-7f3a9c";
    let config = format!(
        "{}headers = {{ Authorization = \"Bearer {secret}\", X-Api-Key = \"key-{secret}\" }}\n\
         [[upstream]]\nname = \"old\"\nurl = \"{url}\"\ntransport = \"sse\"\nconnect_timeout = \"3s\"\n\
         headers = {{ Authorization = \"Bearer {secret}\" }}\n",
        http_upstream("up", &url),
    );
    let gw = start_gateway(&config).await;
    for name in ["up", "old"] {
        let c = HttpMcp::new(&gw.url(name));
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
        let refused = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
        let text = String::from_utf8_lossy(&refused.body).into_owned();
        assert!(text.contains("401") && text.contains("***"), "{name}: the client hears the refusal, masked: {text}");
        assert!(!text.contains(secret), "{name}: {text}");
    }

    let (status, body) = common::gateway_proc::readyz(&gw.addr.to_string()).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("up: its last link failed to open") && body.contains("old: its last"), "{body}");
    assert!(!body.contains(secret) && !body.contains("401") && !body.contains("authorization"), "{body}");
}
