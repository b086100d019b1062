//! Edges of the wire that users met (issue 24, items 4 and 5): integer request ids beyond
//! `i64`, a POST whose session ends while it is handled, an upstream response that names two
//! different ids, and a repeated `params.task.ttl`.

use crate::common;

use common::*;
use serde_json::{Value, json};

/// The integer ids JSON allows and `i64` does not hold, as their text; and `-0`, which a
/// tree reads as a float (found by the jsonrpc fuzz target).
const BIG_IDS: [&str; 5] =
    ["18446744073709551616", "-9223372036854775809", "9223372036854775808", "123456789012345678901234567890", "-0"];

fn call_with_id(id: &str, text: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
    )
    .into_bytes()
}

/// The text of the `id` member of a JSON response body (the body is not read as a tree:
/// that would round the id).
fn id_text(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let at = text.find("\"id\":").unwrap_or_else(|| panic!("no id in {text}")) + 5;
    text[at..].chars().take_while(|c| *c == '-' || c.is_ascii_digit()).collect()
}

/// An integer id beyond `i64` was 400 "id must be a string or integer": it is served, and
/// its answer carries it byte for byte, on a link of its own and on a shared one (where
/// two clients use the same big id at once), and in an error the gateway makes itself.
#[tokio::test]
async fn integer_ids_beyond_i64_are_served_and_echoed_as_they_came() {
    for share in [false, true] {
        let config = format!("{}{}", builtin_upstream("demo"), if share { "share = true\n" } else { "" });
        let gw = start_gateway(&config).await;
        let mut a = HttpMcp::new(&gw.url("demo"));
        a.initialize("2025-06-18").await;
        let mut b = HttpMcp::new(&gw.url("demo"));
        b.initialize("2025-06-18").await;
        let json_only = [("accept", "application/json")];
        for id in BIG_IDS {
            let (ra, rb) = tokio::join!(
                a.post_raw(call_with_id(id, "from a"), &json_only),
                b.post_raw(call_with_id(id, "from b"), &json_only)
            );
            for (r, who) in [(ra, "from a"), (rb, "from b")] {
                assert_eq!(r.status, 200, "{id} (share {share}): {:?}", String::from_utf8_lossy(&r.body));
                assert_eq!(id_text(&r.body), id, "share {share}: {:?}", String::from_utf8_lossy(&r.body));
                assert_eq!(r.json()["result"]["content"][0]["text"], who, "share {share}");
            }
        }
        // Refused by the gateway itself (a key it reads twice): the id as it came too.
        let twice = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"echo","name":"x"}}}}"#,
            BIG_IDS[0]
        );
        let r = a.post_raw(twice.into_bytes(), &json_only).await;
        assert_eq!(
            (r.status, id_text(&r.body)),
            (400, BIG_IDS[0].to_string()),
            "{:?}",
            String::from_utf8_lossy(&r.body)
        );
    }
}

/// A client's cancellation names its request by the big id: the call is cancelled.
#[tokio::test]
async fn a_big_id_is_cancelled_by_its_text() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let id = BIG_IDS[3];
    let slow = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","arguments":{{"duration_ms":20000,"steps":100}},"_meta":{{"progressToken":"p"}}}}}}"#
    );
    let resp = c.post_streaming(slow.into_bytes(), &[]).await;
    assert_eq!(resp.status(), 200);
    let mut events = SseReader::new(resp.into_body());
    let (_, first) = events.next().await.expect("progress first");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    let cancel = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id},"reason":"enough"}}}}"#
    );
    assert_eq!(c.post_raw(cancel.into_bytes(), &[]).await.status, 202);
    // The stream ends without a result: the request was found and cancelled.
    while let Some((_, m)) = events.next().await {
        assert!(m.get("result").is_none(), "a cancelled call was answered: {m}");
    }
}

/// A POST whose session ends (its client deletes it) while its call runs was answered 202,
/// with no response for its request: it gets a JSON-RPC error for it.
#[tokio::test]
async fn a_post_whose_session_ends_gets_an_error_for_its_request() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let mut get = SseReader::new(c.get_raw(&[]).await.into_body());
    // JSON only: its answer comes whole, however long the call takes.
    let ask = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "?"}}});
    let posting = c.post_raw(serde_json::to_vec(&ask).unwrap(), &[("accept", "application/json")]);
    let deleting = async {
        // The call is in flight once its question reaches the GET stream.
        let (_, question) = get.next().await.expect("the question");
        assert_eq!(question["method"], "elicitation/create");
        assert_eq!(c.delete().await, 200);
    };
    let (r, ()) = tokio::join!(posting, deleting);
    assert_eq!(r.status, 200, "{:?}", String::from_utf8_lossy(&r.body));
    let m = r.json();
    assert_eq!((m["id"].clone(), m["error"]["code"].clone()), (json!(41), json!(-32000)), "{m}");
    assert!(m["error"]["message"].as_str().unwrap().contains("session ended"), "{m}");

    // On an event stream: its last event is that error.
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let slow = json!({"jsonrpc": "2.0", "id": 42, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"duration_ms": 20000, "steps": 100}, "_meta": {"progressToken": "p"}}});
    let resp = c.post_streaming(serde_json::to_vec(&slow).unwrap(), &[]).await;
    let mut events = SseReader::new(resp.into_body());
    assert_eq!(events.next().await.expect("progress").1["method"], "notifications/progress");
    assert_eq!(c.delete().await, 200);
    let mut last = Value::Null;
    while let Some((_, m)) = events.next().await {
        last = m;
    }
    assert_eq!((last["id"].clone(), last["error"]["code"].clone()), (json!(42), json!(-32000)), "{last}");
}

/// An upstream response that names two different ids was dropped, and the call waited for
/// `request_timeout`: the call fails at once, saying why.
#[tokio::test]
async fn a_response_with_two_different_ids_fails_its_call_at_once() {
    let up = Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => {
            let id = req["id"].clone();
            // The stream stays open: nothing but the gateway's reading ends the call.
            vec![
                Step::Raw(format!(
                    "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[]}},\"id\":\"other\"}}\n\n"
                )),
                Step::Sleep(30_000),
            ]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await;
    let config = format!("{}request_timeout = \"600s\"\n", http_upstream("up", &up.url()));
    let gw = start_gateway(&config).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", json!({"name": "x", "arguments": {}})).await;
    let e = &out.response["error"];
    assert!(e["message"].as_str().unwrap_or("").contains("different ids"), "{}", out.response);
    // The link goes on serving.
    assert_eq!(c.request("ping", json!({})).await.result(), &json!({}));
}

/// A repeated `params.task.ttl` was passed on (the gateway would keep the task for one ttl
/// and the server read the other): refused with -32602 and the request's id.
#[tokio::test]
async fn a_repeated_task_ttl_is_refused() {
    let gw = start_gateway(&builtin_upstream("demo")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-11-25").await;
    let twice = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"task":{"ttl":1000,"ttl":600000}}}"#;
    let r = c.post_raw(twice.to_vec(), &[]).await;
    let m = r.json();
    assert_eq!((m["id"].clone(), m["error"]["code"].clone()), (json!(7), json!(-32602)), "{m}");
    assert!(m["error"]["message"].as_str().unwrap().contains("params.task.ttl"), "{m}");
    let once = json!({"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 60000}});
    let created = c.request("tools/call", once).await;
    assert!(created.result()["task"]["taskId"].is_string(), "{}", created.response);
}
