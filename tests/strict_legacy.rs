//! Servers that speak only `initialize`, under the default `era = "auto"`: the
//! `server/discover` probe must never break them (issue 24, item 1).
//!
//! - a stdio server that exits, or closes its stdout, when its first message is not
//!   `initialize` (as servers on older SDK releases do: "expected initialize request") is
//!   started again and initialized, and the answer is remembered: it is started at most once
//!   more than it would be without the probe, across sessions, and across a restart of the
//!   gateway on the same file store;
//! - an HTTP server that answers the probe with 400, 500, an HTML page, a body that is not
//!   JSON or not JSON-RPC, or nothing within `probe_timeout`, is initialized, and probed
//!   once only;
//! - a server that refuses 2025-11-25 gets the retried `initialize` translated for the
//!   version it is offered (item 4).
//!
//! None of the interop peers enforces initialize-first (the TypeScript SDK releases in
//! tests/interop answer `server/discover` with -32601 and go on), so the scripted servers
//! here stand for them.

use crate::common;

use common::gateway_proc;
use common::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A stdio server that follows the 2025 lifecycle strictly: when its first line is not an
/// `initialize` request it says so on stderr and exits with status 1 (`exit`), or closes
/// its stdout and lingers (`close`). It answers `initialize` with 2025-03-26, whatever was
/// offered (an older SDK release), lists one tool and answers every call with "pong". Each
/// start appends a line to `starts`, each message it reads to `received`.
struct StrictStdio {
    dir: tempfile::TempDir,
}

const STRICT: &str = r#"
echo start >> "$DIR/starts"
first=1
while IFS= read -r line; do
  printf '%s\n' "$line" >> "$DIR/received"
  id=$(sed -n 's/^{[^{]*"id":\([0-9]*\).*/\1/p' <<<"$line")
  method=$(sed -n 's/^{[^{]*"method":"\([^"]*\)".*/\1/p' <<<"$line")
  if [ $first = 1 ]; then
    first=0
    if [ "$method" != initialize ]; then
      echo "expected initialize request, got $method" >&2
      if [ "$MODE" = close ]; then
        exec 1>&-
        while IFS= read -r line; do :; done
      fi
      exit 1
    fi
  fi
  [ -n "$id" ] && [ -n "$method" ] || continue
  case "$method" in
    initialize) r='{"protocolVersion":"2025-03-26","capabilities":{"tools":{}},"serverInfo":{"name":"strict","version":"0"}}' ;;
    tools/list) r='{"tools":[{"name":"ping","inputSchema":{"type":"object"}}]}' ;;
    tools/call) r='{"content":[{"type":"text","text":"pong"}]}' ;;
    *) r='{}' ;;
  esac
  printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$r"
done
"#;

impl StrictStdio {
    fn new() -> StrictStdio {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.sh"), STRICT).unwrap();
        StrictStdio { dir }
    }

    fn upstream(&self, name: &str, mode: &str, extra: &str) -> String {
        format!(
            "[[upstream]]\nname = \"{name}\"\ncommand = \"bash\"\nargs = [{:?}]\nenv = {{ DIR = {:?}, MODE = \"{mode}\" }}\n{extra}",
            self.dir.path().join("server.sh").to_str().unwrap(),
            self.dir.path().to_str().unwrap(),
        )
    }

    fn starts(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("starts")).map(|s| s.lines().count()).unwrap_or(0)
    }

    fn received_methods(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.path().join("received")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|m| m["method"].as_str().map(str::to_string))
            .collect()
    }

    fn probes(&self) -> usize {
        self.received_methods().iter().filter(|m| *m == "server/discover").count()
    }
}

/// One session of a client of `version`: initialize, list the tools, call one.
async fn session_works(url: &str, version: &str) {
    let mut c = HttpMcp::new(url);
    let init = c.initialize(version).await;
    assert_eq!(init["protocolVersion"], version, "{init}");
    let listed = c.request("tools/list", json!({})).await;
    assert_eq!(listed.result()["tools"][0]["name"], "ping", "{:?}", listed.response);
    let called = c.request("tools/call", json!({"name": "ping", "arguments": {}})).await;
    assert_eq!(called.result()["content"][0]["text"], "pong", "{:?}", called.response);
}

