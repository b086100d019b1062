//! A stdio upstream that misbehaves on its stdout, scripted in bash: a line that is not
//! UTF-8 or is over the limit fails only the request it answers, and the link lives on.

mod common;

use common::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use taskgate::TransportError;

const ARMS: &str = r#"
    slow) ( sleep 0.5; reply '{"content":[{"type":"text","text":"slow done"}]}' ) & ;;
    bad_utf8) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}\n' "$id" ;;
    bad_utf8_id_last) printf '{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"\xff"}]},"id":%s}\n' "$id" ;;
    huge) pad=$(printf '%*s' 20000 ''); printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"%s"}]}}\n' "$id" "${pad// /a}" ;;
    noisy) printf 'bad \xff\n' >&2; head -c 200000 /dev/zero | tr '\0' x >&2; echo >&2; reply '{"content":[{"type":"text","text":"quiet now"}]}' ;;
    batch) printf '[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"in a batch"}},{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"batched"}]}}]\n' "$id" ;;
    pid) reply "{\"content\":[{\"type\":\"text\",\"text\":\"$$\"}]}" ;;
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
        tokio::time::sleep(Duration::from_millis(50)).await;
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
