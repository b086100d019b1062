//! What a client without tasks reads of a long call (see `gateway::session::long_calls`):
//! the gateway's tools (`<prefix>wait`, `<prefix>status`, `<prefix>cancel`) as `tools/list`
//! shows them, their `taskId` argument, and the ordinary tool results that stand for a call
//! still running or ended: text a model can act on, and `structuredContent` a program can.

use crate::mcp::task_messages::TaskStatus;
use serde_json::{Map, Value, json};

/// Where a long call's task stands, as its results show it.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub task_id: String,
    pub status: TaskStatus,
    /// The latest status or progress message.
    pub message: Option<String>,
    /// The latest progress value, and the total if the upstream gave one.
    pub progress: Option<(f64, Option<f64>)>,
}

/// The names of the gateway's tools, made from the configured prefix.
#[derive(Clone, Debug)]
pub struct ToolNames {
    pub wait: String,
    pub status: String,
    pub cancel: String,
}

impl ToolNames {
    pub fn with_prefix(prefix: &str) -> ToolNames {
        ToolNames {
            wait: format!("{prefix}wait"),
            status: format!("{prefix}status"),
            cancel: format!("{prefix}cancel"),
        }
    }

    pub fn all(&self) -> [&str; 3] {
        [&self.wait, &self.status, &self.cancel]
    }
}

fn task_id_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"taskId": {"type": "string", "description": "The taskId a still-running call answered with"}},
        "required": ["taskId"],
    })
}

/// The gateway's three tools, as `tools/list` lists them.
pub fn tool_definitions(names: &ToolNames, wait_max_secs: u64) -> Vec<Value> {
    vec![
        json!({
            "name": names.wait,
            "description": format!(
                "Waits up to {wait_max_secs} s for a tool call that is still running (one that answered with a taskId) and returns its result exactly as the tool gave it. If it is still running then, says so again: call this tool again."
            ),
            "inputSchema": task_id_schema(),
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }),
        json!({
            "name": names.status,
            "description": "Says at once how a tool call that is still running (one that answered with a taskId) is doing: its status, progress and latest message.",
            "inputSchema": task_id_schema(),
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }),
        json!({
            "name": names.cancel,
            "description": "Stops a tool call that is still running (one that answered with a taskId).",
            "inputSchema": task_id_schema(),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
        }),
    ]
}

/// The longest `taskId` looked up.
const MAX_TASK_ID: usize = 256;

/// The `taskId` argument of a call of one of the gateway's tools.
pub fn task_id_argument(params: Option<&Value>) -> Result<String, String> {
    match params.and_then(|p| p.pointer("/arguments/taskId")) {
        // Task ids are 32 characters; one far longer is no task's, and is not echoed back.
        Some(Value::String(t)) if t.len() > MAX_TASK_ID => Err(format!("no task has an id of {} bytes", t.len())),
        Some(Value::String(t)) if !t.is_empty() => Ok(t.clone()),
        Some(_) => Err("the argument taskId must be a non-empty string".into()),
        None => Err("the argument taskId is missing: pass the taskId the still-running call answered with".into()),
    }
}

/// A tool result that is an error of the call to the gateway's tool (not of the task).
pub fn tool_error(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

fn progress_words(s: &Snapshot) -> String {
    let mut words = String::new();
    match s.progress {
        Some((p, Some(t))) if t > 0.0 => words.push_str(&format!(", {:.0}% done", (p / t * 100.0).clamp(0.0, 100.0))),
        Some((p, _)) => words.push_str(&format!(", progress {}", number(p))),
        None => {}
    }
    if let Some(m) = &s.message {
        words.push_str(&format!(": {m}"));
    }
    words
}

fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 1e15 { json!(v as i64) } else { json!(v) }
}

/// `structuredContent` of a still-running or status result.
fn structured(s: &Snapshot, names: &ToolNames) -> Value {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(s.task_id));
    m.insert("status".into(), json!(s.status.as_str()));
    if let Some((p, total)) = s.progress {
        m.insert("progress".into(), number(p));
        if let Some(t) = total {
            m.insert("total".into(), number(t));
        }
    }
    if let Some(msg) = &s.message {
        m.insert("message".into(), json!(msg));
    }
    m.insert("waitTool".into(), json!(names.wait));
    Value::Object(m)
}

