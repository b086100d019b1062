//! Modern (2026-07-28) clients in front of legacy servers: `server/discover`, stateless
//! requests with their `_meta` and mirrored headers, the era's refusals, results that name
//! their type, multi round-trip input, and cancellation by closing the response; over
//! Streamable HTTP and stdio.

use crate::common;

use common::modern_client::*;
use common::*;
use serde_json::{Value, json};

async fn demo_gateway() -> (Gw, HttpMcp) {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let c = HttpMcp::new(&gw.url("demo"));
    (gw, c)
}

#[tokio::test]
async fn discover_and_stateless_calls_over_http() {
    let (_gw, c) = demo_gateway().await;
    let (status, d, _) = call(&c, &request(json!(1), "server/discover", json!({}), json!({}))).await;
    assert_eq!(status, 200, "{d}");
    let r = &d["result"];
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"][0], V, "{r}");
    assert!(r["supportedVersions"].as_array().unwrap().iter().any(|v| v == "2025-11-25"), "dual era: {r}");
    assert_eq!(r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "taskgate-demo");
    assert!(r["capabilities"]["tools"].is_object() && r["capabilities"].get("tasks").is_none(), "{r}");
    assert!(r["capabilities"]["tools"].get("listChanged").is_none(), "no subscriptions/listen to deliver it: {r}");
    assert!(r.get("serverInfo").is_none() && r.get("protocolVersion").is_none(), "{r}");

    let (_, tools, _) = call(&c, &request(json!(2), "tools/list", json!({}), json!({}))).await;
    let t = &tools["result"];
    assert_eq!(
        (t["resultType"].as_str(), t["ttlMs"].as_u64(), t["cacheScope"].as_str()),
        (Some("complete"), Some(0), Some("private"))
    );
    assert!(t["tools"].as_array().unwrap().iter().all(|t| t.get("execution").is_none()), "{t}");

    let echo =
        request(json!("e"), "tools/call", json!({"name": "echo", "arguments": {"text": "hi modern"}}), json!({}));
    let (status, r, _) = call(&c, &echo).await;
    assert_eq!(status, 200);
    assert_eq!(r["id"], "e");
    assert_eq!(r["result"]["content"][0]["text"], "hi modern");
    assert_eq!(r["result"]["resultType"], "complete");

    // A task asked for the 2025-11-25 way is ignored, as 2026-07-28 servers must.
    let mut tasked = echo.clone();
    tasked["params"]["task"] = json!({"ttl": 1000});
    let (_, r, _) = call(&c, &tasked).await;
    assert_eq!(r["result"]["content"][0]["text"], "hi modern", "{r}");
    assert!(r["result"].get("task").is_none());

    let (_, read, _) = call(&c, &request(json!(3), "resources/read", json!({"uri": "demo://readme"}), json!({}))).await;
    assert_eq!(read["result"]["cacheScope"], "private", "{read}");
}

