//! Each side speaks its own version: the gateway initializes every upstream on its own behalf,
//! answers each client at the client's version, and translates what crosses. Conformant
//! scripted servers of each version stand for the field; clients of each version talk to them
//! through the gateway.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether version `v` has what `since` added (the dates order as strings).
fn has(v: &str, since: &str) -> bool {
    v >= since
}

fn older<'a>(a: &'a str, b: &'a str) -> &'a str {
    a.min(b)
}

fn name_of(version: &str) -> String {
    format!("s{}", version.replace('-', "_"))
}

/// A tool as a server of `version` lists it: only the fields its version has.
fn tool_of(version: &str) -> Value {
    let mut t = json!({"name": "t", "description": "a tool", "inputSchema": {"type": "object"}});
    if has(version, "2025-03-26") {
        t["annotations"] = json!({"readOnlyHint": true});
    }
    if has(version, "2025-06-18") {
        t["title"] = json!("The Tool");
        t["outputSchema"] = json!({"type": "object", "properties": {"n": {"type": "number"}}});
    }
    if has(version, "2025-11-25") {
        t["icons"] = json!([{"src": "https://example.com/t.png"}]);
    }
    t
}

/// A call result as a server of `version` sends it.
fn call_result_of(version: &str) -> Value {
    let mut content = vec![json!({"type": "text", "text": "hello"})];
    if has(version, "2025-03-26") {
        content.push(json!({"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}));
    }
    let mut r = json!({});
    if has(version, "2025-06-18") {
        content.push(json!({"type": "resource_link", "uri": "file:///r.txt", "name": "r.txt"}));
        r["structuredContent"] = json!({"n": 1});
    }
    r["content"] = Value::Array(content);
    r
}

/// A conformant server that speaks only `version`: whatever it is offered, it answers with
/// its own, and sends only what its version defines.
async fn server_of(version: &'static str) -> Scripted {
    Scripted::start(move |req| {
        let id = req["id"].clone();
        match req["method"].as_str().unwrap_or("") {
            "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": format!("server-{version}"), "version": "1"},
                "instructions": "be kind"
            }}))],
            "tools/list" => vec![reply(req, json!({"tools": [tool_of(version)]}))],
            "tools/call" => {
                let tok = req["params"]["_meta"]["progressToken"].clone();
                let mut steps = vec![];
                if !tok.is_null() {
                    let mut p = json!({"progressToken": tok, "progress": 1, "total": 2});
                    if has(version, "2025-03-26") {
                        p["message"] = json!("halfway");
                    }
                    steps.push(Step::Send(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": p})));
                }
                steps.push(reply(req, call_result_of(version)));
                steps
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

/// A gateway in front of one conformant server of each version, each at `/mcp/<name_of(v)>`.
async fn a_server_of_every_version() -> (Gw, Vec<Scripted>) {
    let mut servers = vec![];
    let mut config = String::new();
    for v in VERSIONS {
        let s = server_of(v).await;
        config += &http_upstream(&name_of(v), &s.url());
        servers.push(s);
    }
    (start_gateway(&config).await, servers)
}

struct Field {
    path: &'static str,
    since: &'static str,
}

const TOOL_FIELDS: [Field; 4] = [
    Field { path: "/annotations", since: "2025-03-26" },
    Field { path: "/title", since: "2025-06-18" },
    Field { path: "/outputSchema", since: "2025-06-18" },
    Field { path: "/icons", since: "2025-11-25" },
];

#[tokio::test]
async fn a_client_of_each_version_in_front_of_a_server_of_each_version() {
    let (gw, servers) = a_server_of_every_version().await;
    for (up, server) in VERSIONS.iter().zip(&servers) {
        for client in VERSIONS {
            let at = format!("client {client}, server {up}");
            let mut c = HttpMcp::new(&gw.url(&name_of(up)));
            let init = c.initialize(client).await;
            assert_eq!(init["protocolVersion"], client, "{at}: the client keeps its version");
            assert_eq!(init["serverInfo"]["name"], format!("server-{up}"), "{at}: {init}");
            assert_eq!(init["instructions"], "be kind", "{at}");
            assert_eq!(init["capabilities"]["tools"], json!({}), "{at}");
            assert_eq!(init["capabilities"].get("tasks").is_some(), client == "2025-11-25", "{at}: {init}");

            let list = c.request("tools/list", json!({})).await;
            let tool = &list.result()["tools"][0];
            for f in &TOOL_FIELDS {
                let want = has(older(client, up), f.since);
                assert_eq!(tool.pointer(f.path).is_some(), want, "{at}: {} in {tool}", f.path);
            }
            // Hosted for a client with tasks (the server has none): shown as optional.
            assert_eq!(
                tool.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("optional"),
                client == "2025-11-25",
                "{at}: {tool}"
            );

            let call =
                c.request("tools/call", json!({"name": "t", "arguments": {}, "_meta": {"progressToken": "p"}})).await;
            let result = call.result();
            let content = result["content"].as_array().unwrap();
            let types: Vec<&str> = content.iter().map(|b| b["type"].as_str().unwrap()).collect();
            let mut want = vec!["text"];
            if has(up, "2025-03-26") {
                want.push(if has(client, "2025-03-26") { "audio" } else { "text" });
            }
            if has(up, "2025-06-18") {
                want.push(if has(client, "2025-06-18") { "resource_link" } else { "text" });
                if !has(client, "2025-06-18") {
                    // The structured result, as text, where the content lacks it.
                    want.push("text");
                }
            }
            assert_eq!(types, want, "{at}: {result}");
            let texts: Vec<&str> = content.iter().filter_map(|b| b["text"].as_str()).collect();
            if has(up, "2025-03-26") && !has(client, "2025-03-26") {
                assert!(texts.iter().any(|t| t.starts_with("[audio") && t.contains("audio/wav")), "{at}: {texts:?}");
            }
            if has(up, "2025-06-18") && !has(client, "2025-06-18") {
                assert!(texts.iter().any(|t| t.contains("file:///r.txt")), "{at}: the link is described: {texts:?}");
                assert!(
                    texts.iter().any(|t| serde_json::from_str::<Value>(t).ok() == Some(json!({"n": 1}))),
                    "{at}: {texts:?}"
                );
            }
            assert_eq!(
                result.get("structuredContent").is_some(),
                has(older(client, up), "2025-06-18"),
                "{at}: {result}"
            );
            let progress: Vec<&Value> =
                call.others.iter().filter(|m| m["method"] == "notifications/progress").collect();
            assert_eq!(progress.len(), 1, "{at}: {:?}", call.others);
            let msg = progress[0]["params"].get("message");
            assert_eq!(msg.is_some(), has(older(client, up), "2025-03-26"), "{at}: {}", progress[0]);
            assert_eq!(c.delete().await, 200);
        }
        // The server was initialized by the gateway, at the newest version, once per session,
        // and told so once per session: the clients' own notifications/initialized stop at the gateway.
        let received = server.received.lock().unwrap().clone();
        let inits: Vec<&Value> = received.iter().filter(|m| m["method"] == "initialize").collect();
        assert_eq!(inits.len(), VERSIONS.len(), "one link per session");
        for i in &inits {
            assert_eq!(i["params"]["protocolVersion"], "2025-11-25", "{i}");
            assert_eq!(i["params"]["clientInfo"]["name"], "taskgate", "{i}");
        }
        let told = received.iter().filter(|m| m["method"] == "notifications/initialized").count();
        assert_eq!(told, VERSIONS.len());
        assert!(!received.iter().any(|m| m["params"].get("task").is_some()), "no task reaches a server without tasks");
    }
}

#[tokio::test]
async fn the_gateway_declares_the_clients_capabilities_and_its_own_client_info() {
    let server = server_of("2025-06-18").await;
    let config = http_upstream("up", &server.url())
        + "[upstream.client_info]\nname = \"acme-gateway\"\nversion = \"7.1\"\ntitle = \"Acme\"\n";
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;
    let received = server.received.lock().unwrap().clone();
    let init = received.iter().find(|m| m["method"] == "initialize").unwrap();
    assert_eq!(init["params"]["clientInfo"], json!({"name": "acme-gateway", "version": "7.1", "title": "Acme"}));
    // The client's own, as its version has them (2025-03-26 has no elicitation).
    let mut own = init_params("2025-03-26")["capabilities"].clone();
    own.as_object_mut().unwrap().remove("elicitation");
    assert_eq!(init["params"]["capabilities"], own);
}

#[tokio::test]
async fn a_client_of_an_unknown_version_gets_the_newest() {
    let server = server_of("2025-03-26").await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2099-01-01").await;
    assert_eq!(init["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn a_server_that_refuses_the_newest_version_is_offered_one_it_names() {
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" if req["params"]["protocolVersion"] != "2025-03-26" => vec![Step::Send(json!({
            "jsonrpc": "2.0", "id": req["id"].clone(),
            "error": {"code": -32602, "message": "Unsupported protocol version", "data": {"supported": ["2024-11-05", "2025-03-26"], "requested": req["params"]["protocolVersion"].clone()}}
        }))],
        "initialize" => init_result(req, json!({"tools": {}})),
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    assert_eq!(init["protocolVersion"], "2025-11-25");
    let offered: Vec<Value> = server
        .received
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "initialize")
        .map(|m| m["params"]["protocolVersion"].clone())
        .collect();
    assert_eq!(offered, vec![json!("2025-11-25"), json!("2025-03-26")]);

    // One that refuses and names nothing the gateway speaks: the client hears why.
    let server = Scripted::start(|req| {
        vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "error": {"code": -32602, "message": "no", "data": {"supported": ["1999-01-01"]}}}))]
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")});
    let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    let msg = first_message(&r);
    assert_eq!(msg["error"]["code"], -32000, "{msg}");
    assert!(msg["error"]["message"].as_str().unwrap().contains("refused to initialize: no (-32602)"), "{msg}");
    assert!(r.headers.get("mcp-session-id").is_none());
}

