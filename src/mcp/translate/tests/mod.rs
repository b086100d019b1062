//! Every row of the table, for every version: kept as it is from the version that added it
//! on, and before it what the row's `older` says; and messages already in a version's shape,
//! which stay as they are. `facts` checks the table against the schemas, `forms` the exact
//! rewrites.

use super::table::{self, Older, Place, Shape, TABLE};
use super::*;
use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, Method};
use crate::mcp::ProtocolVersion::{V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25};
use serde_json::{Value, json};

mod facts;
mod forms;

const LATEST: ProtocolVersion = ProtocolVersion::LATEST;
const EDITED: Verdict = Verdict::Deliver { edited: true };

fn req(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

fn note(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

fn resp(result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": result})
}

fn down(msg: &Value, method: Option<&str>, to: ProtocolVersion) -> (Value, Verdict) {
    let mut m = msg.clone();
    let v = translate(&mut m, method.map(Method::parse), LATEST, to);
    (m, v)
}

/// A message that shows `place` and nothing else newer than 2024-11-05 (or than `min`).
struct Case {
    msg: Value,
    method: Option<&'static str>,
    /// The object holding the field (or the block, for a block type).
    at: &'static str,
    key: &'static str,
    /// The oldest version the rest of the message exists in.
    min: ProtocolVersion,
}

fn value_for(key: &str) -> Value {
    match key {
        "structuredContent" => json!({"a": 1}),
        "mode" => json!("form"),
        "oneOf" => json!([{"const": "a", "title": "A"}]),
        "default" => json!("d"),
        _ => json!({}),
    }
}

fn elicit(extra: Value, prop: Value) -> Value {
    let mut params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {"p": prop}}});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    req("elicitation/create", params)
}

fn sampling(content: Value, extra: Value) -> Value {
    let mut params = json!({"messages": [{"role": "user", "content": content}], "maxTokens": 10});
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    req("sampling/createMessage", params)
}

