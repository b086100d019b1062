//! Around a task: retrieving its outcome, cancelling it, the client's input, and status
//! notifications, each from one dialect to the other.
//!
//! **Serving a core `tasks/result` from an extension server.** Core blocks the answer until
//! the task is terminal; the extension has only `tasks/get`. The session answers the waiting
//! request from the task's poller (the parent module's "State"): each `tasks/get` answer
//! goes through [`core_payload`]; [`Payload::Pending`] means wait `after` (the server's
//! `pollIntervalMs`, clamped) and poll again, first relaying any input requests not relayed
//! yet on the waiting request's stream (core delivers input on the `tasks/result` stream); a
//! `Result` or `Error` is the answer, and it is kept: a second `tasks/result` gets the same.

use super::task::{Inline, get_to_core, status_of, tag, untag};
use super::{CORE_NOTIFICATION, DialectError, EXT_NOTIFICATION, TASKS_UPDATE};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, Id, Method, RpcError, object};
use crate::mcp::modern::{ResultType, key};
use crate::mcp::task_messages::TaskStatus;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// What a core `tasks/result` gets, from one extension `tasks/get` answer.
#[derive(Clone, Debug, PartialEq)]
pub enum Payload {
    /// Terminal with a result: the response's `result`, tagged with related-task.
    Result(Value),
    /// Terminal with an error (or cancelled): the response's `error`.
    Error(Value),
    /// Not terminal: poll again after `after` (`None`: the server suggests no interval),
    /// relaying `input` first if it holds keys not relayed yet.
    Pending { after: Option<Duration>, input: Map<String, Value> },
}

/// The error a core `tasks/result` of a cancelled task answers (the underlying request has
/// no outcome of its own; hosted tasks answer the same).
pub fn cancelled_error(task_id: &str) -> RpcError {
    RpcError::new(INTERNAL_ERROR, format!("task {task_id} was cancelled before it finished"))
}

/// Reads an extension `tasks/get` result for a core client waiting in `tasks/result`.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn core_payload(ext_get_result: Value) -> Result<Payload, DialectError> {
    let ext_status = crate::mcp::task_messages::TaskView::of(&ext_get_result).status();
    let (task, inline) = get_to_core(ext_get_result)?;
    let id = task["taskId"].as_str().unwrap_or_default().to_string();
    match (ext_status, inline) {
        (_, Inline::Result(Value::Object(mut r))) => {
            r.remove("resultType");
            tag(&mut r, &id);
            Ok(Payload::Result(Value::Object(r)))
        }
        (_, Inline::Error(e)) => Ok(Payload::Error(e)),
        (Some(TaskStatus::Cancelled), _) => Ok(Payload::Error(cancelled_error(&id).to_value())),
        (Some(TaskStatus::Completed), _) => Err(DialectError::MissingInline("completed", "result")),
        (Some(TaskStatus::Failed), _) => Err(DialectError::MissingInline("failed", "error")),
        (_, inline) => Ok(Payload::Pending {
            after: task
                .get("pollInterval")
                .and_then(Value::as_f64)
                .filter(|ms| *ms >= 0.0)
                .map(|ms| Duration::from_millis(ms as u64)),
            input: match inline {
                Inline::InputRequests(m) => m,
                _ => Map::new(),
            },
        }),
    }
}

/// A core upstream's `tasks/result` answer (the whole response) as what an extension
/// `tasks/get` inlines: its result, untagged, or its error.
pub fn inline_from_core_payload(core_response: &Value) -> Result<Inline, DialectError> {
    if let Some(Value::Object(r)) = core_response.get("result") {
        let mut r = r.clone();
        untag(&mut r);
        return Ok(Inline::Result(Value::Object(r)));
    }
    match core_response.get("error") {
        Some(e) => Ok(Inline::Error(e.clone())),
        None => Err(DialectError::NotATask("a tasks/result answer is a result or an error")),
    }
}