#[tokio::test]
async fn hosted_tasks_for_a_server_of_every_version() {
    let (gw, servers) = a_server_of_every_version().await;
    for (up, server) in VERSIONS.iter().zip(&servers) {
        let mut c = HttpMcp::new(&gw.url(&name_of(up)));
        let init = c.initialize("2025-11-25").await;
        assert!(init.pointer("/capabilities/tasks/requests/tools/call").is_some(), "server {up}: {init}");
        let created = c.request("tools/call", json!({"name": "t", "arguments": {}, "task": {"ttl": 60000}})).await;
        let task_id = created.result()["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("server {up}: {}", created.response))
            .to_string();
        let result = c.request("tasks/result", json!({"taskId": task_id})).await;
        assert_eq!(result.result()["content"][0]["text"], "hello", "server {up}: {}", result.response);
        let task = c.request("tasks/get", json!({"taskId": task_id})).await;
        assert_eq!(task.result()["status"], "completed", "server {up}");
        let received = server.received.lock().unwrap().clone();
        let calls: Vec<&Value> = received.iter().filter(|m| m["method"] == "tools/call").collect();
        assert_eq!(calls.len(), 1, "server {up}");
        assert!(calls[0]["params"].get("task").is_none(), "server {up} got a plain call: {}", calls[0]);
        assert!(!received.iter().any(|m| m["method"].as_str().unwrap_or("").starts_with("tasks/")), "server {up}");
    }
}

/// A server at 2025-11-25 whose `ask` tool asks the client through elicitation (id 77) and
/// returns what it got.
async fn asking_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {
            "protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "asker", "version": "1"}
        }}))],
        "tools/call" => {
            let req = req.clone();
            vec![
                Step::Send(json!({"jsonrpc": "2.0", "id": 77, "method": "elicitation/create", "params": {
                    "message": "which?", "requestedSchema": {"type": "object", "properties": {"c": {"type": "string"}}}
                }})),
                Step::AwaitResponse(json!(77)),
                Step::Then(Arc::new(move |got: &[Value]| {
                    let answer = got.iter().find(|m| m.get("method").is_none() && m["id"] == 77).cloned().unwrap_or_default();
                    vec![reply(&req, json!({"content": [{"type": "text", "text": answer.to_string()}]}))]
                })),
            ]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await
}

