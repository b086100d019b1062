//! SEP-1391 (long-running operations) on the wire: the client's opt-in, the `operation`
//! parameter of `tools/call` and its immediate answer, `tools/async/status|result`, the
//! `_operation` tag on what is sent for an operation, and `invocationMode` in listings.
//!
//! The SEP ties its semantics to a protocol version that was never assigned, so a client
//! opts in by declaring `capabilities.experimental["sep-1391"]` (an object) in its
//! `initialize`; the gateway speaks the dialect only to those, and only for upstreams that
//! enable it.

use crate::jsonrpc::{INVALID_PARAMS, INVALID_REQUEST, RpcError};
use crate::mcp::task_messages::TaskStatus;
use serde_json::{Value, json};
use std::time::Duration;

/// The key under `capabilities.experimental` by which a client opts in.
pub const OPT_IN: &str = "sep-1391";

/// The longest operation token accepted (a token is kept per operation).
const MAX_TOKEN_LEN: usize = 256;

/// Whether `initialize` params declare the opt-in.
pub fn declared(init_params: Option<&Value>) -> bool {
    init_params
        .and_then(|p| p.pointer("/capabilities/experimental"))
        .and_then(|e| e.get(OPT_IN))
        .is_some_and(Value::is_object)
}

/// The refusal of the dialect's requests for a client that did not opt in (the SEP's
/// "outdated client").
pub fn outdated(method: &str) -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        format!(
            "{method}: long-running operations need a client that declares capabilities.experimental[\"{OPT_IN}\"] in initialize"
        ),
    )
}

/// `params.operation` of a `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationParam {
    pub token: String,
    /// `keepAlive` in seconds: `None` absent, `Some(None)` unlimited (`null`).
    pub keep_alive: Option<Option<Duration>>,
}

fn bad(why: impl Into<String>) -> RpcError {
    RpcError::new(INVALID_PARAMS, why.into())
}

/// The `operation` parameter of call `msg`, if it has one.
pub fn operation_param(msg: &Value) -> Result<Option<OperationParam>, RpcError> {
    let Some(op) = msg.pointer("/params/operation") else { return Ok(None) };
    let Some(op) = op.as_object() else { return Err(bad("params.operation must be an object")) };
    let token = match op.get("token") {
        Some(Value::String(t)) if !t.is_empty() && t.len() <= MAX_TOKEN_LEN => t.clone(),
        Some(Value::String(_)) => {
            return Err(bad(format!("params.operation.token must be 1 to {MAX_TOKEN_LEN} characters")));
        }
        _ => return Err(bad("params.operation.token must be a string chosen by the client")),
    };
    let keep_alive = match op.get("keepAlive") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s >= 0.0 && s.is_finite() => Some(Some(Duration::from_secs_f64(s.min(1e9)))),
            _ => return Err(bad("params.operation.keepAlive must not be negative")),
        },
        Some(_) => return Err(bad("params.operation.keepAlive must be a number of seconds or null")),
    };
    Ok(Some(OperationParam { token, keep_alive }))
}

/// The token of a `tools/async/status|result` request.
pub fn token_param(msg: &Value, method: &str) -> Result<String, RpcError> {
    match msg.pointer("/params/token") {
        Some(Value::String(t)) if !t.is_empty() => Ok(t.clone()),
        _ => Err(bad(format!("{method}: params.token must be the operation's token"))),
    }
}

/// An operation status as the SEP names it.
pub fn status_of(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "canceled",
    }
}

/// The immediate `CallToolResult` of an accepted operation.
pub fn accepted(keep_alive: Duration, poll: Duration, status: TaskStatus) -> Value {
    json!({
        "content": [],
        "operation": {
            "keepAlive": keep_alive.as_secs(),
            "pollFrequency": poll.as_secs().max(1),
            "status": status_of(status),
        },
    })
}

