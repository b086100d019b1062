//! Shaping what reaches a client to what its negotiated version defines, and to what the
//! gateway itself offers (hosted tasks).

use crate::mcp::ProtocolVersion;
use crate::mcp::tasks::{self, TaskSupport};
use serde_json::{Value, json};

/// Capabilities in an `initialize` result. `hosting`: the gateway hosts tasks for this upstream.
pub fn initialize_result(result: &mut Value, client: ProtocolVersion, hosting: bool) {
    let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut) else { return };
    if !client.has_tasks() {
        caps.remove("tasks");
        return;
    }
    if hosting {
        let merged = match caps.remove("tasks") {
            Some(Value::Object(mut upstream)) => {
                // Keep what the upstream declares beyond ours; ours fill the rest.
                if let Value::Object(ours) = tasks::hosting_capability() {
                    for (k, v) in ours {
                        match (upstream.get_mut(&k), v) {
                            (Some(Value::Object(u)), Value::Object(o)) => {
                                for (k2, v2) in o {
                                    u.entry(k2).or_insert(v2);
                                }
                            }
                            (None, v) => {
                                upstream.insert(k, v);
                            }
                            _ => {}
                        }
                    }
                }
                Value::Object(upstream)
            }
            _ => tasks::hosting_capability(),
        };
        caps.insert("tasks".into(), merged);
    }
}

/// A `tools/list` result. `hosted(name, support)` says whether the gateway hosts tasks for
/// that tool.
pub fn tools_list(result: &mut Value, client: ProtocolVersion, hosted: &dyn Fn(&str, TaskSupport) -> bool) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return };
    for tool in tools.iter_mut() {
        let support = TaskSupport::of_tool(tool);
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(obj) = tool.as_object_mut() else { continue };
        if !client.has_tasks() {
            obj.remove("execution");
        } else if support != TaskSupport::Required && hosted(&name, support) {
            let exec = obj.entry("execution").or_insert_with(|| json!({}));
            if let Some(e) = exec.as_object_mut() {
                e.insert("taskSupport".into(), "optional".into());
            } else {
                *exec = json!({"taskSupport": "optional"});
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_clients_never_see_task_fields() {
        let mut init = json!({"capabilities": {"tools": {}, "tasks": {"list": {}}}});
        initialize_result(&mut init, ProtocolVersion::V2025_06_18, true);
        assert_eq!(init, json!({"capabilities": {"tools": {}}}));
        let mut list = json!({"tools": [{"name": "a", "execution": {"taskSupport": "optional"}, "x": 1}]});
        tools_list(&mut list, ProtocolVersion::V2024_11_05, &|_, _| true);
        assert_eq!(list, json!({"tools": [{"name": "a", "x": 1}]}));
    }

    #[test]
    fn hosting_adds_capability_and_optional_support() {
        let mut init = json!({"capabilities": {"tools": {}}});
        initialize_result(&mut init, ProtocolVersion::V2025_11_25, true);
        assert_eq!(init["capabilities"]["tasks"]["requests"]["tools"]["call"], json!({}));
        let mut list = json!({"tools": [
            {"name": "plain"},
            {"name": "req", "execution": {"taskSupport": "required"}},
            {"name": "skip"}
        ]});
        tools_list(&mut list, ProtocolVersion::V2025_11_25, &|n, _| n != "skip");
        assert_eq!(list["tools"][0]["execution"]["taskSupport"], "optional");
        assert_eq!(list["tools"][1]["execution"]["taskSupport"], "required");
        assert!(list["tools"][2].get("execution").is_none());
    }
}
