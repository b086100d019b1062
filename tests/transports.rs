//! Every downstream × upstream transport pair carries the whole demo feature set.

use crate::common;

use common::*;
use serde_json::json;

/// The same conversation over any pair: tools, progress, elicitation, resources, prompts,
/// ping, unknown fields and unknown methods.
async fn conversation(client: &mut Mcp) {
    let init = client.initialize("2025-06-18").await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "taskgate-demo");

    let tools = client.request("tools/list", json!({})).await;
    let names: Vec<&str> =
        tools.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"echo") && names.contains(&"slow") && names.contains(&"ask"), "{names:?}");

    // Unknown fields in params and arguments survive the round trip.
    let echo = client
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi", "x-extra": {"nested": [1, 2]}}, "x-unknown": true}),
        )
        .await;
    assert_eq!(echo.result()["content"][0]["text"], "hi");
    assert_eq!(echo.result()["structuredContent"]["arguments"]["x-extra"], json!({"nested": [1, 2]}));

    let add = client.request("tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}})).await;
    assert_eq!(add.result()["content"][0]["text"], "5");

    let slow = client
        .request(
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 200, "steps": 4}, "_meta": {"progressToken": "tok-1"}}),
        )
        .await;
    assert_eq!(slow.result()["content"][0]["text"], "done after 4 steps");
    assert_eq!(slow.progress(), vec![1.0, 2.0, 3.0, 4.0]);
    assert!(
        slow.others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .all(|m| m["params"]["progressToken"] == "tok-1")
    );

    let ask = client.request("tools/call", json!({"name": "ask", "arguments": {"question": "meaning?"}})).await;
    assert_eq!(ask.result()["content"][0]["text"], "answer: forty-two");
    let elicit = ask.others.iter().find(|m| m["method"] == "elicitation/create").expect("the client was asked");
    assert_eq!(elicit["params"]["message"], "meaning?");

    let fail = client.request("tools/call", json!({"name": "fail", "arguments": {}})).await;
    assert_eq!(fail.result()["isError"], true);

    let res = client.request("resources/list", json!({})).await;
    assert!(res.result()["resources"].as_array().unwrap().iter().any(|r| r["uri"] == "demo://readme"));
    let read = client.request("resources/read", json!({"uri": "demo://readme"})).await;
    assert!(read.result()["contents"][0]["text"].as_str().unwrap().contains("demo server"));

    let prompt = client.request("prompts/get", json!({"name": "greet", "arguments": {"name": "Ada"}})).await;
    assert_eq!(prompt.result()["messages"][0]["content"]["text"], "Hello, Ada!");

    assert_eq!(client.request("ping", json!({})).await.result(), &json!({}));
    // Unknown methods reach the upstream, which answers for itself.
    let unknown = client.request("vendor/unknownMethod", json!({"a": 1})).await;
    assert_eq!(unknown.error_code(), -32601);
    assert!(unknown.response["error"]["message"].as_str().unwrap().contains("vendor/unknownMethod"));
    // The 2026-07-28 probe is answered by the gateway itself.
    let discover = client.request("server/discover", json!({})).await;
    assert_eq!(discover.error_code(), -32601);
}

/// Every progress value is checked, so none may be coalesced: under load, two steps can come
/// closer together than the default `progress_min_interval` (coalescing has its own tests).
fn uncoalesced(upstream_config: &str) -> String {
    format!("[server]\nprogress_min_interval = \"0s\"\n\n{upstream_config}")
}

async fn over_http(upstream_config: &str) {
    let gw = start_gateway(&uncoalesced(upstream_config)).await;
    let mut c = Mcp::Http(HttpMcp::new(&gw.url("up")));
    conversation(&mut c).await;
    if let Mcp::Http(h) = &c {
        assert_eq!(h.delete().await, 200);
    }
}

async fn over_stdio(upstream_config: &str) {
    let mut c = Mcp::Stdio(StdioMcp::start(&uncoalesced(upstream_config), "up").await);
    conversation(&mut c).await;
}

#[tokio::test]
async fn http_to_builtin() {
    over_http(&builtin_upstream("up")).await;
}

#[tokio::test]
async fn http_to_stdio() {
    over_http(&stdio_demo_upstream("up")).await;
}

#[tokio::test]
async fn http_to_http() {
    let demo = start_demo_http().await;
    over_http(&http_upstream("up", &format!("http://{}/mcp", demo.addr))).await;
}

#[tokio::test]
async fn stdio_to_builtin() {
    over_stdio(&builtin_upstream("up")).await;
}

#[tokio::test]
async fn stdio_to_stdio() {
    over_stdio(&stdio_demo_upstream("up")).await;
}

#[tokio::test]
async fn stdio_to_http() {
    let demo = start_demo_http().await;
    over_stdio(&http_upstream("up", &format!("http://{}/mcp", demo.addr))).await;
}