fn case(place: Place<'static>) -> Case {
    let c = |msg, method, at, key| Case { msg, method, at, key, min: V2024_11_05 };
    let text = json!({"type": "text", "text": "x"});
    match place {
        Place::Field(shape, key) => {
            let kv = json!({ key: value_for(key) });
            let with = |base: Value| {
                let mut b = base;
                b.as_object_mut().unwrap().extend(kv.as_object().unwrap().clone());
                b
            };
            match shape {
                Shape::Tool => c(
                    resp(json!({"tools": [with(json!({"name": "t", "inputSchema": {"type": "object"}}))]})),
                    Some("tools/list"),
                    "/result/tools/0",
                    key,
                ),
                Shape::CallToolResult => c(resp(with(json!({"content": [text]}))), Some("tools/call"), "/result", key),
                Shape::ContentBlock => {
                    c(resp(json!({"content": [with(text)]})), Some("tools/call"), "/result/content/0", key)
                }
                Shape::Annotations => c(
                    resp(
                        json!({"content": [{"type": "text", "text": "x", "annotations": with(json!({"priority": 0.5}))}]}),
                    ),
                    Some("tools/call"),
                    "/result/content/0/annotations",
                    key,
                ),
                Shape::Resource => c(
                    resp(json!({"resources": [with(json!({"uri": "file:///a", "name": "a"}))]})),
                    Some("resources/list"),
                    "/result/resources/0",
                    key,
                ),
                Shape::ResourceTemplate => c(
                    resp(json!({"resourceTemplates": [with(json!({"uriTemplate": "file:///{p}", "name": "a"}))]})),
                    Some("resources/templates/list"),
                    "/result/resourceTemplates/0",
                    key,
                ),
                Shape::ResourceContents => c(
                    resp(json!({"contents": [with(json!({"uri": "file:///a", "text": "t"}))]})),
                    Some("resources/read"),
                    "/result/contents/0",
                    key,
                ),
                Shape::Prompt => c(
                    resp(json!({"prompts": [with(json!({"name": "p"}))]})),
                    Some("prompts/list"),
                    "/result/prompts/0",
                    key,
                ),
                Shape::PromptArgument => c(
                    resp(json!({"prompts": [{"name": "p", "arguments": [with(json!({"name": "a"}))]}]})),
                    Some("prompts/list"),
                    "/result/prompts/0/arguments/0",
                    key,
                ),
                Shape::Implementation => c(
                    resp(json!({"protocolVersion": "2024-11-05", "capabilities": {},
                        "serverInfo": with(json!({"name": "s", "version": "1"}))})),
                    Some("initialize"),
                    "/result/serverInfo",
                    key,
                ),
                Shape::Root => c(
                    resp(json!({"roots": [with(json!({"uri": "file:///r"}))]})),
                    Some("roots/list"),
                    "/result/roots/0",
                    key,
                ),
                Shape::ProgressParams => c(
                    note("notifications/progress", with(json!({"progressToken": 1, "progress": 1}))),
                    None,
                    "/params",
                    key,
                ),
                Shape::CallToolParams => c(req("tools/call", with(json!({"name": "t"}))), None, "/params", key),
                Shape::CompleteParams | Shape::PromptReference => {
                    let r = json!({"type": "ref/prompt", "name": "p"});
                    let prompt_ref = shape == Shape::PromptReference;
                    let r = if prompt_ref { with(r) } else { r };
                    let params = json!({"ref": r, "argument": {"name": "a", "value": "v"}});
                    let msg = req("completion/complete", if prompt_ref { params } else { with(params) });
                    c(msg, None, if prompt_ref { "/params/ref" } else { "/params" }, key)
                }
                Shape::CreateMessageParams => c(sampling(text, kv.clone()), None, "/params", key),
                Shape::SamplingMessage => {
                    let mut msg = sampling(text, json!({}));
                    msg["params"]["messages"][0][key] = value_for(key);
                    c(msg, None, "/params/messages/0", key)
                }
                Shape::ElicitParams => {
                    Case { min: V2025_06_18, ..c(elicit(kv.clone(), json!({"type": "string"})), None, "/params", key) }
                }
                Shape::ElicitSchema => {
                    let mut msg = elicit(json!({}), json!({"type": "string"}));
                    msg["params"]["requestedSchema"][key] = value_for(key);
                    Case { min: V2025_06_18, ..c(msg, None, "/params/requestedSchema", key) }
                }
                Shape::ElicitProperty => {
                    let at = "/params/requestedSchema/properties/p";
                    Case { min: V2025_06_18, ..c(elicit(json!({}), with(json!({"type": "string"}))), None, at, key) }
                }
                Shape::CreateTaskResult => c(
                    resp(json!({"task": {"taskId": "t", "status": "working", "createdAt": "2025-11-25T10:30:00Z",
                        "lastUpdatedAt": "2025-11-25T10:30:00Z", "ttl": null}})),
                    Some("tools/call"),
                    "/result",
                    key,
                ),
                Shape::CancelledParams | Shape::ServerCapabilities | Shape::ClientCapabilities => {
                    unreachable!("no field rows for {shape:?}")
                }
            }
        }
        Place::Capability(shape, path) => {
            let caps = match path {
                [k] => json!({ *k: {} }),
                [k, sub] => json!({ *k: { *sub: {} } }),
                _ => unreachable!(),
            };
            let key = path[path.len() - 1];
            match shape {
                Shape::ServerCapabilities => c(
                    resp(
                        json!({"protocolVersion": "2024-11-05", "capabilities": caps, "serverInfo": {"name": "s", "version": "1"}}),
                    ),
                    Some("initialize"),
                    "/result/capabilities",
                    key,
                ),
                _ => c(
                    req(
                        "initialize",
                        json!({"protocolVersion": "2024-11-05", "capabilities": caps,
                        "clientInfo": {"name": "c", "version": "1"}}),
                    ),
                    None,
                    "/params/capabilities",
                    key,
                ),
            }
        }
        Place::Block(ty) => {
            let b = match ty {
                "audio" => json!({"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}),
                "resource_link" => json!({"type": "resource_link", "uri": "file:///a", "name": "a"}),
                "tool_use" => json!({"type": "tool_use", "id": "c1", "name": "t", "input": {}}),
                "tool_result" => json!({"type": "tool_result", "toolUseId": "c1", "content": [text]}),
                _ => unreachable!("no block {ty}"),
            };
            if ty.starts_with("tool_") {
                c(sampling(b, json!({})), None, "/params/messages/0/content", "type")
            } else {
                c(resp(json!({"content": [b]})), Some("tools/call"), "/result/content/0", "type")
            }
        }
        Place::Request(m) => {
            let params = if m == Method::ElicitationCreate {
                json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}})
            } else {
                json!({"taskId": "t"})
            };
            c(req(m.as_str(), params), None, "", "")
        }
        Place::Notification(m) => c(note(m.as_str(), json!({"taskId": "t", "elicitationId": "e"})), None, "", ""),
        Place::MetaKey(k) => c(
            resp(json!({"content": [], "_meta": {k: {"taskId": "t"}, "other": 1}})),
            Some("tools/call"),
            "/result/_meta",
            k,
        ),
        p if p == table::CANCEL_WITHOUT_REQUEST_ID => {
            c(note("notifications/cancelled", json!({"reason": "r"})), None, "", "")
        }
        p if p == table::SAMPLING_CONTENT_ARRAY => {
            c(sampling(json!([text, {"type": "text", "text": "y"}]), json!({})), None, "/params/messages", "")
        }
        p if p == table::ELICIT_URL_MODE => Case {
            min: V2025_06_18,
            ..c(
                req(
                    "elicitation/create",
                    json!({"mode": "url", "message": "m", "elicitationId": "e", "url": "https://x"}),
                ),
                None,
                "",
                "",
            )
        },
        p if p == table::ELICIT_DEFAULT => Case {
            min: V2025_06_18,
            ..c(
                elicit(json!({}), json!({"type": "string", "default": "d"})),
                None,
                "/params/requestedSchema/properties/p",
                "default",
            )
        },
        p if p == table::ELICIT_MULTI_SELECT => Case {
            min: V2025_06_18,
            ..c(elicit(json!({}), json!({"type": "array", "items": {"type": "string", "enum": ["a"]}})), None, "", "")
        },
        Place::Form(..) => unreachable!("no case for {place:?}"),
    }
}

