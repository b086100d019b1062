//! How each side says it does tasks, and the calls that create them.
//!
//! A core server says so once, in `initialize` (`capabilities.tasks`, and per tool
//! `execution.taskSupport`); a core client asks for a task per call (`params.task`). An
//! extension server lists `extensions["io.modelcontextprotocol/tasks"]` in `server/discover`
//! and decides per call; an extension client declares the same key in every request's
//! `_meta` clientCapabilities, and a server may answer that request with a task only then.

use super::EXTENSION;
use crate::mcp::modern::{MISSING_REQUIRED_CLIENT_CAPABILITY, ModernError};
use crate::mcp::task_messages::{self, TaskSupport};
use serde_json::{Map, Value, json};

/// Whether capabilities (a server's, or a request's clientCapabilities) declare the extension.
pub fn declares(caps: &Value) -> bool {
    caps.get("extensions").and_then(|e| e.get(EXTENSION)).is_some_and(Value::is_object)
}

/// Declares the extension in capabilities (a modern server's, or the clientCapabilities the
/// gateway sends an extension server), leaving other extensions as they are.
pub fn declare(caps: &mut Map<String, Value>) {
    let ext = caps.entry("extensions").or_insert_with(|| json!({}));
    if !ext.is_object() {
        *ext = json!({});
    }
    if let Some(ext) = ext.as_object_mut() {
        ext.insert(EXTENSION.into(), json!({}));
    }
}

fn undeclare(caps: &mut Map<String, Value>) -> bool {
    let Some(Value::Object(ext)) = caps.get_mut("extensions") else { return false };
    let had = ext.remove(EXTENSION).is_some();
    if ext.is_empty() {
        caps.remove("extensions");
    }
    had
}

/// A core server's capabilities for a modern client: `tasks` goes (it "MUST NOT" be
/// advertised where the extension exists), and the extension stands for it when the server
/// takes tool calls as tasks.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn server_caps_to_ext(caps: &mut Map<String, Value>) {
    let had_tasks = caps.get("tasks").is_some_and(|t| task_messages::server_has_tool_tasks(&json!({"tasks": t})));
    caps.remove("tasks");
    if had_tasks {
        declare(caps);
    }
}

/// An extension server's capabilities for a core client: the extension becomes `tasks`,
/// with `tasks/cancel` and task-augmented `tools/call`; `tasks/list` (served from what the
/// gateway has seen) only when `list`, that is when the gateway knows the owner.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn server_caps_to_core(caps: &mut Map<String, Value>, list: bool) {
    if !undeclare(caps) {
        return;
    }
    let mut t = task_messages::hosting_capability();
    if !list {
        t.as_object_mut().map(|t| t.remove("list"));
    }
    caps.insert("tasks".into(), t);
}

/// A core client's capabilities for an extension server: its `tasks` (client-hosted tasks
/// for sampling and elicitation) has no counterpart and goes. Whether the extension is
/// declared is decided per request ([`core_call_to_ext`]).
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn client_caps_to_modern(caps: &mut Map<String, Value>) {
    caps.remove("tasks");
}

/// What an extension server answers, and the gateway as one: "missing required client
/// capability", naming the extension.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn missing_extension() -> ModernError {
    ModernError::MissingCapability { required: json!({"extensions": {EXTENSION: {}}}) }
}

/// Whether an upstream's error refuses a call because the client did not declare the
/// extension (so the call did not run, and may be retried declaring it, then bridged).
pub fn requires_extension(error: &Value) -> bool {
    error.get("code").and_then(Value::as_i64) == Some(MISSING_REQUIRED_CLIENT_CAPABILITY)
        && error.pointer("/data/requiredCapabilities").is_some_and(declares)
}

/// An extension server's tools for a core client: the server may make any call a task, so
/// each tool without a flag of its own is `taskSupport: "optional"`.
pub fn tools_for_core(tools: &mut [Value]) {
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let exec = tool.entry("execution").or_insert_with(|| json!({}));
        if let Some(exec) = exec.as_object_mut() {
            exec.entry("taskSupport").or_insert_with(|| "optional".into());
        }
    }
}

/// A core server's tools for an extension client: `execution` does not exist there. Each
/// tool's support, read before it goes, is what the session calls it by
/// ([`call_as_task`]).
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn tools_for_ext(tools: &mut [Value]) -> Vec<(String, TaskSupport)> {
    let mut support = Vec::with_capacity(tools.len());
    for tool in tools.iter_mut() {
        let s = TaskSupport::of_tool(tool);
        if let Some(t) = tool.as_object_mut() {
            if let Some(Value::String(name)) = t.get("name") {
                support.push((name.clone(), s));
            }
            t.remove("execution");
        }
    }
    support
}