#[tokio::test]
async fn a_stdio_server_that_exits_on_the_probe_is_restarted_once_and_remembered() {
    for mode in ["exit", "close"] {
        let server = StrictStdio::new();
        let gw = start_gateway(&server.upstream("strict", mode, "share = true\n")).await;
        for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
            session_works(&gw.url("strict"), version).await;
        }
        assert_eq!(server.starts(), 2, "{mode}: one start for the probe, one that serves every session");
        assert_eq!(server.probes(), 1, "{mode}: probed once");
    }
}

#[tokio::test]
async fn per_session_links_pay_the_restart_only_in_the_first_session() {
    let server = StrictStdio::new();
    let gw = start_gateway(&server.upstream("strict", "exit", "")).await;
    for _ in 0..3 {
        session_works(&gw.url("strict"), "2025-11-25").await;
    }
    // A link per session: three sessions, three servers, and one more the probe stopped.
    assert_eq!(server.starts(), 4);
    assert_eq!(server.probes(), 1, "the remembered answer is used: no later session probes");
}

#[tokio::test]
async fn sessions_opened_together_wait_for_one_answer() {
    let server = StrictStdio::new();
    let gw = start_gateway(&server.upstream("strict", "exit", "")).await;
    let url = gw.url("strict");
    let sessions = (0..3).map(|_| session_works(&url, "2025-11-25"));
    futures_util::future::join_all(sessions).await;
    assert_eq!(server.starts(), 4, "three sessions, and one start the probe stopped");
    assert_eq!(server.probes(), 1);
}