/// `tools/async/status`'s result.
pub fn status_result(status: TaskStatus, message: Option<&str>) -> Value {
    let mut r = json!({"status": status_of(status)});
    if status == TaskStatus::Failed {
        r["error"] = message.unwrap_or("the operation failed").into();
    }
    r
}

pub fn not_found(token: &str) -> RpcError {
    bad(format!("Failed to retrieve operation {token:?}: Operation not found"))
}

pub fn expired(token: &str) -> RpcError {
    bad(format!("Failed to retrieve operation {token:?}: Operation has expired"))
}

pub fn reused(token: &str) -> RpcError {
    bad(format!("operation token {token:?} was already used to start an operation"))
}

/// Tags a request or notification sent for an operation with its token.
pub fn tag(msg: &mut Value, token: &str) {
    if let Some(m) = msg.as_object_mut() {
        let params = m.entry("params").or_insert_with(|| json!({}));
        if let Some(p) = params.as_object_mut() {
            p.insert("_operation".into(), json!({"token": token}));
        }
    }
}

/// The client's answer to such a request echoes the tag; the upstream never saw it.
pub fn untag_answer(msg: &mut Value) {
    if let Some(r) = msg.get_mut("result").and_then(Value::as_object_mut) {
        r.remove("_operation");
    }
}

/// Each tool of a listing marked `invocationMode`: `async` where `is_async` says the gateway
/// runs it as an operation, `sync` elsewhere.
pub fn mark_tools(result: &mut Value, is_async: &dyn Fn(&Value) -> bool) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return };
    for t in tools.iter_mut() {
        let mode = if is_async(t) { "async" } else { "sync" };
        if let Some(o) = t.as_object_mut() {
            o.insert("invocationMode".into(), mode.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_params_are_read_or_refused() {
        let call = |op: Value| json!({"params": {"name": "t", "operation": op}});
        let got = operation_param(&call(json!({"token": "a", "keepAlive": 30}))).unwrap().unwrap();
        assert_eq!(got, OperationParam { token: "a".into(), keep_alive: Some(Some(Duration::from_secs(30))) });
        assert_eq!(
            operation_param(&call(json!({"token": "a", "keepAlive": null}))).unwrap().unwrap().keep_alive,
            Some(None)
        );
        assert_eq!(operation_param(&json!({"params": {"name": "t"}})).unwrap(), None);
        for bad in [
            json!(1),
            json!({}),
            json!({"token": ""}),
            json!({"token": 5}),
            json!({"token": "a", "keepAlive": -1}),
            json!({"token": "a", "keepAlive": "1"}),
            json!({"token": "x".repeat(300)}),
        ] {
            let e = operation_param(&call(bad.clone())).unwrap_err();
            assert_eq!(e.code, INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn statuses_and_answers_are_the_seps() {
        assert_eq!(status_of(TaskStatus::Cancelled), "canceled");
        assert_eq!(status_of(TaskStatus::InputRequired), "input_required");
        let a = accepted(Duration::from_secs(60), Duration::from_millis(500), TaskStatus::Working);
        assert_eq!(a["operation"], json!({"keepAlive": 60, "pollFrequency": 1, "status": "working"}));
        assert_eq!(status_result(TaskStatus::Failed, Some("boom")), json!({"status": "failed", "error": "boom"}));
        assert!(declared(Some(&json!({"capabilities": {"experimental": {"sep-1391": {}}}}))));
        assert!(!declared(Some(&json!({"capabilities": {"experimental": {"sep-1391": true}}}))));
        let mut m = json!({"method": "elicitation/create", "params": {"message": "?"}});
        tag(&mut m, "tok");
        assert_eq!(m["params"]["_operation"]["token"], "tok");
        let mut tools = json!({"tools": [{"name": "a"}, {"name": "b"}]});
        mark_tools(&mut tools, &|t| t["name"] == "a");
        assert_eq!(tools["tools"][0]["invocationMode"], "async");
        assert_eq!(tools["tools"][1]["invocationMode"], "sync");
    }
}
