//! The request headers of the HTTP transport, as the spec and the reference SDK take them
//! (issue 24): `MCP-Protocol-Version` (item 2: on an existing session any version the gateway
//! speaks is accepted, not only the negotiated one; a version it does not speak is 400 on
//! every request, `initialize` included) and `Mcp-Param-*` (item 4: checked where the gateway
//! is the server, forwarded where it is an intermediary that does not recognise them).

mod common;

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