#[tokio::test]
async fn an_elicitation_for_a_client_whose_version_lacks_it_is_refused_upstream() {
    for client in ["2025-03-26", "2025-06-18"] {
        let server = asking_server().await;
        let gw = start_gateway(&http_upstream("up", &server.url())).await;
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize(client).await;
        let out = c.request("tools/call", json!({"name": "ask", "arguments": {}})).await;
        let answer: Value = serde_json::from_str(out.result()["content"][0]["text"].as_str().unwrap()).unwrap();
        let asked = out.others.iter().any(|m| m["method"] == "elicitation/create");
        if has(client, "2025-06-18") {
            assert!(asked, "{client}: {:?}", out.others);
            assert!(answer.get("result").is_some(), "{client}: {answer}");
        } else {
            assert!(!asked, "{client}: the request never reaches it: {:?}", out.others);
            assert_eq!(answer["error"]["code"], -32601, "{client}: {answer}");
            let why = answer["error"]["message"].as_str().unwrap();
            assert!(why.contains("2025-03-26") && why.contains("elicitation/create"), "{why}");
        }
    }
}

/// A server with 2025-11-25 tasks that honours its negotiated version: task fields only in a
/// 2025-11-25 session. `job` must run as a task; a plain call of it is refused.
async fn strict_task_server(version: &'static str) -> Scripted {
    Scripted::start(move |req| {
        let id = req["id"].clone();
        let tasks = version == "2025-11-25";
        match req["method"].as_str().unwrap_or("") {
            "initialize" => {
                let mut caps = json!({"tools": {}});
                // A lax server of an older version declares tasks all the same.
                caps["tasks"] = json!({"requests": {"tools": {"call": {}}}});
                vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": version, "capabilities": caps, "serverInfo": {"name": "strict", "version": "1"}
                }}))]
            }
            "tools/list" => vec![reply(req, json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}))],
            "tools/call" if tasks && req["params"].get("task").is_some() => vec![reply(req, json!({"task": {
                "taskId": "j1", "status": "working", "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 50
            }}))],
            "tools/call" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "job must run as a task"}}))],
            "tasks/get" if tasks => vec![reply(req, json!({
                "taskId": "j1", "status": "completed", "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000
            }))],
            "tasks/result" if tasks => vec![reply(req, json!({"content": [{"type": "text", "text": "job done"}]}))],
            m if m.starts_with("tasks/") => vec![Step::Send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": format!("{m}: not in {version}")}}))],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}

#[tokio::test]
async fn an_old_client_is_bridged_to_a_strict_task_server() {
    let server = strict_task_server("2025-11-25").await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    for client in ["2024-11-05", "2025-06-18"] {
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize(client).await;
        let list = c.request("tools/list", json!({})).await;
        assert_eq!(list.result()["tools"][0], json!({"name": "job", "inputSchema": {"type": "object"}}), "{client}");
        let out = c.request("tools/call", json!({"name": "job", "arguments": {}})).await;
        assert_eq!(out.result()["content"][0]["text"], "job done", "{client}: {}", out.response);
    }
    let received = server.received.lock().unwrap().clone();
    assert!(
        received.iter().filter(|m| m["method"] == "initialize").all(|m| m["params"]["protocolVersion"] == "2025-11-25")
    );
    assert!(received.iter().any(|m| m["method"] == "tasks/result"));
}

#[tokio::test]
async fn no_bridge_over_a_link_whose_version_has_no_tasks() {
    // The server speaks 2025-06-18 yet declares tasks and marks a tool required: at its
    // version neither means anything, so the gateway sends it nothing of tasks.
    let server = strict_task_server("2025-06-18").await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "job", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32601, "the server's own refusal: {}", out.response);
    // A client with tasks is served by the gateway's hosted tasks instead.
    let mut c = HttpMcp::new(&gw.url("up"));
    let init = c.initialize("2025-11-25").await;
    assert!(init.pointer("/capabilities/tasks/requests/tools/call").is_some(), "{init}");
    let received = server.received.lock().unwrap().clone();
    assert!(!received.iter().any(|m| m["params"].get("task").is_some()), "{received:?}");
    assert!(!received.iter().any(|m| m["method"].as_str().unwrap_or("").starts_with("tasks/")), "{received:?}");
}

