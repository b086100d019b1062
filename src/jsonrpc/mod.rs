//! JSON-RPC 2.0 frames: parsing, classification, ids and error objects.
//!
//! The gateway keeps every message as raw `serde_json::Value` so that fields it does not
//! understand pass through untouched. This module only reads the envelope: `jsonrpc`, `id`,
//! `method`, `result`/`error`, and types the keys messages are routed by ([`Method`],
//! [`ProgressToken`], [`TaskId`]).

mod keys;
mod method;

pub use keys::{ProgressToken, TaskId};
pub use method::Method;

use serde_json::{Map, Value, json};
use std::fmt;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The upstream could not be reached, or went away while the request was in flight.
pub const UPSTREAM_UNAVAILABLE: i64 = -32000;
/// The request ran past `request_timeout` or `max_request_time`.
pub const REQUEST_TIMEOUT: i64 = -32001;
/// A gateway limit (in-flight requests, sessions) refused the request.
pub const GATEWAY_BUSY: i64 = -32004;

/// A JSON-RPC request id. MCP ids are strings or integers, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().map(Id::Num),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => Value::from(*n),
            Id::Str(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// One classified JSON-RPC message. `msg` is the whole message as received.
#[derive(Clone, Debug)]
pub struct Frame {
    pub kind: Kind,
    /// Present for requests and responses (`None` for a response whose id is null).
    pub id: Option<Id>,
    /// What the gateway knows the method as, read once here ([`Method::Other`] for a
    /// response, and for a method the gateway only passes through).
    pub method: Method,
    pub msg: Value,
}

impl Frame {
    /// The method's name as the message spells it, `""` for a response.
    pub fn method_name(&self) -> &str {
        self.msg.get("method").and_then(Value::as_str).unwrap_or("")
    }

    pub fn params(&self) -> Option<&Value> {
        self.msg.get("params")
    }

    pub fn is_error(&self) -> bool {
        self.msg.get("error").is_some()
    }
}

/// An error the gateway answers with, before or instead of forwarding. Small (`data` is
/// boxed), so that it is returned as it is, alone or with an id.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Box<Value>>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn to_value(&self) -> Value {
        let mut e = Map::new();
        e.insert("code".into(), self.code.into());
        e.insert("message".into(), Value::String(self.message.clone()));
        if let Some(d) = &self.data {
            e.insert("data".into(), Value::clone(d));
        }
        Value::Object(e)
    }

    /// The full error response for `id` (`null` when the request's id is unknown).
    pub fn response(&self, id: Option<&Id>) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": id.map(Id::to_value).unwrap_or(Value::Null),
            "error": self.to_value(),
        })
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// A parsed body: one message or a batch (array) of them.
#[derive(Debug)]
pub enum Body {
    Single(Value),
    Batch(Vec<Value>),
}

/// Parses a body; malformed JSON is -32700, an empty batch or a non-object/array is -32600.
pub fn parse_body(bytes: &[u8]) -> Result<Body, RpcError> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| RpcError::new(PARSE_ERROR, format!("parse error: {e}")))?;
    match v {
        Value::Array(items) if items.is_empty() => Err(RpcError::new(INVALID_REQUEST, "invalid request: empty batch")),
        Value::Array(items) => Ok(Body::Batch(items)),
        Value::Object(_) => Ok(Body::Single(v)),
        _ => Err(RpcError::new(INVALID_REQUEST, "invalid request: expected a JSON object or array")),
    }
}

