//! Modern (2026-07-28) upstreams: a scripted modern-only server behind legacy clients of
//! every version, the probe's fallback for a legacy-only server, and `era = "legacy"`.
//!
//! The modern server is strict: it checks on each POST what a 2026-07-28 server checks (the
//! `_meta` fields, `MCP-Protocol-Version` equal to them, `Mcp-Method`, `Mcp-Name`; no session
//! id) and answers -32602 or -32020 with HTTP 400 when one is wrong; `initialize` gets -32601
//! with HTTP 404, as an unknown method does.

use crate::common;

use common::modern::*;
use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_modern_only_server_serves_legacy_clients_of_every_version() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize(version).await;
        assert_eq!(init["protocolVersion"], version);
        assert_eq!(init["serverInfo"], json!({"name": "modern-scripted", "version": "9"}));
        assert_eq!(init["instructions"], "modern only");
        let caps = &init["capabilities"];
        assert!(caps["tools"].is_object() && caps["prompts"].is_object(), "{caps}");
        assert!(caps.get("extensions").is_none(), "{caps}");
        assert_eq!(caps["tools"]["listChanged"], true, "the link's listen holds them: {caps}");
        assert_eq!(caps["resources"]["subscribe"], true, "the link's listen holds them: {caps}");

        let tools = c.request("tools/list", json!({})).await;
        assert_eq!(tools.result()["tools"][0]["name"], "echo", "{version}");
        assert!(no_result_type(tools.result()) && tools.result().get("ttlMs").is_none(), "{:?}", tools.result());
        if version < "2025-06-18" {
            assert!(tools.result()["tools"][0].get("title").is_none(), "translated for {version}");
        }

        let call = c
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p"}}),
            )
            .await;
        assert_eq!(call.result()["content"][0]["text"], "hi", "{version}");
        assert!(no_result_type(call.result()));
        assert_eq!(call.progress(), vec![1.0, 2.0]);

        let read = c.request("resources/read", json!({"uri": "mem://a b"})).await;
        assert_eq!(read.result()["contents"][0]["text"], "hello");
        assert!(no_result_type(read.result()) && read.result().get("cacheScope").is_none());
        let prompt = c.request("prompts/get", json!({"name": "p"})).await;
        assert_eq!(prompt.result()["messages"][0]["content"]["text"], "a prompt");

        // The era's errors pass as they are; a shape a legacy client cannot read fails.
        assert_eq!(c.request("tools/call", json!({"name": "nope", "arguments": {}})).await.error_code(), -32602);
        assert_eq!(c.request("tools/call", json!({"name": "needs-tasks", "arguments": {}})).await.error_code(), -32021);
        assert_eq!(c.request("tools/call", json!({"name": "ask", "arguments": {}})).await.error_code(), -32603);

        // What 2026-07-28 removed.
        assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
        // Kept by the link's subscriptions/listen, which this server does not serve.
        let sub = c.request("resources/subscribe", json!({"uri": "mem://a"})).await;
        assert_eq!(sub.error_code(), -32603, "{}", sub.response);
        assert!(sub.response["error"]["message"].as_str().unwrap().contains("refused the subscriptions/listen"));
        c.notify("notifications/roots/list_changed", json!({})).await;
    }
    let methods = up.received_methods();
    assert!(!methods.iter().any(|m| m == "initialize" || m == "ping" || m.starts_with("resources/sub")), "{methods:?}");
    assert!(!methods.iter().any(|m| m == "notifications/roots/list_changed"), "{methods:?}");
    assert_eq!(methods.iter().filter(|m| *m == "server/discover").count(), 4, "one probe per session's link");
    assert!(up.received_http().is_empty(), "no GET, no DELETE: {:?}", up.received_http());
}

