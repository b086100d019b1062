//! Unit tests of `message`.

use super::*;
use serde_json::json;

fn parse(s: &str) -> Result<Message, Refused> {
    Message::parse(Bytes::copy_from_slice(s.as_bytes()))
}

#[test]
fn a_new_id_is_spliced_into_the_original_bytes() {
    let text = r#"{ "jsonrpc":"2.0", "params" : {"name":"echo","x":[1, 2.50, "\u00e9"]}, "id" : "a-1", "method":"tools/call" }"#;
    let m = parse(text).unwrap();
    assert_eq!((m.kind(), m.method(), m.id()), (Kind::Request, Method::ToolsCall, Some(&Id::Str("a-1".into()))));
    let m = m.with_id(&Id::Num(7));
    assert_eq!(m.bytes().as_ref(), text.replace(r#""a-1""#, "7").as_bytes(), "only the id changed");
    assert_eq!(m.id(), Some(&Id::Num(7)));
    assert_eq!(m.tool_name().as_deref(), Some("echo"), "spans after the id moved with it");
    let back = m.with_id(&Id::Str("q\"uote".into()));
    let edited = back.clone().edit(|v| v["params"]["name"] = json!("other"));
    assert_eq!(edited.tool_name().as_deref(), Some("other"));
    assert_eq!(back.value()["id"], json!("q\"uote"));
    assert_eq!(back.value()["params"]["x"][2], json!("é"));
}

#[test]
fn reads_the_fields_it_routes_by() {
    let m = parse(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":5},"_meta":{"progressToken":"p"}}}"#).unwrap();
    assert_eq!(m.task_param(), Some(r#"{"ttl":5}"#));
    assert_eq!(m.progress_token(), Some(ProgressToken::Str("p".into())));
    let p = parse(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":3,"progress":1}}"#)
        .unwrap();
    assert_eq!(p.progress_token(), ProgressToken::from_value(&json!(3)));
    let c = parse(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r"}}"#).unwrap();
    assert_eq!(c.request_id_param(), Some(Id::Str("r".into())));
    let r = parse(r#"{"jsonrpc":"2.0","id":2,"result":{"task":{"taskId":"t1"},"_meta":{"k":1,"io.modelcontextprotocol/related-task":{"taskId":"t0"}}}}"#).unwrap();
    assert_eq!(r.result_field(Key::Task), Some(r#"{"taskId":"t1"}"#));
    assert_eq!(r.result_field(Key::RelatedTaskId), Some(r#""t0""#));
    assert_eq!(r.param(Key::RelatedTaskId), None);
    assert_eq!(r.method_name(), "");
    let o = parse(r#"{"jsonrpc":"2.0","id":2,"method":"vendor/thing"}"#).unwrap();
    assert_eq!((o.method(), o.method_name()), (Method::Other, "vendor/thing"));
}

#[test]
fn refuses_what_is_not_json_rpc() {
    for bad in [
        r#"{"id":1,"method":"x"}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
        r#"[1]"#,
        r#"["2.0",1,"ping"]"#,
        r#"7"#,
    ] {
        let e = parse(bad).err().unwrap_or_else(|| panic!("accepted {bad}"));
        assert_eq!(e.error.code, INVALID_REQUEST, "{bad}");
    }
    assert_eq!(parse("{nope").unwrap_err().error.code, PARSE_ERROR);
    let null_id = parse(r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#).unwrap();
    assert_eq!((null_id.kind(), null_id.id()), (Kind::Response, None));
}

#[test]
fn a_repeat_of_what_the_gateway_reads_is_refused_with_the_id() {
    for bad in [
        r#"{"jsonrpc":"2.0","id":3,"result":{"task":{"taskId":"a"},"task":{"taskId":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"_meta":{},"status":"completed","_meta":{}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"taskId":"a","status":"working","taskId":"b"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"task":{"taskId":"a","taskId":"b"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"a","taskId":"b"}}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":1,"progressToken":2}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"x","params":{"_meta":{"io.modelcontextprotocol/related-task":{},"io.modelcontextprotocol/related-task":{}}}}"#,
    ] {
        let r = parse(bad).err().unwrap_or_else(|| panic!("accepted {bad}"));
        assert_eq!((r.error.code, r.id), (INVALID_REQUEST, Some(Id::Num(3))), "{bad}: {}", r.error);
        assert!(r.error.message.contains("appears twice"), "{}", r.error);
    }
    let r = parse(r#"{"jsonrpc":"2.0","id":3,"result":{"task":{"taskId":"a","taskId":"b"}}}"#).unwrap_err();
    assert_eq!(r.error.message, "invalid request: \"result.task.taskId\" appears twice (the gateway reads it)");
    // The ttl a task-augmented call asks for: hosted, the gateway would keep the task for one
    // ttl and the client believe the other.
    let r =
        parse(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","task":{"ttl":1,"ttl":600000}}}"#)
            .unwrap_err();
    assert_eq!((r.error.code, r.id), (INVALID_PARAMS, Some(Id::Num(3))));
    assert_eq!(r.error.message, "invalid params: \"params.task.ttl\" appears twice (the gateway reads it)");
    // What the gateway never reads is the peer's business: passed on as it came.
    for fine in [
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"content":[],"name":1,"name":2,"_meta":{"k":1,"k":2}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"task":1,"task":2}],"task":{"ttl":1,"pollInterval":1,"pollInterval":2}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{"a":1,"a":2},"_meta":{"x":1,"x":2}}}"#,
    ] {
        assert_eq!(parse(fine).unwrap().bytes().as_ref(), fine.as_bytes());
    }
}

#[test]
fn a_refusal_says_what_it_could_read() {
    let refused = |s: &str| parse(s).err().unwrap_or_else(|| panic!("accepted {s}"));
    let r = refused(r#"{"jsonrpc":"2.0","id":4,"result":{"n":1e400}}"#);
    assert_eq!((r.error.code, r.answers()), (PARSE_ERROR, Some(&Id::Num(4))));
    let r = refused(r#"{"jsonrpc":"2.0","id":"a","id":"a","result":{}}"#);
    assert_eq!((r.error.code, r.answers()), (INVALID_REQUEST, Some(&Id::Str("a".into()))));
    let r = refused(r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#);
    assert_eq!((r.id, r.is_response), (None, true), "two ids: neither can be told to be the one");
    let r = refused(r#"{"jsonrpc":"2.0","id":5,"method":"x","params":{"v":1e400}}"#);
    assert_eq!((r.id.clone(), r.answers()), (Some(Id::Num(5)), None), "a request is answered, not a response");
    let r = refused(r#"{"jsonrpc":"2.0","id":5,"method":"x","method":"y"}"#);
    assert_eq!((r.id, r.is_response), (Some(Id::Num(5)), false));
    assert_eq!(refused(r#"{"jsonrpc":"1.0","id":6,"result":{}}"#).answers(), Some(&Id::Num(6)));
    // A null method is no method, whichever way the refusal was read (found by fuzzing).
    assert!(refused(r#"{"jsonrpc":"1.0","id":8,"method":null}"#).is_response);
    assert!(refused(r#"{"jsonrpc":"2.0","id":8,"method":null,"method":null,"x":1e400}"#).is_response);
    for unreadable in [r#"{"id":7,"result":"#, "[1]", r#"{"id":7,"result":"\ud83d"x}"#] {
        let r = refused(unreadable);
        assert_eq!((r.id, r.is_response), (None, false), "{unreadable}");
    }
}

#[test]
fn line_breaks_between_tokens_become_spaces() {
    let m = parse("{\"jsonrpc\":\"2.0\",\r\n \"method\":\"x\",\n\"params\":{\"s\":\"a\\nb\"}}").unwrap();
    assert_eq!(m.bytes().as_ref(), b"{\"jsonrpc\":\"2.0\",   \"method\":\"x\", \"params\":{\"s\":\"a\\nb\"}}");
    assert_eq!(m.value()["params"]["s"], json!("a\nb"));
    let raw_break_in_a_string = "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{\"s\":\"a\nb\"}}";
    assert_eq!(parse(raw_break_in_a_string).unwrap_err().error.code, PARSE_ERROR, "not JSON, not made JSON");
}

#[test]
fn what_a_tree_cannot_hold_is_refused_as_a_tree_parser_would() {
    let deep = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":{{\"a\":{}1{}}}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    for bad in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"n":1e400}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"s":"\ud83d"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"\udead":1}}"#,
        deep.as_str(),
    ] {
        let e = parse(bad).err().unwrap_or_else(|| panic!("accepted {bad}"));
        assert_eq!(e.error.code, PARSE_ERROR, "{bad}");
        assert!(serde_json::from_str::<Value>(bad).is_err(), "a tree parser refuses it too");
    }
    assert!(Message::parse(Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"s\":\"\xff\"}")).is_err());
    let escaped = parse(r#"{"jsonrpc":"2\u002e0","method":"x"}"#).unwrap();
    assert_eq!(escaped.method_name(), "x", "an escaped version string is still 2.0");
}

#[test]
fn a_message_made_from_a_tree_reads_as_its_parsed_text_would() {
    for v in [
        json!({"jsonrpc":"2.0","id":"a\nb","method":"tools/call","params":{"name":"e\u{e9}","task":{"ttl":5},"_meta":{"progressToken":7}}}),
        json!({"jsonrpc":"2.0","id":3,"result":{"task":{"taskId":"t","status":"working"},"n":[1.5,-2,18446744073709551615u64]}}),
        json!({"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t","statusMessage":"line\r\nbreak"}}),
    ] {
        let made = Message::from_value(v.clone()).unwrap();
        let parsed = Message::parse(Bytes::from(serde_json::to_vec(&v).unwrap())).unwrap();
        assert_eq!(made.bytes(), parsed.bytes());
        assert_eq!((made.kind(), made.method(), made.id()), (parsed.kind(), parsed.method(), parsed.id()));
        assert_eq!((made.tool_name(), made.task_param()), (parsed.tool_name(), parsed.task_param()));
        assert_eq!(made.progress_token(), parsed.progress_token());
        assert_eq!(made.value(), &v);
    }
}

#[test]
fn a_tree_deeper_than_a_parser_reads_is_refused_when_made() {
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    assert!(
        nests_deeper_than(&deep, SHALLOW)
            && !nests_deeper_than(&json!([[1]]), 2)
            && nests_deeper_than(&json!([[1]]), 1)
    );
    let Err(e) = Message::from_value(json!({"jsonrpc":"2.0","method":"x","params":{"a":deep}})) else {
        panic!("a tree too deep to read back was made a message")
    };
    assert_eq!(e.error.code, PARSE_ERROR);
    let mut shallow = json!(1);
    for _ in 0..SHALLOW - 2 {
        shallow = json!([shallow]);
    }
    assert!(Message::from_value(json!({"jsonrpc":"2.0","method":"x","params":{"a":shallow}})).is_ok());
}

#[test]
fn unknown_fields_and_methods_pass_byte_for_byte() {
    let text = r#"{"jsonrpc":"2.0","method":"x/y","params":{"a":{"b":[1e3,2]}},"extra":true}"#;
    let m = parse(text).unwrap();
    assert_eq!(m.bytes().as_ref(), text.as_bytes());
    assert_eq!(m.clone().into_value()["params"]["a"]["b"][0], json!(1000.0));
}
