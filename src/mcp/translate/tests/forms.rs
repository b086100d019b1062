//! The exact forms of the rewrites, message by message.

use super::*;

#[test]
fn structured_content_as_text_only_where_no_text_block_carries_it() {
    let carried =
        resp(json!({"content": [{"type": "text", "text": "{ \"a\": [1, 2] }"}], "structuredContent": {"a": [1, 2]}}));
    let (m, v) = down(&carried, Some("tools/call"), V2025_03_26);
    assert_eq!(v, EDITED);
    assert_eq!(m["result"], json!({"content": [{"type": "text", "text": "{ \"a\": [1, 2] }"}]}));
    let alone = resp(
        json!({"content": [{"type": "text", "text": "done"}], "structuredContent": {"a": [1, 2]}, "isError": false}),
    );
    let (m, _) = down(&alone, Some("tools/call"), V2024_11_05);
    assert_eq!(
        m["result"],
        json!({"content": [{"type": "text", "text": "done"}, {"type": "text", "text": "{\"a\":[1,2]}"}], "isError": false})
    );
}

#[test]
fn blocks_an_older_client_lacks_become_text_in_calls_and_prompts() {
    let call = resp(json!({"content": [
        {"type": "audio", "mimeType": "audio/wav", "data": "A".repeat(16384), "annotations": {"audience": ["user"]}},
        {"type": "resource_link", "uri": "file:///log", "name": "log", "icons": [{"src": "i"}], "title": "Log"},
        {"type": "image", "mimeType": "image/png", "data": "AAAA", "_meta": {"k": 1}}
    ]}));
    let (m, _) = down(&call, Some("tools/call"), V2024_11_05);
    assert_eq!(
        m["result"]["content"],
        json!([
            {"type": "text", "text": "[audio: audio/wav, 12 KiB]", "annotations": {"audience": ["user"]}},
            {"type": "text", "text": "[resource link: file:///log (log)]"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"}
        ])
    );
    let (m, _) = down(&call, Some("tools/call"), V2025_06_18);
    assert_eq!(
        m["result"]["content"][1],
        json!({"type": "resource_link", "uri": "file:///log", "name": "log", "title": "Log"})
    );
    let prompt =
        resp(json!({"messages": [{"role": "user", "content": {"type": "resource_link", "uri": "u", "name": "n"}}]}));
    let (m, _) = down(&prompt, Some("prompts/get"), V2025_03_26);
    assert_eq!(m["result"]["messages"][0]["content"], json!({"type": "text", "text": "[resource link: u (n)]"}));
}

#[test]
fn sampling_for_clients_before_2025_11_25() {
    let msg = sampling(
        json!([{"type": "text", "text": "a"}, {"type": "tool_use", "id": "c1", "name": "get", "input": {"k": 1}}]),
        json!({"task": {"ttl": 1000}}),
    );
    let mut msg = msg;
    msg["params"]["messages"][0]["_meta"] = json!({"x": 1});
    let (m, v) = down(&msg, None, V2025_06_18);
    assert_eq!(v, EDITED);
    assert_eq!(
        m["params"],
        json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "a"}},
            {"role": "user", "content": {"type": "text", "text": r#"[tool use c1: get {"k":1}]"#}}
        ], "maxTokens": 10})
    );
    let tools = sampling(json!({"type": "text", "text": "a"}), json!({"tools": [], "toolChoice": {"mode": "auto"}}));
    let (_, v) = down(&tools, None, V2025_06_18);
    assert!(matches!(&v, Verdict::Refuse(e) if e.code == INVALID_PARAMS && e.message.contains("2025-11-25")), "{v:?}");
    let result = resp(json!({"role": "assistant", "model": "m", "content": [
        {"type": "text", "text": "one"}, {"type": "audio", "mimeType": "audio/mp3", "data": "AAAA"}]}));
    let (m, _) = down(&result, Some("sampling/createMessage"), V2025_06_18);
    assert_eq!(m["result"]["content"], json!({"type": "text", "text": "one\n[audio: audio/mp3, 3 B]"}));
    let single =
        resp(json!({"role": "assistant", "model": "m", "content": [{"type": "audio", "mimeType": "a", "data": ""}]}));
    let (m, _) = down(&single, Some("sampling/createMessage"), V2025_03_26);
    assert_eq!(m["result"]["content"], json!({"type": "audio", "mimeType": "a", "data": ""}), "audio is 2025-03-26's");
    let (m, _) = down(&single, Some("sampling/createMessage"), V2024_11_05);
    assert_eq!(m["result"]["content"], json!({"type": "text", "text": "[audio: a, 0 B]"}));
}

#[test]
fn elicitation_for_2025_06_18_clients() {
    let form = elicit(
        json!({"mode": "form", "task": {}, "_meta": {crate::mcp::task_messages::RELATED_TASK: {"taskId": "t"}}}),
        json!({"type": "string", "title": "Colour", "oneOf": [{"const": "r", "title": "Red"}, {"const": "g"}], "default": "r"}),
    );
    let mut form = form;
    form["params"]["requestedSchema"]["$schema"] = json!("https://json-schema.org/draft/2020-12/schema");
    form["params"]["requestedSchema"]["properties"]["ok"] = json!({"type": "boolean", "default": true});
    let (m, v) = down(&form, None, V2025_06_18);
    assert_eq!(v, EDITED);
    assert_eq!(
        m["params"],
        json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "p": {"type": "string", "title": "Colour", "enum": ["r", "g"], "enumNames": ["Red", "g"]},
            "ok": {"type": "boolean", "default": true}
        }}})
    );
    let url = req(
        "elicitation/create",
        json!({"mode": "url", "message": "sign in", "elicitationId": "e", "url": "https://x"}),
    );
    let (_, v) = down(&url, None, V2025_06_18);
    assert!(matches!(&v, Verdict::Refuse(e) if e.code == INVALID_PARAMS), "{v:?}");
    let (_, v) = down(&form, None, V2025_03_26);
    let Verdict::Refuse(e) = v else { panic!("{v:?}") };
    assert_eq!(e.code, METHOD_NOT_FOUND);
    assert_eq!(
        e.message,
        "request elicitation/create: the receiver speaks protocol version 2025-03-26, which predates it (added in 2025-06-18)"
    );
}