/// A tool whose listing declares `x-mcp-header` is called with its argument as
/// `Mcp-Param-*` (the strict server refuses the call without it), encoded where needed.
#[tokio::test]
async fn declared_arguments_travel_as_mcp_param_headers() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    // Before the listing the gateway cannot know the header: the server's refusal is the answer.
    let early = c.request("tools/call", json!({"name": "regional", "arguments": {"region": "us-west1"}})).await;
    assert_eq!(early.error_code(), -32020, "{}", early.response);
    let tools = c.request("tools/list", json!({})).await;
    assert_eq!(tools.result()["tools"][1]["name"], "regional");
    for region in ["us-west1", "Zürich", " padded "] {
        let call =
            c.request("tools/call", json!({"name": "regional", "arguments": {"region": region, "query": "q"}})).await;
        assert_eq!(call.result()["content"][0]["text"], region, "{}", call.response);
    }
    // Absent: no header, and the server expects none.
    let none = c.request("tools/call", json!({"name": "regional", "arguments": {"query": "q"}})).await;
    assert!(none.response.get("result").is_some(), "{}", none.response);
    // Other tools carry none.
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "x");
}

#[tokio::test]
async fn log_level_travels_in_each_request_meta() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    c.request("tools/list", json!({})).await;
    assert_eq!(c.request("logging/setLevel", json!({"level": "warning"})).await.result(), &json!({}));
    assert_eq!(c.request("logging/setLevel", json!({"level": "loud"})).await.error_code(), -32602);
    c.request("tools/list", json!({})).await;
    let received = up.received.lock().unwrap().clone();
    let lists: Vec<&Value> = received.iter().filter(|m| m["method"] == "tools/list").collect();
    assert_eq!(lists.len(), 2);
    assert!(lists[0]["params"]["_meta"].get("io.modelcontextprotocol/logLevel").is_none());
    assert_eq!(lists[1]["params"]["_meta"]["io.modelcontextprotocol/logLevel"], "warning");
    assert!(!received.iter().any(|m| m["method"] == "logging/setLevel"));
}

/// A legacy server that answers `server/discover` as most SDKs do before a session.
fn legacy_server(req: &Value) -> Vec<Step> {
    match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(400, vec![], "Bad Request: No valid session ID provided".into())],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "legacy"}]}))],
        _ => vec![reply(req, json!({}))],
    }
}