#[tokio::test]
async fn the_eras_refusals_over_http() {
    let (_gw, c) = demo_gateway().await;
    let echo = request(json!(1), "tools/call", json!({"name": "echo", "arguments": {"text": "x"}}), json!({}));
    let code = |r: &RawResponse| r.json()["error"]["code"].as_i64().unwrap();

    // Headers: missing, disagreeing with the body.
    let r = post(&c, &echo, &[]).await;
    assert_eq!((r.status, code(&r)), (400, -32020), "{:?}", r.json());
    let mut h = mirrored(&echo);
    h[0].1 = "2025-11-25".into();
    let r = post(&c, &echo, &h).await;
    assert_eq!((r.status, code(&r)), (400, -32020));
    let mut h = mirrored(&echo);
    h[2].1 = "add".into();
    let r = post(&c, &echo, &h).await;
    assert_eq!((r.status, code(&r)), (400, -32020));
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("Mcp-Name"), "{:?}", r.json());
    let h: Vec<_> = mirrored(&echo).into_iter().filter(|(k, _)| *k != "mcp-method").collect();
    let r = post(&c, &echo, &h).await;
    assert_eq!((r.status, code(&r)), (400, -32020));

    // _meta: a missing field, an unknown version.
    let mut bare = echo.clone();
    bare["params"]["_meta"].as_object_mut().unwrap().remove("io.modelcontextprotocol/clientCapabilities");
    let r = post(&c, &bare, &mirrored(&bare)).await;
    assert_eq!((r.status, code(&r)), (400, -32602));
    let mut future = echo.clone();
    future["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let mut h = mirrored(&future);
    h[0].1 = "2099-01-01".into();
    let r = post(&c, &future, &h).await;
    assert_eq!((r.status, code(&r)), (400, -32022));
    assert_eq!(r.json()["error"]["data"]["requested"], "2099-01-01");
    assert!(r.json()["error"]["data"]["supported"].as_array().unwrap().iter().any(|v| v == V));

    // Methods the era removed, or never had from a client.
    for m in ["ping", "logging/setLevel", "tasks/result", "resources/subscribe"] {
        let (status, r, _) = call(&c, &request(json!(9), m, json!({}), json!({}))).await;
        assert_eq!((status, r["error"]["code"].as_i64()), (404, Some(-32601)), "{m}: {r}");
    }
    let (_, r, _) = call(&c, &request(json!(9), "subscriptions/listen", json!({}), json!({}))).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (status, r, _) = call(&c, &request(json!(9), "tasks/get", json!({"taskId": "t"}), json!({}))).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (400, Some(-32021)), "{r}");
    assert_eq!(r["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"], json!({}));

    // No batches, no responses, no GET or DELETE.
    let r = c.post_raw(serde_json::to_vec(&json!([echo])).unwrap(), &[("mcp-protocol-version", V)]).await;
    assert_eq!(r.status, 400);
    let answer = json!({"jsonrpc": "2.0", "id": 5, "result": {}});
    let r = c.post_raw(serde_json::to_vec(&answer).unwrap(), &[("mcp-protocol-version", V)]).await;
    assert_eq!((r.status, code(&r)), (400, -32600));
    let get = c.get_raw(&[("mcp-protocol-version", V)]).await;
    assert_eq!(get.status(), 405);

    // None of that broke anything: the next request is served.
    let (status, r, _) = call(&c, &echo).await;
    assert_eq!((status, r["result"]["content"][0]["text"].as_str()), (200, Some("x")));
}

#[tokio::test]
async fn progress_and_logs_reach_the_requests_stream() {
    let (_gw, c) = demo_gateway().await;
    let mut slow = request(
        json!(1),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 300, "steps": 3}}),
        json!({}),
    );
    slow["params"]["_meta"]["progressToken"] = json!("p-1");
    let (_, r, before) = call(&c, &slow).await;
    assert_eq!(r["result"]["content"][0]["text"], "done after 3 steps", "{r}");
    let progress: Vec<&Value> = before.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 3, "{before:?}");
    assert!(progress.iter().all(|m| m["params"]["progressToken"] == "p-1"), "the client's own token: {before:?}");
}

#[tokio::test]
async fn two_clients_may_use_the_same_id_at_once() {
    let (_gw, c) = demo_gateway().await;
    let slow = |steps: u64| {
        request(
            json!(7),
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 200, "steps": steps}}),
            json!({}),
        )
    };
    let (a, b) = (slow(2), slow(5));
    let ((_, ra, _), (_, rb, _)) = tokio::join!(call(&c, &a), call(&c, &b));
    assert_eq!(ra["result"]["content"][0]["text"], "done after 2 steps", "{ra}");
    assert_eq!(rb["result"]["content"][0]["text"], "done after 5 steps", "{rb}");
}

#[tokio::test]
async fn an_elicitation_becomes_a_multi_round_trip_over_http() {
    let (_gw, c) = demo_gateway().await;
    let caps = json!({"elicitation": {"form": {}}});
    let ask =
        request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "meaning?"}}), caps.clone());
    let (status, r, _) = call(&c, &ask).await;
    assert_eq!(status, 200);
    let first = &r["result"];
    assert_eq!(first["resultType"], "input_required", "{r}");
    let requests = first["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{first}");
    let (key, asked) = requests.iter().next().unwrap();
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "meaning?");
    let state = first["requestState"].as_str().expect("requestState").to_string();

    // A retry under a new id with the answer: the original call completes.
    let mut retry = ask.clone();
    retry["id"] = json!(2);
    retry["params"]["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "forty-two"}}});
    retry["params"]["requestState"] = json!(state);
    let (status, r, _) = call(&c, &retry).await;
    assert_eq!(status, 200);
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "answer: forty-two", "{r}");
    assert_eq!(r["result"]["resultType"], "complete");

    // The state is used up: a second retry with it is refused.
    let mut again = retry.clone();
    again["id"] = json!(3);
    let (_, r, _) = call(&c, &again).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // A client that cannot answer elicitations is not asked.
    let plain = request(json!(4), "tools/call", json!({"name": "ask", "arguments": {"question": "q"}}), json!({}));
    let (_, r, _) = call(&c, &plain).await;
    assert!(r["result"]["content"][0]["text"].as_str().unwrap().contains("does not support elicitation"), "{r}");
}

