//! Input requests of a modern (2026-07-28) upstream for legacy clients: the scripted strict
//! modern server (`common::modern`) answers with `InputRequiredResult`s, which the gateway
//! relays to the client as server requests and answers with retries (multi round-trip
//! requests), over HTTP and stdio.

use crate::common;

use common::modern::*;
use common::*;
use serde_json::{Value, json};

/// The `tools/call`s of `tool` the upstream received, in order.
fn calls_of(up: &Scripted, tool: &str) -> Vec<Value> {
    let received = up.received.lock().unwrap().clone();
    received.into_iter().filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool).collect()
}

/// Whether the upstream was told to cancel its request `id`.
fn cancelled_upstream(up: &Scripted, id: &Value) -> bool {
    up.received
        .lock()
        .unwrap()
        .iter()
        .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == *id)
}

fn declared(call: &Value) -> &Value {
    &call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
}

/// `initialize` with these client capabilities, then `notifications/initialized`.
async fn initialize_with(c: &mut HttpMcp, version: &str, capabilities: Value) {
    let mut params = init_params(version);
    params["capabilities"] = capabilities;
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let resp = c.post_raw(serde_json::to_vec(&msg).unwrap(), &[]).await;
    assert_eq!(resp.status, 200);
    c.session = Some(resp.headers["mcp-session-id"].to_str().unwrap().to_string());
    c.version = Some(version.to_string());
    assert_eq!(c.notify("notifications/initialized", json!({})).await, 202);
}

/// Starts `tools/call` of `tool` with id `id` and returns its response stream.
async fn start_call(c: &HttpMcp, id: i64, tool: &str) -> SseReader {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}});
    let resp = c.post_streaming(serde_json::to_vec(&call).unwrap(), &[]).await;
    assert_eq!(resp.status(), 200);
    SseReader::new(resp.into_body())
}