/// The gateway binary on `config` (a file store beside it), its log kept for the caller.
async fn gateway_with_log(config: &Path, log: &Path) -> (gateway_proc::Proc, String) {
    let mut child = tokio::process::Command::new(bin())
        .args(["serve", "--config", config.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut addr = None;
    eventually("the gateway listens", async || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        addr = text.split("listening on http://").nth(1).map(|r| r.split_whitespace().next().unwrap().to_string());
        addr.is_some() || matches!(child.try_wait(), Ok(Some(_)))
    })
    .await;
    let addr = addr.unwrap_or_else(|| panic!("the gateway exited: {}", std::fs::read_to_string(log).unwrap()));
    (gateway_proc::Proc(child), addr)
}

#[tokio::test]
async fn the_file_store_remembers_the_answer_across_a_restart_and_check_says_it() {
    let server = StrictStdio::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!("[server]\nlisten = \"127.0.0.1:0\"\n{}", server.upstream("strict", "exit", ""));
    std::fs::write(&config, text).unwrap();
    let log: PathBuf = dir.path().join("first.log");
    let (gw, addr) = gateway_with_log(&config, &log).await;
    session_works(&format!("http://{addr}/mcp/strict"), "2025-11-25").await;
    drop(gw);
    assert_eq!(server.starts(), 2);
    let first = std::fs::read_to_string(&log).unwrap();
    assert!(
        first.contains("era found: legacy (2025-03-26): the server closed the connection when its first message was server/discover"),
        "the log says which era and why:\n{first}"
    );

    let log = dir.path().join("second.log");
    let (gw, addr) = gateway_with_log(&config, &log).await;
    session_works(&format!("http://{addr}/mcp/strict"), "2025-11-25").await;
    assert_eq!(server.starts(), 3, "the restarted gateway started the server once: it did not probe");
    assert_eq!(server.probes(), 1);
    drop(gw);

    let check = std::process::Command::new(bin()).args(["check", "--config"]).arg(&config).output().unwrap();
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{out}\n{}", String::from_utf8_lossy(&check.stderr));
    assert!(
        out.contains("# upstream \"strict\": era found: legacy (2025-03-26): the server closed the connection when its first message was server/discover"),
        "{out}"
    );
}

/// An HTTP server that answers `server/discover` with `probe` and is otherwise a plain
/// 2025-06-18 server.
async fn http_server(probe: Step) -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap_or("") {
        "server/discover" => vec![probe.clone()],
        "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "plain", "version": "0"}}}))],
        "tools/list" => vec![reply(req, json!({"tools": [{"name": "ping", "inputSchema": {"type": "object"}}]}))],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "pong"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn an_http_server_that_answers_the_probe_badly_or_not_at_all_is_initialized() {
    let html = vec![("content-type", "text/html".to_string())];
    let json_type = vec![("content-type", "application/json".to_string())];
    let cases = [
        ("400", Step::Plain(400, vec![], "Bad Request: expected initialize".into())),
        ("500", Step::Plain(500, vec![], "Internal Server Error".into())),
        ("html", Step::Plain(200, html, "<!doctype html><html><body>Welcome</body></html>".into())),
        ("garbage", Step::Plain(200, json_type.clone(), "this is not json {".into())),
        ("not-jsonrpc", Step::Plain(200, json_type, "{\"hello\": \"world\"}".into())),
        ("silence", Step::Sleep(60_000)),
    ];
    for (what, probe) in cases {
        let server = http_server(probe).await;
        let config = format!(
            "[[upstream]]\nname = \"plain\"\nurl = \"{}\"\nconnect_timeout = \"4s\"\nprobe_timeout = \"300ms\"\n",
            server.url()
        );
        let gw = start_gateway(&config).await;
        for version in ["2025-11-25", "2025-06-18"] {
            let mut c = HttpMcp::new(&gw.url("plain"));
            let init = c.initialize(version).await;
            assert_eq!(init["protocolVersion"], version, "{what}: {init}");
            let called = c.request("tools/call", json!({"name": "ping", "arguments": {}})).await;
            assert_eq!(called.result()["content"][0]["text"], "pong", "{what}: {:?}", called.response);
        }
        let probes = server.received_methods().iter().filter(|m| *m == "server/discover").count();
        assert_eq!(probes, 1, "{what}: probed once, then remembered");
    }
}

#[tokio::test]
async fn the_retried_initialize_is_translated_for_the_version_it_offers() {
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "server/discover" => vec![Step::Plain(400, vec![], "no".into())],
        "initialize" if req["params"]["protocolVersion"] != "2025-03-26" => vec![Step::Send(json!({
            "jsonrpc": "2.0", "id": req["id"],
            "error": {"code": -32602, "message": "Unsupported protocol version",
                      "data": {"supported": ["2024-11-05", "2025-03-26"], "requested": req["params"]["protocolVersion"]}}}))],
        "initialize" => init_result(req, json!({"tools": {}})),
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&format!(
        "[[upstream]]\nname = \"old\"\nurl = \"{}\"\nconnect_timeout = \"4s\"\nclient_info = {{ name = \"gw\", version = \"1\", title = \"The Gateway\" }}\n",
        server.url()
    ))
    .await;
    let mut c = HttpMcp::new(&gw.url("old"));
    let init = c
        .initialize_with(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tasks": {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}},
                             "elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}},
                             "roots": {"listChanged": true}},
            "clientInfo": {"name": "c", "version": "0", "title": "A client"}
        }))
        .await;
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    let inits: Vec<Value> =
        server.received.lock().unwrap().iter().filter(|m| m["method"] == "initialize").cloned().collect();
    assert_eq!(inits.len(), 2, "{inits:?}");
    assert_eq!(inits[0]["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        inits[0]["params"]["capabilities"]["elicitation"],
        json!({"form": {}, "url": {}}),
        "the first offer is as it was"
    );
    let retry = &inits[1]["params"];
    assert_eq!(retry["protocolVersion"], "2025-03-26");
    // 2025-03-26 has sampling and roots; it has no tasks, no elicitation, no sampling.tools
    // or sampling.context, and Implementation has no title.
    assert_eq!(retry["capabilities"], json!({"sampling": {}, "roots": {"listChanged": true}}), "{retry}");
    assert_eq!(retry["clientInfo"], json!({"name": "gw", "version": "1"}), "{retry}");
}