#[tokio::test]
async fn a_listing_the_gateway_reads_itself_does_not_make_an_old_link_a_task_server() {
    // The server speaks 2025-06-18 and marks `job` required. The client's first call of it
    // is task-augmented, before any tools/list of its own: the gateway reads the listing
    // itself, and what it reads there must count no more than what the client is shown.
    let server = strict_task_server("2025-06-18").await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let created = c.request("tools/call", json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}})).await;
    assert!(
        created.response.pointer("/result/task/taskId").is_some_and(Value::is_string),
        "hosted, as for every server without tasks: {}",
        created.response
    );
    // A plain call is a plain call: never bridged over a link without tasks.
    let plain = c.request("tools/call", json!({"name": "job", "arguments": {}})).await;
    assert_eq!(plain.error_code(), -32601, "the server's own refusal: {}", plain.response);
    let received = server.received.lock().unwrap().clone();
    assert!(!received.iter().any(|m| m["params"].get("task").is_some()), "{received:?}");
    assert!(!received.iter().any(|m| m["method"].as_str().unwrap_or("").starts_with("tasks/")), "{received:?}");
}

/// A server at `version` whose `initialize` result has these capabilities (`None`: none at all).
async fn server_with_capabilities(version: &'static str, caps: Option<Value>) -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap_or("") {
        "initialize" => {
            let mut result = json!({"protocolVersion": version, "serverInfo": {"name": "odd", "version": "1"}});
            if let Some(c) = &caps {
                result["capabilities"] = c.clone();
            }
            vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result}))]
        }
        "tools/list" => vec![reply(req, json!({"tools": [tool_of(version)]}))],
        _ => vec![reply(req, json!({"content": [{"type": "text", "text": "ok"}]}))],
    })
    .await
}