#[tokio::test]
async fn an_elicitation_asked_with_input_required_reaches_the_client_and_its_answer_the_retry() {
    let up = Scripted::start_with_headers(modern_server).await;
    let cfg = http_upstream("up", &up.url());
    let gw = start_gateway(&cfg).await;
    let mut clients = vec![];
    for version in ["2025-06-18", "2025-11-25"] {
        let mut c = HttpMcp::new(&gw.url("up"));
        c.initialize(version).await;
        clients.push((version, Mcp::Http(c)));
    }
    let mut s = StdioMcp::start(&cfg, "up").await;
    s.initialize("2025-11-25").await;
    clients.push(("stdio 2025-11-25", Mcp::Stdio(s)));
    for (i, (version, mut c)) in clients.into_iter().enumerate() {
        let out = c
            .request("tools/call", json!({"name": "confirm", "arguments": {}, "_meta": {"progressToken": "tok"}}))
            .await;
        let text: Value = serde_json::from_str(out.result()["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, json!({"action": "accept", "content": {"answer": "forty-two"}}), "{version}");
        assert!(no_result_type(out.result()), "{version}: {}", out.result());
        let asked: Vec<&Value> = out.others.iter().filter(|m| m["method"] == "elicitation/create").collect();
        assert_eq!(asked.len(), 1, "{version}: {:?}", out.others);
        assert_eq!(asked[0]["params"]["message"], ASK_FORM);
        assert_eq!(out.progress(), vec![1.0, 2.0], "{version}: progress under the client's token in both rounds");

        let calls = calls_of(&up, "confirm");
        let (first, retry) = (&calls[2 * i], &calls[2 * i + 1]);
        assert!(first["params"].get("requestState").is_none() && first["params"].get("inputResponses").is_none());
        assert_ne!(first["id"], retry["id"], "{version}: the retry is a new request");
        assert_eq!(retry["params"]["requestState"], "st-1", "{version}: the state echoed");
        assert_eq!(retry["params"]["inputResponses"]["confirm"]["action"], "accept");
        assert_eq!(retry["params"]["_meta"]["progressToken"], first["params"]["_meta"]["progressToken"]);
        for call in [first, retry] {
            assert_eq!(declared(call), &json!({"elicitation": {}, "sampling": {}, "roots": {}}), "{version}");
        }
    }
}

#[tokio::test]
async fn two_rounds_of_elicitation_then_sampling_and_roots() {
    let up = Scripted::start_with_headers(modern_server).await;
    let cfg = http_upstream("up", &up.url());
    let gw = start_gateway(&cfg).await;
    let mut h = HttpMcp::new(&gw.url("up"));
    h.initialize("2025-06-18").await;
    let mut s = StdioMcp::start(&cfg, "up").await;
    s.initialize("2025-06-18").await;
    for (version, mut c) in [("http 2025-06-18", Mcp::Http(h)), ("stdio 2025-06-18", Mcp::Stdio(s))] {
        let before = calls_of(&up, "two-rounds").len();
        let out = c.request("tools/call", json!({"name": "two-rounds", "arguments": {}})).await;
        let text = out.result()["content"][0]["text"].as_str().unwrap().to_string();
        let got: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(got["model"]["content"]["text"], "sampled", "{version}: {got}");
        assert_eq!(got["roots"]["roots"][0]["uri"], "file:///tmp", "{version}: {got}");
        let methods: Vec<&str> = out.others.iter().filter_map(|m| m["method"].as_str()).collect();
        let asked = |m: &str| methods.iter().filter(|x| **x == m).count();
        assert_eq!((asked("sampling/createMessage"), asked("roots/list")), (1, 1), "{version}: {methods:?}");
        let calls = &calls_of(&up, "two-rounds")[before..];
        assert_eq!(calls.len(), 3, "{version}");
        let ids: std::collections::HashSet<String> = calls.iter().map(|c| c["id"].to_string()).collect();
        assert_eq!(ids.len(), 3, "{version}: every round a new id");
    }
}

#[tokio::test]
async fn a_client_without_elicitation_declares_none_and_is_not_asked() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    // One that declared only sampling; one whose version has no elicitation (what it declared
    // of it is not its to declare).
    let mut sampling_only = HttpMcp::new(&gw.url("up"));
    initialize_with(&mut sampling_only, "2025-11-25", json!({"sampling": {}})).await;
    let mut old = HttpMcp::new(&gw.url("up"));
    old.initialize("2025-03-26").await;
    for (who, mut c, caps) in [
        ("sampling only", sampling_only, json!({"sampling": {}})),
        ("2025-03-26", old, json!({"sampling": {}, "roots": {}})),
    ] {
        let before = calls_of(&up, "confirm").len();
        // The server asks anyway: the request fails at once, the client is asked nothing.
        let out = c.request("tools/call", json!({"name": "confirm", "arguments": {}})).await;
        assert_eq!(out.error_code(), -32021, "{who}: {}", out.response);
        assert_eq!(out.response["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}), "{who}");
        assert!(out.others.iter().all(|m| m.get("id").is_none()), "{who}: no server request: {:?}", out.others);
        let calls = &calls_of(&up, "confirm")[before..];
        assert_eq!(calls.len(), 1, "{who}: no retry");
        assert_eq!(declared(&calls[0]), &caps, "{who}");
        // A later request is served as ever.
        let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still"}})).await;
        assert_eq!(echo.result()["content"][0]["text"], "still");
    }
    // URL mode needs elicitation.url; a method that is no input request fails too.
    let mut form_only = HttpMcp::new(&gw.url("up"));
    initialize_with(&mut form_only, "2025-11-25", json!({"elicitation": {"form": {}}})).await;
    let out = form_only.request("tools/call", json!({"name": "ask-url", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32021);
    assert_eq!(out.response["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"url": {}}}));
    let out = form_only.request("tools/call", json!({"name": "ask-ping", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32603, "{}", out.response);
    // A client with URL mode is asked, with the elicitationId its version requires.
    let mut url = HttpMcp::new(&gw.url("up"));
    initialize_with(&mut url, "2025-11-25", json!({"elicitation": {"form": {}, "url": {}}})).await;
    let out = url.request("tools/call", json!({"name": "ask-url", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "accept", "{}", out.response);
    let asked = out.others.iter().find(|m| m["method"] == "elicitation/create").expect("asked");
    assert_eq!(asked["params"]["url"], "https://example.com/login");
    assert!(asked["params"]["elicitationId"].as_str().is_some_and(|e| !e.is_empty()), "{asked}");
}

#[tokio::test]
async fn progress_keeps_rising_across_rounds() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c
        .request("tools/call", json!({"name": "progress-rounds", "arguments": {}, "_meta": {"progressToken": 5}}))
        .await;
    assert_eq!(out.result()["content"][0]["text"], "done");
    assert_eq!(out.progress(), vec![1.0, 2.0, 3.0], "the retry's 1 is below the 2 the client had");
    let calls = calls_of(&up, "progress-rounds");
    assert_eq!(calls[1]["params"]["_meta"]["progressToken"], 5, "the retry carries the client's token");
}

#[tokio::test]
async fn a_state_only_round_is_retried_at_once_and_rounds_are_bounded() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "state-only", "arguments": {}})).await;
    assert_eq!(out.result()["content"][0]["text"], "retried");
    let calls = calls_of(&up, "state-only");
    assert_eq!(calls[1]["params"]["requestState"], "again");
    assert!(calls[1]["params"].get("inputResponses").is_none(), "nothing was asked, nothing is answered");

    let out = c.request("tools/call", json!({"name": "forever", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32603, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("more than 16 times"), "{}", out.response);
    assert_eq!(calls_of(&up, "forever").len(), 17, "the first round and 16 retries");
}

#[tokio::test]
async fn cancelling_while_the_client_is_asked_cancels_its_request_and_sends_no_retry() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let mut stream = start_call(&c, 41, "confirm").await;
    let (_, asked) = stream.next().await.expect("the elicitation");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 41, "reason": "no"})).await, 202);
    // The client is told its request is no longer wanted; its stream ends with no response.
    let mut rest = vec![];
    while let Some((_, m)) = stream.next().await {
        rest.push(m);
    }
    assert!(
        rest.iter().any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == asked["id"]),
        "{rest:?}"
    );
    assert!(rest.iter().all(|m| m["id"] != json!(41)), "no response after the cancel: {rest:?}");
    // A late answer changes nothing.
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    assert_eq!(c.post_raw(serde_json::to_vec(&answer).unwrap(), &[]).await.status, 202);
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "after"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "after");
    assert_eq!(calls_of(&up, "confirm").len(), 1, "no retry went up");
}

#[tokio::test]
async fn cancelling_while_the_retry_is_upstream_cancels_the_retry() {
    let up = Scripted::start_with_headers(modern_server).await;
    let cfg = http_upstream("up", &up.url());
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let mut stream = start_call(&c, 42, "slow-confirm").await;
    let (_, asked) = stream.next().await.expect("the elicitation");
    let reply = answer(&asked);
    assert_eq!(c.post_raw(serde_json::to_vec(&reply).unwrap(), &[]).await.status, 202);
    eventually("the retry went up", async || calls_of(&up, "slow-confirm").len() == 2).await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 42})).await, 202);
    let retry_id = calls_of(&up, "slow-confirm")[1]["id"].clone();
    eventually("the upstream was told to stop the retry", async || cancelled_upstream(&up, &retry_id)).await;
    let first_id = calls_of(&up, "slow-confirm")[0]["id"].clone();
    assert!(!cancelled_upstream(&up, &first_id), "the first round had ended");

    // Over stdio too.
    let mut s = StdioMcp::start(&cfg, "up").await;
    s.initialize("2025-11-25").await;
    s.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow-confirm", "arguments": {}}})).await;
    let asked = s.recv().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    s.send(&answer(&asked)).await;
    eventually("the stdio client's retry went up", async || calls_of(&up, "slow-confirm").len() == 4).await;
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})).await;
    let retry_id = calls_of(&up, "slow-confirm")[3]["id"].clone();
    eventually("the upstream was told to stop the stdio client's retry", async || cancelled_upstream(&up, &retry_id))
        .await;
}