/// Classifies one message. On failure returns the id (if any could be read) and the error.
pub fn classify(msg: Value) -> Result<Frame, (Option<Id>, RpcError)> {
    let Some(obj) = msg.as_object() else {
        return Err((None, RpcError::new(INVALID_REQUEST, "invalid request: message is not an object")));
    };
    let raw_id = obj.get("id");
    let id = raw_id.and_then(Id::from_value);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((id, RpcError::new(INVALID_REQUEST, "invalid request: \"jsonrpc\" must be \"2.0\"")));
    }
    if let Some(method) = obj.get("method") {
        if !method.is_string() {
            return Err((id, RpcError::new(INVALID_REQUEST, "invalid request: \"method\" must be a string")));
        }
        if let Some(p) = obj.get("params")
            && !(p.is_object() || p.is_array())
        {
            return Err((id, RpcError::new(INVALID_REQUEST, "invalid request: \"params\" must be an object or array")));
        }
        let method = Method::parse(method.as_str().unwrap_or_default());
        return match raw_id {
            None => Ok(Frame { kind: Kind::Notification, id: None, method, msg }),
            Some(_) if id.is_some() => Ok(Frame { kind: Kind::Request, id, method, msg }),
            Some(_) => {
                Err((None, RpcError::new(INVALID_REQUEST, "invalid request: \"id\" must be a string or integer")))
            }
        };
    }
    let has_result = obj.contains_key("result");
    let has_error = obj.contains_key("error");
    if has_result != has_error && raw_id.is_some() {
        if raw_id.is_some_and(|v| !v.is_null()) && id.is_none() {
            return Err((None, RpcError::new(INVALID_REQUEST, "invalid response: \"id\" must be a string or integer")));
        }
        return Ok(Frame { kind: Kind::Response, id, method: Method::Other, msg });
    }
    Err((id, RpcError::new(INVALID_REQUEST, "invalid request: neither a request, a notification nor a response")))
}

/// Replaces the `id` of a request or response.
pub fn set_id(msg: &mut Value, id: &Id) {
    if let Some(obj) = msg.as_object_mut() {
        obj.insert("id".into(), id.to_value());
    }
}

/// A successful response.
pub fn result_response(id: &Id, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.to_value(), "result": result})
}

pub fn request(id: &Id, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id.to_value(), "method": method, "params": params})
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The method of a message held as a `Value` (one not classified into a [`Frame`]).
pub fn method_of(msg: &Value) -> Method {
    msg.get("method").and_then(Value::as_str).map_or(Method::Other, Method::parse)
}

/// `params._meta.progressToken` of a request, if it carries one.
pub fn progress_token(msg: &Value) -> Option<&Value> {
    msg.get("params")?.get("_meta")?.get("progressToken")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_three_kinds() {
        let r = classify(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})).unwrap();
        assert_eq!(r.kind, Kind::Request);
        assert_eq!(r.id, Some(Id::Num(1)));
        assert_eq!((r.method, r.method_name()), (Method::ToolsList, "tools/list"));
        let n = classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).unwrap();
        assert_eq!(n.kind, Kind::Notification);
        let s = classify(json!({"jsonrpc":"2.0","id":"a","result":{}})).unwrap();
        assert_eq!(s.kind, Kind::Response);
        assert_eq!(s.id, Some(Id::Str("a".into())));
    }

    #[test]
    fn rejects_what_is_not_json_rpc() {
        for bad in [
            json!({"id":1,"method":"x"}),
            json!({"jsonrpc":"1.0","id":1,"method":"x"}),
            json!({"jsonrpc":"2.0","id":null,"method":"x"}),
            json!({"jsonrpc":"2.0","id":1.5,"method":"x"}),
            json!({"jsonrpc":"2.0","id":1,"method":7}),
            json!({"jsonrpc":"2.0","id":1,"method":"x","params":3}),
            json!({"jsonrpc":"2.0","id":1}),
            json!({"jsonrpc":"2.0","id":1,"result":{},"error":{}}),
            json!([1]),
        ] {
            let e = classify(bad.clone()).err().unwrap_or_else(|| panic!("accepted {bad}"));
            assert_eq!(e.1.code, INVALID_REQUEST, "{bad}");
        }
    }

    #[test]
    fn body_errors_have_the_right_codes() {
        assert_eq!(parse_body(b"{nope").unwrap_err().code, PARSE_ERROR);
        assert_eq!(parse_body(b"[]").unwrap_err().code, INVALID_REQUEST);
        assert_eq!(parse_body(b"42").unwrap_err().code, INVALID_REQUEST);
        assert!(matches!(parse_body(b"[{}]").unwrap(), Body::Batch(v) if v.len() == 1));
    }

    #[test]
    fn unknown_fields_survive_id_rewriting() {
        let mut m = json!({"jsonrpc":"2.0","id":1,"method":"x","params":{"a":{"b":[1,2]}},"extra":true});
        set_id(&mut m, &Id::Num(99));
        assert_eq!(m, json!({"jsonrpc":"2.0","id":99,"method":"x","params":{"a":{"b":[1,2]}},"extra":true}));
    }
}