#[tokio::test]
async fn capabilities_that_are_not_an_object_still_get_the_gateways_tasks() {
    for caps in [None, Some(Value::Null), Some(json!("tools")), Some(json!([]))] {
        let server = server_with_capabilities("2025-06-18", caps.clone()).await;
        let gw = start_gateway(&http_upstream("up", &server.url())).await;
        let mut c = HttpMcp::new(&gw.url("up"));
        let init = c.initialize("2025-11-25").await;
        assert!(init["capabilities"].is_object(), "{caps:?}: capabilities must be an object: {init}");
        // The tools are shown hosted: the capability that lets the client use them is there.
        let list = c.request("tools/list", json!({})).await;
        assert_eq!(list.result()["tools"][0]["execution"]["taskSupport"], "optional", "{caps:?}");
        assert!(init.pointer("/capabilities/tasks/requests/tools/call").is_some(), "{caps:?}: {init}");
        let mut old = HttpMcp::new(&gw.url("up"));
        let init = old.initialize("2025-06-18").await;
        assert_eq!(init["capabilities"], json!({}), "{caps:?}: {init}");
    }
}

#[tokio::test]
async fn the_clients_capabilities_are_declared_as_its_version_has_them() {
    // Clients that declare more than their version has: the upstream must not be told the
    // client can serve what its version cannot carry.
    let server = server_of("2025-11-25").await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let caps = json!({
        "roots": {"listChanged": true},
        "sampling": {"context": {}, "tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "tasks": {"requests": {"elicitation": {"create": {}}}}
    });
    let cases = [
        ("2025-03-26", json!({"roots": {"listChanged": true}, "sampling": {}})),
        ("2025-06-18", json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}})),
        ("2025-11-25", caps.clone()),
    ];
    for (version, want) in cases {
        let c = HttpMcp::new(&gw.url("up"));
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": caps, "clientInfo": {"name": "lax", "version": "0"}
        }});
        let r = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
        assert_eq!(r.status, 200, "{version}");
        let received = server.received.lock().unwrap().clone();
        let declared = &received.iter().rfind(|m| m["method"] == "initialize").unwrap()["params"]["capabilities"];
        assert_eq!(declared, &want, "{version}");
    }
}