#[tokio::test]
async fn an_error_answer_or_no_answer_fails_the_request() {
    let up = Scripted::start_with_headers(modern_server).await;
    let cfg = format!("{}request_timeout = \"500ms\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let mut stream = start_call(&c, 43, "confirm").await;
    let (_, asked) = stream.next().await.expect("the elicitation");
    let refusal = json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32600, "message": "not now"}});
    assert_eq!(c.post_raw(serde_json::to_vec(&refusal).unwrap(), &[]).await.status, 202);
    let (_, resp) = stream.next().await.expect("the response");
    assert_eq!(resp["id"], 43);
    assert_eq!(resp["error"]["code"], -32600, "{resp}");
    assert!(resp["error"]["message"].as_str().unwrap().contains("not now"), "{resp}");

    // Nobody answers: past request_timeout the request fails and the question is withdrawn.
    let mut stream = start_call(&c, 44, "confirm").await;
    let (_, asked) = stream.next().await.expect("the elicitation");
    let mut got = vec![];
    let resp = loop {
        let (_, m) = stream.next().await.expect("the response");
        if m["id"] == json!(44) && m.get("method").is_none() {
            break m;
        }
        got.push(m);
    };
    assert_eq!(resp["error"]["code"], -32001, "{resp}");
    assert!(
        got.iter().any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == asked["id"]),
        "{got:?}"
    );
    assert_eq!(calls_of(&up, "confirm").len(), 2, "no retry for either");
}

