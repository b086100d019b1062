//! The errors the gateway answers with itself, and the JSON-RPC codes it uses.

use super::keys::Id;
use serde_json::{Map, Value};
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

/// An error the gateway answers with, before or instead of forwarding.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    /// Boxed: an error travels in `Result`s on hot paths, where it should stay small.
    pub data: Option<Box<Value>>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    /// A peer's error object as this error (its code, message and data), `what` failed when
    /// it is not one.
    pub fn from_object(e: Option<&Value>, what: &str) -> Self {
        let e = e.unwrap_or(&Value::Null);
        RpcError {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR),
            message: e.get("message").and_then(Value::as_str).unwrap_or(what).to_string(),
            data: e.get("data").cloned().map(Box::new),
        }
    }

    pub fn to_value(&self) -> Value {
        let mut e = Map::new();
        e.insert("code".into(), self.code.into());
        e.insert("message".into(), Value::String(self.message.clone()));
        if let Some(d) = &self.data {
            e.insert("data".into(), (**d).clone());
        }
        Value::Object(e)
    }

    /// The full error response for `id` (`null` when the request's id is unknown).
    pub fn response(&self, id: Option<&Id>) -> Value {
        // Not `json!`, which would copy the error object it is given.
        Value::Object(Map::from_iter([
            ("jsonrpc".to_string(), Value::from("2.0")),
            ("id".to_string(), id.map(Id::to_value).unwrap_or(Value::Null)),
            ("error".to_string(), self.to_value()),
        ]))
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}