#[tokio::test]
async fn a_retry_without_every_answer_is_asked_again() {
    let (_gw, c) = demo_gateway().await;
    let caps = json!({"elicitation": {}});
    let ask = request(json!(1), "tools/call", json!({"name": "ask", "arguments": {"question": "q?"}}), caps);
    let (_, r, _) = call(&c, &ask).await;
    let state = r["result"]["requestState"].as_str().unwrap().to_string();
    let key = r["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let mut retry = ask.clone();
    retry["id"] = json!(2);
    retry["params"]["requestState"] = json!(state);
    retry["params"]["inputResponses"] = json!({"not-a-key": {"action": "decline"}});
    let (_, r, _) = call(&c, &retry).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    assert!(r["result"]["inputRequests"].get(&key).is_some(), "the same question, still open: {r}");
    let mut last = retry.clone();
    last["id"] = json!(3);
    last["params"]["requestState"] = r["result"]["requestState"].clone();
    last["params"]["inputResponses"] = json!({key: {"action": "decline"}});
    let (_, r, _) = call(&c, &last).await;
    assert_eq!(r["result"]["content"][0]["text"], "no answer (decline)", "{r}");
}

/// Over stdio: the same era, with `notifications/cancelled` as the way to cancel, and an
/// `initialize` choosing the legacy era for the rest of the process.
#[tokio::test]
async fn modern_requests_over_stdio() {
    let mut c = StdioMcp::start(&builtin_upstream("demo"), "demo").await;
    c.send(&request(json!(1), "server/discover", json!({}), json!({}))).await;
    let d = c.wait_response(1).await;
    assert_eq!(d.result()["supportedVersions"][0], V, "{:?}", d.response);
    c.send(&request(json!(2), "tools/call", json!({"name": "echo", "arguments": {"text": "over stdio"}}), json!({})))
        .await;
    let r = c.wait_response(2).await;
    assert_eq!(
        (r.result()["content"][0]["text"].as_str(), r.result()["resultType"].as_str()),
        (Some("over stdio"), Some("complete"))
    );

    let caps = json!({"elicitation": {}});
    let ask = request(json!(3), "tools/call", json!({"name": "ask", "arguments": {"question": "colour?"}}), caps);
    c.send(&ask).await;
    let r = c.wait_response(3).await;
    assert_eq!(r.result()["resultType"], "input_required", "{:?}", r.response);
    assert!(r.others.is_empty(), "no server request reaches a modern client: {:?}", r.others);
    let key = r.result()["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let mut retry = ask.clone();
    retry["id"] = json!(4);
    retry["params"]["requestState"] = r.result()["requestState"].clone();
    retry["params"]["inputResponses"] = json!({key: {"action": "accept", "content": {"answer": "blue"}}});
    c.send(&retry).await;
    let r = c.wait_response(4).await;
    assert_eq!(r.result()["content"][0]["text"], "answer: blue", "{:?}", r.response);

    // Cancelled: no answer comes for it, and the next request is served.
    let slow = request(
        json!(5),
        "tools/call",
        json!({"name": "slow", "arguments": {"duration_ms": 30000, "steps": 30}}),
        json!({}),
    );
    c.send(&slow).await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})).await;
    c.send(&request(json!(6), "tools/call", json!({"name": "echo", "arguments": {"text": "after"}}), json!({}))).await;
    let r = c.wait_response(6).await;
    assert_eq!(r.result()["content"][0]["text"], "after");
    assert!(r.others.iter().all(|m| m["id"] != 5), "{:?}", r.others);

    // `initialize` selects the legacy era: then a request is a legacy session's.
    let init = c.initialize("2025-06-18").await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    let r = c.request("ping", json!({})).await;
    assert_eq!(r.result(), &json!({}));
}