#[tokio::test]
async fn on_a_shared_link_each_request_declares_its_own_clients_capabilities() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&format!("{}share = true\n", http_upstream("up", &up.url()))).await;
    let mut asks = HttpMcp::new(&gw.url("up"));
    asks.initialize("2025-11-25").await;
    let mut cannot = HttpMcp::new(&gw.url("up"));
    initialize_with(&mut cannot, "2025-11-25", json!({"roots": {"listChanged": true}})).await;
    let out = asks.request("tools/call", json!({"name": "confirm", "arguments": {}})).await;
    assert!(out.result()["content"][0]["text"].as_str().unwrap().contains("forty-two"));
    assert_eq!(cannot.request("tools/call", json!({"name": "confirm", "arguments": {}})).await.error_code(), -32021);
    let calls = calls_of(&up, "confirm");
    assert_eq!(calls.len(), 3);
    assert_eq!(declared(&calls[0]), &json!({"elicitation": {}, "sampling": {}, "roots": {}}));
    assert_eq!(declared(&calls[1]), declared(&calls[0]), "the retry declares the same");
    assert_eq!(declared(&calls[2]), &json!({"roots": {}}));
}

#[tokio::test]
async fn an_ended_session_cancels_its_retry_on_a_shared_link() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&format!("{}share = true\n", http_upstream("up", &up.url()))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let mut stream = start_call(&c, 45, "slow-confirm").await;
    let (_, asked) = stream.next().await.expect("the elicitation");
    assert_eq!(c.post_raw(serde_json::to_vec(&answer(&asked)).unwrap(), &[]).await.status, 202);
    eventually("the retry went up", async || calls_of(&up, "slow-confirm").len() == 2).await;
    let retry_id = calls_of(&up, "slow-confirm")[1]["id"].clone();
    assert_eq!(c.delete().await, 200);
    eventually("the upstream was told to stop the ended session's retry", async || cancelled_upstream(&up, &retry_id))
        .await;
}

#[tokio::test]
async fn max_request_time_bounds_the_whole_exchange() {
    let up = Scripted::start_with_headers(modern_server).await;
    // Each round fits in max_request_time; the two together do not.
    let cfg = format!("{}max_request_time = \"1s\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "paced-confirm", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32001, "{}", out.response);
    let message = out.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("input rounds ran past max_request_time"), "{message}");
    let retry_id = calls_of(&up, "paced-confirm")[1]["id"].clone();
    eventually("the upstream was told to stop the retry", async || cancelled_upstream(&up, &retry_id)).await;
}