/// The answer to a call still running: the call itself past `defer_after` (`tool`: its
/// name), or a wait that ended before the task did. A tool with an `outputSchema`
/// (`schema_bound`) gets no `structuredContent` (a client checks it against that schema),
/// and is marked `isError` so that clients do not ask for one; its text says it is not an
/// error of the tool.
pub fn still_running(s: &Snapshot, names: &ToolNames, tool: Option<&str>, schema_bound: bool) -> Value {
    let what = match tool {
        Some(t) => format!("The tool {t:?} is still running"),
        None => "The call is still running".to_string(),
    };
    let text = format!(
        "{what} as task {id} ({status}{progress}). Nothing is lost: call the tool {wait} with {{\"taskId\": \"{id}\"}} to wait for its result, {status_tool} to see how it is doing, or {cancel} to stop it.{note}",
        id = s.task_id,
        status = s.status.as_str(),
        progress = progress_words(s),
        wait = names.wait,
        status_tool = names.status,
        cancel = names.cancel,
        note = if schema_bound { " This is not an error of the tool: its result is not ready yet." } else { "" },
    );
    let mut r = json!({"content": [{"type": "text", "text": text}]});
    if schema_bound {
        r["isError"] = json!(true);
    } else {
        r["structuredContent"] = structured(s, names);
    }
    r
}

/// The status tool's answer.
pub fn status(s: &Snapshot, names: &ToolNames) -> Value {
    let next = match s.status {
        TaskStatus::Completed | TaskStatus::Failed => format!(" Call {} for its result.", names.wait),
        TaskStatus::Cancelled => String::new(),
        _ => format!(" Call {} to wait for its result.", names.wait),
    };
    let text = format!("Task {} is {}{}.{next}", s.task_id, s.status.as_str(), progress_words(s));
    json!({"content": [{"type": "text", "text": text}], "structuredContent": structured(s, names)})
}

/// The cancel tool's answer for a task it cancelled.
pub fn cancelled(task_id: &str) -> Value {
    json!({
        "content": [{"type": "text", "text": format!("Task {task_id} is cancelled: its call was stopped.")}],
        "structuredContent": {"taskId": task_id, "status": "cancelled"},
    })
}

/// What a task id that is unknown, expired, or another client's gets (the same for each).
pub fn unknown_task(task_id: &str) -> Value {
    tool_error(format!("No task {task_id}: it is unknown, or its result was kept for its retention time and is gone."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(progress: Option<(f64, Option<f64>)>) -> Snapshot {
        Snapshot { task_id: "t1".into(), status: TaskStatus::Working, message: Some("step 3 of 10".into()), progress }
    }

    #[test]
    fn a_running_call_names_its_task_and_the_wait_tool() {
        let names = ToolNames::with_prefix("tg_");
        let r = still_running(&snap(Some((3.0, Some(10.0)))), &names, Some("slow"), false);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("task t1") && text.contains("tg_wait") && text.contains("30% done"), "{text}");
        assert_eq!(r["structuredContent"]["taskId"], "t1");
        assert_eq!(r["structuredContent"]["progress"], 3);
        assert_eq!(r["structuredContent"]["total"], 10);
        assert_eq!(r["structuredContent"]["message"], "step 3 of 10");
        assert!(r.get("isError").is_none());
        // Bound by an output schema: no structured content, and not to be checked against it.
        let r = still_running(&snap(None), &names, Some("slow"), true);
        assert!(r.get("structuredContent").is_none());
        assert_eq!(r["isError"], true);
    }

    #[test]
    fn the_task_id_argument_is_checked() {
        assert_eq!(task_id_argument(Some(&json!({"arguments": {"taskId": "x"}}))).unwrap(), "x");
        assert!(task_id_argument(Some(&json!({"arguments": {"taskId": 3}}))).is_err());
        assert!(task_id_argument(Some(&json!({"arguments": {}}))).is_err());
        assert!(task_id_argument(None).is_err());
        let long = "x".repeat(10_000);
        let why = task_id_argument(Some(&json!({"arguments": {"taskId": long}}))).unwrap_err();
        assert!(why.len() < 100, "{why}");
    }

    #[test]
    fn tools_are_named_from_the_prefix() {
        let defs = tool_definitions(&ToolNames::with_prefix("x_"), 40);
        let names: Vec<_> = defs.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["x_wait", "x_status", "x_cancel"]);
        assert!(defs.iter().all(|d| d["inputSchema"]["required"][0] == "taskId"));
    }
}
