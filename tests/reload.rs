//! Reloading the config on the real binary: SIGHUP, and a watched file replaced by a rename
//! or written in place. Under load, with a client of each era and a hosted task in flight:
//! nothing is answered twice or lost, no session of an upstream that stays is dropped, the
//! tool policy and limits apply at once, a removed upstream drains and an added one is
//! served. An invalid file is refused naming its key, and the running config stays;
//! `taskgate check` says what a reload would change; new TLS connections take a renewed
//! certificate.

use crate::common;

use common::gateway_proc::{Proc, listening_logged, serve_command, signal};
use common::modern_client::{call, request};
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::mpsc;

/// A gateway process with its log lines, read on as they come.
struct Logged {
    proc: Proc,
    addr: String,
    log: mpsc::UnboundedReceiver<String>,
}

impl Logged {
    async fn start(config: &Path) -> Logged {
        let (proc, addr, log) = listening_logged(serve_command(config).spawn().unwrap()).await;
        Logged { proc, addr, log }
    }

    fn url(&self, upstream: &str) -> String {
        format!("http://{}/mcp/{upstream}", self.addr)
    }

    /// [`Logged::start`], the config watch's own lines (at debug) logged too.
    async fn watching(config: &Path) -> Logged {
        let mut serve = serve_command(config);
        serve.env("RUST_LOG", "info,taskgate::downstream::reload=debug");
        let (proc, addr, log) = listening_logged(serve.spawn().unwrap()).await;
        Logged { proc, addr, log }
    }

    /// The next log line that contains `what` (within a few seconds).
    async fn logged(&mut self, what: &str) -> String {
        self.logged_any(&[what]).await
    }

    /// The next log line that contains any of `whats` (within a few seconds).
    async fn logged_any(&mut self, whats: &[&str]) -> String {
        let found = tokio::time::timeout(STEP, async {
            while let Some(line) = self.log.recv().await {
                if whats.iter().any(|w| line.contains(w)) {
                    return line;
                }
            }
            panic!("the gateway's log ended before {whats:?}");
        });
        found.await.unwrap_or_else(|_| panic!("no log line with {whats:?}"))
    }

    /// SIGHUP, and the log line of the reload's outcome.
    async fn reload(&mut self) -> String {
        signal(self.proc.pid(), libc::SIGHUP);
        self.logged("config reload").await
    }
}

/// `GET path` of the gateway at `addr`: the body, after a 200.
async fn get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n");
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(STEP, tcp.read_to_end(&mut got)).await.expect("GET timed out").unwrap();
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// The config file of a test in `dir`: a file store beside it, `server` and `upstreams` as given.
fn config(dir: &Path, server: &str, upstreams: &str) -> PathBuf {
    let path = dir.join("config.toml");
    write(&path, &text(server, upstreams));
    path
}

fn text(server: &str, upstreams: &str) -> String {
    format!("[server]\nlisten = \"127.0.0.1:0\"\n{server}\n{upstreams}")
}

