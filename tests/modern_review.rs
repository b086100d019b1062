//! Regressions found by review of the modern (2026-07-28) client front: what one client may
//! do to the `_meta` an upstream sees, to the requests of others, and to its own parked
//! requests; which requests may answer `input_required`; and the era's edges.

use crate::common;

use common::modern::{modern_server, no_result_type};
use common::modern_client::*;
use common::*;
use serde_json::{Value, json};

fn elicit() -> Value {
    json!({"elicitation": {}})
}

/// A legacy client cannot write the `_meta` a modern upstream sees: the gateway's is sent.
#[tokio::test]
async fn a_legacy_clients_own_modern_meta_does_not_reach_the_upstream() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let forged = json!({"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientInfo": {"name": "evil", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}, "sampling": {}}});
    let out = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "x"}, "_meta": forged})).await;
    assert_eq!(out.result()["content"][0]["text"], "x", "{:?}", out.response);
    let got = up.received.lock().unwrap().iter().rev().find(|m| m["method"] == "tools/call").cloned().unwrap();
    let meta = &got["params"]["_meta"];
    assert_ne!(meta["io.modelcontextprotocol/clientInfo"]["name"], "evil", "{meta}");
    let caps = &meta["io.modelcontextprotocol/clientCapabilities"];
    assert!(caps.get("extensions").is_none(), "what the session's client declared in initialize: {caps}");
}

/// A modern client in front of a modern upstream sees tools as the server lists them.
#[tokio::test]
async fn a_modern_upstreams_tools_reach_a_modern_client_unmarked() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (_, r, _) = call(&c, &request(json!(1), "tools/list", json!({}), json!({}))).await;
    let tools = r["result"]["tools"].as_array().unwrap();
    assert!(tools.iter().all(|t| t.get("execution").is_none()), "{r}");
    assert_eq!(r["result"]["resultType"], "complete");
    let (_, r, _) =
        call(&c, &request(json!(2), "tools/call", json!({"name": "echo", "arguments": {"text": "m"}}), json!({})))
            .await;
    assert_eq!(r["result"]["content"][0]["text"], "m", "{r}");
    assert!(!no_result_type(&r["result"]), "the modern server's own result: {r}");
}

/// Only `tools/call`, `prompts/get` and `resources/read` may answer `input_required`.
#[tokio::test]
async fn input_required_answers_only_the_requests_that_may_get_it() {
    const ARMS: &str = r#"
    tools/list) printf '{"jsonrpc":"2.0","id":"r1","method":"roots/list"}\n'
        IFS= read -r answer; reply "{\"tools\":[],\"roots\":$answer}" ;;
"#;
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&script.upstream("up")).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (_, r, _) = call(&c, &request(json!(1), "tools/list", json!({}), json!({"roots": {}}))).await;
    assert!(r["result"].get("inputRequests").is_none(), "{r}");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"]["roots"]["error"]["code"].is_i64(), "refused upstream: {r}");
}

/// A retry must repeat its request; a wrong one is refused and the right one still works.
#[tokio::test]
async fn a_retry_of_another_request_is_refused_and_the_request_stays_parked() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let ask = request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "q"}}), elicit());
    let (_, r, _) = call(&c, &ask).await;
    let state = r["result"]["requestState"].clone();
    let key = r["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let answer = json!({key.clone(): {"action": "accept", "content": {"answer": "right"}}});
    let mut wrong = request(json!(2), "prompts/get", json!({"name": "greet", "arguments": {"name": "x"}}), elicit());
    wrong["params"]["requestState"] = state.clone();
    wrong["params"]["inputResponses"] = answer.clone();
    let (_, r, _) = call(&c, &wrong).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let mut other_args = ask.clone();
    other_args["id"] = json!(3);
    other_args["params"]["arguments"]["question"] = json!("another");
    other_args["params"]["requestState"] = state.clone();
    other_args["params"]["inputResponses"] = answer.clone();
    let (_, r, _) = call(&c, &other_args).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let mut retry = ask.clone();
    retry["id"] = json!(4);
    retry["params"]["requestState"] = state;
    retry["params"]["inputResponses"] = answer;
    let (_, r, _) = call(&c, &retry).await;
    assert_eq!(r["result"]["content"][0]["text"], "answer: right", "{r}");
}

/// A legacy HTTP server whose `ask` elicits on the call's stream and answers with what it
/// was told; `hang` elicits and never answers. It records what it receives.
async fn eliciting_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
        "tools/call" => {
            let ask_id = json!(format!("e-{}", req["id"]));
            let req_id = req["id"].clone();
            let hang = req["params"]["name"] == "hang";
            let mut steps = vec![
                Step::Send(json!({"jsonrpc": "2.0", "id": ask_id, "method": "elicitation/create",
                    "params": {"message": "go?", "requestedSchema": {"type": "object", "properties": {}}}})),
                Step::AwaitResponse(ask_id.clone()),
            ];
            if hang {
                steps.push(Step::Sleep(30_000));
            } else {
                steps.push(Step::Then(std::sync::Arc::new(move |got: &[Value]| {
                    let answer = got.iter().find(|m| m.get("method").is_none() && m["id"] == ask_id).unwrap();
                    vec![Step::Send(json!({"jsonrpc": "2.0", "id": req_id, "result": {"content": [{"type": "text", "text": answer["result"]["action"]}]}}))]
                })));
            }
            steps
        }
        _ => vec![reply(req, json!({}))],
    })
    .await
}

