//! `[server.tls]`: the gateway binary serving HTTPS with a self-signed certificate, driven
//! through an MCP session by a client that trusts only that certificate; a plain-HTTP
//! request to the TLS port gets no MCP answer and costs the TLS clients nothing; bad files
//! stop the start naming them.

use crate::common;

use bytes::Bytes;
use common::STEP;
use common::gateway_proc::start;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Pki {
    dir: tempfile::TempDir,
    cert_pem: String,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().unwrap();
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    std::fs::write(dir.path().join("cert.pem"), c.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), c.signing_key.serialize_pem()).unwrap();
    Pki { dir, cert_pem: c.cert.pem() }
}

fn config(p: &Pki, tls: &str) -> std::path::PathBuf {
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n{tls}\n[tasks]\nstore = \"memory\"\n\n{}",
        common::builtin_upstream("demo")
    );
    let path = p.dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

type Https = Client<hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>, Full<Bytes>>;

/// A client whose only root is the test's own certificate.
fn client(cert_pem: &str) -> Https {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()).unwrap();
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let https = hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls).https_only().enable_http1().build();
    Client::builder(hyper_util::rt::TokioExecutor::new()).build(https)
}

/// POSTs one message; returns the session id header and the JSON-RPC answer (a plain JSON
/// body or the first event of a stream).
async fn post(c: &Https, url: &str, session: Option<&str>, msg: Value) -> (u16, Option<String>, Value) {
    let mut b = hyper::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s).header("mcp-protocol-version", "2025-06-18");
    }
    let req = b.body(Full::new(Bytes::from(serde_json::to_vec(&msg).unwrap()))).unwrap();
    let resp = tokio::time::timeout(STEP, c.request(req)).await.expect("POST timed out").expect("POST failed");
    let status = resp.status().as_u16();
    let sid = resp.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_string());
    let sse = resp.headers().get("content-type").is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    let body = tokio::time::timeout(STEP, resp.into_body().collect()).await.unwrap().unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body).to_string();
    let json = if status == 202 {
        Value::Null
    } else if sse {
        let data = text.lines().find_map(|l| l.strip_prefix("data:")).expect("an event with data");
        serde_json::from_str(data.trim()).unwrap()
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    (status, sid, json)
}

async fn session_lists_tools(c: &Https, url: &str) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, sid, answer) = post(c, url, None, init).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["protocolVersion"], "2025-06-18", "{answer}");
    let sid = sid.expect("a session id");
    let (status, _, _) =
        post(c, url, Some(&sid), json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert_eq!(status, 202);
    let (status, _, answer) =
        post(c, url, Some(&sid), json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).await;
    assert_eq!(status, 200);
    let names: Vec<&str> =
        answer["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo"), "{answer}");
}

#[tokio::test]
async fn an_mcp_session_over_https_and_plain_http_gets_no_answer() {
    let p = pki();
    let cfg = config(&p, "[server.tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n");
    let (_gw, addr) = start(&cfg).await;
    let c = client(&p.cert_pem);
    for host in [addr.clone(), addr.replace("127.0.0.1", "localhost")] {
        session_lists_tools(&c, &format!("https://{host}/mcp/demo")).await;
    }

    // Plain HTTP on the TLS port: the handshake fails, and no HTTP answer comes back.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let req = format!(
        "POST /mcp/demo HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(STEP, tcp.read_to_end(&mut got)).await.expect("the gateway closes the connection");
    let text = String::from_utf8_lossy(&got);
    assert!(read.is_err() || !text.contains("HTTP/1.1"), "plain HTTP got an HTTP answer: {text:?}");
    assert!(!text.contains("jsonrpc"), "plain HTTP got an MCP answer: {text:?}");

    // A client that trusts another certificate fails its handshake; the others go on.
    let stranger = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let other = client(&stranger.cert.pem());
    let req = hyper::Request::get(format!("https://{addr}/mcp/demo")).body(Full::new(Bytes::new())).unwrap();
    let refused = tokio::time::timeout(STEP, other.request(req)).await.expect("refused in time");
    assert!(refused.is_err(), "a client not trusting the certificate connected");
    session_lists_tools(&c, &format!("https://{addr}/mcp/demo")).await;
}

#[tokio::test]
async fn bad_tls_files_stop_the_start_naming_them() {
    let p = pki();
    std::fs::write(p.dir.path().join("junk.pem"), "not a certificate\n").unwrap();
    for (tls, named) in [
        ("cert = \"missing.pem\"\nkey = \"key.pem\"", "missing.pem"),
        ("cert = \"junk.pem\"\nkey = \"key.pem\"", "junk.pem"),
        ("cert = \"cert.pem\"\nkey = \"junk.pem\"", "junk.pem"),
    ] {
        let cfg = config(&p, &format!("[server.tls]\n{tls}\n"));
        let out = tokio::time::timeout(
            STEP,
            tokio::process::Command::new(common::bin())
                .args(["serve", "--config", cfg.to_str().unwrap()])
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the gateway exits")
        .unwrap();
        assert_eq!(out.status.code(), Some(1), "{tls}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("server.tls") && err.contains(named), "{tls}: {err}");
    }
}