fn names(result: &Value) -> Vec<String> {
    result["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()
}

fn slow(id: i64, ms: u64, steps: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": ms, "steps": steps}, "_meta": {"progressToken": id}}}))
    .unwrap()
}

/// Every response on a call's stream (there must be exactly one), after reading it to its end.
async fn responses(mut events: SseReader) -> Vec<Value> {
    let mut out = Vec::new();
    while let Some((_, m)) = tokio::time::timeout(Duration::from_secs(20), events.next()).await.expect("stream stalled")
    {
        if m.get("method").is_none() {
            out.push(m);
        }
    }
    out
}

const BEFORE: &str = "\
[[upstream]]\nname = \"kept\"\nbuiltin = \"demo\"\n\
[[upstream]]\nname = \"limited\"\nbuiltin = \"demo\"\n\
[[upstream]]\nname = \"changed\"\nbuiltin = \"demo\"\n\
[[upstream]]\nname = \"removed\"\nbuiltin = \"demo\"\n";

const AFTER: &str = "\
[[upstream]]\nname = \"kept\"\nbuiltin = \"demo\"\n[upstream.tools]\ndeny = [\"add\"]\n\
[[upstream]]\nname = \"limited\"\nbuiltin = \"demo\"\n[upstream.limits]\ncalls_per_minute = 1\nburst = 1\n\
[[upstream]]\nname = \"changed\"\nbuiltin = \"demo\"\nrequest_timeout = \"7s\"\n\
[[upstream]]\nname = \"added\"\nbuiltin = \"demo\"\n";

#[tokio::test]
async fn a_reload_under_load_drops_no_session_and_no_task_and_applies_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "drain_timeout = \"5s\"", BEFORE);
    let mut gw = Logged::start(&path).await;

    // A legacy session on each upstream, and a 2025-11-25 one with a hosted task.
    let mut legacy = HttpMcp::new(&gw.url("kept"));
    legacy.initialize("2025-06-18").await;
    let mut tasked = HttpMcp::new(&gw.url("kept"));
    tasked.initialize("2025-11-25").await;
    let mut limited = HttpMcp::new(&gw.url("limited"));
    limited.initialize("2025-06-18").await;
    let mut changed = HttpMcp::new(&gw.url("changed"));
    changed.initialize("2025-06-18").await;
    let mut removed = HttpMcp::new(&gw.url("removed"));
    removed.initialize("2025-06-18").await;
    let modern = HttpMcp::new(&gw.url("kept"));

    // In flight across the reload: a plain call on a kept, a changed and a removed upstream,
    // and a hosted task.
    let on_kept = SseReader::new(legacy.post_streaming(slow(10, 1500, 3), &[]).await.into_body());
    let on_changed = SseReader::new(changed.post_streaming(slow(11, 1500, 3), &[]).await.into_body());
    let on_removed = SseReader::new(removed.post_streaming(slow(12, 1500, 3), &[]).await.into_body());
    let task = tasked
        .request("tools/call", json!({"name": "slow", "arguments": {"duration_ms": 2000, "steps": 2}, "task": {}}))
        .await;
    let task_id = task.result()["task"]["taskId"].as_str().expect("a hosted task").to_string();
    // The legacy session's stream for what is not a response: it hears of the new policy.
    let mut unrelated = SseReader::new(legacy.get_raw(&[]).await.into_body());

    write(&path, &text("drain_timeout = \"5s\"", AFTER));
    let outcome = gw.reload().await;
    assert!(outcome.contains("config reloaded"), "{outcome}");
    for want in ["added upstreams: \"added\"", "removed upstreams: \"removed\"", "changed upstreams: \"changed\""] {
        assert!(outcome.contains(want), "{outcome}");
    }
    assert!(outcome.contains("took_ms"), "{outcome}");

    // Tool policy, at once, for the sessions already open and for a 2026-07-28 client; the
    // open session is told its list changed.
    let (_, note) = tokio::time::timeout(STEP, unrelated.next()).await.unwrap().expect("the GET stream ended");
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    let listed = legacy.request("tools/list", json!({})).await;
    assert!(!names(listed.result()).contains(&"add".to_string()), "{}", listed.response);
    let denied = legacy.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(denied.response["error"]["message"], "unknown tool \"add\"", "{}", denied.response);
    let add = json!({"name": "add", "arguments": {"a": 1, "b": 2}});
    let (_, out, _) = call(&modern, &request(json!(3), "tools/call", add, json!({}))).await;
    assert_eq!(out["error"]["code"], -32602, "{out}");
    // The rate limit, at once: one call, then the bucket is empty.
    let first = limited.request("tools/call", json!({"name": "echo", "arguments": {"text": "a"}})).await;
    assert_eq!(first.result()["content"][0]["text"], "a");
    let echo = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "b"}}});
    let second = limited.post_raw(serde_json::to_vec(&echo).unwrap(), &[]).await;
    assert_eq!(second.status, 429);
    assert_eq!(second.json()["error"]["code"], -32004, "{}", second.json());

    // What was in flight is answered once, the removed upstream's call included.
    for (stream, id) in [(on_kept, 10), (on_changed, 11), (on_removed, 12)] {
        let got = responses(stream).await;
        assert_eq!(got.len(), 1, "{id}: {got:?}");
        assert_eq!(got[0]["id"], id);
        assert_eq!(got[0]["result"]["content"][0]["text"], "done after 3 steps", "{got:?}");
    }
    let result = tasked.request("tasks/result", json!({"taskId": task_id})).await;
    assert_eq!(result.result()["content"][0]["text"], "done after 2 steps", "{}", result.response);

    // The sessions of upstreams that stay go on; the changed one's too.
    for c in [&mut legacy, &mut changed] {
        let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await;
        assert_eq!(echo.result()["content"][0]["text"], "still here", "{}", echo.response);
    }
    // The removed upstream: its session's requests and new sessions get 404.
    let gone = removed
        .post_raw(serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})).unwrap(), &[])
        .await;
    assert_eq!(gone.status, 404);
    let fresh = HttpMcp::new(&gw.url("removed"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(fresh.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await.status, 404);
    // The added one is served.
    let mut added = HttpMcp::new(&gw.url("added"));
    added.initialize("2025-11-25").await;
    let echo = added.request("tools/call", json!({"name": "echo", "arguments": {"text": "new"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "new");
    // The removed upstream's session ends once its call was answered.
    gw.logged("ended 1 sessions of removed upstreams").await;
}

#[tokio::test]
async fn an_invalid_file_is_refused_naming_the_key_and_the_running_config_stays() {
    let dir = tempfile::tempdir().unwrap();
    let policy = "[upstream.tools]\ndeny = [\"add\"]\n";
    let path = config(dir.path(), "", &format!("{}{policy}", builtin_upstream("demo")));
    let mut gw = Logged::start(&path).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;

    for (bad, key) in [
        (text("max_sessions = 0", &builtin_upstream("demo")), "server.max_sessions"),
        (text("", &format!("{}[upstream.tools]\nallow = [\"\"]\n", builtin_upstream("demo"))), "tools.allow"),
        (text("", &format!("{}[upstream.limits]\nburst = 3\n", builtin_upstream("demo"))), "limits.burst"),
        ("[server\n".to_string(), "config.toml"),
    ] {
        write(&path, &bad);
        let outcome = gw.reload().await;
        assert!(outcome.contains("config reload refused, the running config stays"), "{outcome}");
        assert!(outcome.contains(key), "{key}: {outcome}");
    }
    // The policy of the running config still holds, and the session is there.
    let denied = c.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(denied.response["error"]["code"], -32602, "{}", denied.response);
    let metrics = get(&gw.addr, "/metrics").await;
    assert!(metrics.contains("taskgate_config_reloads_total{outcome=\"refused\"} 4"), "{metrics}");

    // A good file again: applied.
    write(&path, &text("", &builtin_upstream("demo")));
    assert!(gw.reload().await.contains("config reloaded"));
    let sum = c.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(sum.result()["content"][0]["text"], "3", "{}", sum.response);
}

#[tokio::test]
async fn a_watched_file_is_reloaded_when_renamed_over_and_when_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "watch_config = true", &builtin_upstream("demo"));
    let mut gw = Logged::watching(&path).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let offered = async |c: &mut HttpMcp| names(c.request("tools/list", json!({})).await.result());
    assert!(offered(&mut c).await.contains(&"add".to_string()));

    // Replaced whole, by a rename (as editors and config management do).
    let tmp = dir.path().join("config.toml.new");
    let deny = format!("{}[upstream.tools]\ndeny = [\"add\"]\n", builtin_upstream("demo"));
    write(&tmp, &text("watch_config = true", &deny));
    std::fs::rename(&tmp, &path).unwrap();
    let outcome = gw.logged("config reload").await;
    assert!(outcome.contains("config reloaded") && outcome.contains("the config file changed"), "{outcome}");
    assert!(!offered(&mut c).await.contains(&"add".to_string()));

    // Written in place.
    let deny = format!("{}[upstream.tools]\ndeny = [\"add\", \"echo\"]\n", builtin_upstream("demo"));
    write(&path, &text("watch_config = true", &deny));
    assert!(gw.logged("config reload").await.contains("config reloaded"));
    assert_eq!(offered(&mut c).await, ["slow", "fail", "ask"]);

    // Written again with the same text: the watch sees the file change, reads it once it
    // settles, and finds nothing to reload; the next reload logged is the SIGHUP's.
    write(&path, &text("watch_config = true", &deny));
    let seen = gw.logged_any(&["config reload", "nothing to reload"]).await;
    assert!(seen.contains("nothing to reload"), "{seen}");
    let next = gw.reload().await;
    assert!(next.contains("SIGHUP") && next.contains("no change"), "{next}");
}

#[tokio::test]
async fn check_says_what_a_reload_would_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "", BEFORE);
    let _gw = Logged::start(&path).await;
    write(&path, &text("max_sessions = 7", AFTER));
    let out = std::process::Command::new(bin()).args(["check", "--config", path.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = String::from_utf8(out.stdout).unwrap();
    for want in [
        "a reload would change",
        "added upstreams: \"added\"",
        "removed upstreams: \"removed\"",
        "changed upstreams: \"changed\"",
        "tool policy or limits changed: \"kept\", \"limited\"",
        "needs a restart (the running value stays): server.max_sessions",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
}

#[tokio::test]
async fn a_renewed_certificate_is_taken_by_new_connections_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let issue = || {
        let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
        std::fs::write(dir.path().join("cert.pem"), c.cert.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), c.signing_key.serialize_pem()).unwrap();
        c.cert.der().to_vec()
    };
    let first = issue();
    let tls = "[server.tls]\ncert = \"cert.pem\"\nkey = \"key.pem\"\n";
    let path = config(dir.path(), tls, &builtin_upstream("demo"));
    let mut gw = Logged::start(&path).await;
    // The certificate a new connection is served, whatever it is (the test trusts any).
    let served = async |addr: &str| -> Vec<u8> {
        let tls =
            rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(AnyCertificate))
                .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let conn = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls)).connect(name, tcp).await.unwrap();
        conn.get_ref().1.peer_certificates().unwrap()[0].to_vec()
    };
    assert_eq!(served(&gw.addr).await, first);
    let second = issue();
    assert_ne!(first, second);
    assert!(gw.reload().await.contains("config reloaded"));
    assert_eq!(served(&gw.addr).await, second);
    // A key that does not match: refused, and the certificate in use stays.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    std::fs::write(dir.path().join("key.pem"), other.signing_key.serialize_pem()).unwrap();
    let refused = gw.reload().await;
    assert!(refused.contains("refused") && refused.contains("server.tls"), "{refused}");
    assert_eq!(served(&gw.addr).await, second);
}