/// One client cannot take every parked place: at most half are one client's. Parked
/// requests end when their time is up, with nothing else going on.
#[tokio::test]
async fn parked_requests_are_shared_out_and_expire_by_themselves() {
    let up = eliciting_server().await;
    let cfg = format!("[server]\nmax_in_flight = 4\n\n{}request_timeout = \"1s\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let c = HttpMcp::new(&gw.url("up"));
    let ask =
        |id: i64| request(json!(id), "tools/call", json!({"name": "ask", "arguments": {"question": "q"}}), elicit());
    for id in 1..=2 {
        let (_, r, _) = call(&c, &ask(id)).await;
        assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    }
    // Half of the places are one client's.
    let (_, r, _) = call(&c, &ask(3)).await;
    assert_eq!(
        (r["error"]["code"].as_i64(), r["error"]["data"]["originalCode"].as_i64()),
        (Some(-32603), Some(-32004)),
        "{r}"
    );
    // After request_timeout the parked ones are gone without any other request: each
    // ended session answers its elicitation upstream with an error (a place is given back
    // before its session ends).
    eventually("every parked request's session ended", async || {
        let got = up.received.lock().unwrap();
        let calls = got.iter().filter(|m| m["method"] == "tools/call").map(|m| format!("e-{}", m["id"]));
        calls.collect::<Vec<_>>().iter().all(|e| got.iter().any(|m| m["id"] == e.as_str() && m.get("error").is_some()))
    })
    .await;
    let (_, r, _) = call(&c, &ask(4)).await;
    assert_eq!(r["result"]["resultType"], "input_required", "places freed: {r}");
}

/// Over stdio, cancelling a retry's id cancels the request upstream.
#[tokio::test]
async fn cancelling_a_retry_over_stdio_reaches_the_upstream() {
    let up = eliciting_server().await;
    let mut c = StdioMcp::start(&http_upstream("up", &up.url()), "up").await;
    let hang = request(json!(1), "tools/call", json!({"name": "hang", "arguments": {}}), elicit());
    c.send(&hang).await;
    let r = c.wait_response(1).await;
    assert_eq!(r.result()["resultType"], "input_required", "{:?}", r.response);
    let key = r.result()["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let mut retry = hang.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = r.result()["requestState"].clone();
    retry["params"]["inputResponses"] = json!({key: {"action": "accept", "content": {}}});
    c.send(&retry).await;
    let got = |what: &'static str| {
        let up = &up;
        async move || {
            up.received.lock().unwrap().iter().any(|m| {
                what == "answer" && m["id"].as_str().is_some_and(|i| i.starts_with("e-")) && m.get("result").is_some()
                    || what == "cancel" && m["method"] == "notifications/cancelled"
            })
        }
    };
    eventually("the upstream got the answer", got("answer")).await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})).await;
    eventually("the upstream heard the cancel", got("cancel")).await;
}

/// An `initialize` carrying modern `_meta` still opens a legacy session.
#[tokio::test]
async fn an_initialize_with_modern_meta_opens_a_session() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    let mut params = init_params("2025-11-25");
    params["_meta"] = meta(json!({}));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    assert!(r.headers.get("mcp-session-id").is_some());
    assert_eq!(messages_of(&r)[0]["result"]["protocolVersion"], "2025-11-25");
}

/// A modern client gets only the error codes its era allows: the legacy, implementation-
/// defined range (an upstream's -32000, the gateway's own timeout -32001) and -32042 become
/// -32603, the code they had kept in `data.originalCode`; -32002 is the era's -32602.
#[tokio::test]
async fn legacy_range_codes_reach_a_modern_client_as_the_eras_codes() {
    let up = Scripted::start(|req| {
        let fail = |code: i64| {
            vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(),
                "error": {"code": code, "message": format!("failed with {code}"), "data": {"url": "https://example.com/x"}}}))]
        };
        match (req["method"].as_str().unwrap_or(""), req["params"]["name"].as_str().unwrap_or("")) {
            ("initialize", _) => init_result(req, json!({"tools": {}, "resources": {}})),
            ("server/discover", _) => vec![Step::Plain(404, vec![], "not found".into())],
            ("tools/call", "server_error") => fail(-32000),
            ("tools/call", "url_needed") => fail(-32042),
            ("tools/call", "silent") => vec![Step::Sleep(5_000)],
            ("resources/read", _) => fail(-32002),
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&format!("{}request_timeout = \"300ms\"\n", http_upstream("up", &up.url()))).await;
    let c = HttpMcp::new(&gw.url("up"));
    for (name, was) in [("server_error", -32000), ("url_needed", -32042), ("silent", -32001)] {
        let (_, r, _) =
            call(&c, &request(json!(name), "tools/call", json!({"name": name, "arguments": {}}), json!({}))).await;
        assert_eq!(r["error"]["code"], -32603, "{name}: {r}");
        assert_eq!(r["error"]["data"]["originalCode"], was, "{name}: {r}");
    }
    let (_, r, _) = call(&c, &request(json!(9), "resources/read", json!({"uri": "file:///nope"}), json!({}))).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A legacy client of the same upstream gets the codes as they were.
    let mut legacy = HttpMcp::new(&gw.url("up"));
    legacy.initialize("2025-11-25").await;
    let out = legacy.request("tools/call", json!({"name": "server_error", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32000);
}
