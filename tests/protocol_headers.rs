//! The request headers of the HTTP transport, as the spec and the reference SDK take them
//! (issue 24): `MCP-Protocol-Version` (item 2: on an existing session any version the gateway
//! speaks is accepted, not only the negotiated one; a version it does not speak is 400 on
//! every request, `initialize` included) and `Mcp-Param-*` (item 4: checked where the gateway
//! is the server, forwarded where it is an intermediary that does not recognise them).

use crate::common;

use common::modern_client as modern;
use common::*;
use serde_json::{Value, json};

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// The official conformance suite's SEP-1699 scenario: a 2025-11-25 session, then concurrent
/// POSTs that name 2025-03-26. The TypeScript SDK's server answers them; so does the gateway.
#[tokio::test]
async fn concurrent_posts_naming_another_spoken_version_are_served() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let old = [("mcp-protocol-version", "2025-03-26")];
    let calls = (0..3).map(|i| {
        let call = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": format!("n{i}")}}});
        let c = &c;
        async move { (i, c.post_raw(body(&call), &old).await) }
    });
    for (i, r) in futures_util::future::join_all(calls).await {
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        let m = first_message(&r);
        assert_eq!(
            (m["id"].clone(), m["result"]["content"][0]["text"].clone()),
            (json!(100 + i), json!(format!("n{i}")))
        );
    }
    // The session goes on in the version it negotiated.
    let tools = c.request("tools/list", json!({})).await;
    assert!(tools.result()["tools"].as_array().is_some_and(|t| !t.is_empty()), "{:?}", tools.response);
}

/// An `initialize` naming a version the gateway does not speak is 400, and opens no session.
#[tokio::test]
async fn initialize_naming_an_unsupported_version_is_refused() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-11-25")});
    for bad in ["garbage", "1999-01-01", "2025-11-26"] {
        let r = c.post_raw(body(&init), &[("mcp-protocol-version", bad)]).await;
        assert_eq!(r.status, 400, "{bad}: {:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.json()["error"]["code"], -32600, "{bad}");
        assert!(r.headers.get("mcp-session-id").is_none(), "{bad}");
        assert_eq!(gw.server.session_count(), 0, "{bad}: no session opened");
    }
    // A spoken version, the one asked for or another, opens one.
    for (n, good) in ["2025-11-25", "2025-06-18"].into_iter().enumerate() {
        let r = c.post_raw(body(&init), &[("mcp-protocol-version", good)]).await;
        assert_eq!(r.status, 200, "{good}: {:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(gw.server.session_count(), n + 1);
    }
}

/// On an existing session, a version the gateway does not speak is 400 on POST (requests and
/// notifications alike), and the session is untouched.
#[tokio::test]
async fn an_unsupported_version_is_refused_on_every_request_of_a_session() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    for bad in ["garbage", "1999-01-01"] {
        for msg in [&ping, &note] {
            let r = c.post_raw(body(msg), &[("mcp-protocol-version", bad)]).await;
            assert_eq!(r.status, 400, "{bad} {msg}");
        }
    }
    for good in ["2024-11-05", "2025-03-26", "2025-11-25"] {
        let r = c.post_raw(body(&ping), &[("mcp-protocol-version", good)]).await;
        assert_eq!((r.status, first_message(&r)["result"].clone()), (200, json!({})), "{good}");
    }
}

// ---- Mcp-Param-* (2026-07-28 "Custom Headers"), issue 24 item 4 ----

/// A legacy server with one tool whose `region` a modern client mirrors as
/// `Mcp-Param-Region`; its calls answer with the region they got.
/// A request naming two different versions is 400, on a session and for a 2026-07-28 client
/// alike; the same version twice is one version.
#[tokio::test]
async fn two_different_version_headers_on_one_request_are_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let session = c.session.clone().unwrap();
    let status = async |versions: &[&str], session: Option<&str>| -> String {
        let call = body(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}));
        let mut head = format!(
            "POST /mcp/demo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n",
            call.len()
        );
        if let Some(s) = session {
            head.push_str(&format!("mcp-session-id: {s}\r\n"));
        }
        for v in versions {
            head.push_str(&format!("mcp-protocol-version: {v}\r\n"));
        }
        let mut tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        tcp.write_all(format!("{head}\r\n").as_bytes()).await.unwrap();
        tcp.write_all(&call).await.unwrap();
        let mut got = Vec::new();
        tokio::time::timeout(STEP, tcp.read_to_end(&mut got)).await.unwrap().unwrap();
        String::from_utf8_lossy(&got).lines().next().unwrap_or_default().to_string()
    };
    let two = status(&["2025-11-25", "2025-06-18"], Some(&session)).await;
    assert!(two.starts_with("HTTP/1.1 400"), "{two}");
    let modern = status(&["2026-07-28", "2025-11-25"], None).await;
    assert!(modern.starts_with("HTTP/1.1 400"), "{modern}");
    let same = status(&["2025-11-25", "2025-11-25"], Some(&session)).await;
    assert!(same.starts_with("HTTP/1.1 200"), "{same}");
}

fn legacy_regional(req: &Value) -> Vec<Step> {
    match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(400, vec![], "Bad Request: No valid session ID provided".into())],
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
            common::modern::regional_tool(),
            {"name": "plain", "inputSchema": {"type": "object"}}]}),
        )],
        "tools/call" => {
            let region = req["params"]["arguments"]["region"].as_str().unwrap_or("none").to_string();
            vec![reply(req, json!({"content": [{"type": "text", "text": region}]}))]
        }
        _ => vec![reply(req, json!({}))],
    }
}

/// `Mcp-Param-*` headers a test sends: (name, value).
type Params<'a> = &'a [(&'static str, &'a str)];