/// Takes any certificate: the test looks at which one it was served.
#[derive(Debug)]
struct AnyCertificate;

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

#[tokio::test]
async fn a_removed_upstreams_session_still_takes_its_clients_answer_while_it_drains() {
    let dir = tempfile::tempdir().unwrap();
    let both = format!("{}{}", builtin_upstream("stays"), builtin_upstream("goes"));
    let path = config(dir.path(), "drain_timeout = \"10s\"", &both);
    let mut gw = Logged::start(&path).await;
    let mut c = HttpMcp::new(&gw.url("goes"));
    c.initialize("2025-06-18").await;
    let ask = json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "where?"}}});
    let mut call = SseReader::new(c.post_streaming(serde_json::to_vec(&ask).unwrap(), &[]).await.into_body());
    let (_, question) = call.next().await.unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");

    write(&path, &text("drain_timeout = \"10s\"", &builtin_upstream("stays")));
    assert!(gw.reload().await.contains("removed upstreams: \"goes\""));
    // A new request: 404, as the path now answers.
    let list = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/list"});
    assert_eq!(c.post_raw(serde_json::to_vec(&list).unwrap(), &[]).await.status, 404);
    // The answer to the server's question is taken, and the call it was for ends with its result.
    let answered = c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await;
    assert_eq!(answered.status, 202, "{:?}", String::from_utf8_lossy(&answered.body));
    let got = responses(call).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["result"]["content"][0]["text"], "answer: forty-two", "{got:?}");
    gw.logged("ended 1 sessions of removed upstreams").await;
    // Then the session is gone: even an answer gets 404.
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(&question)).unwrap(), &[]).await.status, 404);
}

