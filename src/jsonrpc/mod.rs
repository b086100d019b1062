//! JSON-RPC 2.0 frames: parsing, classification, ids and error objects.
//!
//! A message is kept as the bytes it came as ([`Message`]), so that fields the gateway does
//! not understand pass through untouched. This module reads the envelope (`jsonrpc`, `id`,
//! `method`, `result`/`error`) once, and types the keys messages are routed by ([`Method`],
//! [`ProgressToken`], [`TaskId`]).

mod answer;
mod checked;
mod error;
mod fields;
mod keys;
mod message;
mod method;
mod refused;

pub use error::*;
pub use fields::{Key, RELATED_TASK};
pub use keys::{Id, Kind, ProgressToken, TaskId};
pub use message::{Message, as_str};
pub use method::Method;
pub use refused::Refused;

use bytes::Bytes;
use serde_json::Value;

/// A body as received: one message or a batch (array) of them, each still its own bytes.
#[derive(Debug)]
pub enum Body {
    Single(Bytes),
    Batch(Vec<Bytes>),
}

/// Splits a body; malformed JSON is -32700, an empty batch or a non-object/array is -32600.
/// A single message is not read here: [`Message::parse`] reads it, once.
pub fn parse_body(bytes: Bytes) -> Result<Body, RpcError> {
    let parse_error = |e: serde_json::Error| RpcError::new(PARSE_ERROR, format!("parse error: {e}"));
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(Body::Single(bytes)),
        Some(b'[') => {
            let items: Vec<&serde_json::value::RawValue> = serde_json::from_slice(&bytes).map_err(parse_error)?;
            if items.is_empty() {
                return Err(RpcError::new(INVALID_REQUEST, "invalid request: empty batch"));
            }
            // Each item its own copy: a small item kept (in a replay buffer, say) must not
            // keep the whole body alive beyond what it is counted as.
            Ok(Body::Batch(items.iter().map(|raw| Bytes::copy_from_slice(raw.get().as_bytes())).collect()))
        }
        _ => match serde_json::from_slice::<serde::de::IgnoredAny>(&bytes) {
            Ok(_) => Err(RpcError::new(INVALID_REQUEST, "invalid request: expected a JSON object or array")),
            Err(e) => Err(parse_error(e)),
        },
    }
}