/// The extension's `tasks/cancel` (and `tasks/update`) answer: an empty acknowledgement.
pub fn ack() -> Value {
    json!({"resultType": ResultType::Complete.as_str()})
}

/// A core upstream's `tasks/cancel` answer (the whole response) as an extension client's:
/// `Ok(result)` or `Err(error)`. The task moved to `cancelled`: an ack. -32602 for a task
/// the gateway has seen end (`seen_terminal`): also an ack, since the extension's cancel
/// only signals intent and may find the task done; any other error passes.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn cancel_to_ext(core_response: &Value, seen_terminal: bool) -> Result<Value, Value> {
    match core_response.get("error") {
        Some(e) if seen_terminal && e.get("code").and_then(Value::as_i64) == Some(INVALID_PARAMS) => Ok(ack()),
        Some(e) => Err(e.clone()),
        None => Ok(ack()),
    }
}

/// Whether a core client's `tasks/cancel` is refused before anything is sent: -32602 for a
/// task the gateway does not know (for this owner) or has seen in a terminal status.
pub fn refuse_core_cancel(task_id: &str, last_seen: Option<&Map<String, Value>>) -> Option<RpcError> {
    let Some(task) = last_seen else {
        return Some(RpcError::new(INVALID_PARAMS, format!("task not found or expired: {task_id}")));
    };
    match status_of(task) {
        Ok(s) if s.is_terminal() => Some(RpcError::new(
            INVALID_PARAMS,
            format!("task {task_id} is already {} and cannot be cancelled", s.as_str()),
        )),
        _ => None,
    }
}

/// An extension upstream's `tasks/cancel` answer (the whole response) as a core client's:
/// the task as last seen (a core `Task`), now `cancelled` at `now` (ISO 8601), for the
/// session to keep as sticky; or the upstream's error.
pub fn cancel_to_core(ext_response: &Value, last_seen: &Map<String, Value>, now: &str) -> Result<Value, Value> {
    if let Some(e) = ext_response.get("error") {
        return Err(e.clone());
    }
    let mut t = last_seen.clone();
    t.insert("status".into(), TaskStatus::Cancelled.as_str().into());
    t.insert("statusMessage".into(), "cancelled by the client".into());
    t.insert("lastUpdatedAt".into(), now.into());
    Ok(Value::Object(t))
}

fn input_method(req: &Value) -> Result<Method, DialectError> {
    let m = req.get("method").and_then(Value::as_str).ok_or(DialectError::BadInput("no method"))?;
    // The methods an input request may have, in either dialect.
    let method = Method::parse(m);
    method.is_input_request().then_some(method).ok_or(DialectError::BadInput("not elicitation, sampling or roots"))
}

/// One of an extension task's `inputRequests` (`{method, params}`) as the core server→client
/// request that asks the same, tagged with its task. Without an `id`: the session gives it
/// one and remembers it → (task, key).
pub fn input_request_to_core(task_id: &str, ext_request: &Value) -> Result<Value, DialectError> {
    let method = input_method(ext_request)?;
    let mut params = match ext_request.get("params") {
        Some(Value::Object(p)) => p.clone(),
        None | Some(Value::Null) => Map::new(),
        Some(_) => return Err(DialectError::BadInput("params must be an object")),
    };
    tag(&mut params, task_id);
    Ok(jsonrpc::notification(method, Value::Object(params)))
}

/// A core server's input request (a JSON-RPC request tagged with its task) as an entry of
/// `inputRequests`: `{method, params}`, without the envelope, the related-task key, or a
/// `params.task` (a modern client hosts no tasks).
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn input_request_to_ext(core_request: &Value) -> Result<Value, DialectError> {
    let method = input_method(core_request)?;
    let mut out = Map::new();
    out.insert("method".into(), method.as_str().into());
    if let Some(Value::Object(p)) = core_request.get("params") {
        let mut p = p.clone();
        p.remove("task");
        untag(&mut p);
        out.insert("params".into(), Value::Object(p));
    }
    Ok(Value::Object(out))
}

