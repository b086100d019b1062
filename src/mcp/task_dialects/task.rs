//! The `Task` object in each dialect, and the results that carry it: `CreateTaskResult`
//! (nested in core, flat in the extension) and the `tasks/get` result (flat in both, with
//! the outcome or the pending input inline in the extension).
//!
//! Members the gateway does not know pass through where they stand: a task's in the task, a
//! result's in the result. `_meta` stays with the result, less the core related-task key.

use super::DialectError;
use crate::mcp::modern::{ResultType, set_result_type};
use crate::mcp::task_messages::{RELATED_TASK, TaskStatus};
use serde_json::{Map, Value};

/// Task members whose names differ: (core, extension). Both are milliseconds.
const RENAMED: [(&str, &str); 2] = [("ttl", "ttlMs"), ("pollInterval", "pollIntervalMs")];

/// The extension's `Task` members: a flat `CreateTaskResult` is these and `resultType`.
const EXT_TASK: [&str; 7] =
    ["taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"];

/// The members a `DetailedTask` inlines, one per status that has one.
const INLINE: [&str; 3] = ["result", "error", "inputRequests"];

/// What an extension task carries beyond the core `Task`.
#[derive(Clone, Debug, PartialEq)]
pub enum Inline {
    None,
    /// `completed`: the underlying request's result (a `CallToolResult`).
    Result(Value),
    /// `failed`: the JSON-RPC error object the underlying request ended with.
    Error(Value),
    /// `input_required`: the outstanding requests, by the server's keys.
    InputRequests(Map<String, Value>),
}

/// A task's status, checking that it is one (`taskId` a string, `status` one of the five).
pub fn status_of(task: &Map<String, Value>) -> Result<TaskStatus, DialectError> {
    if !task.get("taskId").is_some_and(Value::is_string) {
        return Err(DialectError::NotATask("taskId must be a string"));
    }
    let s = task.get("status").and_then(Value::as_str).ok_or(DialectError::NotATask("status must be a string"))?;
    TaskStatus::parse(s).ok_or_else(|| DialectError::UnknownStatus(s.to_string()))
}

/// Milliseconds as the extension types them (integers): a fraction is cut; anything else
/// (null, or a value no dialect allows) is left for the receiver to judge.
fn whole_ms(v: Value) -> Value {
    match &v {
        Value::Number(n) if n.is_f64() => match n.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Value::from(f.min(u64::MAX as f64) as u64),
            _ => v,
        },
        _ => v,
    }
}

fn rename(task: &mut Map<String, Value>, from: &str, to: &str, convert: fn(Value) -> Value) {
    if let Some(v) = task.remove(from) {
        task.insert(to.into(), convert(v));
    }
}

/// Removes the core related-task key from a result's `_meta` (and `_meta` if that empties it).
pub(super) fn untag(result: &mut Map<String, Value>) {
    if let Some(Value::Object(meta)) = result.get_mut("_meta") {
        meta.remove(RELATED_TASK);
        if meta.is_empty() {
            result.remove("_meta");
        }
    }
}

/// Adds the core related-task key to a result's `_meta`.
pub(super) fn tag(result: &mut Map<String, Value>, task_id: &str) {
    let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(RELATED_TASK.into(), serde_json::json!({"taskId": task_id}));
    }
}

/// A core `Task` as an extension `Task`: `ttl` → `ttlMs` (`null` if the task had none),
/// `pollInterval` → `pollIntervalMs`, both in whole milliseconds.
pub fn task_to_ext(mut core: Map<String, Value>) -> Result<Map<String, Value>, DialectError> {
    status_of(&core)?;
    for (c, e) in RENAMED {
        rename(&mut core, c, e, whole_ms);
    }
    core.entry("ttlMs").or_insert(Value::Null);
    Ok(core)
}