#[tokio::test]
async fn a_legacy_server_is_initialized_after_the_probe() {
    let up = Scripted::start(legacy_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    assert_eq!(init["serverInfo"]["name"], "scripted");
    let call = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    assert_eq!(call.result()["content"][0]["text"], "legacy");
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
    let methods = up.received_methods();
    assert_eq!(methods[..3], ["server/discover", "initialize", "notifications/initialized"], "{methods:?}");
    assert!(methods.contains(&"ping".to_string()), "a legacy server gets its pings");
}

#[tokio::test]
async fn era_legacy_sends_no_probe_and_era_modern_sends_no_initialize() {
    let up = Scripted::start(legacy_server).await;
    let cfg = format!("{}era = \"legacy\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    assert_eq!(up.received_methods()[..2], ["initialize", "notifications/initialized"]);

    let cfg = format!("{}era = \"modern\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let c = HttpMcp::new(&gw.url("up"));
    let before = up.received_methods().len();
    let out = c.request_owned("initialize", init_params("2025-06-18")).await;
    assert_eq!(out.error_code(), -32000, "no modern server behind it");
    assert_eq!(up.received_methods()[before..], ["server/discover"]);
}

/// A scripted 2026-07-28 stdio server with resource subscriptions (it answers
/// `server/discover`, then the test's `arms`; `$LOG` names a file beside it), and a gateway
/// that shares one link to it (`share = true`).
async fn listening_server(arms: &str) -> (StdioScript, std::path::PathBuf, Gw) {
    listening_server_declaring(r#"{"resources":{"subscribe":true},"tools":{}}"#, arms).await
}

/// What each `subscriptions/listen` a script logged (a line each) asked for.
fn listened(log: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["params"]["notifications"].clone())
        .collect()
}

/// [`listening_server`] with its discover's `capabilities`.
async fn listening_server_declaring(capabilities: &str, arms: &str) -> (StdioScript, std::path::PathBuf, Gw) {
    listening_server_configured(capabilities, arms, "", "share = true\n").await
}

/// [`listening_server_declaring`], with `server` (a `[server]` table, or nothing) and the
/// upstream table's `keys`.
async fn listening_server_configured(
    capabilities: &str,
    arms: &str,
    server: &str,
    keys: &str,
) -> (StdioScript, std::path::PathBuf, Gw) {
    let discover = format!(
        r#"
    server/discover) reply '{{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{capabilities},"_meta":{{"io.modelcontextprotocol/serverInfo":{{"name":"script","version":"0"}}}}}}' ;;
"#
    );
    let script = StdioScript::new(&format!("{discover}{arms}"));
    let log = script.path().with_file_name("log");
    let table = format!("{server}{}{keys}env = {{ LOG = {:?} }}\n", script.upstream("up"), log.to_str().unwrap());
    let gw = start_gateway(&table).await;
    (script, log, gw)
}

/// Legacy clients in front of a 2026-07-28 server, which sends list changes only on a
/// listen: the link listens for those the server declares once a legacy session is on it,
/// the sessions are told they will hear of them (and of nothing it does not declare), and a
/// change reaches every session's stream, untagged.
#[tokio::test]
async fn legacy_clients_hear_of_list_changes_through_the_links_listen() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"; echo "$id" > "$LOG.id"
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
    change) printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$(cat "$LOG.id")"
        reply '{"resultType":"complete","content":[]}' ;;
"#;
    let caps = r#"{"tools":{"listChanged":true},"prompts":{},"resources":{"subscribe":true}}"#;
    let (_script, log, gw) = listening_server_declaring(caps, ARMS).await;
    let (mut a, mut b) = (HttpMcp::new(&gw.url("up")), HttpMcp::new(&gw.url("up")));
    let init = a.initialize("2025-11-25").await;
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true, "{init}");
    assert!(init["capabilities"]["prompts"].get("listChanged").is_none(), "not declared upstream: {init}");
    b.initialize("2025-06-18").await;
    let listens = || listened(&log);
    eventually("the link listens", async || !listens().is_empty()).await;
    assert_eq!(listens(), vec![json!({"toolsListChanged": true})], "once per link, what the server declares");
    let mut gets = vec![];
    for s in [&a, &b] {
        gets.push(SseReader::new(s.get_raw(&[]).await.into_body()));
    }
    a.request("tools/call", json!({"name": "change", "arguments": {}})).await;
    for get in &mut gets {
        let (_, m) = tokio::time::timeout(STEP, get.next()).await.expect("the change in time").unwrap();
        assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
        assert!(m.get("params").and_then(|p| p.get("_meta")).is_none(), "untagged: {m}");
    }
    // A subscribe adds its uri to the one listen, which still asks for the list changes.
    assert_eq!(a.request("resources/subscribe", json!({"uri": "file:///a"})).await.result(), &json!({}));
    assert_eq!(listens()[1], json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}));
}

/// The link's listen for list changes, refused once (a passing error), is asked for again a
/// second later, and the legacy clients hear through the one acknowledged.
#[tokio::test]
async fn a_refused_list_change_listen_is_asked_for_again() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"
        if [ ! -e "$LOG.once" ]; then touch "$LOG.once"
          printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"busy, try later"}}\n' "$id"
        else echo "$id" > "$LOG.id"
          printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id"
        fi ;;
    change) printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$(cat "$LOG.id")"
        reply '{"resultType":"complete","content":[]}' ;;
"#;
    let (_script, log, gw) = listening_server_declaring(r#"{"tools":{"listChanged":true}}"#, ARMS).await;
    let mut a = HttpMcp::new(&gw.url("up"));
    a.initialize("2025-11-25").await;
    let listens = || std::fs::read_to_string(&log).unwrap_or_default().lines().count();
    eventually("asked again after the refusal", async || listens() == 2).await;
    let mut get = SseReader::new(a.get_raw(&[]).await.into_body());
    let mut heard = async || {
        a.request("tools/call", json!({"name": "change", "arguments": {}})).await;
        tokio::time::timeout(std::time::Duration::from_millis(500), get.next()).await
    };
    // The second listen is logged before the gateway reads its acknowledgement: a change
    // may come before the listen serves, and is told again until one is heard.
    let mut got = None;
    for _ in 0..20 {
        if let Ok(Some((_, m))) = heard().await {
            got = Some(m);
            break;
        }
    }
    let m = got.expect("the legacy client hears of the change");
    assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
    assert_eq!(listens(), 2, "one refusal, one listen serving");
}

