//! Shaping what reaches a client to what its negotiated version defines, and to what the
//! gateway itself offers (hosted tasks).

use crate::jsonrpc::Message;
use crate::mcp::ProtocolVersion;
use crate::mcp::task_messages::{self, TaskSupport};
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
                if let Value::Object(ours) = task_messages::hosting_capability() {
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
            _ => task_messages::hosting_capability(),
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
                    inline_defs(schema);
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

/// A schema's local references into its `$defs` (JSON Schema 2019-09 on, the default dialect
/// from 2025-11-25) replaced by what they name, for a client of an older version: its validator
/// may know only draft-07 and fail to resolve `#/$defs/…` (the TypeScript SDK up to 1.22 does,
/// with `definitions` as much, and then refuses the tool's results). A schema whose references
/// cannot all be inlined (one that recurses, names no definition, or grows past
/// [`MAX_INLINED_BYTES`]) is left as it is.
fn inline_defs(schema: &mut Value) {
    let Some(defs) = schema.get("$defs").and_then(Value::as_object).cloned() else { return };
    let mut inlined = schema.clone();
    // Bounded in bytes: a definition referenced many times must not multiply what is kept.
    let mut budget = (schema.to_string().len() * 4).max(MAX_INLINED_BYTES);
    if inline(&mut inlined, &defs, 0, &mut budget) {
        if let Some(o) = inlined.as_object_mut() {
            o.remove("$defs");
        }
        *schema = inlined;
    }
}

/// The most bytes of definitions one schema's inlining copies in (or four times the schema's
/// own size, if more): past it the schema is left as it is.
const MAX_INLINED_BYTES: usize = 64 * 1024;

/// Replaces each `{"$ref": "#/$defs/Name", …}` below `v` by the definition's keywords beside
/// its own (its own win); `false` if one cannot be (see [`inline_defs`]).
fn inline(v: &mut Value, defs: &serde_json::Map<String, Value>, depth: usize, budget: &mut usize) -> bool {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let Some(name) = r.strip_prefix("#/$defs/") else { return true };
                let Some(def) = defs.get(name).filter(|_| depth < 16) else { return false };
                let Some(left) = budget.checked_sub(def.to_string().len()) else { return false };
                *budget = left;
                let mut def = def.clone();
                if !inline(&mut def, defs, depth + 1, budget) {
                    return false;
                }
                let Value::Object(def) = def else { return false };
                m.remove("$ref");
                for (k, v) in def {
                    m.entry(k).or_insert(v);
                }
            }
            m.iter_mut().filter(|(k, _)| *k != "$defs").all(|(_, child)| inline(child, defs, depth, budget))
        }
        Value::Array(a) => a.iter_mut().all(|child| inline(child, defs, depth, budget)),
        _ => true,
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
    let msg = if task_messages::is_tagged(&msg) {
        msg.edit(|m| {
            for field in ["params", "result"] {
                task_messages::untag_related(m, field);
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
    fn defs_are_inlined_for_clients_before_2025_11_25() {
        let schema = json!({"type": "object", "properties": {
            "now": {"$ref": "#/$defs/Time", "description": "mine"}, "zones": {"type": "array", "items": {"$ref": "#/$defs/Zone"}},
            "other": {"$ref": "https://example.com/s.json"}},
            "$defs": {"Time": {"type": "string", "description": "theirs"}, "Zone": {"type": "object", "properties": {"at": {"$ref": "#/$defs/Time"}}}}});
        let listing = json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}]});
        let mut old = listing.clone();
        tools_list(&mut old, ProtocolVersion::V2025_06_18, true, &|_, _| false);
        let out = &old["tools"][0]["outputSchema"];
        assert!(out.get("$defs").is_none(), "{out}");
        assert_eq!(out["properties"]["now"], json!({"type": "string", "description": "mine"}), "its own keywords win");
        assert_eq!(out["properties"]["zones"]["items"]["properties"]["at"]["type"], "string", "nested too");
        assert_eq!(out["properties"]["other"]["$ref"], "https://example.com/s.json", "not a local one");
        // A 2025-11-25 client reads 2020-12: as it is.
        let mut new = listing.clone();
        tools_list(&mut new, ProtocolVersion::V2025_11_25, true, &|_, _| false);
        assert_eq!(new, listing);
        // One that recurses, or names nothing, is left as it is.
        for schema in [
            json!({"$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}, "$ref": "#/$defs/Node"}),
            json!({"$defs": {}, "properties": {"a": {"$ref": "#/$defs/Missing"}}}),
        ] {
            let kept = json!({"tools": [{"name": "t", "inputSchema": schema}]});
            let mut out = kept.clone();
            tools_list(&mut out, ProtocolVersion::V2025_03_26, true, &|_, _| false);
            assert_eq!(out, kept);
        }
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