/// An extension `Task` or `DetailedTask` as a core `Task`, and what it inlined. A
/// `completed` task whose result has `isError: true` is `failed` in core. `resultType` and
/// inline members that do not belong to the status are dropped.
pub fn task_to_core(mut ext: Map<String, Value>) -> Result<(Map<String, Value>, Inline), DialectError> {
    let status = status_of(&ext)?;
    ext.remove("resultType");
    let mut taken: Vec<Option<Value>> = INLINE.iter().map(|k| ext.remove(*k)).collect();
    let inline = match status {
        TaskStatus::Completed => taken[0].take().map_or(Inline::None, Inline::Result),
        TaskStatus::Failed => taken[1].take().map_or(Inline::None, Inline::Error),
        TaskStatus::InputRequired => match taken[2].take() {
            Some(Value::Object(m)) => Inline::InputRequests(m),
            _ => Inline::InputRequests(Map::new()),
        },
        TaskStatus::Working | TaskStatus::Cancelled => Inline::None,
    };
    if matches!(&inline, Inline::Result(r) if r.get("isError") == Some(&Value::Bool(true))) {
        ext.insert("status".into(), TaskStatus::Failed.as_str().into());
    }
    for (c, e) in RENAMED {
        rename(&mut ext, e, c, |v| v);
    }
    ext.entry("ttl").or_insert(Value::Null);
    Ok((ext, inline))
}

/// A core `Task` and its outcome or pending input as an extension `DetailedTask`. A
/// terminal task's status follows its payload: a result is `completed` (even with
/// `isError`), an error `failed`; without the payload it is [`DialectError::PayloadNeeded`].
/// An `input_required` task lists the requests the gateway holds (none yet: `{}`).
pub fn detailed_to_ext(core: Map<String, Value>, inline: Inline) -> Result<Map<String, Value>, DialectError> {
    let status = status_of(&core)?;
    let mut t = task_to_ext(core)?;
    let mut set = |s: TaskStatus, k: &str, v: Value| {
        t.insert("status".into(), s.as_str().into());
        t.insert(k.into(), v);
    };
    match (status, inline) {
        (TaskStatus::Completed | TaskStatus::Failed, Inline::Result(r)) => set(TaskStatus::Completed, "result", r),
        (TaskStatus::Completed | TaskStatus::Failed, Inline::Error(e)) => set(TaskStatus::Failed, "error", e),
        (TaskStatus::Completed | TaskStatus::Failed, _) => return Err(DialectError::PayloadNeeded),
        (TaskStatus::InputRequired, Inline::InputRequests(m)) => set(status, "inputRequests", Value::Object(m)),
        (TaskStatus::InputRequired, _) => set(status, "inputRequests", Value::Object(Map::new())),
        (TaskStatus::Working | TaskStatus::Cancelled, _) => {}
    }
    Ok(t)
}

fn object(v: Value, what: &'static str) -> Result<Map<String, Value>, DialectError> {
    match v {
        Value::Object(m) => Ok(m),
        _ => Err(DialectError::NotATask(what)),
    }
}

/// A core `CreateTaskResult {task}` as the extension's flat one, `resultType: "task"`.
pub fn create_to_ext(core_result: Value) -> Result<Value, DialectError> {
    let mut r = object(core_result, "a CreateTaskResult must be an object")?;
    let task = object(r.remove("task").unwrap_or(Value::Null), "CreateTaskResult.task must be an object")?;
    untag(&mut r);
    r.extend(task_to_ext(task)?);
    let mut r = Value::Object(r);
    set_result_type(&mut r, ResultType::Task);
    Ok(r)
}

/// The extension's flat `CreateTaskResult` as core's `{task}`, and anything it already
/// inlined (a server may create a task in any status).
pub fn create_to_core(ext_result: Value) -> Result<(Value, Inline), DialectError> {
    let mut r = object(ext_result, "a CreateTaskResult must be an object")?;
    if r.remove("resultType") != Some(Value::from(ResultType::Task.as_str())) {
        return Err(DialectError::NotATask("a CreateTaskResult has resultType \"task\""));
    }
    let task: Map<String, Value> =
        EXT_TASK.iter().chain(INLINE.iter()).filter_map(|k| Some((k.to_string(), r.remove(*k)?))).collect();
    let (task, inline) = task_to_core(task)?;
    r.insert("task".into(), Value::Object(task));
    Ok((Value::Object(r), inline))
}

