//! `[server.auth] mode = "jwt"`: tokens verified against a local public key and against a
//! JWKS served on 127.0.0.1; good, badly signed, expired, for another audience or issuer,
//! without a principal, and an algorithm-confusion attempt.

use crate::common;

use base64::Engine;
use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

const ISSUER: &str = "https://idp.test";
const AUDIENCE: &str = "https://gw.test";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn claims(iss: &str, aud: &str, exp: u64) -> Value {
    json!({"iss": iss, "aud": aud, "exp": exp, "sub": "carol"})
}

fn sign(key: &rcgen::KeyPair, kid: Option<&str>, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = kid.map(str::to_string);
    let k = EncodingKey::from_ec_pem(key.serialize_pem().as_bytes()).unwrap();
    encode(&header, claims, &k).unwrap()
}

/// The status of an `initialize` with bearer `token`, and its `WWW-Authenticate`.
async fn initialize_status(gw: &Gw, token: &str) -> (u16, String) {
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some(token.to_string());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    let r = c.post_raw(serde_json::to_vec(&body).unwrap(), &[]).await;
    let challenge = r.headers.get("www-authenticate").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (r.status, challenge)
}

async fn jwt_gateway(key_setting: &str) -> Gw {
    start_gateway(&format!(
        "[server.auth]\nmode = \"jwt\"\n{key_setting}\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\nleeway = \"0s\"\n{}",
        builtin_upstream("demo")
    ))
    .await
}

#[tokio::test]
async fn tokens_are_verified_against_a_local_key() {
    let key = rcgen::KeyPair::generate().unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("idp.pem");
    std::fs::write(&pem, key.public_key_pem()).unwrap();
    let gw = jwt_gateway(&format!("key_file = {:?}", pem.display().to_string())).await;

    let later = now() + 600;
    assert_eq!(initialize_status(&gw, &sign(&key, None, &claims(ISSUER, AUDIENCE, later))).await.0, 200);
    let mut no_sub = claims(ISSUER, AUDIENCE, later);
    no_sub.as_object_mut().unwrap().remove("sub");
    // `iss` is one StringOrURI (RFC 7519): an array holding the issuer is not it.
    let mut iss_array = claims(ISSUER, AUDIENCE, later);
    iss_array["iss"] = json!([ISSUER, "https://evil.test"]);
    // HS256 keyed with the public key's own bytes: a verifier that let the token choose
    // would take it.
    let confused = encode(
        &Header::new(Algorithm::HS256),
        &claims(ISSUER, AUDIENCE, later),
        &EncodingKey::from_secret(key.public_key_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    for (why, token) in [
        ("signed by another key", sign(&other, None, &claims(ISSUER, AUDIENCE, later))),
        ("expired", sign(&key, None, &claims(ISSUER, AUDIENCE, now() - 60))),
        ("for another audience", sign(&key, None, &claims(ISSUER, "https://elsewhere.test", later))),
        ("from another issuer", sign(&key, None, &claims("https://evil.test", AUDIENCE, later))),
        ("without a principal", sign(&key, None, &no_sub)),
        ("with iss as an array", sign(&key, None, &iss_array)),
        ("HS256 with the public key as secret", confused),
        ("not a JWT", "not.a.jwt".to_string()),
    ] {
        let (status, challenge) = initialize_status(&gw, &token).await;
        assert_eq!(status, 401, "{why}");
        assert!(challenge.contains("error=\"invalid_token\""), "{why}: {challenge}");
    }

    // With scopes configured, a token must grant them (`scope`, space-separated, or `scp`).
    let scoped = jwt_gateway(&format!("key_file = {:?}\nscopes = [\"mcp:tools\"]", pem.display().to_string())).await;
    let with = |extra: Value| {
        let mut c = claims(ISSUER, AUDIENCE, later);
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        sign(&key, None, &c)
    };
    assert_eq!(initialize_status(&scoped, &with(json!({}))).await.0, 401, "no scope");
    assert_eq!(initialize_status(&scoped, &with(json!({"scope": "read mcp:toolsx"}))).await.0, 401, "another scope");
    assert_eq!(initialize_status(&scoped, &with(json!({"scope": "read mcp:tools"}))).await.0, 200);
    assert_eq!(initialize_status(&scoped, &with(json!({"scp": ["mcp:tools"]}))).await.0, 200);
}

/// Serves `body` as JSON to every GET on 127.0.0.1 (until dropped); returns its URL.
async fn serve_json(body: String) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
            });
        }
    });
    (url, task)
}

