//! Tool policy (`[upstream.tools]`): a tool the client is not offered is absent from every
//! listing, in every era's shape, and a call of it on any path is refused as a call of an
//! unknown tool, with nothing sent upstream.

use crate::common;

use common::modern_client::{call, request};
use common::*;
use serde_json::{Value, json};

const POLICY: &str = "[upstream.tools]\nallow = [\"echo\", \"slow\", \"ask\"]\ndeny = [\"ask\"]\n";

fn names(result: &Value) -> Vec<String> {
    result["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str().map(String::from)).collect()
}

fn assert_unknown_tool(resp: &Value, tool: &str) {
    assert_eq!(resp["error"]["code"], -32602, "{resp}");
    assert_eq!(resp["error"]["message"], format!("unknown tool {tool:?}"), "{resp}");
}

#[tokio::test]
async fn a_denied_tool_is_unknown_to_clients_of_every_version_and_era() {
    let gw = start_gateway(&format!("{}{POLICY}", builtin_upstream("demo"))).await;
    for version in ["2024-11-05", "2025-06-18", "2025-11-25"] {
        let mut c = HttpMcp::new(&gw.url("demo"));
        c.initialize(version).await;
        let listed = c.request("tools/list", json!({})).await;
        assert_eq!(names(listed.result()), ["echo", "slow"], "{version}");
        for tool in ["add", "ask", "no_such_tool_at_all_but_denied"] {
            let out = c.request("tools/call", json!({"name": tool, "arguments": {"a": 1, "b": 2}})).await;
            assert_unknown_tool(&out.response, tool);
        }
        let ok = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).await;
        assert_eq!(ok.result()["content"][0]["text"], "hi");
    }
    // As a task (hosted for a 2025-11-25 client): refused, no task made.
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "add", "arguments": {}, "task": {"ttl": 60000}})).await;
    assert_unknown_tool(&out.response, "add");
    let listed = c.request("tasks/list", json!({})).await;
    assert_eq!(listed.result()["tasks"], json!([]));

    // A 2026-07-28 client, with the tasks extension and without.
    let c = HttpMcp::new(&gw.url("demo"));
    for caps in [json!({}), json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})] {
        let (_, listed, _) = call(&c, &request(json!(1), "tools/list", json!({}), caps.clone())).await;
        assert_eq!(names(&listed["result"]), ["echo", "slow"], "{listed}");
        let add = json!({"name": "add", "arguments": {"a": 1, "b": 2}});
        let (_, out, _) = call(&c, &request(json!(2), "tools/call", add, caps)).await;
        assert_unknown_tool(&out, "add");
    }
}

#[tokio::test]
async fn a_principal_named_in_a_rule_gets_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let auth = bearer_tokens(&dir, &[("admin", "admin-token-0123456789"), ("bob", "bob-token-0123456789ab")]);
    let policy = format!("{POLICY}[[upstream.tools.for]]\nprincipals = [\"admin\"]\nallow = [\"*\"]\n");
    let gw = start_gateway(&format!("[server]\n{auth}{}{policy}", builtin_upstream("demo"))).await;
    let mut admin = HttpMcp::new(&gw.url("demo"));
    admin.bearer = Some("admin-token-0123456789".into());
    admin.initialize("2025-06-18").await;
    let listed = admin.request("tools/list", json!({})).await;
    assert_eq!(names(listed.result()), ["echo", "add", "slow", "fail", "ask"]);
    let sum = admin.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(sum.result()["content"][0]["text"], "3", "{}", sum.response);

    let mut bob = HttpMcp::new(&gw.url("demo"));
    bob.bearer = Some("bob-token-0123456789ab".into());
    bob.initialize("2025-06-18").await;
    let listed = bob.request("tools/list", json!({})).await;
    assert_eq!(names(listed.result()), ["echo", "slow"]);
    let out = bob.request("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_unknown_tool(&out.response, "add");
}

#[tokio::test]
async fn a_denied_tool_is_neither_bridged_nor_deferred_and_nothing_goes_upstream() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(
            req,
            json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}),
        ),
        "tools/list" => vec![reply(
            req,
            json!({"tools": [
                {"name": "plain", "inputSchema": {"type": "object"}},
                {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}
            ]}),
        )],
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "ran"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let config = format!(
        "{}[upstream.tools]\ndeny = [\"research\"]\n[upstream.long_calls]\ndefer_after = \"1s\"\n",
        http_upstream("up", &up.url())
    );
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let listed = c.request("tools/list", json!({})).await;
    // The gateway's long-call tools are its own, not the upstream's to deny.
    assert_eq!(names(listed.result()), ["plain", "taskgate_wait", "taskgate_status", "taskgate_cancel"]);
    let out = c.request("tools/call", json!({"name": "research", "arguments": {}})).await;
    assert_unknown_tool(&out.response, "research");
    let ran = c.request("tools/call", json!({"name": "plain", "arguments": {}})).await;
    assert_eq!(ran.result()["content"][0]["text"], "ran", "{}", ran.response);
    let names: Vec<Value> = calls_to(&up, "tools/call").iter().map(|m| m["params"]["name"].clone()).collect();
    assert_eq!(names, [json!("plain")], "nothing of the denied tool went upstream");
}

#[test]
fn the_policy_keys_are_checked() {
    let bad = format!("{}[upstream.tools]\nallow = [\"\"]\n", builtin_upstream("demo"));
    let err = taskgate::Config::parse(&bad, &|_| None).unwrap_err().to_string();
    assert!(err.contains("upstream \"demo\".tools.allow"), "{err}");
}

#[tokio::test]
async fn a_denied_upstream_tool_of_a_long_call_tools_name_stays_denied() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/list" => {
            vec![reply(req, json!({"tools": [{"name": "taskgate_status", "inputSchema": {"type": "object"}}]}))]
        }
        "tools/call" => vec![reply(req, json!({"content": [{"type": "text", "text": "the upstream's own"}]}))],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let config = format!(
        "{}[upstream.tools]\ndeny = [\"taskgate_status\"]\n[upstream.long_calls]\ndefer_after = \"1s\"\n",
        http_upstream("up", &up.url())
    );
    let gw = start_gateway(&config).await;
    // Called before any listing, and after one.
    for list_first in [false, true] {
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize("2025-06-18").await;
        if list_first {
            let listed = c.request("tools/list", json!({})).await;
            assert_eq!(names(listed.result()), Vec::<String>::new(), "{}", listed.response);
        }
        let out = c.request("tools/call", json!({"name": "taskgate_status", "arguments": {"taskId": "x"}})).await;
        assert_unknown_tool(&out.response, "taskgate_status");
    }
    assert!(calls_to(&up, "tools/call").is_empty(), "the denied tool never ran");
}