/// A core `tasks/get` result (`Result & Task`) and what the gateway holds for it, as the
/// extension's (`Result & DetailedTask`, `resultType: "complete"`).
pub fn get_to_ext(core_result: Value, inline: Inline) -> Result<Value, DialectError> {
    let mut r = object(core_result, "a tasks/get result must be an object")?;
    untag(&mut r);
    let mut r = Value::Object(detailed_to_ext(r, inline)?);
    set_result_type(&mut r, ResultType::Complete);
    Ok(r)
}

/// An extension `tasks/get` result as core's, and what it inlined.
pub fn get_to_core(ext_result: Value) -> Result<(Value, Inline), DialectError> {
    let r = object(ext_result, "a tasks/get result must be an object")?;
    let (t, inline) = task_to_core(r)?;
    Ok((Value::Object(t), inline))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "786512e2-9e0d-44bd-8f29-789f320fe840";

    /// The `CreateTaskResult` example of the core tasks page (2025-11-25).
    fn core_created() -> Value {
        json!({"task": {"taskId": ID, "status": "working", "statusMessage": "The operation is now in progress.",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:40:00Z",
            "ttl": 60000, "pollInterval": 5000}})
    }

    /// The same task as the extension's "Example Response (CreateTaskResult)".
    fn ext_created() -> Value {
        json!({"resultType": "task", "taskId": ID, "status": "working",
            "statusMessage": "The operation is now in progress.",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:40:00Z",
            "ttlMs": 60000, "pollIntervalMs": 5000})
    }

    /// The extension's final `tasks/get` of "Example Message Flow".
    fn ext_completed(is_error: bool) -> Value {
        json!({"resultType": "complete", "taskId": ID, "status": "completed",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:50:00Z",
            "ttlMs": 3600000, "pollIntervalMs": 5000,
            "result": {"content": [{"type": "text", "text": "Hello, Luca!"}], "isError": is_error}})
    }

    #[test]
    fn creation_results_both_ways() {
        assert_eq!(create_to_ext(core_created()).unwrap(), ext_created());
        assert_eq!(create_to_core(ext_created()).unwrap(), (core_created(), Inline::None));
        let mut with_meta = core_created();
        with_meta["_meta"] =
            json!({"io.modelcontextprotocol/model-immediate-response": "started", RELATED_TASK: {"taskId": ID}});
        let flat = create_to_ext(with_meta).unwrap();
        assert_eq!(flat["_meta"], json!({"io.modelcontextprotocol/model-immediate-response": "started"}));
        assert_eq!(
            create_to_core(flat).unwrap().0["_meta"],
            json!({"io.modelcontextprotocol/model-immediate-response": "started"})
        );
        let mut no_type = ext_created();
        no_type.as_object_mut().unwrap().remove("resultType");
        assert!(matches!(create_to_core(no_type), Err(DialectError::NotATask(_))));
        assert!(matches!(create_to_ext(json!({"content": []})), Err(DialectError::NotATask(_))));
        let unknown = create_to_ext(json!({"task": {"taskId": "a", "status": "done"}})).unwrap_err();
        assert_eq!(unknown, DialectError::UnknownStatus("done".into()));
        assert_eq!(unknown.to_rpc().code, -32603, "the peer's message, untranslatable");
    }

    #[test]
    fn ttl_and_poll_interval() {
        let t = |v: Value| v.as_object().unwrap().clone();
        let ext = task_to_ext(t(json!({"taskId": "a", "status": "working", "ttl": null}))).unwrap();
        assert_eq!(Value::Object(ext), json!({"taskId": "a", "status": "working", "ttlMs": null}));
        let ext =
            task_to_ext(t(json!({"taskId": "a", "status": "working", "ttl": 1500.7, "pollInterval": 250.2}))).unwrap();
        assert_eq!((&ext["ttlMs"], &ext["pollIntervalMs"]), (&json!(1500), &json!(250)));
        let ext = task_to_ext(t(json!({"taskId": "a", "status": "working"}))).unwrap();
        assert_eq!(ext["ttlMs"], Value::Null, "a core task without its required ttl: unlimited");
        let (core, _) = task_to_core(t(json!({"taskId": "a", "status": "working", "ttlMs": 60000}))).unwrap();
        assert_eq!(Value::Object(core), json!({"taskId": "a", "status": "working", "ttl": 60000}));
        let (core, _) = task_to_core(t(json!({"taskId": "a", "status": "working", "extra": [1]}))).unwrap();
        assert_eq!(core["extra"], json!([1]), "unknown members pass");
    }

    #[test]
    fn get_results_inline_in_the_extension_only() {
        let (core, inline) = get_to_core(ext_completed(false)).unwrap();
        assert_eq!(
            core,
            json!({"taskId": ID, "status": "completed", "createdAt": "2025-11-25T10:30:00Z",
                "lastUpdatedAt": "2025-11-25T10:50:00Z", "ttl": 3600000, "pollInterval": 5000})
        );
        let Inline::Result(result) = &inline else { panic!("{inline:?}") };
        assert_eq!(result["content"][0]["text"], "Hello, Luca!");
        assert_eq!(get_to_ext(core, inline).unwrap(), ext_completed(false));
        let (core, inline) = get_to_core(ext_completed(true)).unwrap();
        assert_eq!(core["status"], "failed", "isError is failed in core");
        assert_eq!(get_to_ext(core.clone(), inline).unwrap(), ext_completed(true), "and completed again");
        assert_eq!(get_to_ext(core, Inline::None), Err(DialectError::PayloadNeeded));
    }

    #[test]
    fn a_failed_task_carries_its_error() {
        // "Example: Task with JSON-RPC execution error".
        let ext = json!({"resultType": "complete", "taskId": ID, "status": "failed",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:40:00Z", "ttlMs": 3600000,
            "statusMessage": "Tool execution failed: API rate limit exceeded",
            "error": {"code": -32603, "message": "API rate limit exceeded"}});
        let (core, inline) = get_to_core(ext.clone()).unwrap();
        assert_eq!(core["statusMessage"], "Tool execution failed: API rate limit exceeded");
        assert_eq!(inline, Inline::Error(json!({"code": -32603, "message": "API rate limit exceeded"})));
        assert!(core.get("error").is_none());
        assert_eq!(get_to_ext(core, inline).unwrap(), ext);
    }

    #[test]
    fn input_required_lists_what_is_pending() {
        let requests = json!({"name": {"method": "elicitation/create", "params": {"mode": "form",
            "message": "Please enter your name.",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}});
        let ext = json!({"resultType": "complete", "taskId": ID, "status": "input_required",
            "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:50:00Z",
            "ttlMs": 3600000, "pollIntervalMs": 5000, "inputRequests": requests});
        let (core, inline) = get_to_core(ext.clone()).unwrap();
        assert_eq!(inline, Inline::InputRequests(requests.as_object().unwrap().clone()));
        assert!(core.get("inputRequests").is_none());
        assert_eq!(get_to_ext(core.clone(), inline).unwrap(), ext);
        assert_eq!(get_to_ext(core, Inline::None).unwrap()["inputRequests"], json!({}));
        let core = json!({"taskId": ID, "status": "working", "createdAt": "x", "lastUpdatedAt": "x", "ttl": null,
            "_meta": {RELATED_TASK: {"taskId": ID}}});
        let ext = get_to_ext(core, Inline::Result(json!({}))).unwrap();
        assert!(ext.get("result").is_none() && ext.get("_meta").is_none(), "{ext}");
        assert_eq!(ext["resultType"], "complete");
    }
}
