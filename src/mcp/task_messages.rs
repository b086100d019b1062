//! The protocol's task messages and types, in the vocabulary of 2025-11-25 (SEP-1686):
//! statuses, the `Task` object, the related-task `_meta` key (and the task a message names
//! by it), the capability a task-hosting server declares, and a server's refusal of a plain
//! call of a task tool. Protocol knowledge only: the task engine is `crate::tasks`, and the
//! translation to the tasks extension `task_dialects`.

use crate::jsonrpc::{Key, Message, TaskId, as_str};
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

pub use crate::jsonrpc::RELATED_TASK;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// The status named `s` on the wire (the same five names in both task dialects).
    pub fn parse(s: &str) -> Option<TaskStatus> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

/// The fewest and most time the gateway waits between two looks at a task it follows,
/// whatever poll interval its server asks for.
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(30);
/// The poll interval of a task whose server names none.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// A borrowed view of a task object as a server sends it (a core `Task`, or the tasks
/// extension's): the fields the gateway reads, typed, the object itself left as it is.
#[derive(Clone, Copy, Debug)]
pub struct TaskView<'a>(Option<&'a serde_json::Map<String, Value>>);

impl<'a> TaskView<'a> {
    /// The view of `task`; what is not an object has none of the fields.
    pub fn of(task: &'a Value) -> TaskView<'a> {
        TaskView(task.as_object())
    }

    pub fn of_map(task: &'a serde_json::Map<String, Value>) -> TaskView<'a> {
        TaskView(Some(task))
    }

    fn get(self, key: &str) -> Option<&'a Value> {
        self.0?.get(key)
    }

    fn text(self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }

    /// `taskId`, if it is a string.
    pub fn id(self) -> Option<&'a str> {
        self.text("taskId")
    }

    /// `status` as sent (one the gateway does not know included).
    pub fn status_text(self) -> Option<&'a str> {
        self.text("status")
    }

    /// `status`, if it is one of the five.
    pub fn status(self) -> Option<TaskStatus> {
        self.status_text().and_then(TaskStatus::parse)
    }

    /// Whether the task has ended (`completed`, `failed` or `cancelled`).
    pub fn is_terminal(self) -> bool {
        self.status().is_some_and(TaskStatus::is_terminal)
    }

    pub fn status_message(self) -> Option<&'a str> {
        self.text("statusMessage")
    }

    pub fn last_updated_at(self) -> Option<&'a str> {
        self.text("lastUpdatedAt")
    }

    /// `ttl` in milliseconds, if it is a whole number.
    pub fn ttl_ms(self) -> Option<u64> {
        self.get("ttl").and_then(Value::as_u64)
    }

    /// A core task's `pollInterval`, within [`MIN_POLL`] and [`MAX_POLL`] (1 s if it names none).
    pub fn poll_interval(self) -> Duration {
        self.named_poll_interval().unwrap_or(DEFAULT_POLL)
    }

    /// A core task's `pollInterval`, clamped, if it names one: a follower keeps the last it
    /// was told when a later snapshot leaves it out (the field is optional on every `Task`).
    pub fn named_poll_interval(self) -> Option<Duration> {
        self.poll_by("pollInterval")
    }

    /// An extension task's `pollIntervalMs`, likewise.
    pub fn named_ext_poll_interval(self) -> Option<Duration> {
        self.poll_by("pollIntervalMs")
    }

    fn poll_by(self, key: &str) -> Option<Duration> {
        let every = self.get(key).and_then(Value::as_u64).map(Duration::from_millis)?;
        Some(every.clamp(MIN_POLL, MAX_POLL))
    }
}

/// `execution.taskSupport` of a tool; absent means forbidden.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

impl TaskSupport {
    pub fn of_tool(tool: &Value) -> TaskSupport {
        match tool.pointer("/execution/taskSupport").and_then(Value::as_str) {
            Some("optional") => TaskSupport::Optional,
            Some("required") => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }
}

/// Whether server capabilities declare tasks, in any form: some servers declare
/// `"tasks": {}` and serve task-augmented `tools/call` all the same.
pub fn server_has_tool_tasks(capabilities: &Value) -> bool {
    capabilities.get("tasks").is_some_and(Value::is_object)
}

/// The `tasks` server capability of a gateway that hosts tasks.
pub fn hosting_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Adds the related-task key to a message's `params._meta` (or `result._meta`).
pub fn tag_related(msg: &mut Value, field: &str, task_id: &str) {
    let Some(m) = msg.as_object_mut() else { return };
    let Some(obj) = m.entry(field).or_insert_with(|| json!({})).as_object_mut() else { return };
    let meta = obj.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(RELATED_TASK.into(), json!({"taskId": task_id}));
    }
}