/// Closing a modern request's response cancels it upstream (the era's rule).
#[tokio::test]
async fn closing_the_response_cancels_the_request() {
    let up = Scripted::start(|req: &Value| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
        "tools/call" => vec![Step::Sleep(30_000)],
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let gw = start_gateway(&http_upstream("up", &up.url())).await;
    let c = HttpMcp::new(&gw.url("up"));
    let hang = request(json!(1), "tools/call", json!({"name": "hang", "arguments": {}}), json!({}));
    let h: Vec<(&str, String)> = mirrored(&hang);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c.post_streaming(serde_json::to_vec(&hang).unwrap(), &h).await;
    assert_eq!(resp.status(), 200);
    drop(resp);
    eventually("the upstream hears the cancel", async || {
        up.received_methods().iter().any(|m| m == "notifications/cancelled")
    })
    .await;
}

/// `subscriptions/listen`: list changes and updates of the listed resources, on the one
/// stream that asked for them, tagged with its id; the upstream subscription goes with it.
#[tokio::test]
async fn subscriptions_listen_carries_what_was_asked() {
    const ARMS: &str = r#"
    resources/subscribe|resources/unsubscribe) echo "$line" >> "$LOG"; reply '{}' ;;
    touch) for u in a b; do printf '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///%s"}}\n' "$u"; done
        printf '{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}\n'
        printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'
        reply '{"content":[]}' ;;
"#;
    let script = StdioScript::new(ARMS);
    let log = script.path().with_file_name("log");
    let caps = r#"{"tools":{"listChanged":true},"resources":{"subscribe":true}}"#;
    let table = format!("{}env = {{ LOG = {:?}, CAPS = {caps:?} }}\n", script.upstream("up"), log.to_str().unwrap());
    let gw = start_gateway(&table).await;
    let c = HttpMcp::new(&gw.url("up"));

    let (_, d, _) = call(&c, &request(json!(0), "server/discover", json!({}), json!({}))).await;
    assert_eq!(d["result"]["capabilities"]["resources"]["subscribe"], true, "{d}");
    let listen = request(
        json!("L"),
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["file:///a"]}}),
        json!({}),
    );
    let h = mirrored(&listen);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c.post_streaming(serde_json::to_vec(&listen).unwrap(), &h).await;
    assert_eq!(resp.status(), 200);
    let mut events = SseReader::new(resp.into_body());
    let (_, ack) = events.next().await.expect("the acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}),
        "prompts: the upstream has no listChanged for them"
    );
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L");
    assert!(std::fs::read_to_string(&log).unwrap().contains("resources/subscribe"), "subscribed upstream");

    let (_, r, _) =
        call(&c, &request(json!(1), "tools/call", json!({"name": "touch", "arguments": {}}), json!({}))).await;
    assert!(r["result"]["content"].is_array(), "{r}");
    let mut got = Vec::new();
    while got.len() < 2 {
        let (_, m) = tokio::time::timeout(std::time::Duration::from_secs(5), events.next()).await.unwrap().unwrap();
        got.push(m);
    }
    let methods: Vec<&str> = got.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert!(methods.contains(&"notifications/tools/list_changed"), "{got:?}");
    let updated: Vec<&Value> = got.iter().filter(|m| m["method"] == "notifications/resources/updated").collect();
    assert_eq!(updated.len(), 1, "only the uri asked for: {got:?}");
    assert_eq!(updated[0]["params"]["uri"], "file:///a");
    assert!(got.iter().all(|m| m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"), "{got:?}");

    // Closing the stream lets the upstream subscription go.
    drop(events);
    eventually("unsubscribed upstream", async || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("resources/unsubscribe")
    })
    .await;
}

/// Over stdio a listen stream ends when the client cancels it (nothing more is tagged with
/// it, and it holds no place); a listen asking for task ids without the extension is refused.
#[tokio::test]
async fn a_listen_stream_ends_when_cancelled_and_task_ids_need_the_extension() {
    const ARMS: &str = r#"
    change) printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'; reply '{"content":[]}' ;;
"#;
    let script = StdioScript::new(ARMS);
    let caps = r#"{"tools":{"listChanged":true}}"#;
    let table = format!("[server]\nmax_in_flight = 2\n\n{}env = {{ CAPS = {caps:?} }}\n", script.upstream("up"));
    let mut c = StdioMcp::start(&table, "up").await;
    for n in 0..3 {
        let id = 500 + n;
        let listen =
            request(json!(id), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
        c.send(&listen).await;
        let ack = c.recv().await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})).await;
    }
    c.send(&request(json!(1), "tools/call", json!({"name": "change", "arguments": {}}), json!({}))).await;
    let r = c.wait_response(1).await;
    assert!(r.response.get("error").is_none(), "the cancelled listens hold no places: {:?}", r.response);
    let tagged = |m: &Value| m["params"]["_meta"].get("io.modelcontextprotocol/subscriptionId").is_some();
    assert!(!r.others.iter().chain(&c.backlog).any(tagged), "nothing for a cancelled stream: {:?}", r.others);

    let gw = start_gateway(&builtin_upstream("demo")).await;
    let h = HttpMcp::new(&gw.url("demo"));
    let tasks = request(json!(2), "subscriptions/listen", json!({"notifications": {"taskIds": ["t"]}}), json!({}));
    let (status, r, _) = call(&h, &tasks).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (400, Some(-32021)), "{r}");
}