#[tokio::test]
async fn a_prompt_may_ask_too() {
    let up = Scripted::start_with_headers(modern_server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;
    let out = c.request("prompts/get", json!({"name": "rooted"})).await;
    assert_eq!(out.result()["messages"][0]["content"]["text"], "file:///tmp", "{}", out.response);
    assert!(out.others.iter().any(|m| m["method"] == "roots/list"), "{:?}", out.others);
}

/// A task the gateway hosts for a 2025-11-25 client in front of a modern upstream (without
/// the tasks extension; or with it, when the server asks for input instead of making a
/// task): the call's input requests become the task's input (`input_required`, asked on the
/// `tasks/result` stream, tagged with the task), and the answers go up in the retry; the
/// task completes with its result.
#[tokio::test]
async fn a_hosted_tasks_input_rounds_are_the_tasks_input() {
    type Server = fn(&Value, &hyper::HeaderMap) -> Vec<Step>;
    for server in [modern_server_without_tasks as Server, modern_server] {
        hosted_rounds_complete(server).await;
    }
}

async fn hosted_rounds_complete(server: fn(&Value, &hyper::HeaderMap) -> Vec<Step>) {
    let up = Scripted::start_with_headers(server).await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    for tool in ["confirm", "two-rounds"] {
        let created = c.request("tools/call", json!({"name": tool, "arguments": {}, "task": {"ttl": 60000}})).await;
        let task_id = created.result()["task"]["taskId"].as_str().expect("a hosted task").to_string();
        eventually("the task waits for input", async || {
            c.request("tasks/get", json!({"taskId": task_id})).await.result()["status"] == "input_required"
        })
        .await;
        let result = c.request("tasks/result", json!({"taskId": task_id})).await;
        let asked: Vec<&Value> = result.others.iter().filter(|m| m.get("id").is_some()).collect();
        assert!(!asked.is_empty(), "{tool}: {:?}", result.others);
        for q in &asked {
            assert_eq!(q["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task_id.as_str(), "{q}");
        }
        let text = result.result()["content"][0]["text"].as_str().expect("the tool's result").to_string();
        assert!(no_result_type(result.result()), "{tool}: {}", result.response);
        let got: Value = serde_json::from_str(&text).unwrap();
        let calls = calls_of(&up, tool);
        match tool {
            "confirm" => {
                assert_eq!(got, json!({"action": "accept", "content": {"answer": "forty-two"}}));
                assert_eq!(calls.len(), 2);
                assert_eq!(calls[1]["params"]["requestState"], "st-1", "the state echoed");
                assert!(calls[1]["params"].get("task").is_none(), "the upstream never sees params.task");
            }
            _ => {
                assert_eq!(got["model"]["content"]["text"], "sampled", "{got}");
                assert_eq!(got["roots"]["roots"][0]["uri"], "file:///tmp", "{got}");
                assert_eq!(calls.len(), 3, "two rounds, then the answer");
            }
        }
        let ids: std::collections::HashSet<String> = calls.iter().map(|c| c["id"].to_string()).collect();
        assert_eq!(ids.len(), calls.len(), "every round is a new request");
        assert_eq!(c.request("tasks/get", json!({"taskId": task_id})).await.result()["status"], "completed");
    }
}

/// The limits of a hosted task's rounds are those of a blocking call's; a client that
/// answers a round with an error fails the task with it; other tasks are not affected.
#[tokio::test]
async fn a_hosted_tasks_rounds_are_bounded_and_an_error_answer_fails_it() {
    let up = Scripted::start_with_headers(modern_server_without_tasks).await;
    let cfg = format!("{}max_input_rounds = 2\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let task = |out: &Outcome| out.result()["task"]["taskId"].as_str().expect("a hosted task").to_string();
    let forever = task(&c.request("tools/call", json!({"name": "forever", "arguments": {}, "task": {}})).await);
    let result = c.request("tasks/result", json!({"taskId": forever})).await;
    assert_eq!(result.error_code(), -32603, "{}", result.response);
    let message = result.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("more than 2 times") && message.contains("max_input_rounds"), "{message}");
    assert_eq!(calls_of(&up, "forever").len(), 3, "the first round and 2 retries");
    assert_eq!(c.request("tasks/get", json!({"taskId": forever})).await.result()["status"], "failed");

    // An error answer: the task fails with its code, and no retry goes up.
    let confirm = task(&c.request("tools/call", json!({"name": "confirm", "arguments": {}, "task": {}})).await);
    let wait = json!({"jsonrpc": "2.0", "id": 77, "method": "tasks/result", "params": {"taskId": confirm}});
    let resp = c.post_streaming(serde_json::to_vec(&wait).unwrap(), &[]).await;
    let mut stream = SseReader::new(resp.into_body());
    let asked = loop {
        let (_, m) = stream.next().await.expect("the question on the tasks/result stream");
        if m["method"] == "elicitation/create" {
            break m;
        }
    };
    let refusal = json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32600, "message": "not now"}});
    assert_eq!(c.post_raw(serde_json::to_vec(&refusal).unwrap(), &[]).await.status, 202);
    let failed = loop {
        let (_, m) = stream.next().await.expect("the tasks/result answer");
        if m["id"] == json!(77) {
            break m;
        }
    };
    assert_eq!(failed["error"]["code"], -32600, "{failed}");
    assert_eq!(calls_of(&up, "confirm").len(), 1, "no retry");
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "still");
}

/// The round limits are the upstream's `max_input_rounds` and `max_input_requests`.
#[tokio::test]
async fn the_round_limits_come_from_the_config() {
    let up = Scripted::start_with_headers(modern_server).await;
    let cfg = format!("{}max_input_rounds = 3\nmax_input_requests = 1\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&cfg).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-11-25").await;
    let out = c.request("tools/call", json!({"name": "forever", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32603, "{}", out.response);
    let message = out.response["error"]["message"].as_str().unwrap();
    assert!(message.contains("more than 3 times") && message.contains("max_input_rounds"), "{message}");
    assert_eq!(calls_of(&up, "forever").len(), 4, "the first round and 3 retries");
    // The second round of two-rounds asks two things at once: one more than allowed.
    let out = c.request("tools/call", json!({"name": "two-rounds", "arguments": {}})).await;
    assert_eq!(out.error_code(), -32603, "{}", out.response);
    assert!(out.response["error"]["message"].as_str().unwrap().contains("max_input_requests"), "{}", out.response);
    assert_eq!(calls_of(&up, "two-rounds").len(), 2, "no retry after the refused round");
    // Nothing else changed: the session serves the next request.
    let echo = c.request("tools/call", json!({"name": "echo", "arguments": {"text": "still"}})).await;
    assert_eq!(echo.result()["content"][0]["text"], "still");
}