fn lacks(v: &Value, at: &str, key: &str) -> bool {
    v.pointer(at).and_then(Value::as_object).is_none_or(|o| !o.contains_key(key))
}

#[test]
fn every_row_holds_from_its_version_on_and_not_before() {
    for row in TABLE {
        let c = case(row.place);
        for to in ProtocolVersion::ALL.into_iter().filter(|&v| v >= c.min) {
            let (m, verdict) = down(&c.msg, c.method, to);
            let what = format!("{:?} for {to}", row.place);
            if to >= row.since {
                assert_eq!(verdict, Verdict::Deliver { edited: false }, "{what}");
                assert_eq!(m, c.msg, "{what}: kept as it is");
                continue;
            }
            match row.older {
                Older::Removed => {
                    assert_eq!(verdict, EDITED, "{what}");
                    assert!(lacks(&m, c.at, c.key), "{what}: removed, in {m}");
                }
                Older::Described(_) if row.place == table::STRUCTURED_CONTENT => {
                    assert_eq!(verdict, EDITED, "{what}");
                    assert!(lacks(&m, c.at, c.key), "{what}");
                    assert_eq!(m["result"]["content"][1], json!({"type": "text", "text": r#"{"a":1}"#}), "{what}");
                }
                Older::Described(_) => {
                    assert_eq!(verdict, EDITED, "{what}");
                    let b = m.pointer(c.at).unwrap();
                    assert_eq!(b["type"], "text", "{what}");
                    assert!(b["text"].as_str().unwrap().starts_with('['), "{what}: says what was there: {b}");
                }
                Older::Rewritten(_) => {
                    assert_eq!(verdict, EDITED, "{what}");
                    assert_ne!(m, c.msg, "{what}");
                }
                Older::Refused(code) => {
                    assert!(matches!(&verdict, Verdict::Refuse(e) if e.code == code), "{what}: {verdict:?}")
                }
                Older::Dropped => assert!(matches!(verdict, Verdict::Drop(_)), "{what}: {verdict:?}"),
                Older::Failed(code) => {
                    assert!(matches!(&verdict, Verdict::Fail(e) if e.code == code), "{what}: {verdict:?}")
                }
            }
        }
    }
}

/// Messages as each version shapes them, the newest things it has in use.
fn shaped_for(v: ProtocolVersion) -> Vec<(Value, Option<&'static str>)> {
    let mut out = vec![
        (
            resp(json!({"content": [{"type": "text", "text": "x", "annotations": {"priority": 1}}], "isError": false})),
            Some("tools/call"),
        ),
        (req("tools/call", json!({"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 3}})), None),
        (note("notifications/cancelled", json!({"requestId": 1})), None),
        (
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32042, "message": "m", "data": {"elicitations": []}}}),
            Some("tools/call"),
        ),
    ];
    if v >= V2025_03_26 {
        // A batch is the framing's to split or join: left as it is.
        out.push((json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]), None));
        out.push((
            resp(json!({"content": [{"type": "audio", "mimeType": "audio/wav", "data": "AAAA"}]})),
            Some("tools/call"),
        ));
        out.push((note("notifications/progress", json!({"progressToken": 1, "progress": 1, "message": "m"})), None));
        out.push((
            resp(json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "annotations": {"title": "T"}}]})),
            Some("tools/list"),
        ));
    }
    if v >= V2025_06_18 {
        out.push((
            resp(json!({"content": [{"type": "resource_link", "uri": "u", "name": "n", "_meta": {}}, {"type": "text", "text": "{}"}],
                "structuredContent": {}})),
            Some("tools/call"),
        ));
        out.push((elicit(json!({}), json!({"type": "string", "enum": ["a"], "enumNames": ["A"]})), None));
        out.push((resp(json!({"prompts": [{"name": "p", "title": "P", "arguments": [{"name": "a", "title": "A"}], "_meta": {}}]})), Some("prompts/list")));
    }
    if v >= V2025_11_25 {
        out.push((resp(json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]})), Some("tools/list")));
        out.push((
            sampling(
                json!([{"type": "tool_use", "id": "c", "name": "t", "input": {}}]),
                json!({"tools": [], "task": {}}),
            ),
            None,
        ));
        out.push((note("notifications/tasks/status", json!({"taskId": "t", "status": "working"})), None));
    }
    out
}