fn regional_call(id: i64, arguments: Value) -> Value {
    modern::request(json!(id), "tools/call", json!({"name": "regional", "arguments": arguments}), json!({}))
}

/// `req`'s mirrored headers plus `params` (Mcp-Param-*).
async fn post_with(c: &HttpMcp, req: &Value, params: Params<'_>) -> RawResponse {
    let mut h = modern::mirrored(req);
    h.extend(params.iter().map(|(k, v)| (*k, v.to_string())));
    modern::post(c, req, &h).await
}

/// In front of a legacy server the gateway is the server that processes the body: a missing,
/// mismatching or badly encoded `Mcp-Param-*` is 400 with -32020 (it was 200), and the call
/// never reaches the upstream; a correct one is served. No listing was asked for first: the
/// gateway reads the one it needs itself.
#[tokio::test]
async fn param_headers_are_checked_in_front_of_a_legacy_server() {
    let up = Scripted::start(legacy_regional).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let refused: [(Value, Params, &str); 5] = [
        (json!({"region": "us-west1", "query": "q"}), &[], "is required"),
        (json!({"region": "us-west1"}), &[("mcp-param-region", "eu-west1")], "says 'eu-west1'"),
        (json!({"region": "us-west1"}), &[("mcp-param-region", "=?base64?!!?=")], "malformed"),
        (json!({"query": "q"}), &[("mcp-param-region", "us-west1")], "no value"),
        (json!({"region": "Zürich"}), &[("mcp-param-region", "=?base64?WnVyaWNo?=")], "says 'Zurich'"),
    ];
    for (i, (arguments, params, why)) in refused.into_iter().enumerate() {
        let req = regional_call(10 + i as i64, arguments.clone());
        let r = post_with(&c, &req, params).await;
        assert_eq!(r.status, 400, "{arguments} {params:?}: {:?}", String::from_utf8_lossy(&r.body));
        let m = r.json();
        assert_eq!((m["id"].clone(), m["error"]["code"].clone()), (json!(10 + i), json!(-32020)), "{m}");
        assert!(m["error"]["message"].as_str().unwrap().contains(why), "{why}: {m}");
    }
    assert!(!up.received_methods().contains(&"tools/call".to_string()), "no refused call went up");
    for (region, header) in [("us-west1", "us-west1"), ("Zürich", "=?base64?WsO8cmljaA==?=")] {
        let req = regional_call(20, json!({"region": region, "query": "q"}));
        let r = post_with(&c, &req, &[("Mcp-Param-Region", header)]).await;
        assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
        assert_eq!(modern::messages_of(&r).last().unwrap()["result"]["content"][0]["text"], region);
    }
    // Absent or null: no header expected; a header no declaration names is not the tool's.
    let req = regional_call(21, json!({"region": null, "query": "q"}));
    let r = post_with(&c, &req, &[("Mcp-Param-Other", "x")]).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let plain = modern::request(json!(22), "tools/call", json!({"name": "plain", "arguments": {}}), json!({}));
    assert_eq!(post_with(&c, &plain, &[]).await.status, 200);
    let lists = up.received_methods().iter().filter(|m| *m == "tools/list").count();
    assert_eq!(lists, 1, "the gateway read the listing once: {:?}", up.received_methods());
}

/// In front of a 2026-07-28 server, before any listing: the gateway does not know the tool's
/// declarations, so it passes on the client's `Mcp-Param-*` as it came (it dropped it, and
/// the client got the server's -32020); the server checks it.
#[tokio::test]
async fn unrecognised_param_headers_are_forwarded_to_a_modern_server() {
    let up = Scripted::start_with_headers(common::modern::modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let req = regional_call(30, json!({"region": "us-west1", "query": "q"}));
    let r = post_with(&c, &req, &[("Mcp-Param-Region", "us-west1")]).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert_eq!(modern::messages_of(&r).last().unwrap()["result"]["content"][0]["text"], "us-west1");
    // A wrong one goes on too, and the server's refusal is the answer.
    let req = regional_call(31, json!({"region": "us-west1", "query": "q"}));
    let r = post_with(&c, &req, &[("Mcp-Param-Region", "eu-west1")]).await;
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (400, json!(-32020)));
    assert!(!up.received_methods().contains(&"tools/list".to_string()), "no listing was asked for");
}

/// A tool whose `x-mcp-header` declarations break the rules (a name declared twice ignoring
/// case, a declaration on an object property) is left out of every client's listing, as
/// 2026-07-28 says: no client could make its headers. The valid ones stay.
#[tokio::test]
async fn tools_with_invalid_header_declarations_are_left_out() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(400, vec![], "no session".into())],
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
                common::modern::regional_tool(),
                {"name": "twice", "inputSchema": {"type": "object", "properties": {
                    "a": {"type": "string", "x-mcp-header": "Dup"}, "b": {"type": "string", "x-mcp-header": "dup"}}}},
                {"name": "on_object", "inputSchema": {"type": "object", "properties": {
                    "o": {"type": "object", "x-mcp-header": "Obj"}}}},
                {"name": "plain", "inputSchema": {"type": "object"}}]}),
        )],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let names = |r: &Value| -> Vec<String> {
        r["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    };
    let mut legacy = HttpMcp::new(&gw.url("up"));
    legacy.initialize("2025-11-25").await;
    let listed = legacy.request("tools/list", json!({})).await;
    assert_eq!(names(listed.result()), ["regional", "plain"]);
    let c = HttpMcp::new(&gw.url("up"));
    let (_, r, _) = modern::call(&c, &modern::request(json!(1), "tools/list", json!({}), json!({}))).await;
    assert_eq!(names(&r["result"]), ["regional", "plain"], "{r}");
}
