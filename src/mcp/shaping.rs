//! Shaping what reaches a client to what its negotiated version defines, and to what the
//! gateway itself offers (hosted tasks).

use crate::jsonrpc::Message;
use crate::mcp::ProtocolVersion;
use crate::mcp::tasks::{self, TaskSupport};
use serde_json::{Value, json};

/// Capabilities in an `initialize` result. `hosting`: the gateway hosts tasks for this upstream.
pub fn initialize_result(result: &mut Value, client: ProtocolVersion, hosting: bool) {
    let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut) else { return };
    // 2026-07-28's: a dual-era server may declare its extensions in a legacy `initialize`
    // too, and no legacy client reads them (an extension's tasks are not core tasks).
    caps.remove("extensions");
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
/// that tool; `bridge_required` whether tools the upstream requires as tasks are bridged for
/// clients without tasks (else they are hidden from them).
pub fn tools_list(
    result: &mut Value,
    client: ProtocolVersion,
    bridge_required: bool,
    hosted: &dyn Fn(&str, TaskSupport) -> bool,
) {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return };
    if !client.has_tasks() && !bridge_required {
        tools.retain(|t| TaskSupport::of_tool(t) != TaskSupport::Required);
    }
    for tool in tools.iter_mut() {
        let support = TaskSupport::of_tool(tool);
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(obj) = tool.as_object_mut() else { continue };
        if client < ProtocolVersion::V2025_11_25 {
            for key in ["inputSchema", "outputSchema"] {
                if let Some(schema) = obj.get_mut(key) {
                    defs_as_definitions(schema);
                }
            }
        }
        let bridged = support == TaskSupport::Required && bridge_required;
        if !client.has_tasks() {
            obj.remove("execution");
        } else if bridged || (support != TaskSupport::Required && hosted(&name, support)) {
            let exec = obj.entry("execution").or_insert_with(|| json!({}));
            if let Some(e) = exec.as_object_mut() {
                e.insert("taskSupport".into(), "optional".into());
            } else {
                *exec = json!({"taskSupport": "optional"});
            }
        }
    }
}

/// A schema's `$defs` (JSON Schema 2019-09 on, the default dialect from 2025-11-25) as
/// draft-07's `definitions`, its local references with them, for a client of an older
/// version: its validator may know only draft-07 and fail to resolve `#/$defs/…` (the
/// TypeScript SDK up to 1.22 does, and then refuses the tool's results). Any reader resolves
/// the rewritten references the same way. A schema that already has `definitions` is kept
/// as it is.
fn defs_as_definitions(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else { return };
    if obj.contains_key("definitions") {
        return;
    }
    let Some(defs) = obj.remove("$defs") else { return };
    obj.insert("definitions".into(), defs);
    rewrite_refs(schema);
}