#[test]
fn a_message_already_in_the_receivers_shape_is_unchanged() {
    for to in ProtocolVersion::ALL {
        for (msg, method) in shaped_for(to) {
            assert_eq!(down(&msg, method, to), (msg.clone(), Verdict::Deliver { edited: false }), "{to}: {msg}");
        }
    }
}

#[test]
fn upgrading_and_same_version_are_identity() {
    for from in ProtocolVersion::ALL {
        for to in ProtocolVersion::ALL.into_iter().filter(|&to| to >= from) {
            for (msg, method) in shaped_for(from) {
                let mut m = msg.clone();
                assert_eq!(translate(&mut m, method.map(Method::parse), from, to), Verdict::Deliver { edited: false });
                assert_eq!(m, msg, "{from} → {to}");
            }
        }
    }
}

#[test]
fn a_downgraded_message_is_in_the_receivers_shape() {
    // Once downgraded, downgrading again changes nothing: no field the receiver lacks is left.
    for row in TABLE {
        let c = case(row.place);
        for to in ProtocolVersion::ALL.into_iter().filter(|&v| v >= c.min) {
            let (once, verdict) = down(&c.msg, c.method, to);
            if matches!(verdict, Verdict::Deliver { .. }) {
                assert_eq!(
                    down(&once, c.method, to),
                    (once.clone(), Verdict::Deliver { edited: false }),
                    "{:?} {to}",
                    row.place
                );
            }
        }
    }
}

#[test]
fn a_crossing_message_the_table_leaves_alone_keeps_its_bytes_and_an_edited_one_is_rewritten() {
    let text = r#"{"jsonrpc":"2.0", "id":7,  "result":{"content":[{"type":"text","text":"x"}],"isError":false}}"#;
    let msg = crate::jsonrpc::Message::parse(bytes::Bytes::from_static(text.as_bytes())).unwrap();
    let Ok(same) = cross(msg, Some(Method::ToolsCall), LATEST, V2025_06_18) else { panic!("not delivered") };
    assert_eq!(same.bytes().as_ref(), text.as_bytes(), "unedited: as it came, spacing and all");
    assert_eq!(same.value()["result"]["content"][0]["text"], json!("x"));
    let newer =
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":{"a":1}}}"#;
    let msg = crate::jsonrpc::Message::parse(bytes::Bytes::from_static(newer.as_bytes())).unwrap();
    let Ok(older) = cross(msg, Some(Method::ToolsCall), LATEST, V2025_03_26) else { panic!("not delivered") };
    assert_ne!(older.bytes().as_ref(), newer.as_bytes(), "edited: written again");
    assert!(older.value()["result"].get("structuredContent").is_none(), "2025-03-26 has no structured content");
    assert_eq!(older.id(), Some(&crate::jsonrpc::Id::Num(7)));
}