/// A stdio server's log while it serves a call names no request; with one call in flight it
/// is that call's. The link's own listen, in flight for the whole life of the link, is no
/// other candidate: the log still reaches the caller.
#[tokio::test]
async fn the_links_own_listen_does_not_hide_which_call_a_log_is_for() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
    log) printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working on it"}}\n'
        reply '{"resultType":"complete","content":[]}' ;;
"#;
    let caps = r#"{"tools":{"listChanged":true},"logging":{}}"#;
    let (_script, log, gw) = listening_server_declaring(caps, ARMS).await;
    let mut a = HttpMcp::new(&gw.url("up"));
    a.initialize("2025-11-25").await;
    eventually("the link listens", async || !listened(&log).is_empty()).await;
    let out = a.request("tools/call", json!({"name": "log", "arguments": {}})).await;
    assert!(out.result()["content"].is_array(), "{}", out.response);
    let logs: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "notifications/message").collect();
    assert_eq!(logs.len(), 1, "the call's log: {:?}", out.others);
    assert_eq!(logs[0]["params"]["data"], "working on it");
}

/// The link's own listens take no place of `max_in_flight`: with a limit of 1, a legacy
/// client of a 2026-07-28 server that declares list changes still makes its calls.
#[tokio::test]
async fn the_links_own_listen_takes_no_place_of_max_in_flight() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
    echo) reply '{"resultType":"complete","content":[{"type":"text","text":"hi"}]}' ;;
"#;
    let caps = r#"{"tools":{"listChanged":true}}"#;
    let (_script, log, gw) =
        listening_server_configured(caps, ARMS, "[server]\nmax_in_flight = 1\n", "era = \"modern\"\n").await;
    let mut a = HttpMcp::new(&gw.url("up"));
    a.initialize("2025-11-25").await;
    eventually("the link listens", async || log.exists()).await;
    let r = a.request("tools/call", json!({"name": "echo", "arguments": {}})).await;
    assert_eq!(r.response["result"]["content"][0]["text"], "hi", "{}", r.response);
}

/// Legacy clients' resource subscriptions in front of a 2026-07-28 server, which has no
/// `resources/subscribe`: the shared stdio link listens upstream (`subscriptions/listen`) for
/// the uris its sessions hold, opening the listen again as the set changes, and each update
/// reaches the sessions holding its uri only, untagged.
#[tokio::test]
async fn legacy_subscriptions_are_held_by_the_links_listen() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"; echo "$id" > "$LOG.id"
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
    touch) l=$(cat "$LOG.id")
        for u in a b c; do
          printf '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///%s","_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$u" "$l"
        done
        reply '{"resultType":"complete","content":[]}' ;;
"#;
    let (_script, log, gw) = listening_server(ARMS).await;
    let session = async || {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize("2025-11-25").await;
        assert_eq!(init["capabilities"]["resources"]["subscribe"], true, "{init}");
        c
    };
    let (mut a, mut b, mut c) = (session().await, session().await, session().await);
    let sub = |uri: &str| json!({"uri": uri});
    for (s, uri) in [(&mut a, "file:///a"), (&mut b, "file:///b"), (&mut c, "file:///a")] {
        assert_eq!(s.request("resources/subscribe", sub(uri)).await.result(), &json!({}));
    }
    assert_eq!(c.request("resources/unsubscribe", sub("file:///a")).await.result(), &json!({}));
    let listens = || listened(&log);
    assert_eq!(
        listens(),
        vec![
            json!({"resourceSubscriptions": ["file:///a"]}),
            json!({"resourceSubscriptions": ["file:///a", "file:///b"]})
        ],
        "a listen per change of the set (c's uri was a's already)"
    );
    let mut gets = vec![];
    for s in [&a, &b, &c] {
        gets.push(SseReader::new(s.get_raw(&[]).await.into_body()));
    }
    a.request("tools/call", json!({"name": "touch", "arguments": {}})).await;
    for (get, uri) in gets.iter_mut().zip(["file:///a", "file:///b"]) {
        let (_, m) = tokio::time::timeout(STEP, get.next()).await.expect("the update in time").unwrap();
        assert_eq!(
            (m["method"].as_str(), m["params"]["uri"].as_str()),
            (Some("notifications/resources/updated"), Some(uri))
        );
        assert!(m["params"].get("_meta").is_none(), "the gateway's own stream tag is not the client's: {m}");
    }
    let none = tokio::time::timeout(std::time::Duration::from_millis(300), gets[2].next()).await;
    assert!(none.is_err(), "nothing for the session that let go: {none:?}");
    // The last holder of a uri leaves: the listen goes on without it.
    assert_eq!(b.delete().await, 200);
    eventually("listening without b", async || listens().len() == 3).await;
    assert_eq!(listens()[2], json!({"resourceSubscriptions": ["file:///a"]}));
}