/// A 2026-07-28 stdio upstream serves `subscriptions/listen` itself: its acknowledgement and
/// what it tags for the stream reach the client that listens, under the client's own id (the
/// tag, not a stream, is what ties them to the request over stdio), and no other client.
#[tokio::test]
async fn a_modern_stdio_upstreams_listen_stream_reaches_its_client() {
    const ARMS: &str = r#"
    server/discover) reply '{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"script","version":"0"}}}' ;;
    subscriptions/listen) echo "$id" >> "$LOG"
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id" ;;
    change) for l in $(cat "$LOG"); do
          printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$l"
        done
        reply '{"resultType":"complete","content":[]}' ;;
    hang) ;;
"#;
    let script = StdioScript::new(ARMS);
    let log = script.path().with_file_name("log");
    let table =
        format!("{}request_timeout = \"1s\"\nenv = {{ LOG = {:?} }}\n", script.upstream("up"), log.to_str().unwrap());
    let gw = start_gateway(&table).await;
    let c = HttpMcp::new(&gw.url("up"));
    let open = async |id: &str| {
        let listen =
            request(json!(id), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
        let (events, ack) = listen_stream(&c, &listen).await;
        assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "{ack}");
        events
    };
    let mut first = open("L1").await;
    let mut second = open("L2").await;
    // A quiet listen stream is not a request that timed out: a call the server never
    // answers, made after both listens, times out (request_timeout) while they stay open.
    let (_, r, _) =
        call(&c, &request(json!(2), "tools/call", json!({"name": "hang", "arguments": {}}), json!({}))).await;
    assert_eq!(r["error"]["data"]["originalCode"], -32001, "the unanswered call timed out: {r}");
    let (_, r, _) =
        call(&c, &request(json!(1), "tools/call", json!({"name": "change", "arguments": {}}), json!({}))).await;
    assert!(r["result"]["content"].is_array(), "{r}");
    for (events, id) in [(&mut first, "L1"), (&mut second, "L2")] {
        let (_, m) = tokio::time::timeout(STEP, events.next()).await.expect("the change in time").unwrap();
        assert_eq!(m["method"], "notifications/tools/list_changed", "{m}");
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "its own stream's: {m}");
        let more = tokio::time::timeout(std::time::Duration::from_millis(300), events.next()).await;
        assert!(more.is_err(), "one change per stream, not the other's too: {more:?}");
    }
}

/// A 2026-07-28 server ends a listen by cancelling it (over stdio, the one purpose it may send
/// `notifications/cancelled` for): the client's stream ends with an answer that says so, so
/// that it listens again, and the listen holds no place any more.
#[tokio::test]
async fn a_server_ending_a_listen_ends_the_clients_stream() {
    const ARMS: &str = r#"
    server/discover) reply '{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"script","version":"0"}}}' ;;
    subscriptions/listen)
        printf '{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/subscriptionId":%s}}}\n' "$id"
        printf '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"going away"}}\n' "$id" ;;
