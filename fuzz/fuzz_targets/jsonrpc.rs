//! The JSON-RPC frame classifier: `parse_body` then `classify` on every message, with the
//! invariants the gateway relies on checked for each outcome.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use taskgate::jsonrpc::{self, Body, INVALID_REQUEST, Id, Kind, Method, PARSE_ERROR};

fuzz_target!(|data: &[u8]| {
    let items = match jsonrpc::parse_body(data) {
        Ok(Body::Single(v)) => {
            assert!(v.is_object(), "a single body is an object");
            vec![v]
        }
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
    for msg in items {
        check(msg);
    }
});

fn check(msg: Value) {
    let original = msg.clone();
    match jsonrpc::classify(msg) {
        Ok(frame) => {
            assert_eq!(frame.msg, original, "classify keeps the message whole");
            assert_eq!(frame.msg["jsonrpc"], "2.0");
            match frame.kind {
                Kind::Request => {
                    let id = frame.id.clone().expect("a request has an id");
                    assert!(frame.msg["method"].is_string());
                    assert_eq!(Id::from_value(&id.to_value()), Some(id.clone()), "ids round-trip");
                    let mut rewritten = frame.msg.clone();
                    jsonrpc::set_id(&mut rewritten, &Id::Num(7));
                    assert_eq!(rewritten["id"], 7);
                    let _ = jsonrpc::progress_token(&frame.msg);
                    let _ = frame.params();
                    // The method read once at the edge is the one the message names.
                    assert_eq!(frame.method, Method::parse(frame.method_name()));
                    assert_eq!(frame.method.name().unwrap_or(frame.method_name()), frame.method_name());
                }
                Kind::Notification => {
                    assert!(frame.id.is_none());
                    assert!(frame.msg.get("id").is_none());
                    assert!(frame.msg["method"].is_string());
                }
                Kind::Response => {
                    assert!(frame.msg.get("method").is_none());
                    let obj = frame.msg.as_object().unwrap();
                    assert_ne!(obj.contains_key("result"), obj.contains_key("error"));
                    let _ = frame.is_error();
                }
            }
        }
        Err((id, e)) => {
            assert_eq!(e.code, INVALID_REQUEST, "classify errors are -32600");
            let resp = e.response(id.as_ref());
            assert_eq!(resp["error"]["code"], INVALID_REQUEST);
            if let Some(id) = id {
                assert_eq!(resp["id"], id.to_value());
            }
        }
    }
}