/// The resource listen is kept as the server treats it: one the server ends after
/// acknowledging it is opened again; a new one it refuses (one session's uri it will not
/// listen to) fails only that subscribe, and the listen serving the others stays.
#[tokio::test]
async fn the_resource_listen_survives_an_end_and_a_refusal() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"
        case "$line" in
          *bogus*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such resource"}}\n' "$id" ;;
          *) echo "$id" > "$LOG.id"
             printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id"
             [ -e "$LOG.once" ] || { touch "$LOG.once"; reply '{"resultType":"complete"}'; } ;;
        esac ;;
    touch) printf '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///a","_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$(cat "$LOG.id")"
        reply '{"resultType":"complete","content":[]}' ;;
"#;
    let (_script, log, gw) = listening_server(ARMS).await;
    let (mut a, mut x) = (HttpMcp::new(&gw.url("up")), HttpMcp::new(&gw.url("up")));
    a.initialize("2025-11-25").await;
    x.initialize("2025-11-25").await;
    assert_eq!(a.request("resources/subscribe", json!({"uri": "file:///a"})).await.result(), &json!({}));
    let listens = || std::fs::read_to_string(&log).unwrap_or_default().lines().count();
    // The server ended the first listen at once: the gateway listens again.
    eventually("listening again", async || listens() == 2).await;
    let refused = x.request("resources/subscribe", json!({"uri": "file:///bogus"})).await;
    assert_eq!(refused.error_code(), -32603, "{}", refused.response);
    assert!(refused.response["error"]["message"].as_str().unwrap().contains("no such resource"));
    let mut get = SseReader::new(a.get_raw(&[]).await.into_body());
    a.request("tools/call", json!({"name": "touch", "arguments": {}})).await;
    let (_, m) = tokio::time::timeout(STEP, get.next()).await.expect("the update in time").unwrap();
    assert_eq!(m["params"]["uri"], "file:///a", "a's listen still serves: {m}");
}

/// One session's uri the server will not listen to fails only that session's subscribe, even
/// while another's is still waiting for its own listen's answer.
#[tokio::test]
async fn a_refused_uri_fails_only_its_own_subscribe() {
    const ARMS: &str = r#"
    subscriptions/listen) echo "$line" >> "$LOG"; sleep 0.3
        case "$line" in
          *bogus*) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"no such resource"}}\n' "$id" ;;
          *) printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
        esac ;;
"#;
    let (_script, log, gw) = listening_server(ARMS).await;
    let (mut a, mut x) = (HttpMcp::new(&gw.url("up")), HttpMcp::new(&gw.url("up")));
    a.initialize("2025-11-25").await;
    x.initialize("2025-11-25").await;
    let (ra, rx) = tokio::join!(a.request("resources/subscribe", json!({"uri": "file:///a"})), async {
        // While a's listen waits for its answer: the server has it, and answers 0.3 s later.
        eventually("a's listen reached the server", async || {
            listened(&log).iter().any(|n| n.to_string().contains("file:///a"))
        })
        .await;
        x.request("resources/subscribe", json!({"uri": "file:///bogus"})).await
    });
    assert_eq!(ra.result(), &json!({}), "a's own listen was acknowledged");
    assert_eq!(rx.error_code(), -32603, "{}", rx.response);
}
