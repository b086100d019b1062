//! An upstream that speaks both eras (it answers `server/discover` as a 2026-07-28 server,
//! and `initialize` too), as the official SDKs' servers and the conformance suite's reference
//! server do: a legacy client's session is initialized in its own generation, so it keeps
//! what the modern era lacks (the server's own elicitation on the call's stream), while a
//! modern client's requests go up stateless. The answer is remembered: later legacy sessions
//! skip the probe. A 2026-07-28 server that refuses `initialize` is used in 2026-07-28 after
//! all, and asked once.

use crate::common;

use common::modern::MODERN;
use common::modern_client::{call, request};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

/// A dual-era scripted server: a POST naming 2026-07-28 is served statelessly, anything else
/// as a legacy session. `initializes`: whether it accepts `initialize` (else 404, -32601).
async fn dual_server(initializes: bool) -> Scripted {
    Scripted::start_with_headers(move |req: &Value, h: &hyper::HeaderMap| {
        let modern = h.get("mcp-protocol-version").is_some_and(|v| v == MODERN);
        let id = req["id"].clone();
        let method = req["method"].as_str().unwrap_or("");
        if modern {
            return match method {
                "server/discover" => vec![common::modern::complete(
                    req,
                    json!({"supportedVersions": [MODERN, "2025-11-25", "2025-06-18"],
                        "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private",
                        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "dual-modern", "version": "1"}}}),
                )],
                "tools/call" => vec![common::modern::complete(
                    req,
                    json!({"content": [{"type": "text", "text": "modern path"}]}),
                )],
                _ => vec![common::modern::complete(req, json!({}))],
            };
        }
        match method {
            "initialize" if !initializes => common::modern::err(404, req, -32601, "initialize: not here"),
            "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": req["params"]["protocolVersion"].clone(),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "dual-legacy", "version": "1"}
            }}))],
            "tools/call" => {
                let ask_id = json!(format!("ask-{id}"));
                vec![
                    Step::Send(json!({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                        "params": {"message": "answer?", "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}})),
                    Step::AwaitResponse(ask_id.clone()),
                    Step::Then(Arc::new(move |got: &[Value]| {
                        let a = got.iter().find(|m| m.get("method").is_none() && m["id"] == ask_id).unwrap();
                        let text = format!("legacy path: {}", a["result"]["content"]["answer"].as_str().unwrap_or("none"));
                        vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}}))]
                    })),
                ]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

fn echo_call() -> Value {
    json!({"name": "ask", "arguments": {}})
}

#[tokio::test]
async fn a_legacy_client_of_a_dual_era_server_keeps_its_generation_and_a_modern_one_goes_stateless() {
    let up = dual_server(true).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;

    for round in 0..2 {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize("2025-06-18").await;
        assert_eq!(init["serverInfo"]["name"], "dual-legacy", "round {round}: the upstream's own initialize");
        let out = c.request("tools/call", echo_call()).await;
        assert_eq!(out.result()["content"][0]["text"], "legacy path: forty-two", "round {round}");
        let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
        assert_eq!(asked.len(), 1, "round {round}: the server's question reached the client: {:?}", out.others);
    }
    // Probed once; the second session went straight to `initialize`.
    assert_eq!(calls_to(&up, "server/discover").len(), 1);
    assert_eq!(calls_to(&up, "initialize").len(), 2);

    // A modern client is served in 2026-07-28, and its discover lists what the gateway serves.
    let c = HttpMcp::new(&gw.url("up"));
    let req = request(json!(1), "tools/call", echo_call(), json!({}));
    let (status, resp, _) = call(&c, &req).await;
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["result"]["content"][0]["text"], "modern path");
    let (_, d, _) = call(&c, &request(json!(2), "server/discover", json!({}), json!({}))).await;
    let listed: Vec<&str> =
        d["result"]["supportedVersions"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(listed, ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"], "{d}");
    // ... and agrees with what a refused version lists.
    let mut bad = request(json!(3), "tools/list", json!({}), json!({}));
    bad["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let mut headers = common::modern_client::mirrored(&bad);
    headers[0].1 = "2099-01-01".into();
    let r = common::modern_client::post(&c, &bad, &headers).await;
    let refused = r.json();
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["supported"], d["result"]["supportedVersions"]);
    assert_eq!(calls_to(&up, "initialize").len(), 2, "the modern client opened no legacy session");
}

#[tokio::test]
async fn a_server_that_lists_legacy_versions_but_refuses_initialize_is_used_in_2026_07_28() {
    let up = dual_server(false).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    for round in 0..2 {
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize("2025-06-18").await;
        assert_eq!(init["serverInfo"]["name"], "dual-modern", "round {round}: synthesized from discover");
        let out = c.request("tools/call", echo_call()).await;
        assert_eq!(out.result()["content"][0]["text"], "modern path", "round {round}");
    }
    // Tried once, then remembered as modern only; a modern client's probe in between
    // (which cannot tell) changes nothing of that.
    let modern = HttpMcp::new(&gw.url("up"));
    let (_, r, _) = call(&modern, &request(json!(1), "tools/call", echo_call(), json!({}))).await;
    assert_eq!(r["result"]["content"][0]["text"], "modern path", "{r}");
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    assert_eq!(c.request("tools/call", echo_call()).await.result()["content"][0]["text"], "modern path");
    assert_eq!(calls_to(&up, "initialize").len(), 1);
}

/// 2026-07-28 has no `initialize`: sent as a modern request it is an unknown method, HTTP
/// 404 with -32601, as the era's servers answer it.
#[tokio::test]
async fn initialize_as_a_modern_request_is_an_unknown_method() {
    let up = dual_server(true).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let init = request(json!(1), "initialize", init_params("2025-11-25"), json!({}));
    let (status, resp, _) = call(&c, &init).await;
    assert_eq!((status, resp["error"]["code"].as_i64()), (404, Some(-32601)), "{resp}");
    assert!(calls_to(&up, "initialize").is_empty(), "nothing went up");
}

/// A modern server that refuses its first request with -32022 while listing 2026-07-28 (as
/// the conformance suite's mock server does, to see that a client retries with a version
/// from the list): the gateway's probe asks once more, and the link is modern.
#[tokio::test]
async fn a_minus_32022_that_lists_2026_07_28_is_retried_once() {
    let refused = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let first = refused.clone();
    let up = Scripted::start_with_headers(move |req: &Value, h: &hyper::HeaderMap| {
        if req["method"] == "server/discover" && !first.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let body = json!({"jsonrpc": "2.0", "id": req["id"].clone(), "error": {"code": -32022,
                "message": "Unsupported protocol version", "data": {"supported": [MODERN], "requested": "none"}}});
            return vec![Step::Plain(400, vec![("content-type", "application/json".into())], body.to_string())];
        }
        common::modern::modern_server_without_tasks(req, h)
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    assert_eq!(init["serverInfo"]["name"], "modern-scripted", "{init}");
    assert_eq!(calls_to(&up, "server/discover").len(), 2, "asked once more");
    // The legacy client's link then tried `initialize` (refused: 2026-07-28 only) once.
    assert_eq!(calls_to(&up, "initialize").len(), 1);
}