/// A core client's answer to a relayed input request (the whole response) as the value of
/// its key in `inputResponses`. An error answer has none.
pub fn input_answer_to_ext(core_response: &Value) -> Result<Value, DialectError> {
    match core_response.get("result") {
        Some(Value::Object(r)) => {
            let mut r = r.clone();
            untag(&mut r);
            Ok(Value::Object(r))
        }
        _ => Err(DialectError::NoCounterpart("an error answer to an input request")),
    }
}

/// The value of one key of an extension client's `inputResponses` as the core response to
/// the upstream's input request `upstream_id`, tagged with its task.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn input_answer_to_core(task_id: &str, upstream_id: &Id, ext_response: Value) -> Value {
    let mut r = match ext_response {
        Value::Object(r) => r,
        _ => Map::new(),
    };
    r.remove("resultType");
    tag(&mut r, task_id);
    jsonrpc::result_response(upstream_id, Value::Object(r))
}

/// The `tasks/update` params that carry a core client's answers to an extension server.
pub fn tasks_update_params(task_id: &str, input_responses: Map<String, Value>) -> Value {
    object([("taskId", task_id.into()), ("inputResponses", Value::Object(input_responses))])
}

/// Reads an extension client's `tasks/update` params: the task and its responses by key
/// (-32602 when either is missing or malformed).
pub fn read_tasks_update(params: Option<&Value>) -> Result<(String, Map<String, Value>), RpcError> {
    let bad = |why: &str| RpcError::new(INVALID_PARAMS, format!("invalid params: {TASKS_UPDATE} {why}"));
    let task_id =
        params.and_then(|p| p.get("taskId")).and_then(Value::as_str).ok_or_else(|| bad("needs a string taskId"))?;
    let responses = params
        .and_then(|p| p.get("inputResponses"))
        .and_then(Value::as_object)
        .ok_or_else(|| bad("needs an inputResponses object"))?;
    Ok((task_id.to_string(), responses.clone()))
}

/// An extension `notifications/tasks` params (a `DetailedTask`) as the core
/// `notifications/tasks/status` (params: a `Task`), and what it inlined (the payload of a
/// terminal task, for the session to keep). The subscription key in `_meta` goes.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn notification_to_core(ext_params: Value) -> Result<(Value, Inline), DialectError> {
    let Value::Object(mut p) = ext_params else { return Err(DialectError::NotATask("params must be an object")) };
    if let Some(Value::Object(meta)) = p.get_mut("_meta") {
        meta.remove(key::SUBSCRIPTION_ID);
        if meta.is_empty() {
            p.remove("_meta");
        }
    }
    let (t, inline) = super::task::task_to_core(p)?;
    Ok((jsonrpc::notification(CORE_NOTIFICATION, Value::Object(t)), inline))
}