/// Removes the related-task key from `field._meta` (and `_meta` itself if that empties it).
pub fn untag_related(msg: &mut Value, field: &str) {
    let Some(obj) = msg.get_mut(field).and_then(Value::as_object_mut) else { return };
    let Some(meta) = obj.get_mut("_meta").and_then(Value::as_object_mut) else { return };
    meta.remove(RELATED_TASK);
    if meta.is_empty() {
        obj.remove("_meta");
    }
}

/// The retention a task-augmented request asks for: `params.task` must be an object; its
/// `ttl`, if present and not null, a non-negative number of milliseconds (fractions are cut).
pub fn requested_ttl(task: Option<&Value>) -> Result<Option<std::time::Duration>, crate::jsonrpc::RpcError> {
    let bad =
        |why: &str| crate::jsonrpc::RpcError::new(crate::jsonrpc::INVALID_PARAMS, format!("invalid params: {why}"));
    let Some(task) = task else { return Ok(None) };
    let Some(task) = task.as_object() else { return Err(bad("params.task must be an object")) };
    match task.get("ttl") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(ms) if ms >= 0.0 && ms.is_finite() => {
                Ok(Some(std::time::Duration::from_millis(ms.min(u64::MAX as f64) as u64)))
            }
            _ => Err(bad("params.task.ttl must not be negative")),
        },
        Some(_) => Err(bad("params.task.ttl must be a number of milliseconds")),
    }
}

/// The task a related-task key's `taskId` (JSON text) names, if it is a string.
fn related_in(task_id: Option<&str>) -> Option<TaskId> {
    task_id.and_then(as_str).map(TaskId::new)
}

/// The task a message's `params._meta` relates it to (the related-task key), if any.
pub fn related_task(msg: &Message) -> Option<TaskId> {
    related_in(msg.param(Key::RelatedTaskId))
}

/// Whether a message carries the related-task key in `params._meta` or `result._meta`.
pub fn is_tagged(msg: &Message) -> bool {
    msg.param(Key::RelatedTask).is_some() || msg.result_field(Key::RelatedTask).is_some()
}

/// A `CreateTaskResult` response: the task's id and its ttl, if it has one.
pub fn created_task(resp: &Message) -> Option<(TaskId, Option<Duration>)> {
    #[derive(Deserialize)]
    struct Created {
        #[serde(rename = "taskId")]
        task_id: String,
        ttl: Option<Value>,
    }
    let task: Created = serde_json::from_str(resp.result_field(Key::Task)?).ok()?;
    let ttl = task.ttl.as_ref().and_then(Value::as_f64).filter(|t| *t >= 0.0).map(|t| Duration::from_millis(t as u64));
    Some((TaskId::new(task.task_id), ttl))
}

fn is_terminal(status: Option<&str>) -> bool {
    matches!(status.and_then(as_str).as_deref(), Some("completed" | "failed" | "cancelled"))
}

/// The task a response shows ended: a `Task` in a terminal status (`tasks/get`,
/// `tasks/cancel`), or a `tasks/result` payload tagged with its task.
pub fn ended_task(resp: &Message) -> Option<TaskId> {
    if resp.kind() != crate::jsonrpc::Kind::Response || resp.is_error() {
        return None;
    }
    if is_terminal(resp.result_field(Key::Status)) {
        return resp.result_field(Key::TaskId).and_then(as_str).map(TaskId::new);
    }
    related_in(resp.result_field(Key::RelatedTaskId))
}

/// The task a `notifications/tasks/status` shows in a terminal status.
pub fn ended_task_status(note: &Message) -> Option<TaskId> {
    is_terminal(note.param(Key::Status)).then(|| note.param(Key::TaskId).and_then(as_str).map(TaskId::new)).flatten()
}

/// The exact words with which SDK servers refuse a plain call of a tool that must run as a
/// task (`{name}` stands for the tool's name).
const SDK_REFUSALS: [&str; 2] = [
    // TypeScript SDK (`McpServer`), as a JSON-RPC error or wrapped in an `isError` result.
    "Tool {name} requires task augmentation (taskSupport: 'required')",
    // Rust SDK (rmcp).
    "Tool requires task-based invocation",
];

fn is_sdk_refusal(text: &str, tool: &str) -> bool {
    // A refusal wrapped into a tool result keeps the error's code as a prefix.
    let text = match text.strip_prefix("MCP error ") {
        Some(rest) => rest.split_once(": ").map(|(_, t)| t).unwrap_or(rest),
        None => text,
    };
    SDK_REFUSALS.iter().any(|r| r.replace("{name}", tool) == text)
}