/// How the gateway calls a core server's tool for an extension client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallAs {
    /// A plain call: the answer is the result.
    Plain,
    /// Task-augmented; the `CreateTaskResult` goes to the client, flat.
    Task,
    /// Task-augmented, and followed to its end for a client that did not declare the
    /// extension (answered with the final result, as a blocking call).
    Bridged,
}

/// A `required` tool is always a task; an `optional` one when the client declared the
/// extension on this request; a `forbidden` one never.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn call_as_task(support: TaskSupport, client_declared: bool) -> CallAs {
    match (support, client_declared) {
        (TaskSupport::Required, true) | (TaskSupport::Optional, true) => CallAs::Task,
        (TaskSupport::Required, false) => CallAs::Bridged,
        _ => CallAs::Plain,
    }
}

/// A core client's `tools/call` for an extension server: `params.task` goes (the extension
/// has no per-request opt-in, and its servers ignore the member); it is returned, since the
/// client asked for a task and the session declares the extension for it. Its requested
/// `ttl` has no counterpart.
pub fn core_call_to_ext(request: &mut Value) -> Option<Value> {
    request.get_mut("params").and_then(Value::as_object_mut)?.remove("task")
}

/// A call for a core server, task-augmented: `params.task`, with the retention asked for.
#[cfg_attr(not(test), expect(dead_code, reason = "no wired direction uses it yet (issue 11)"))]
pub fn ext_call_to_core(request: &mut Value, ttl_ms: Option<u64>) {
    let Some(obj) = request.as_object_mut() else { return };
    let params = obj.entry("params").or_insert_with(|| json!({}));
    if let Some(p) = params.as_object_mut() {
        p.insert("task".into(), ttl_ms.map_or_else(|| json!({}), |t| json!({"ttl": t})));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn server_capabilities_both_ways() {
        // The core page's server example, and the extension's "Server to client".
        let mut c = obj(json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}));
        server_caps_to_ext(&mut c);
        assert_eq!(Value::Object(c.clone()), json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}));
        assert!(declares(&Value::Object(c.clone())));
        server_caps_to_core(&mut c, true);
        assert_eq!(
            Value::Object(c.clone()),
            json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})
        );
        let mut c = obj(json!({"extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/ui": {}}}));
        server_caps_to_core(&mut c, false);
        assert_eq!(
            Value::Object(c),
            json!({"extensions": {"io.modelcontextprotocol/ui": {}}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}})
        );
        let mut plain = obj(json!({"tools": {}}));
        server_caps_to_core(&mut plain, true);
        server_caps_to_ext(&mut plain);
        assert_eq!(Value::Object(plain), json!({"tools": {}}), "no tasks either way");
    }

    #[test]
    fn client_capabilities_and_the_missing_one() {
        let mut c = obj(json!({"elicitation": {}, "tasks": {"requests": {"elicitation": {"create": {}}}}}));
        client_caps_to_modern(&mut c);
        assert!(!declares(&Value::Object(c.clone())));
        declare(&mut c);
        assert_eq!(Value::Object(c), json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}));
        // The extension's -32021 example.
        let e = missing_extension().to_rpc().to_value();
        assert_eq!(e["code"], -32021);
        assert_eq!(e["data"], json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}));
        assert!(requires_extension(&e));
        let other = json!({"code": -32021, "data": {"requiredCapabilities": {"elicitation": {}}}});
        assert!(!requires_extension(&other));
    }

    #[test]
    fn tools_and_calls() {
        let mut tools = vec![json!({"name": "a"}), json!({"name": "b", "execution": {"taskSupport": "required"}})];
        tools_for_core(&mut tools);
        assert_eq!(tools[0]["execution"]["taskSupport"], "optional");
        assert_eq!(tools[1]["execution"]["taskSupport"], "required");
        let support = tools_for_ext(&mut tools);
        assert_eq!(support, vec![("a".into(), TaskSupport::Optional), ("b".into(), TaskSupport::Required)]);
        assert!(tools.iter().all(|t| t.get("execution").is_none()));
        assert_eq!(call_as_task(TaskSupport::Required, false), CallAs::Bridged);
        assert_eq!(call_as_task(TaskSupport::Optional, true), CallAs::Task);
        assert_eq!(call_as_task(TaskSupport::Optional, false), CallAs::Plain);
        assert_eq!(call_as_task(TaskSupport::Forbidden, true), CallAs::Plain);

        // The core page's task-augmented call.
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_weather", "arguments": {"city": "New York"}, "task": {"ttl": 60000}}});
        assert_eq!(core_call_to_ext(&mut call), Some(json!({"ttl": 60000})));
        assert_eq!(call["params"], json!({"name": "get_weather", "arguments": {"city": "New York"}}));
        assert_eq!(core_call_to_ext(&mut call), None);
        ext_call_to_core(&mut call, Some(60000));
        assert_eq!(call["params"]["task"], json!({"ttl": 60000}));
        ext_call_to_core(&mut call, None);
        assert_eq!(call["params"]["task"], json!({}));
    }
}