#[tokio::test]
async fn a_server_request_before_the_handshake_ends_is_translated_for_the_client() {
    // A server that asks for elicitation while it initializes (before its initialize result):
    // the client's version (2025-03-26) has no elicitation, so the server is refused, as it
    // would be at any other time, instead of the request reaching the client.
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => vec![
            Step::Send(json!({"jsonrpc": "2.0", "id": 77, "method": "elicitation/create", "params": {
                "message": "early", "requestedSchema": {"type": "object", "properties": {}}
            }})),
            Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {
                "protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "eager", "version": "1"}
            }})),
        ],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;
    let received = server.received.clone();
    eventually("the server hears -32601 for its elicitation", async || {
        received
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.get("method").is_none() && m["id"] == 77 && m["error"]["code"] == -32601)
    })
    .await;
}

/// The raw body of a POST of `msg`, read to its end.
async fn raw_post(c: &HttpMcp, msg: Value) -> String {
    let r = c.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
    String::from_utf8(r.body.to_vec()).unwrap()
}

#[tokio::test]
async fn progress_between_two_sides_of_one_version_keeps_its_bytes() {
    // The server writes progress in a form of its own (spaces, `1.50`): between two sides of
    // one version it reaches the client as it was written, for every version.
    const PROGRESS: &str = r#"{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p", "progress": 1.50, "total": 2}}"#;
    for v in VERSIONS {
        let server = Scripted::start(move |req| match req["method"].as_str().unwrap_or("") {
            "initialize" => vec![Step::Send(json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": {
                "protocolVersion": v, "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}
            }}))],
            "tools/call" => vec![
                Step::Raw(format!("data: {PROGRESS}\n\n")),
                Step::Sleep(20),
                reply(req, json!({"content": [{"type": "text", "text": "done"}]})),
            ],
            _ => vec![reply(req, json!({}))],
        })
        .await;
        let cfg = http_upstream("up", &server.url()) + "[upstream.tasks]\nhosted = \"never\"\n";
        let gw = start_gateway(&cfg).await;
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize(v).await;
        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t", "arguments": {}, "_meta": {"progressToken": "p"}}});
        let body = raw_post(&c, call).await;
        assert!(body.contains(PROGRESS), "{v}: {body}");
    }
}

#[tokio::test]
async fn an_initialize_its_client_abandons_ends_its_session_and_its_link() {
    // A slow upstream handshake, and a client that hangs up before it ends: nobody holds the
    // session's id, so the session goes, and so does the link the handshake had opened.
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => {
            let mut steps = vec![Step::Sleep(400)];
            steps.extend(init_result(req, json!({"tools": {}})));
            steps
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init_params("2025-06-18")});
    let posted = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]);
    assert!(tokio::time::timeout(std::time::Duration::from_millis(100), posted).await.is_err());
    drop(c);
    eventually("the session ends", async || gw.server.session_count() == 0).await;
    eventually("the upstream session is deleted", async || server.received_http().iter().any(|m| m == "DELETE")).await;
}

#[tokio::test]
async fn a_task_asked_for_by_a_client_whose_version_has_none_is_not_passed_up() {
    // A server that makes a task of any call asked as one.
    let server = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
        "tools/list" => vec![reply(req, json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}))],
        "tools/call" if req["params"].get("task").is_some() => vec![reply(req, json!({"task": {
            "taskId": "x", "status": "working", "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 1000
        }}))],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "plain"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &server.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "t", "arguments": {}, "task": {"ttl": 1000}})).await;
    assert_eq!(out.result()["content"][0]["text"], "plain", "{}", out.response);
    let received = server.received.lock().unwrap().clone();
    assert!(!received.iter().any(|m| m["params"].get("task").is_some()), "{received:?}");
}
