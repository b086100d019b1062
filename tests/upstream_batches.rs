//! JSON-RPC batches from a 2025-03-26 upstream, on a stdio line, in a POST's JSON body and
//! in an SSE event: each message goes on alone (notifications, server requests, responses),
//! what is not a message is skipped, an empty batch is skipped, and a batch longer than
//! `max_batch` is dropped, failing the requests it answered at once.
//! (A batch on the legacy HTTP+SSE stream: `sse_upstream.rs`.)

use crate::common;

use common::*;
use serde_json::{Value, json};
use taskgate::TransportError;

const ARMS: &str = r#"
    mixed) printf '[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"first"}},42,"x",[],{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}},{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"mixed"}]}}]\n' "$id" ;;
    empty) printf '[]\n'; reply '{"content":[{"type":"text","text":"after an empty batch"}]}' ;;
"#;

/// A bash `case` arm `<name>)` that answers with a batch of `logs` log notifications and the
/// response.
fn batch_arm(name: &str, logs: usize) -> String {
    let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"n"}},"#;
    let answer = r#"{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}"#;
    format!("    {name}) printf '[{}{answer}]\\n' \"$id\" ;;\n", log.repeat(logs))
}

fn call(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

fn logs(out: &Outcome) -> usize {
    out.others.iter().filter(|m| m["method"] == "notifications/message").count()
}

#[tokio::test]
async fn a_batch_line_from_a_stdio_upstream_is_taken_apart() {
    let script = StdioScript::new(&format!("{ARMS}{}{}", batch_arm("six", 5), batch_arm("seven", 6)));
    let config = format!("[server]\nmax_batch = 6\n{}request_timeout = \"1m\"\n", script.upstream("up"));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;

    // A notification, three things that are not messages (skipped), a server request (one
    // that serves the request in flight, so that it goes to the call's stream), and the
    // response, in that order.
    let out = c.request("tools/call", call("mixed")).await;
    assert_eq!(out.result()["content"][0]["text"], "mixed");
    let methods: Vec<&str> = out.others.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/message", "sampling/createMessage"], "{:?}", out.others);

    let out = c.request("tools/call", call("empty")).await;
    assert_eq!(out.result()["content"][0]["text"], "after an empty batch");

    // max_batch messages are taken; one more and the batch is dropped, its response's
    // request failing at once (request_timeout is a minute).
    let out = c.request("tools/call", call("six")).await;
    assert_eq!((out.result()["content"].clone(), logs(&out)), (json!([]), 5));
    let out = c.request("tools/call", call("seven")).await;
    out.assert_upstream_failed("up", TransportError::BatchTooLarge { limit: 6, len: 7 });
    assert_eq!(logs(&out), 0);
}

fn note(data: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}})
}

fn json_body(v: Value) -> Step {
    Step::Plain(200, vec![("content-type", "application/json".into())], v.to_string())
}

#[tokio::test]
async fn a_batch_from_an_http_upstream_is_taken_apart() {
    let up = Scripted::start(|req| {
        let id = req["id"].clone();
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "batched"}]}});
        match (req["method"].as_str().unwrap_or(""), req["params"]["name"].as_str().unwrap_or("")) {
            ("initialize", _) => init_result(req, json!({"tools": {}, "logging": {}})),
            ("tools/call", "json") => {
                vec![json_body(json!([note("in a body"), 7, {"jsonrpc": "2.0", "id": "s1", "method": "ping"}, answer]))]
            }
            ("tools/call", "json_empty") => vec![json_body(json!([]))],
            ("tools/call", "json_five") => vec![json_body(json!([note("1"), note("2"), note("3"), note("4"), answer]))],
            ("tools/call", "sse_empty") => vec![Step::Send(json!([])), Step::Send(answer)],
            ("tools/call", "sse_five") => vec![Step::Send(json!([note("1"), note("2"), note("3"), note("4"), answer]))],
            // Several JSON objects run together, in a body and in one event: no message can
            // be read from either, the answer among them included.
            ("tools/call", "json_run_together") => {
                vec![Step::Plain(
                    200,
                    vec![("content-type", "application/json".into())],
                    format!("{}\n{answer}", note("x")),
                )]
            }
            ("tools/call", "json_null_id_error") => vec![Step::Plain(
                200,
                vec![("content-type", "application/json".into())],
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32602, "message": "bad arguments"}})
                    .to_string(),
            )],
            ("tools/call", "sse_run_together") => {
                vec![Step::Raw(format!("event: message\ndata: {}\ndata: {answer}\n\n", note("x"))), Step::Sleep(60_000)]
            }
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let config = format!("[server]\nmax_batch = 4\n{}request_timeout = \"1m\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;

    let out = c.request("tools/call", call("json")).await;
    assert_eq!(out.result()["content"][0]["text"], "batched");
    let methods: Vec<&str> = out.others.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/message", "ping"], "{:?}", out.others);

    // An empty array is not an answer: the request it came for fails at once.
    let out = c.request("tools/call", call("json_empty")).await;
    out.assert_upstream_failed("up", TransportError::BadBody("invalid request: empty batch".into()));
    // On a stream it is skipped, and what follows is read.
    let out = c.request("tools/call", call("sse_empty")).await;
    assert_eq!(out.result()["content"][0]["text"], "batched");

    // An answer that cannot be read fails its request at once, saying why: the client does
    // not wait for its timeout (a minute here) on a stream that stays open.
    for name in ["json_run_together", "sse_run_together"] {
        let started = std::time::Instant::now();
        let out = c.request("tools/call", call(name)).await;
        assert_eq!(out.error_code(), -32000, "{name}: {}", out.response);
        let message = out.response["error"]["message"].as_str().unwrap();
        assert!(message.contains("unreadable response body"), "{name}: {message}");
        assert!(started.elapsed() < std::time::Duration::from_secs(30), "{name}: failed at once");
    }
    // An error without an id, as the body of the request's answer, is its answer.
    let out = c.request("tools/call", call("json_null_id_error")).await;
    assert_eq!((out.error_code(), out.response["error"]["message"].as_str()), (-32602, Some("bad arguments")));
    for name in ["json_five", "sse_five"] {
        let out = c.request("tools/call", call(name)).await;
        out.assert_upstream_failed("up", TransportError::BatchTooLarge { limit: 4, len: 5 });
        assert_eq!(logs(&out), 0, "{name}");
    }
    // The session goes on.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}