#[tokio::test]
async fn a_rotated_token_file_is_taken_on_sighup_and_the_old_token_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("alice.tok");
    write(&tokens, "alice-token-0123456789abcdef\n");
    let auth =
        format!("[server.auth]\nmode = \"bearer\"\ntokens = [{{ principal = \"alice\", file = {:?} }}]\n", tokens);
    let path = config(dir.path(), "", &format!("{}\n{auth}", builtin_upstream("demo")));
    let mut gw = Logged::start(&path).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.bearer = Some("alice-token-0123456789abcdef".into());
    c.initialize("2025-06-18").await;

    write(&tokens, "alice-token-rotated-0123456789\n");
    let outcome = gw.reload().await;
    assert!(outcome.contains("server.auth changed"), "{outcome}");
    let list = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})).unwrap();
    assert_eq!(c.post_raw(list.clone(), &[]).await.status, 401, "the old token is refused");
    // The new token, on the same session: alice's still.
    c.bearer = Some("alice-token-rotated-0123456789".into());
    let r = c.post_raw(list, &[]).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
}

#[tokio::test]
async fn a_changed_shared_upstream_gets_a_new_link_and_the_old_closes_once_unheld() {
    let dir = tempfile::tempdir().unwrap();
    let shared = format!("{}share = true\n", stdio_demo_upstream("shared"));
    let path = config(dir.path(), "", &shared);
    let mut gw = Logged::start(&path).await;
    let mut old = HttpMcp::new(&gw.url("shared"));
    old.initialize("2025-06-18").await;
    let first = gw.logged("shared upstream link open").await;
    assert!(first.contains("generation=1"), "{first}");

    write(&path, &text("", &format!("{shared}request_timeout = \"9s\"\n")));
    assert!(gw.reload().await.contains("changed upstreams: \"shared\""));
    let mut new = HttpMcp::new(&gw.url("shared"));
    new.initialize("2025-06-18").await;
    // A new link, whose generation no earlier link of the upstream had.
    let second = gw.logged("shared upstream link open").await;
    assert!(second.contains("generation=2"), "{second}");
    for c in [&mut old, &mut new] {
        let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "both"}})).await;
        assert_eq!(echo.result()["content"][0]["text"], "both", "{}", echo.response);
    }
    // The old link closes once its last session has ended.
    assert_eq!(old.delete().await, 200);
    gw.logged("retired shared link closed").await;
    let echo = new.request("tools/call", json!({"name": "echo", "arguments": {"text": "new"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "new");
}

#[tokio::test]
async fn a_file_written_in_place_in_two_writes_is_read_once_whole() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let both = format!("{}{}", builtin_upstream("first"), builtin_upstream("second"));
    let path = config(dir.path(), "watch_config = true", &both);
    let mut gw = Logged::watching(&path).await;
    let mut c = HttpMcp::new(&gw.url("second"));
    c.initialize("2025-06-18").await;
    // The same upstreams and a new one; the first write alone would remove "second".
    let whole = text("watch_config = true", &format!("{both}{}", builtin_upstream("third")));
    let cut = whole.find("name = \"second\"").unwrap() - "[[upstream]]\n".len();
    let mut f = std::fs::OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
    f.write_all(&whole.as_bytes()[..cut]).unwrap();
    f.flush().unwrap();
    // The watch has seen the file half written, and waits for it to settle.
    gw.logged("config watch: the file changed").await;
    f.write_all(&whole.as_bytes()[cut..]).unwrap();
    drop(f);
    let outcome = gw.logged("config reload").await;
    assert!(outcome.contains("added upstreams: \"third\"") && !outcome.contains("removed"), "{outcome}");
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "kept"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "kept");
}

#[tokio::test]
async fn check_keeps_naming_a_key_that_waits_for_a_restart_and_a_tls_file_that_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), "", &builtin_upstream("demo"));
    let mut gw = Logged::start(&path).await;
    write(&path, &text("max_sessions = 7", &builtin_upstream("demo")));
    assert!(gw.reload().await.contains("needs a restart (the running value stays): server.max_sessions"));
    let out = std::process::Command::new(bin()).args(["check", "--config", path.to_str().unwrap()]).output().unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(out.contains("needs a restart (the running value stays): server.max_sessions"), "{out}");

    // TLS turned on by a reload, with files that are not there: refused (the next start
    // would fail on them).
    let tls = "max_sessions = 7\n[server.tls]\ncert = \"missing.pem\"\nkey = \"missing-key.pem\"\n";
    write(&path, &text(tls, &builtin_upstream("demo")));
    let refused = gw.reload().await;
    assert!(refused.contains("refused") && refused.contains("server.tls"), "{refused}");
}
