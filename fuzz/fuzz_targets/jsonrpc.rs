//! The JSON-RPC envelope: `parse_body`, then `Message::parse` on every message, with the
//! invariants the gateway relies on checked for each outcome: the bytes it passes on mean
//! what the bytes it received meant, a new id changes the id and nothing else, and the
//! fields it routes by are the message's own.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use taskgate::jsonrpc::{self, Body, INVALID_REQUEST, Id, Key, Kind, Message, Method, PARSE_ERROR, ProgressToken};

fuzz_target!(|data: &[u8]| {
    let items = match jsonrpc::parse_body(Bytes::copy_from_slice(data)) {
        Ok(Body::Single(text)) => vec![text],
        Ok(Body::Batch(items)) => {
            assert!(!items.is_empty(), "an empty batch is refused");
            items
        }
        Err(e) => {
            assert!(e.code == PARSE_ERROR || e.code == INVALID_REQUEST, "body error code {}", e.code);
            assert_eq!(e.response(None)["error"]["code"], e.code);
            return;
        }
    };
    for text in items {
        check(text);
    }
});

fn check(text: Bytes) {
    // What a whole-tree parser makes of the input; `None` where it cannot (numbers beyond
    // f64, invalid JSON), and then only the envelope's own rules are checked.
    let original: Option<Value> = serde_json::from_slice(&text).ok();
    match Message::parse(text) {
        Ok(m) => {
            let tree: Option<Value> = serde_json::from_slice(m.bytes()).ok();
            assert_eq!(tree, original, "the bytes passed on mean what the bytes received meant");
            if let Some(tree) = &tree {
                assert_eq!(m.value(), tree, "the lazy tree is the message's");
                assert_eq!(tree["jsonrpc"], "2.0");
            }
            assert!(!m.bytes().iter().any(|&b| b == b'\n' || b == b'\r'), "a message fits on one line");
            let _ = (m.tool_name(), m.task_param(), m.task_id_param(), m.request_id_param());
            let _ = (m.progress_token(), m.progress_values(), m.result_field(Key::Task));
            if let Some(tree) = &tree {
                // No key the gateway reads appears twice: what it reads is what a tree (and so
                // the peer) reads.
                let raw = |v: Option<&str>| v.map(|t| serde_json::from_str::<Value>(t).expect("a value"));
                let meta = |obj: &str, key: &str| {
                    tree.get(obj)
                        .filter(|o| o.is_object())
                        .and_then(|o| o.get("_meta"))
                        .filter(|m| m.is_object())
                        .and_then(|m| m.get(key))
                        .cloned()
                };
                let related = |obj: &str| meta(obj, jsonrpc::RELATED_TASK);
                let related_id =
                    |obj: &str| related(obj).filter(Value::is_object).and_then(|r| r.get("taskId").cloned());
                assert_eq!(raw(m.param(Key::RelatedTask)), related("params"));
                assert_eq!(raw(m.param(Key::RelatedTaskId)), related_id("params"));
                if m.method() != Method::Progress {
                    let token = meta("params", "progressToken");
                    assert_eq!(m.progress_token(), token.as_ref().and_then(ProgressToken::from_value));
                }
                if m.kind() == Kind::Response && tree["result"].is_object() {
                    let result = &tree["result"];
                    for (key, name) in [(Key::Task, "task"), (Key::TaskId, "taskId"), (Key::Status, "status")] {
                        assert_eq!(raw(m.result_field(key)), result.get(name).cloned(), "result.{name}");
                    }
                    assert_eq!(raw(m.result_field(Key::RelatedTaskId)), related_id("result"));
                }
            }
            match m.kind() {
                Kind::Request => {
                    let id = m.id().cloned().expect("a request has an id");
                    // An integer beyond i64 is kept as its text; a tree cannot hold it exactly.
                    if id.is_big() {
                        assert!(id.to_string().trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()), "{id}");
                    } else {
                        assert_eq!(Id::from_value(&id.to_value()), Some(id.clone()), "ids round-trip");
                    }
                    // The method read once at the edge is the one the message names.
                    assert_eq!(m.method(), Method::parse(m.method_name()));
                    assert_eq!(m.method().name().unwrap_or(m.method_name()), m.method_name());
                    if let Some(tree) = &tree {
                        assert_eq!(tree["method"], m.method_name());
                    }
                    let (name, task) = (m.tool_name().map(|n| n.into_owned()), m.task_param().map(str::to_string));
                    for new in [Id::Num(7), Id::Str("a\"\\é-long-id".into()), id] {
                        let moved = m.clone().with_id(&new);
                        assert_eq!(moved.id(), Some(&new));
                        assert_eq!(moved.tool_name().map(|n| n.into_owned()), name, "spans move with the id");
                        assert_eq!(moved.task_param().map(str::to_string), task);
                        if let Some(tree) = &original {
                            let mut want = tree.clone();
                            want["id"] = new.to_value();
                            let mut got: Value = serde_json::from_slice(moved.bytes()).expect("still JSON");
                            if new.is_big() {
                                // Written as its text, which a tree reads as a float.
                                let text = new.to_string();
                                assert!(got["id"].is_number(), "{got}");
                                assert!(moved.bytes().windows(text.len()).any(|w| w == text.as_bytes()), "{text}");
                                got["id"] = new.to_value();
                            }
                            assert_eq!(got, want, "a new id changes the id and nothing else");
                        }
                    }
                }
                Kind::Notification => {
                    assert!(m.id().is_none());
                    if let Some(tree) = &tree {
                        assert!(tree.get("id").is_none());
                    }
                }
                Kind::Response => {
                    assert_eq!(m.method_name(), "");
                    if let Some(tree) = &tree {
                        let obj = tree.as_object().unwrap();
                        assert!(obj.get("method").is_none());
                        assert_ne!(obj.contains_key("result"), obj.contains_key("error"));
                        assert_eq!(m.is_error(), obj.contains_key("error"));
                    }
                }
            }
        }
        Err(r) => {
            let e = &r.error;
            assert!(e.code == INVALID_REQUEST || e.code == PARSE_ERROR, "envelope errors are -32600 or -32700");
            let resp = e.response(r.id.as_ref());
            assert_eq!(resp["error"]["code"], e.code);
            if let Some(id) = &r.id {
                assert_eq!(resp["id"], id.to_value());
            }
            // What the refusal says it read is the message's own.
            if let Some(obj) = original.as_ref().and_then(Value::as_object) {
                // As the envelope reads it, a null method is no method.
                assert_eq!(r.is_response, obj.get("method").is_none_or(Value::is_null));
                match &r.id {
                    Some(id) if id.is_big() => assert!(obj.get("id").is_some_and(Value::is_number), "{id}"),
                    Some(id) => assert_eq!(obj.get("id"), Some(&id.to_value())),
                    None => {}
                }
            } else if original.is_some() {
                assert!(!r.is_response && r.id.is_none(), "what is not an object is no response");
            }
        }
    }
}