"#;
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&script.upstream("up")).await;
    let c = HttpMcp::new(&gw.url("up"));
    let listen =
        request(json!("L1"), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
    let (mut events, _ack) = listen_stream(&c, &listen).await;
    let (_, end) = tokio::time::timeout(STEP, events.next()).await.expect("told in time").expect("the end");
    assert_eq!(end["id"], "L1", "{end}");
    let why = end["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("ended this subscriptions/listen") && why.contains("going away"), "{end}");
    let more = tokio::time::timeout(STEP, events.next()).await.expect("the stream ends");
    assert!(more.is_none(), "{more:?}");
}

/// A listen stream whose upstream link is lost ends saying so (`notifications/cancelled` with
/// its id), so that the client listens again on the new one.
#[tokio::test]
async fn a_listen_stream_ends_when_its_link_is_lost() {
    let script = StdioScript::new("    die) exit 3 ;;\n");
    let caps = r#"{"tools":{"listChanged":true}}"#;
    let gw = start_gateway(&format!("{}env = {{ CAPS = {caps:?} }}\n", script.upstream("up"))).await;
    let c = HttpMcp::new(&gw.url("up"));
    let listen =
        request(json!("L"), "subscriptions/listen", json!({"notifications": {"toolsListChanged": true}}), json!({}));
    let h = mirrored(&listen);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let resp = c.post_streaming(serde_json::to_vec(&listen).unwrap(), &h).await;
    let mut events = SseReader::new(resp.into_body());
    assert_eq!(events.next().await.unwrap().1["method"], "notifications/subscriptions/acknowledged");
    let die = request(json!(1), "tools/call", json!({"name": "die", "arguments": {}}), json!({}));
    let _ = call(&c, &die).await;
    let (_, end) =
        tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await.unwrap().expect("told");
    assert_eq!(
        (end["method"].as_str(), end["params"]["requestId"].as_str()),
        (Some("notifications/cancelled"), Some("L")),
        "{end}"
    );
    let more = tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await.unwrap();
    assert!(more.is_none(), "the stream ended: {more:?}");
}

/// A legacy upstream with `logging`: a modern request's `_meta` `logLevel` is applied by the
/// gateway to the logs of that request (none without one); no `logging/setLevel` goes up,
/// on a link of its own or a shared one.
#[tokio::test]
async fn log_level_filters_a_legacy_upstreams_logs() {
    const ARMS: &str = r#"
    logging/setLevel) echo "$line" >> "$LOG"; reply '{}' ;;
    logs) for l in debug info warning error; do printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"%s","data":"%s"}}\n' "$l" "$l"; done
        reply '{"content":[{"type":"text","text":"logged"}]}' ;;
"#;
    let script = StdioScript::new(ARMS);
    let log = script.path().with_file_name("log");
    let caps = r#"{"tools":{},"logging":{}}"#;
    let table = format!("{}env = {{ LOG = {:?}, CAPS = {caps:?} }}\n", script.upstream("up"), log.to_str().unwrap());
    for cfg in [table.clone(), format!("{table}share = true\n")] {
        let gw = start_gateway(&cfg).await;
        let c = HttpMcp::new(&gw.url("up"));
        let levels = |before: &[Value]| -> Vec<String> {
            let logs = before.iter().filter(|m| m["method"] == "notifications/message");
            logs.map(|m| m["params"]["level"].as_str().unwrap().to_string()).collect()
        };
        let mut logged = request(json!(1), "tools/call", json!({"name": "logs", "arguments": {}}), json!({}));
        logged["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("warning");
        let (status, r, before) = call(&c, &logged).await;
        assert_eq!((status, r["result"]["content"][0]["text"].as_str()), (200, Some("logged")), "{r}");
        assert_eq!(levels(&before), ["warning", "error"], "{cfg}: {before:?}");
        logged["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
        let (_, _, before) = call(&c, &logged).await;
        assert_eq!(levels(&before), ["debug", "info", "warning", "error"], "{cfg}");
        let quiet = request(json!(2), "tools/call", json!({"name": "logs", "arguments": {}}), json!({}));
        let (_, r, before) = call(&c, &quiet).await;
        assert_eq!(r["result"]["content"][0]["text"], "logged");
        assert!(levels(&before).is_empty(), "{cfg}: no level asked, no logs: {before:?}");
    }
    assert!(!log.exists(), "no logging/setLevel went up: {:?}", std::fs::read_to_string(&log));
}

/// 404 goes with a -32601 for a method the server does not implement, and only there: a
/// -32601 answering a `tools/call` (here the upstream's, for a tool it reports so) is about
/// the tool, and travels with 200.
#[tokio::test]
async fn only_an_unimplemented_method_gets_404() {
    const ARMS: &str = r#"
    gone|completion/complete) printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"not here: %s"}}\n' "$id" "$name" ;;
"#;
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&script.upstream("up")).await;
    let c = HttpMcp::new(&gw.url("up"));
    let gone = request(json!(1), "tools/call", json!({"name": "gone", "arguments": {}}), json!({}));
    let (status, r, _) = call(&c, &gone).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (200, Some(-32601)), "{r}");
    let complete = request(
        json!(2),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "x"}}),
        json!({}),
    );
    let (status, r, _) = call(&c, &complete).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (404, Some(-32601)), "the upstream lacks the method: {r}");
    let (status, r, _) = call(&c, &request(json!(3), "ping", json!({}), json!({}))).await;
    assert_eq!((status, r["error"]["code"].as_i64()), (404, Some(-32601)), "the era has no ping: {r}");
}
