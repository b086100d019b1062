//! Task vocabulary of 2025-11-25 (SEP-1686): statuses, the `Task` object, the related-task
//! `_meta` key, and the capability a task-hosting server declares.

use serde_json::{Value, json};

pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
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

/// Whether server capabilities declare task-augmented `tools/call`.
pub fn server_has_tool_tasks(capabilities: &Value) -> bool {
    capabilities.pointer("/tasks/requests/tools/call").is_some()
}

/// The `tasks` server capability of a gateway that hosts tasks.
pub fn hosting_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// `_meta` carrying the related-task key.
pub fn related_meta(task_id: &str) -> Value {
    json!({ RELATED_TASK: {"taskId": task_id} })
}

/// Adds the related-task key to a message's `params._meta` (or `result._meta`).
pub fn tag_related(msg: &mut Value, field: &str, task_id: &str) {
    let Some(obj) = msg.get_mut(field).and_then(Value::as_object_mut) else { return };
    let meta = obj.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(RELATED_TASK.into(), json!({"taskId": task_id}));
    }
}

/// The task id a message's `_meta` relates it to, if any.
pub fn related_task_id<'a>(msg: &'a Value, field: &str) -> Option<&'a str> {
    msg.get(field)?.get("_meta")?.get(RELATED_TASK)?.get("taskId")?.as_str()
}