/// Whether the response to a plain `tools/call` of `tool` (listed with `support`) is the
/// upstream refusing to run it except as a task, so that it did not run and may be retried
/// as one. Only unambiguous refusals count: -32601 or -32600 for a tool listed `required`,
/// or an SDK's exact refusal for one listed `optional` or `required`. A tool listed
/// `forbidden` (or unmarked) is never retried, whatever its answer says.
pub fn refused_as_plain_call(resp: &Value, tool: &str, support: TaskSupport) -> bool {
    if support == TaskSupport::Forbidden {
        return false;
    }
    if let Some(e) = resp.get("error") {
        let code = e.get("code").and_then(Value::as_i64);
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        return (support == TaskSupport::Required && matches!(code, Some(-32601) | Some(-32600)))
            || is_sdk_refusal(message, tool);
    }
    let Some(r) = resp.get("result") else { return false };
    let texts: Vec<&str> = r
        .get("content")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    r.get("isError") == Some(&Value::Bool(true)) && texts.len() == 1 && is_sdk_refusal(texts[0], tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_view_reads_the_fields_typed_and_clamps_the_poll_interval() {
        let t = json!({"taskId": "t-1", "status": "input_required", "statusMessage": "asks",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 5000, "pollIntervalMs": 7000});
        let v = TaskView::of(&t);
        assert_eq!(
            (v.id(), v.status(), v.status_message()),
            (Some("t-1"), Some(TaskStatus::InputRequired), Some("asks"))
        );
        assert_eq!((v.last_updated_at(), v.ttl_ms()), (Some("2026-01-01T00:00:00Z"), Some(60000)));
        assert!(!v.is_terminal());
        assert_eq!(
            (v.poll_interval(), v.named_ext_poll_interval()),
            (Duration::from_secs(5), Some(Duration::from_secs(7)))
        );
        let odd = json!({"taskId": 7, "status": "paused", "ttl": -1, "pollInterval": 1, "pollIntervalMs": 3_600_000});
        let v = TaskView::of(&odd);
        assert_eq!((v.id(), v.status_text(), v.status(), v.ttl_ms()), (None, Some("paused"), None, None));
        assert_eq!((v.poll_interval(), v.named_ext_poll_interval()), (MIN_POLL, Some(MAX_POLL)), "clamped");
        for status in ["completed", "failed", "cancelled"] {
            assert!(TaskView::of(&json!({"status": status})).is_terminal(), "{status}");
        }
        let array = json!([1]);
        let none = TaskView::of(&array);
        assert_eq!((none.id(), none.status_text(), none.poll_interval()), (None, None, Duration::from_secs(1)));
        assert_eq!((none.named_poll_interval(), none.named_ext_poll_interval()), (None, None), "named none");
    }

    #[test]
    fn only_unambiguous_refusals_count() {
        use TaskSupport::*;
        let e = |code: i64, m: &str| json!({"error": {"code": code, "message": m}});
        let wrapped = |t: &str| json!({"result": {"isError": true, "content": [{"type": "text", "text": t}]}});
        let ts = "Tool x requires task augmentation (taskSupport: 'required')";
        assert!(refused_as_plain_call(&e(-32601, ts), "x", Optional));
        assert!(refused_as_plain_call(&wrapped(&format!("MCP error -32601: {ts}")), "x", Optional));
        assert!(refused_as_plain_call(&e(-32601, "Tool requires task-based invocation"), "x", Optional));
        assert!(!refused_as_plain_call(&e(-32601, ts), "y", Optional), "another tool's name");
        assert!(!refused_as_plain_call(&e(-32601, ts), "x", Forbidden), "never for a forbidden tool");
        assert!(refused_as_plain_call(&e(-32601, "Method not found"), "x", Required));
        assert!(refused_as_plain_call(&e(-32600, "whatever"), "x", Required));
        assert!(!refused_as_plain_call(&e(-32601, "this tool requires a task"), "x", Optional));
        assert!(!refused_as_plain_call(&e(-32602, "task required"), "x", Required));
        assert!(!refused_as_plain_call(&wrapped("Task title required"), "x", Optional));
        assert!(!refused_as_plain_call(&wrapped("Task title required"), "x", Forbidden));
        assert!(!refused_as_plain_call(&json!({"result": {"content": [{"type": "text", "text": ts}]}}), "x", Optional));
    }

    #[test]
    fn task_endings() {
        let resp = |result: Value| Message::made(json!({"jsonrpc": "2.0", "id": 1, "result": result}));
        let t = |s: &str| resp(json!({"taskId": "a", "status": s}));
        assert_eq!(ended_task(&t("completed")), Some(TaskId::new("a")));
        assert_eq!(ended_task(&t("working")), None);
        let r = resp(json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "b"}}}));
        assert_eq!(ended_task(&r), Some(TaskId::new("b")));
        assert!(is_tagged(&r));
        assert!(!is_tagged(&t("working")));
        assert_eq!(
            created_task(&resp(json!({"task": {"taskId": "c", "ttl": 5000}}))).unwrap().1.unwrap().as_millis(),
            5000
        );
        assert_eq!(created_task(&resp(json!({"task": {"taskId": "c", "ttl": null}}))).unwrap().1, None);
        let note = |s: &str| {
            Message::made(
                json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "d", "status": s}}),
            )
        };
        assert_eq!(ended_task_status(&note("failed")), Some(TaskId::new("d")));
        assert_eq!(ended_task_status(&note("input_required")), None);
    }
}
