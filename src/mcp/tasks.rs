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

/// The task id a message's `_meta` relates it to, if any.
pub fn related_task_id<'a>(msg: &'a Value, field: &str) -> Option<&'a str> {
    msg.get(field)?.get("_meta")?.get(RELATED_TASK)?.get("taskId")?.as_str()
}

/// Whether a response to a plain `tools/call` says the tool must be called as a task.
/// Servers say it as -32601 (the spec's tool-level rule), -32600 (its request-level rule), or
/// a tool result with `isError` whose text says so (what an SDK server's error wrapping makes
/// of the former).
pub fn says_task_required(resp: &Value) -> bool {
    let mentions = |text: &str| {
        let t = text.to_ascii_lowercase();
        t.contains("task") && (t.contains("requir") || t.contains("augment"))
    };
    if let Some(e) = resp.get("error") {
        let code = e.get("code").and_then(Value::as_i64);
        return matches!(code, Some(-32601) | Some(-32600))
            && e.get("message").and_then(Value::as_str).is_some_and(mentions);
    }
    let Some(r) = resp.get("result") else { return false };
    r.get("isError") == Some(&Value::Bool(true))
        && r.get("content")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).any(mentions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_ways_to_say_task_required() {
        let e = |code: i64, m: &str| json!({"error": {"code": code, "message": m}});
        assert!(says_task_required(&e(-32601, "Tool x requires task augmentation (taskSupport: 'required')")));
        assert!(says_task_required(&e(-32600, "Task augmentation required for tools/call requests")));
        assert!(says_task_required(
            &json!({"result": {"isError": true, "content": [{"type": "text", "text": "MCP error -32601: Tool x requires task augmentation"}]}})
        ));
        assert!(!says_task_required(&e(-32601, "Method not found")));
        assert!(!says_task_required(&e(-32602, "task required")));
        assert!(!says_task_required(
            &json!({"result": {"isError": true, "content": [{"type": "text", "text": "disk full"}]}})
        ));
        assert!(!says_task_required(&json!({"result": {"content": [{"type": "text", "text": "task required"}]}})));
    }
}