#[tokio::test]
async fn tokens_are_verified_against_the_issuers_jwks() {
    let key = rcgen::KeyPair::generate().unwrap();
    let unlisted = rcgen::KeyPair::generate().unwrap();
    // The P-256 public key as a JWK: the uncompressed point is 0x04 || x || y.
    let raw = key.public_key_raw();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let jwks = json!({"keys": [
        {"kty": "oct", "k": b64(b"a symmetric key is skipped"), "kid": "sym"},
        {"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]), "kid": "k1", "use": "sig", "alg": "ES256"},
    ]});
    let (url, server) = serve_json(jwks.to_string()).await;
    let gw = jwt_gateway(&format!("jwks_url = \"{url}\"")).await;

    let later = now() + 600;
    let good = sign(&key, Some("k1"), &claims(ISSUER, AUDIENCE, later));
    assert_eq!(initialize_status(&gw, &good).await.0, 200);
    for (why, token) in [
        ("a key id the set lacks", sign(&unlisted, Some("k2"), &claims(ISSUER, AUDIENCE, later))),
        ("another key under a listed id", sign(&unlisted, Some("k1"), &claims(ISSUER, AUDIENCE, later))),
        ("expired", sign(&key, Some("k1"), &claims(ISSUER, AUDIENCE, now() - 60))),
        ("for another audience", sign(&key, Some("k1"), &claims(ISSUER, "https://elsewhere.test", later))),
    ] {
        assert_eq!(initialize_status(&gw, &token).await.0, 401, "{why}");
    }
    // The keys were fetched once and are kept: the set's server going away changes nothing.
    server.abort();
    assert_eq!(initialize_status(&gw, &good).await.0, 200);
}

/// A stream lasts no longer than the JWT that opened it: the session's GET stream and a
/// legacy SSE stream (the legacy session with it) end once the token's `exp` has passed,
/// while the session's requests are still answered with a fresh token.
#[tokio::test]
async fn streams_end_when_the_token_that_opened_them_expires() {
    let key = rcgen::KeyPair::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("idp.pem");
    std::fs::write(&pem, key.public_key_pem()).unwrap();
    let gw = jwt_gateway(&format!("key_file = {:?}", pem.display().to_string())).await;
    let short = sign(&key, None, &claims(ISSUER, AUDIENCE, now() + 2));
    let long = sign(&key, None, &claims(ISSUER, AUDIENCE, now() + 600));

    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some(long.clone());
    c.initialize("2025-11-25").await;
    c.bearer = Some(short.clone());
    let get = c.get_raw(&[]).await;
    assert_eq!(get.status(), 200);
    let mut stream = SseReader::new(get.into_body());

    let legacy = tokio::time::timeout(STEP, async {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let req = hyper::Request::get(format!("http://{}/sse/demo", gw.addr))
            .header("accept", "text/event-stream")
            .header("authorization", format!("Bearer {short}"))
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        client.request(req).await.unwrap()
    })
    .await
    .unwrap();
    assert_eq!(legacy.status(), 200);
    let mut legacy = legacy.into_body();

    // Both end (within STEP, else the reads below time out and fail).
    assert!(stream.next().await.is_none(), "the GET stream ended with its token");
    let ended = tokio::time::timeout(STEP, async {
        use http_body_util::BodyExt;
        while let Some(frame) = legacy.frame().await {
            if frame.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the legacy SSE stream ended with its token");
    // The session itself goes on for a request with a valid token.
    c.bearer = Some(long);
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(out.result()["content"][0]["text"], "still here");
}

/// RFC 7519's NumericDate may be fractional: a token whose `exp`, `nbf` and `iat` are is
/// accepted, and the GET stream it opens lasts until that `exp` (not 1970): it carries the
/// progress of a task started after it opened.
#[tokio::test]
async fn fractional_numeric_dates_are_read_as_such() {
    let key = rcgen::KeyPair::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("idp.pem");
    std::fs::write(&pem, key.public_key_pem()).unwrap();
    let gw = jwt_gateway(&format!("key_file = {:?}", pem.display().to_string())).await;
    let t = now() as f64;
    let token = sign(
        &key,
        None,
        &json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "carol", "exp": t + 600.5, "nbf": t - 10.25, "iat": t - 10.75}),
    );

    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some(token);
    c.initialize("2025-11-25").await;
    let get = c.get_raw(&[]).await;
    assert_eq!(get.status(), 200);
    let mut stream = SseReader::new(get.into_body());
    let params = json!({"name": "slow", "arguments": {"duration_ms": 300, "steps": 2}, "task": {"ttl": 60000},
        "_meta": {"progressToken": "p-1"}});
    let out = c.request("tools/call", params).await;
    assert_eq!(out.result()["task"]["status"], "working", "{}", out.response);
    let (_, first) = stream.next().await.expect("the GET stream is still open");
    assert_eq!(first["method"], "notifications/progress", "{first}");
}

#[tokio::test]
async fn a_tool_rule_follows_the_tokens_subject() {
    let key = rcgen::KeyPair::generate().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("idp.pem");
    std::fs::write(&pem, key.public_key_pem()).unwrap();
    let gw = start_gateway(&format!(
        "[server.auth]\nmode = \"jwt\"\nkey_file = {:?}\nissuer = \"{ISSUER}\"\naudience = \"{AUDIENCE}\"\n{}\
         [upstream.tools]\nallow = [\"echo\"]\n[[upstream.tools.for]]\nprincipals = [\"carol\"]\nallow = [\"*\"]\ndeny = [\"fail\"]\n",
        pem.display().to_string(),
        builtin_upstream("demo")
    ))
    .await;
    let listing = async |sub: &str| {
        let mut c = HttpMcp::new(&gw.url("demo"));
        let mut claims = claims(ISSUER, AUDIENCE, now() + 600);
        claims["sub"] = json!(sub);
        c.bearer = Some(sign(&key, None, &claims));
        c.initialize("2025-06-18").await;
        let listed = c.request("tools/list", json!({})).await;
        let names: Vec<String> = listed.result()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        let add = c.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 1}})).await;
        (names, add.response)
    };
    let (names, add) = listing("carol").await;
    assert_eq!(names, ["echo", "add", "slow", "ask"]);
    assert_eq!(add["result"]["content"][0]["text"], "2", "{add}");
    let (names, add) = listing("dave").await;
    assert_eq!(names, ["echo"]);
    assert_eq!(add["error"]["message"], "unknown tool \"add\"", "{add}");
}