/// Core `notifications/tasks/status` params (a `Task`) and what the gateway holds for the
/// task, as the `notifications/tasks` an extension client's `subscriptions/listen` stream
/// `subscription` (its request id) carries.
pub fn notification_to_ext(core_params: Value, inline: Inline, subscription: &Id) -> Result<Value, DialectError> {
    let Value::Object(mut p) = core_params else { return Err(DialectError::NotATask("params must be an object")) };
    untag(&mut p);
    let mut p = super::task::detailed_to_ext(p, inline)?;
    let meta = p.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(key::SUBSCRIPTION_ID.into(), subscription.to_value());
    }
    Ok(jsonrpc::notification(EXT_NOTIFICATION, Value::Object(p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::task_messages::RELATED_TASK;

    const ID: &str = "786512e2-9e0d-44bd-8f29-789f320fe840";

    /// An extension `tasks/get` result of "Example Message Flow", in `status` with `extra`.
    fn ext_get(status: &str, extra: Value) -> Value {
        let mut r = json!({"resultType": "complete", "taskId": ID, "status": status,
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:50:00Z",
            "ttlMs": 3600000, "pollIntervalMs": 5000});
        r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        r
    }

    fn name_request() -> Value {
        json!({"method": "elicitation/create", "params": {"mode": "form", "message": "Please enter your name.",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}})
    }

    #[test]
    fn a_blocking_tasks_result_is_served_from_polling() {
        let hello = json!({"content": [{"type": "text", "text": "Hello, Luca!"}], "isError": false});
        let p = core_payload(ext_get("completed", json!({"result": hello}))).unwrap();
        let mut tagged = hello.clone();
        tagged["_meta"] = json!({RELATED_TASK: {"taskId": ID}});
        assert_eq!(p, Payload::Result(tagged));
        let tool_error =
            json!({"content": [{"type": "text", "text": "Failed to process request: invalid input"}], "isError": true});
        assert!(
            matches!(core_payload(ext_get("completed", json!({"result": tool_error}))), Ok(Payload::Result(r)) if r["isError"] == true)
        );
        let error = json!({"code": -32603, "message": "API rate limit exceeded"});
        assert_eq!(core_payload(ext_get("failed", json!({"error": error}))).unwrap(), Payload::Error(error));
        assert_eq!(
            core_payload(ext_get("working", json!({}))).unwrap(),
            Payload::Pending { after: Some(Duration::from_secs(5)), input: Map::new() }
        );
        let waiting =
            core_payload(ext_get("input_required", json!({"inputRequests": {"name": name_request()}}))).unwrap();
        assert!(matches!(&waiting, Payload::Pending { input, .. } if input["name"] == name_request()));
        let mut no_interval = ext_get("working", json!({}));
        no_interval.as_object_mut().unwrap().remove("pollIntervalMs");
        assert_eq!(core_payload(no_interval).unwrap(), Payload::Pending { after: None, input: Map::new() });
        let Payload::Error(e) = core_payload(ext_get("cancelled", json!({}))).unwrap() else { panic!() };
        assert_eq!(e["code"], -32603);
        assert_eq!(
            core_payload(ext_get("completed", json!({}))),
            Err(DialectError::MissingInline("completed", "result"))
        );
        assert_eq!(core_payload(ext_get("failed", json!({}))), Err(DialectError::MissingInline("failed", "error")));
    }

    #[test]
    fn a_core_payload_is_inlined_for_the_extension() {
        let resp = json!({"jsonrpc": "2.0", "id": 4, "result": {"content": [], "isError": false,
            "_meta": {RELATED_TASK: {"taskId": ID}}}});
        assert_eq!(inline_from_core_payload(&resp).unwrap(), Inline::Result(json!({"content": [], "isError": false})));
        let err = json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "boom"}});
        assert_eq!(inline_from_core_payload(&err).unwrap(), Inline::Error(json!({"code": -32603, "message": "boom"})));
        assert!(inline_from_core_payload(&json!({"jsonrpc": "2.0", "id": 4})).is_err());
    }

    #[test]
    fn cancellation_both_ways() {
        let cancelled = json!({"jsonrpc": "2.0", "id": 9, "result": {"taskId": ID, "status": "cancelled"}});
        assert_eq!(cancel_to_ext(&cancelled, false), Ok(json!({"resultType": "complete"})));
        let terminal = json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32602, "message": "already completed"}});
        assert_eq!(cancel_to_ext(&terminal, true), Ok(ack()));
        assert_eq!(cancel_to_ext(&terminal, false), Err(terminal["error"].clone()));
        let last = json!({"taskId": ID, "status": "working", "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:40:00Z", "ttl": 60000, "statusMessage": "working on it"});
        let last = last.as_object().unwrap();
        assert_eq!(refuse_core_cancel(ID, Some(last)), None);
        let ack_resp = json!({"jsonrpc": "2.0", "id": 10, "result": ack()});
        let t = cancel_to_core(&ack_resp, last, "2025-11-25T10:41:00Z").unwrap();
        assert_eq!(
            (&t["status"], &t["lastUpdatedAt"], &t["ttl"]),
            (&json!("cancelled"), &json!("2025-11-25T10:41:00Z"), &json!(60000))
        );
        let t = t.as_object().unwrap();
        assert_eq!(refuse_core_cancel(ID, Some(t)).unwrap().code, -32602, "cancelled is terminal");
        assert_eq!(refuse_core_cancel(ID, None).unwrap().code, -32602);
        let gone = json!({"jsonrpc": "2.0", "id": 10, "error": {"code": -32602, "message": "Failed to retrieve task: Task not found"}});
        assert_eq!(cancel_to_core(&gone, last, "now"), Err(gone["error"].clone()));
    }

    #[test]
    fn input_requests_and_answers_both_ways() {
        let core = input_request_to_core(ID, &name_request()).unwrap();
        assert_eq!(core["method"], "elicitation/create");
        assert_eq!(core["params"]["_meta"][RELATED_TASK]["taskId"], ID);
        assert!(core.get("id").is_none(), "the session gives it an id");
        let mut upstream = core.clone();
        upstream["id"] = json!(17);
        upstream["params"]["task"] = json!({"ttl": 1000});
        assert_eq!(input_request_to_ext(&upstream).unwrap(), name_request());
        assert!(input_request_to_core(ID, &json!({"method": "tools/call", "params": {}})).is_err());
        assert!(input_request_to_core(ID, &json!({"params": {}})).is_err());
        let roots = input_request_to_core(ID, &json!({"method": "roots/list"})).unwrap();
        assert_eq!(roots["params"], json!({"_meta": {RELATED_TASK: {"taskId": ID}}}));

        // The extension's tasks/update of "Example Message Flow".
        let update =
            json!({"taskId": ID, "inputResponses": {"name": {"action": "accept", "content": {"input": "Luca"}}}});
        let (task, responses) = read_tasks_update(Some(&update)).unwrap();
        assert_eq!(task, ID);
        let answer = input_answer_to_core(ID, &Id::Num(17), responses["name"].clone());
        assert_eq!(answer["id"], 17);
        assert_eq!(answer["result"]["action"], "accept");
        assert_eq!(answer["result"]["_meta"][RELATED_TASK]["taskId"], ID);
        let back = input_answer_to_ext(&answer).unwrap();
        assert_eq!(tasks_update_params(ID, Map::from_iter([("name".to_string(), back)])), update);
        let refused = json!({"jsonrpc": "2.0", "id": 17, "error": {"code": -32601, "message": "no elicitation"}});
        assert!(matches!(input_answer_to_ext(&refused), Err(DialectError::NoCounterpart(_))));
        assert_eq!(read_tasks_update(Some(&json!({"taskId": ID}))).unwrap_err().code, -32602);
        assert_eq!(read_tasks_update(None).unwrap_err().code, -32602);
    }

    #[test]
    fn status_notifications_both_ways() {
        // The extension's "Notification" example.
        let result =
            json!({"content": [{"type": "text", "text": "Operation completed successfully."}], "isError": false});
        let ext = json!({"taskId": ID, "status": "completed", "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:50:00Z", "ttlMs": 60000, "pollIntervalMs": 5000, "result": result});
        let mut delivered = ext.clone();
        delivered["_meta"] = json!({key::SUBSCRIPTION_ID: 12});
        let (note, inline) = notification_to_core(delivered.clone()).unwrap();
        assert_eq!(note["method"], "notifications/tasks/status");
        let core = note["params"].clone();
        assert_eq!(
            core,
            json!({"taskId": ID, "status": "completed", "createdAt": "2025-11-25T10:30:00Z",
                "lastUpdatedAt": "2025-11-25T10:50:00Z", "ttl": 60000, "pollInterval": 5000})
        );
        assert_eq!(inline, Inline::Result(result));
        let note = notification_to_ext(core.clone(), inline, &Id::Num(12)).unwrap();
        assert_eq!(note["method"], "notifications/tasks");
        assert_eq!(note["params"], delivered);
        assert_eq!(notification_to_ext(core, Inline::None, &Id::Num(12)), Err(DialectError::PayloadNeeded));
    }
}