/// Whether JSON text `bytes` holds at most `max` values (each object, array, string, number,
/// `true`, `false` and `null` one), counted without parsing: what parsing it would cost grows
/// with them. Counted from the structure: an opening bracket and a separator each begin a
/// value (an empty container counts as one more), and what is inside strings is skipped. Text
/// of at most `max` bytes is not read: each count takes a byte.
pub fn within_values(bytes: &[u8], max: usize) -> bool {
    if bytes.len() <= max {
        return true;
    }
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' | b',' => {
                values += 1;
                if values > max {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// A response read as its outcome: `Ok` with its `result`, taken out rather than copied, or
/// `Err` with its `error` object as an [`RpcError`] (`what` as the message when the error
/// says none, or the response has neither).
pub fn into_outcome(resp: Value, what: &str) -> Result<Value, RpcError> {
    let Value::Object(mut fields) = resp else {
        return Err(RpcError::from_object(None, what));
    };
    match fields.remove("result") {
        Some(result) => Ok(result),
        None => Err(RpcError::from_object(fields.get("error"), what)),
    }
}

/// Replaces the `id` of a request or response.
pub fn set_id(msg: &mut Value, id: &Id) {
    if let Some(obj) = msg.as_object_mut() {
        obj.insert("id".into(), id.to_value());
    }
}

/// An object of `entries`, in order, taking the values given. `json!` would copy each one
/// (it writes `to_value(&v)`), a whole result or task list included.
pub fn object<const N: usize>(entries: [(&str, Value); N]) -> Value {
    Value::Object(entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A message object of `entries` after `"jsonrpc": "2.0"` (see [`object`]).
fn envelope<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let mut m = serde_json::Map::with_capacity(N + 1);
    m.insert("jsonrpc".into(), Value::from("2.0"));
    for (k, v) in entries {
        m.insert(k.into(), v);
    }
    Value::Object(m)
}

/// A successful response.
pub fn result_response(id: &Id, result: Value) -> Value {
    envelope([("id", id.to_value()), ("result", result)])
}

/// A request of a known method (not [`Method::Other`]).
pub fn request(id: &Id, method: Method, params: Value) -> Value {
    request_named(id, method.as_str(), params)
}

/// A request by its name on the wire: one the gateway passes on without knowing it.
pub fn request_named(id: &Id, method: &str, params: Value) -> Value {
    envelope([("id", id.to_value()), ("method", Value::from(method)), ("params", params)])
}

/// A notification of a known method (not [`Method::Other`]).
pub fn notification(method: Method, params: Value) -> Value {
    envelope([("method", Value::from(method.as_str())), ("params", params)])
}

/// `params._meta.progressToken` of a request, if it carries one.
pub fn progress_token(msg: &Value) -> Option<&Value> {
    msg.get("params")?.get("_meta")?.get("progressToken")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_counted_from_the_structure_outside_strings() {
        let many = format!("[{}]", vec!["{}"; 100].join(","));
        assert!(!within_values(many.as_bytes(), 150), "100 objects and their separators");
        assert!(within_values(many.as_bytes(), 250));
        // Brackets and commas inside strings are text, escaped quotes included.
        let text = format!(r#"{{"a":"{}\"{}"}}"#, "[,{".repeat(100), ",".repeat(100));
        assert!(within_values(text.as_bytes(), 2));
        let numbers = format!("[{}]", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        assert!(within_values(numbers.as_bytes(), 101) && !within_values(numbers.as_bytes(), 99));
        // Nested brackets count one a byte; text no longer than the bound is not read.
        assert!(!within_values(b"[[[[[[[[[[]]]]]]]]]]", 9));
        assert!(within_values(b"[[[[[[[[[[]]]]]]]]]]", 20));
    }

    #[test]
    fn classifies_the_three_kinds() {
        let r = Message::from_value(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})).unwrap();
        assert_eq!(r.kind(), Kind::Request);
        assert_eq!(r.id(), Some(&Id::Num(1)));
        assert_eq!((r.method(), r.method_name()), (Method::ToolsList, "tools/list"));
        let n = Message::from_value(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).unwrap();
        assert_eq!(n.kind(), Kind::Notification);
        let s = Message::from_value(json!({"jsonrpc":"2.0","id":"a","result":{}})).unwrap();
        assert_eq!(s.kind(), Kind::Response);
        assert_eq!(s.id(), Some(&Id::Str("a".into())));
    }

    #[test]
    fn made_messages_are_the_objects_json_would_make_in_the_same_order() {
        let r = json!({"content": [{"type": "text", "text": "x"}], "z": 1, "a": 2});
        let id = Id::Str("k".into());
        let text = |v: &Value| serde_json::to_string(v).unwrap();
        assert_eq!(text(&result_response(&id, r.clone())), text(&json!({"jsonrpc": "2.0", "id": "k", "result": r})));
        assert_eq!(
            text(&request(&Id::Num(3), Method::ToolsCall, r.clone())),
            text(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": r}))
        );
        assert_eq!(
            text(&notification(Method::Progress, r.clone())),
            text(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": r}))
        );
        assert_eq!(text(&object([("b", json!(1)), ("a", r.clone())])), text(&json!({"b": 1, "a": r})));
        assert_eq!(
            text(&RpcError::new(INVALID_PARAMS, "no").response(None)),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"no"}}"#
        );
    }

    #[test]
    fn body_errors_have_the_right_codes() {
        let body = |s: &'static str| parse_body(Bytes::from_static(s.as_bytes()));
        assert_eq!(body("[{nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(body("nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(body("[]").unwrap_err().code, INVALID_REQUEST);
        assert_eq!(body("42").unwrap_err().code, INVALID_REQUEST);
        assert!(
            matches!(body(" [{}, {\"a\": 1}]").unwrap(), Body::Batch(v) if v.len() == 2 && v[1].as_ref() == b"{\"a\": 1}")
        );
        assert!(matches!(body("{nope").unwrap(), Body::Single(_)), "read by Message::parse, which says -32700");
    }

    #[test]
    fn a_progress_token_is_replaced_in_the_bytes_and_nothing_else_is() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p","k":[1]},"z":"{\"a\":1}"}}"#;
        let m = Message::parse(Bytes::from_static(text.as_bytes())).unwrap();
        let new = ProgressToken::Str("tg-12".into());
        let m = m.with_progress_token(&new);
        assert_eq!(m.progress_token(), Some(new));
        assert_eq!(m.bytes().as_ref(), text.replace(r#""progressToken":"p""#, r#""progressToken":"tg-12""#).as_bytes());
        assert_eq!(m.tool_name().as_deref(), Some("x"), "the envelope is read again");
        let m = m.with_id(&Id::Num(99)).with_progress_token(&ProgressToken::Num(3.into()));
        assert_eq!(m.value()["params"]["_meta"], json!({"progressToken": 3, "k": [1]}));
        assert_eq!(m.id(), Some(&Id::Num(99)));
        let note = Message::made(notification(Method::Progress, json!({"progressToken": "tg-1", "progress": 2})));
        let note = note.with_progress_token(&ProgressToken::Str("p".into()));
        assert_eq!(note.value()["params"], json!({"progressToken": "p", "progress": 2}));
        let plain = Message::made(request(&Id::Num(1), Method::Ping, json!({})));
        assert_eq!(plain.clone().with_progress_token(&ProgressToken::Str("p".into())).bytes(), plain.bytes());
    }

    #[test]
    fn unknown_fields_survive_id_rewriting() {
        let mut m = json!({"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"b":[1,2]}},"extra":true});
        set_id(&mut m, &Id::Num(99));
        assert_eq!(m, json!({"jsonrpc":"2.0","id":99,"method":"x","params":{"a":{"b":[1,2]}},"extra":true}));
    }

    #[test]
    fn a_response_reads_as_its_outcome() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"a": [1, {"b": null}]}});
        assert_eq!(into_outcome(ok, "x"), Ok(json!({"a": [1, {"b": null}]})));
        let null = json!({"jsonrpc": "2.0", "id": 1, "result": null});
        assert_eq!(into_outcome(null, "x"), Ok(Value::Null), "a null result is a result");
        let err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "no", "data": {"d": 1}}});
        let e = into_outcome(err, "x").unwrap_err();
        assert_eq!((e.code, e.message.as_str(), e.data.as_deref()), (-32602, "no", Some(&json!({"d": 1}))));
        let bare = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": 5}});
        assert_eq!(into_outcome(bare, "what failed").unwrap_err().message, "what failed");
        let neither = json!({"jsonrpc": "2.0", "id": 1});
        assert_eq!(into_outcome(neither, "w").unwrap_err().code, INTERNAL_ERROR);
        assert_eq!(into_outcome(json!([1]), "w").unwrap_err().code, INTERNAL_ERROR);
    }
}