#[test]
fn initialize_both_ways() {
    let hello = req(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {
            "roots": {"listChanged": true}, "sampling": {"tools": {}, "context": {}},
            "elicitation": {"form": {}, "url": {}}, "tasks": {"list": {}}, "experimental": {"x": {}}},
            "clientInfo": {"name": "c", "version": "1", "title": "C", "icons": [], "websiteUrl": "https://c"}}),
    );
    let (m, _) = down(&hello, None, V2025_06_18);
    assert_eq!(
        m["params"]["capabilities"],
        json!({"roots": {"listChanged": true}, "sampling": {}, "elicitation": {}, "experimental": {"x": {}}})
    );
    assert_eq!(m["params"]["clientInfo"], json!({"name": "c", "version": "1", "title": "C"}));
    assert_eq!(m["params"]["protocolVersion"], "2025-11-25", "the session negotiates the version, not the table");
    let (m, _) = down(&hello, None, V2025_03_26);
    assert_eq!(
        m["params"]["capabilities"],
        json!({"roots": {"listChanged": true}, "sampling": {}, "experimental": {"x": {}}})
    );
    let welcome = resp(json!({"protocolVersion": "2025-11-25", "instructions": "i", "capabilities": {
        "tools": {"listChanged": true}, "completions": {}, "logging": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
        "serverInfo": {"name": "s", "version": "2", "description": "d"}}));
    let (m, _) = down(&welcome, Some("initialize"), V2024_11_05);
    assert_eq!(
        m["result"],
        json!({"protocolVersion": "2025-11-25", "instructions": "i", "capabilities": {"tools": {"listChanged": true}, "logging": {}},
            "serverInfo": {"name": "s", "version": "2"}})
    );
}

#[test]
fn lists_completion_and_meta() {
    let complete = req(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "p", "title": "P"}, "argument": {"name": "a", "value": "v"},
            "context": {"arguments": {"b": "1"}}}),
    );
    let (m, _) = down(&complete, None, V2025_03_26);
    assert_eq!(
        m["params"],
        json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "v"}})
    );
    let call = req(
        "tools/call",
        json!({"name": "t", "task": {"ttl": 5}, "_meta": {crate::mcp::task_messages::RELATED_TASK: {"taskId": "x"}}}),
    );
    let (m, _) = down(&call, None, V2025_06_18);
    assert_eq!(m["params"], json!({"name": "t"}), "an emptied _meta goes too");
    let tools = resp(json!({"tools": [{"name": "t", "title": "T", "inputSchema": {"type": "object", "$schema": "s"},
        "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}, "execution": {"taskSupport": "optional"},
        "icons": [], "_meta": {}}], "nextCursor": "c"}));
    let (m, _) = down(&tools, Some("tools/list"), V2024_11_05);
    assert_eq!(
        m["result"],
        json!({"tools": [{"name": "t", "inputSchema": {"type": "object", "$schema": "s"}}], "nextCursor": "c"})
    );
    let (m, _) = down(&tools, Some("tools/list"), V2025_03_26);
    assert_eq!(m["result"]["tools"][0]["annotations"], json!({"readOnlyHint": true}));
    let resources = resp(json!({"resources": [{"uri": "u", "name": "n", "size": 3,
        "annotations": {"priority": 1, "lastModified": "2025-01-12T15:00:58Z"}}]}));
    let (m, _) = down(&resources, Some("resources/list"), V2025_03_26);
    assert_eq!(
        m["result"],
        json!({"resources": [{"uri": "u", "name": "n", "size": 3, "annotations": {"priority": 1}}]})
    );
}

#[test]
fn what_cannot_reach_an_older_receiver() {
    let status = note("notifications/tasks/status", json!({"taskId": "t", "status": "working"}));
    assert!(matches!(down(&status, None, V2025_06_18).1, Verdict::Drop(_)));
    let created = resp(json!({"task": {"taskId": "t", "status": "working"}}));
    assert!(matches!(down(&created, Some("tools/call"), V2025_06_18).1, Verdict::Fail(e) if e.code == INTERNAL_ERROR));
    let listed = resp(json!({"tasks": []}));
    assert_eq!(down(&listed, Some("tools/list"), V2025_06_18).1, Verdict::Deliver { edited: false });
    let get = req("tasks/get", json!({"taskId": "t"}));
    assert!(matches!(down(&get, None, V2024_11_05).1, Verdict::Refuse(e) if e.code == METHOD_NOT_FOUND));
    let cancel = note("notifications/cancelled", json!({"requestId": 4, "reason": "r"}));
    assert_eq!(down(&cancel, None, V2024_11_05), (cancel, Verdict::Deliver { edited: false }));
}