/// Every `$ref` into `#/$defs/` below `v`, pointed at `#/definitions/` instead.
fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match child {
                    Value::String(r) if k == "$ref" => {
                        if let Some(rest) = r.strip_prefix("#/$defs/") {
                            *r = format!("#/definitions/{rest}");
                        }
                    }
                    _ => rewrite_refs(child),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// A message on its way to the client: `None` if the client's version has no place for it
/// (task notifications before 2025-11-25); task `_meta` is removed for such clients. A
/// message with nothing to change is passed on as it is, its bytes untouched.
pub fn for_client(msg: Message, client: ProtocolVersion) -> Option<Message> {
    if client.has_tasks() {
        return Some(msg);
    }
    if msg.method_name().starts_with("notifications/tasks/") {
        return None;
    }
    // (Progress `message`, which 2024-11-05 lacks, is the version table's: it is removed when
    // the sender is newer. Between two sides of one version a message keeps its bytes.)
    let msg = if tasks::is_tagged(&msg) {
        msg.edit(|m| {
            for field in ["params", "result"] {
                tasks::untag_related(m, field);
            }
        })
    } else {
        msg
    };
    Some(msg)
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
        tools_list(&mut list, ProtocolVersion::V2024_11_05, true, &|_, _| true);
        assert_eq!(list, json!({"tools": [{"name": "a", "x": 1}]}));
    }

    #[test]
    fn defs_become_draft_07_definitions_for_clients_before_2025_11_25() {
        let schema = json!({"type": "object", "properties": {
            "now": {"$ref": "#/$defs/Time"}, "zones": {"type": "array", "items": {"$ref": "#/$defs/Zone"}},
            "other": {"$ref": "https://example.com/s.json"}},
            "$defs": {"Time": {"type": "string"}, "Zone": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Zone"}}}}});
        let listing = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}]});
        let mut old = listing.clone();
        tools_list(&mut old, ProtocolVersion::V2025_06_18, true, &|_, _| false);
        let out = &old["tools"][0]["outputSchema"];
        assert!(out.get("$defs").is_none(), "{out}");
        assert_eq!(out["definitions"]["Time"], json!({"type": "string"}));
        assert_eq!(out["properties"]["now"]["$ref"], "#/definitions/Time");
        assert_eq!(out["properties"]["zones"]["items"]["$ref"], "#/definitions/Zone");
        assert_eq!(
            out["definitions"]["Zone"]["properties"]["next"]["$ref"], "#/definitions/Zone",
            "recursive ones too"
        );
        assert_eq!(out["properties"]["other"]["$ref"], "https://example.com/s.json", "not a local one");
        // A 2025-11-25 client reads 2020-12: as it is.
        let mut new = listing.clone();
        tools_list(&mut new, ProtocolVersion::V2025_11_25, true, &|_, _| false);
        assert_eq!(new, listing);
        // A schema that has `definitions` already is left alone.
        let both = json!({"tools": [{"name": "t", "inputSchema": {"definitions": {}, "$defs": {"A": {}}, "$ref": "#/$defs/A"}}]});
        let mut kept = both.clone();
        tools_list(&mut kept, ProtocolVersion::V2025_03_26, true, &|_, _| false);
        assert_eq!(kept, both);
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
        let before = list.clone();
        tools_list(&mut list, ProtocolVersion::V2025_11_25, false, &|n, _| n != "skip");
        assert_eq!(list["tools"][0]["execution"]["taskSupport"], "optional");
        assert_eq!(list["tools"][1]["execution"]["taskSupport"], "required");
        assert!(list["tools"][2].get("execution").is_none());
        let mut list = before;
        tools_list(&mut list, ProtocolVersion::V2025_11_25, true, &|n, _| n != "skip");
        assert_eq!(list["tools"][1]["execution"]["taskSupport"], "optional", "bridged: a task is optional");
    }

    #[test]
    fn required_tools_for_old_clients() {
        let listing = json!({"tools": [{"name": "a"}, {"name": "r", "execution": {"taskSupport": "required"}}]});
        let mut bridged = listing.clone();
        tools_list(&mut bridged, ProtocolVersion::V2025_06_18, true, &|_, _| false);
        assert_eq!(bridged, json!({"tools": [{"name": "a"}, {"name": "r"}]}));
        let mut hidden = listing;
        tools_list(&mut hidden, ProtocolVersion::V2025_06_18, false, &|_, _| false);
        assert_eq!(hidden, json!({"tools": [{"name": "a"}]}));
    }

    #[test]
    fn outgoing_messages_for_old_clients() {
        let msg = |v: Value| Message::made(v);
        let status = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "t"}});
        assert!(for_client(msg(status.clone()), ProtocolVersion::V2025_06_18).is_none());
        assert!(for_client(msg(status), ProtocolVersion::V2025_11_25).is_some());
        let req = json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}, "k": 1}}});
        let req = for_client(msg(req), ProtocolVersion::V2025_03_26).unwrap();
        assert_eq!(req.value()["params"]["_meta"], json!({"k": 1}));
        let resp = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}});
        let resp = for_client(msg(resp), ProtocolVersion::V2025_06_18).unwrap();
        assert_eq!(resp.value()["result"], json!({"content": []}));
        let p = Message::parse(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1, "progress":1.50}}"#,
        ))
        .unwrap();
        let same = for_client(p.clone(), ProtocolVersion::V2024_11_05).unwrap();
        assert_eq!(same.bytes(), p.bytes(), "progress keeps its bytes (`message` is the version table's)");
        let plain = Message::parse(bytes::Bytes::from_static(br#"{"jsonrpc":"2.0", "id":3,"result":{"content":[ ]}}"#))
            .unwrap();
        let same = for_client(plain.clone(), ProtocolVersion::V2024_11_05).unwrap();
        assert_eq!(same.bytes(), plain.bytes(), "nothing to change: the bytes pass as they came");
    }
}
