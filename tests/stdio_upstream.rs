//! A stdio upstream that misbehaves on its stdout, scripted in bash: a line that is not
//! UTF-8 or is over the limit, or a response the gateway refuses to read, fails only the
//! request it answers, and the link lives on.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use taskgate::TransportError;

const ARMS: &str = r#"
    slow) : > "$0.slow"; ( sleep 0.5; reply '{"content":[{"type":"text","text":"slow done"}]}' ) & ;;
    bad_utf8) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}\n' "$id" ;;
    bad_utf8_id_last) printf '{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"\xff"}]},"id":%s}\n' "$id" ;;
    huge) pad=$(printf '%*s' 20000 ''); printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' "$id" "${pad// /a}" ;;
    noisy) printf 'bad \xff\n' >&2; head -c 200000 /dev/zero | tr '\0' x >&2; echo >&2; reply '{"content":[{"type":"text","text":"quiet now"}]}' ;;
    batch) printf '[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"in a batch"}},{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"batched"}]}}]\n' "$id" ;;
    pid) reply "{\"content\":[{\"type\":\"text\",\"text\":\"$$\"}]}" ;;
    dup_id) printf '{"jsonrpc":"2.0","id":%s,"id":%s,"result":{"content":[]}}\n' "$id" "$id" ;;
    dup_task) printf '{"jsonrpc":"2.0","id":%s,"result":{"task":{"taskId":"a","status":"working"},"task":{"taskId":"b","status":"working"}}}\n' "$id" ;;
    bad_server_request) printf '{"jsonrpc":"2.0","id":"s1","method":"roots/list","method":"ping"}\n'; reply '{"content":[{"type":"text","text":"after"}]}' ;;
"#;

fn call(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

#[tokio::test]
async fn a_bad_stdout_line_fails_only_the_request_it_answers() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&format!("[server]\nmax_body_bytes = 8192\n{}", script.upstream("up"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let pid = c.request("tools/call", call("pid")).await.result()["content"][0]["text"].clone();

    // A line that is not UTF-8 while another call is in flight: only its own call fails, at once.
    let start = Instant::now();
    let (slow, bad) = tokio::join!(c.request_owned("tools/call", call("slow")), async {
        let started = script.path().with_extension("sh.slow");
        eventually("the slow call reached the script", async || started.exists()).await;
        c.request_owned("tools/call", call("bad_utf8")).await
    });
    bad.assert_upstream_failed("up", TransportError::NotUtf8);
    assert_eq!(slow.result()["content"][0]["text"], "slow done");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());

    // The id may come last, after the bad bytes.
    let bad = c.request("tools/call", call("bad_utf8_id_last")).await;
    bad.assert_upstream_failed("up", TransportError::NotUtf8);

    // A line over max_body_bytes: its request fails, nothing else does.
    let huge = c.request("tools/call", call("huge")).await;
    huge.assert_upstream_failed("up", TransportError::TooLarge { limit: 8192 });

    // Still the same child.
    let again = c.request("tools/call", call("pid")).await;
    assert_eq!(again.result()["content"][0]["text"], pid);
}

#[tokio::test]
async fn a_bad_stderr_line_does_not_stop_the_log() {
    // A log line that is not UTF-8, then one longer than any pipe buffer: stderr must keep
    // being read, or the child blocks writing it.
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&format!("{}request_timeout = \"5s\"\n", script.upstream("up"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let out = c.request("tools/call", call("noisy")).await;
    assert_eq!(out.result()["content"][0]["text"], "quiet now");
}

#[tokio::test]
async fn a_batch_line_from_a_2025_03_26_upstream_is_delivered_message_by_message() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&format!("{}request_timeout = \"3s\"\n", script.upstream("up"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-03-26").await;
    let out = c.request("tools/call", call("batch")).await;
    assert_eq!(out.result()["content"][0]["text"], "batched");
    assert!(out.others.iter().any(|m| m["params"]["data"] == "in a batch"), "{:?}", out.others);
}

#[tokio::test]
async fn a_response_the_gateway_refuses_fails_its_request_at_once() {
    let script = StdioScript::new(ARMS);
    let gw = start_gateway(&format!("{}request_timeout = \"20s\"\n", script.upstream("up"))).await;
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize("2025-06-18").await;
    let start = Instant::now();
    // An envelope key twice, and a key of `result` the gateway reads twice (the client would
    // read the last `task`, the gateway none): refused, and their requests fail now.
    let out = c.request("tools/call", call("dup_id")).await;
    let why = "invalid request: a key of the envelope appears twice".to_string();
    out.assert_upstream_failed("up", TransportError::BadResponse(why));
    let out = c.request("tools/call", call("dup_task")).await;
    let why = "invalid request: \"result.task\" appears twice (the gateway reads it)".to_string();
    out.assert_upstream_failed("up", TransportError::BadResponse(why));
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    // A malformed request from the server has no one to fail: it is dropped, and the call
    // that made it is answered.
    let out = c.request("tools/call", call("bad_server_request")).await;
    assert_eq!(out.result()["content"][0]["text"], "after");
    assert!(out.others.is_empty(), "{:?}", out.others);
}
