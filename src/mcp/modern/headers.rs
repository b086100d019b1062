//! The 2026-07-28 Streamable HTTP request headers that mirror the body, and their rules
//! (`basic/transports/streamable-http.mdx`, "Request Metadata" and "Server Validation").
//!
//! | header | mirrors | on |
//! |---|---|---|
//! | `MCP-Protocol-Version` | `params._meta["io.modelcontextprotocol/protocolVersion"]` | every POST |
//! | `Mcp-Method` | `method` | every request |
//! | `Mcp-Name` | `params.name` | `tools/call`, `prompts/get` |
//! | `Mcp-Name` | `params.uri` | `resources/read` |
//! | `Mcp-Name` | `params.taskId` | `tasks/get`, `tasks/update`, `tasks/cancel` (tasks extension) |
//!
//! A server that reads the body rejects a request whose headers are missing, malformed or
//! disagree with it: HTTP 400 with -32020 ([`HeaderProblem`]). `Mcp-Name` (and
//! `Mcp-Param-*`) may carry a value that is not plain header-safe ASCII as
//! `=?base64?{Base64 of its UTF-8}?=`, lowercase markers exactly; a plain value that looks like
//! that form is encoded too, so that decoding is never ambiguous ([`encode_value`],
//! [`decode_value`]). Header names are case-insensitive (the caller's HTTP layer finds them);
//! values are compared exactly.
//!
//! `Mcp-Param-{Name}`: a tool's `inputSchema` may mark properties reachable through
//! `properties` alone with `x-mcp-header: Name` ([`ParamHeaders::of_schema`], which refuses
//! a declaration the spec forbids); a client's `tools/call` then carries each such argument
//! present and not null as `Mcp-Param-Name` (strings as they are, integers in decimal,
//! booleans `true`/`false`, encoded like `Mcp-Name`) ([`ParamHeaders::for_arguments`]). The
//! gateway sets them toward a modern upstream from the listings it has seen
//! (`upstream::link::modern`), and checks a modern client's against the body where it knows
//! the tool ([`ParamHeaders::check`], `gateway::session::modern_client::param_headers`): the
//! header checks here ([`check`]) need no schema, those need the tool's. Notification POSTs:
//! the revision defines no header requirement for them beyond `MCP-Protocol-Version`, so a
//! notification is checked only for the headers it carries.

use super::{HeaderProblem, key};
use serde_json::Value;
use std::borrow::Cow;

pub const PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
pub const METHOD: &str = "Mcp-Method";
pub const NAME: &str = "Mcp-Name";
/// Prefix of the headers a tool's `x-mcp-header` annotations ask for.
pub const PARAM_PREFIX: &str = "Mcp-Param-";

const OPEN: &str = "=?base64?";
const CLOSE: &str = "?=";

/// The `params` member `Mcp-Name` mirrors for `method`, if the method has one.
pub fn name_param(method: &str) -> Option<&'static str> {
    use crate::jsonrpc::Method::*;
    match crate::jsonrpc::Method::parse(method) {
        ToolsCall | PromptsGet => Some("name"),
        ResourcesRead => Some("uri"),
        TasksGet | TasksUpdate | TasksCancel => Some("taskId"),
        _ => None,
    }
}

/// The mirrored headers of one POST, as received (bytes: a value need not be valid text).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestHeaders<'a> {
    pub protocol_version: Option<&'a [u8]>,
    pub method: Option<&'a [u8]>,
    pub name: Option<&'a [u8]>,
}

/// Whether a character may stand in a plain header value (RFC 9110 field-value: visible
/// ASCII, space, horizontal tab).
fn header_safe(c: char) -> bool {
    matches!(c, '\u{21}'..='\u{7e}' | ' ' | '\t')
}

/// A value as `Mcp-Name` (or `Mcp-Param-*`) carries it: as is when it is plain header-safe
/// ASCII without leading or trailing whitespace and does not look encoded; else encoded.
pub fn encode_value(value: &str) -> Cow<'_, str> {
    let encode = !value.chars().all(header_safe)
        || value.starts_with([' ', '\t'])
        || value.ends_with([' ', '\t'])
        || (value.starts_with(OPEN) && value.ends_with(CLOSE));
    if encode { Cow::Owned(format!("{OPEN}{}{CLOSE}", base64_encode(value.as_bytes()))) } else { Cow::Borrowed(value) }
}

/// The value a received `Mcp-Name` (or `Mcp-Param-*`) header stands for.
pub fn decode_value(raw: &[u8]) -> Result<String, &'static str> {
    let text = std::str::from_utf8(raw).map_err(|_| "not ASCII")?;
    if !text.chars().all(header_safe) {
        return Err("contains characters a header value may not");
    }
    match text.strip_prefix(OPEN).and_then(|rest| rest.strip_suffix(CLOSE)) {
        Some(encoded) => {
            let bytes = base64_decode(encoded).ok_or("invalid base64 between =?base64? and ?=")?;
            String::from_utf8(bytes).map_err(|_| "base64 value is not UTF-8")
        }
        None => Ok(text.to_string()),
    }
}

/// A header that is never encoded (`MCP-Protocol-Version`, `Mcp-Method`), as text.
fn plain(header: &'static str, raw: &[u8]) -> Result<String, HeaderProblem> {
    std::str::from_utf8(raw)
        .ok()
        .filter(|t| t.chars().all(header_safe))
        .map(str::to_string)
        .ok_or(HeaderProblem::Invalid { header, why: "contains characters a header value may not" })
}

fn agree(header: &'static str, header_value: String, body_value: &str) -> Result<(), HeaderProblem> {
    if header_value == body_value {
        Ok(())
    } else {
        Err(HeaderProblem::Mismatch { header, header_value, body_value: body_value.to_string() })
    }
}

/// Checks a POST's mirrored headers against its body (one JSON-RPC request or notification).
///
/// Only what the body states is compared: a body without a protocol version in `_meta`, or
/// a `tools/call` without a string `name`, is the `_meta` reader's or the method's -32602 to
/// report, not a header mismatch.
pub fn check(headers: &RequestHeaders<'_>, body: &Value) -> Result<(), HeaderProblem> {
    let is_request = body.get("id").is_some();
    let version = headers.protocol_version.ok_or(HeaderProblem::Missing(PROTOCOL_VERSION))?;
    let version = plain(PROTOCOL_VERSION, version)?;
    if let Some(v) = body.pointer("/params/_meta").and_then(|m| m.get(key::PROTOCOL_VERSION)).and_then(Value::as_str) {
        agree(PROTOCOL_VERSION, version, v)?;
    }
    let body_method = body.get("method").and_then(Value::as_str);
    match (headers.method, body_method) {
        (None, _) if is_request => return Err(HeaderProblem::Missing(METHOD)),
        (Some(raw), Some(m)) => agree(METHOD, plain(METHOD, raw)?, m)?,
        _ => {}
    }
    let Some(param) = body_method.and_then(name_param) else { return Ok(()) };
    let Some(body_name) = body.get("params").and_then(|p| p.get(param)).and_then(Value::as_str) else {
        return Ok(());
    };
    match headers.name {
        None if is_request => Err(HeaderProblem::Missing(NAME)),
        None => Ok(()),
        Some(raw) => {
            let name = decode_value(raw).map_err(|why| HeaderProblem::Invalid { header: NAME, why })?;
            agree(NAME, name, body_name)
        }
    }
}

/// A header as received: its name and its value's bytes (`Mcp-Param-*`, see
/// [`ParamHeaders::check`]).
pub type Received = (String, Vec<u8>);

/// A header name and value, as a client sets it.
pub type Header = (Cow<'static, str>, String);

/// The mirrored headers a client (the gateway, toward a modern upstream) sets for a body:
/// each as (name, value), the value encoded where the rules allow and require it.
pub fn for_body(body: &Value) -> Vec<Header> {
    let mut out = Vec::with_capacity(3);
    if let Some(v) = body.pointer("/params/_meta").and_then(|m| m.get(key::PROTOCOL_VERSION)).and_then(Value::as_str) {
        out.push((PROTOCOL_VERSION.into(), v.to_string()));
    }
    let Some(method) = body.get("method").and_then(Value::as_str) else { return out };
    out.push((METHOD.into(), method.to_string()));
    let name = name_param(method).and_then(|p| body.get("params")?.get(p)?.as_str());
    if let Some(name) = name {
        out.push((NAME.into(), encode_value(name).into_owned()));
    }
    out
}

/// One tool's `x-mcp-header` declarations: each header's name part and the chain of
/// `properties` keys that leads to its argument.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ParamHeaders(Vec<(String, Vec<String>)>);

/// JavaScript's safe integers, the range an `x-mcp-header` integer must stay in.
const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

impl ParamHeaders {
    /// Reads a tool's `inputSchema`: its declarations, or why the tool is invalid (a name
    /// that is empty, not an RFC 9110 token, or repeated ignoring case; a property that is
    /// not a string, integer or boolean; a declaration not reachable through `properties`).
    pub fn of_schema(schema: &Value) -> Result<ParamHeaders, String> {
        let mut found = Vec::new();
        walk(schema, &mut Vec::new(), &mut found)?;
        if count_declarations(schema) != found.len() {
            return Err("an x-mcp-header outside a chain of properties".into());
        }
        for (i, (name, _)) in found.iter().enumerate() {
            if found[..i].iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return Err(format!("x-mcp-header {name:?} is declared twice"));
            }
        }
        Ok(ParamHeaders(found))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `Mcp-Param-*` headers of a call with these `arguments`: one per declared argument
    /// present and not null (a value of another type than declared is left to the server).
    pub fn for_arguments(&self, arguments: &Value) -> Vec<Header> {
        let mut out = Vec::new();
        for (name, path) in &self.0 {
            let value = path.iter().try_fold(arguments, |v, k| v.get(k));
            let text = match value {
                Some(Value::String(s)) => encode_value(s).into_owned(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) if n.as_i64().is_some_and(|i| i.abs() <= MAX_SAFE_INTEGER) => n.to_string(),
                _ => continue,
            };
            out.push((format!("{PARAM_PREFIX}{name}").into(), text));
        }
        out
    }
}

impl ParamHeaders {
    /// Checks the `Mcp-Param-*` headers a client sent with a call of these `arguments`, as a
    /// server that processes the body must ("Server Behavior for Custom Headers"): each
    /// declared argument present and not null needs its header, decoded equal to it
    /// (integers compared as numbers); a header for an argument the body lacks, or a header
    /// sent twice, is refused too. `received` holds every `Mcp-Param-*` header as (name,
    /// value); one no declaration names is not this tool's business (it is ignored here).
    pub fn check(&self, arguments: &Value, received: &[Received]) -> Result<(), HeaderProblem> {
        for (name, path) in &self.0 {
            let header = format!("{PARAM_PREFIX}{name}");
            let problem = |problem: String| HeaderProblem::Param { header: header.clone(), problem };
            let mut sent = received.iter().filter(|(n, _)| n.eq_ignore_ascii_case(&header)).map(|(_, v)| v);
            let (raw, again) = (sent.next(), sent.next());
            if again.is_some() {
                return Err(problem("is sent more than once".into()));
            }
            let value = path.iter().try_fold(arguments, |v, k| v.get(k)).filter(|v| !v.is_null());
            let (raw, value) = match (raw, value) {
                (None, None) => continue,
                (Some(_), None) => return Err(problem("is sent, but the body has no value for its argument".into())),
                (None, Some(v)) => return Err(problem(format!("is required: the body's argument is {v}"))),
                (Some(raw), Some(v)) => (raw, v),
            };
            let text = decode_value(raw).map_err(|why| problem(format!("is malformed: {why}")))?;
            let agrees = match value {
                Value::String(s) => *s == text,
                Value::Bool(b) => text == if *b { "true" } else { "false" },
                Value::Number(n) => match (n.as_i64(), text.parse::<i64>(), text.parse::<f64>()) {
                    (Some(i), Ok(h), _) => i == h,
                    (_, _, Ok(h)) => n.as_f64() == Some(h),
                    _ => false,
                },
                _ => false,
            };
            if !agrees {
                return Err(problem(format!("says '{text}' but the body says {value}")));
            }
        }
        Ok(())
    }

    /// Whether `header` (any case) is one these declarations name.
    pub fn names(&self, header: &str) -> bool {
        header
            .get(..PARAM_PREFIX.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(PARAM_PREFIX))
            .then(|| &header[PARAM_PREFIX.len()..])
            .is_some_and(|rest| self.0.iter().any(|(n, _)| n.eq_ignore_ascii_case(rest)))
    }
}

/// Whether `name` (any case) is an `Mcp-Param-*` header's.
pub fn is_param_header(name: &str) -> bool {
    name.len() > PARAM_PREFIX.len()
        && name.get(..PARAM_PREFIX.len()).is_some_and(|p| p.eq_ignore_ascii_case(PARAM_PREFIX))
}

/// Collects the declarations along `properties` chains from `schema`.
fn walk(schema: &Value, path: &mut Vec<String>, found: &mut Vec<(String, Vec<String>)>) -> Result<(), String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return Ok(()) };
    for (key, prop) in props {
        path.push(key.clone());
        if let Some(decl) = prop.get("x-mcp-header") {
            let name = decl.as_str().filter(|n| !n.is_empty() && n.bytes().all(is_tchar));
            let Some(name) = name else { return Err(format!("x-mcp-header of {key:?} is not a header name")) };
            let primitive = matches!(prop.get("type").and_then(Value::as_str), Some("string" | "integer" | "boolean"));
            if !primitive {
                return Err(format!("x-mcp-header {name:?} is on a property that is not a string, integer or boolean"));
            }
            found.push((name.to_string(), path.clone()));
        }
        walk(prop, path, found)?;
        path.pop();
    }
    Ok(())
}

/// Removes from a `tools/list` result each tool whose `x-mcp-header` declarations break the
/// rules ([`ParamHeaders::of_schema`]): 2026-07-28 says such a tool is left out, since no
/// client could make its headers. Returns each removed tool's name and why.
pub fn drop_invalid_declarations(result: &mut Value) -> Vec<(String, String)> {
    let mut dropped = Vec::new();
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else { return dropped };
    tools.retain(|t| {
        let Some(schema) = t.get("inputSchema").filter(|s| count_declarations(s) > 0) else { return true };
        match ParamHeaders::of_schema(schema) {
            Ok(_) => true,
            Err(why) => {
                dropped.push((t.get("name").and_then(Value::as_str).unwrap_or("?").to_string(), why));
                false
            }
        }
    });
    dropped
}

/// Every `x-mcp-header` key anywhere in `v`.
fn count_declarations(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("x-mcp-header")) + m.values().map(count_declarations).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_declarations).sum(),
        _ => 0,
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Standard Base64 (RFC 4648 §4), padded.
fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Standard Base64 with its padding, as SEP-2243's test cases require (a value without it,
/// `SGVsbG8`, is refused); `None` for any other character or a length no encoding has.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The encoding examples of "Value Encoding".
    const EXAMPLES: [(&str, &str); 5] = [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ];

    #[test]
    fn values_encode_and_decode_as_the_spec_shows() {
        assert_eq!(format!("{PARAM_PREFIX}Region"), "Mcp-Param-Region", "the same encoding serves these headers");
        for (value, header) in EXAMPLES {
            assert_eq!(encode_value(value), header, "{value:?}");
            assert_eq!(decode_value(header.as_bytes()).as_deref(), Ok(value), "{header}");
        }
        for s in ["", "a", "ab", "abc", "abcd", "🦀 crab"] {
            assert_eq!(base64_decode(&base64_encode(s.as_bytes())).unwrap(), s.as_bytes());
        }
        assert_eq!(base64_decode("SGk="), Some(b"Hi".to_vec()));
        assert_eq!(base64_decode("SGk"), None, "padding is required");
        assert_eq!(decode_value(b"=?base64?SGVsbG8?=").ok(), None, "SEP-2243's invalid padding case");
        assert_eq!(decode_value(b"=?base64?***?="), Err("invalid base64 between =?base64? and ?="));
        assert_eq!(decode_value(b"=?base64?/w==?="), Err("base64 value is not UTF-8"));
        assert!(decode_value(b"a\x01b").is_err());
        assert!(decode_value("caf\u{e9}".as_bytes()).is_err(), "raw UTF-8 is not a header value");
        assert_eq!(decode_value(b"=?BASE64?abc?=").as_deref(), Ok("=?BASE64?abc?="), "markers are lowercase");
    }

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}
        }})
    }

    fn hdrs<'a>(v: &'a str, m: &'a str, n: Option<&'a str>) -> RequestHeaders<'a> {
        RequestHeaders { protocol_version: Some(v.as_bytes()), method: Some(m.as_bytes()), name: n.map(str::as_bytes) }
    }

    #[test]
    fn headers_are_checked_against_the_body() {
        use HeaderProblem::*;
        assert_eq!(check(&hdrs("2026-07-28", "tools/call", Some("get_weather")), &call("get_weather")), Ok(()));
        let encoded = encode_value("Hello, 世界").into_owned();
        assert_eq!(check(&hdrs("2026-07-28", "tools/call", Some(&encoded)), &call("Hello, 世界")), Ok(()));
        assert_eq!(
            check(&hdrs("2026-07-28", "tools/call", Some("foo")), &call("bar")),
            Err(Mismatch { header: NAME, header_value: "foo".into(), body_value: "bar".into() })
        );
        assert_eq!(check(&hdrs("2026-07-28", "tools/call", None), &call("x")), Err(Missing(NAME)));
        assert!(matches!(
            check(&hdrs("2025-11-25", "tools/call", Some("x")), &call("x")),
            Err(Mismatch { header: PROTOCOL_VERSION, .. })
        ));
        assert!(matches!(
            check(&hdrs("2026-07-28", "tools/list", Some("x")), &call("x")),
            Err(Mismatch { header: METHOD, .. })
        ));
        assert!(matches!(
            check(&hdrs("2026-07-28", "Tools/Call", Some("x")), &call("x")),
            Err(Mismatch { header: METHOD, .. })
        ));
        let none = RequestHeaders { method: Some(b"tools/call"), name: Some(b"x"), ..Default::default() };
        assert_eq!(check(&none, &call("x")), Err(Missing(PROTOCOL_VERSION)));
        let no_method = RequestHeaders { protocol_version: Some(b"2026-07-28"), ..Default::default() };
        assert_eq!(check(&no_method, &call("x")), Err(Missing(METHOD)));
        assert!(matches!(
            check(&hdrs("2026-07-28", "tools/call", Some("=?base64?!!?=")), &call("x")),
            Err(Invalid { header: NAME, .. })
        ));
        let bad = RequestHeaders { protocol_version: Some(b"2026-07-28\x7f"), ..hdrs("", "tools/call", Some("x")) };
        assert!(matches!(check(&bad, &call("x")), Err(Invalid { header: PROTOCOL_VERSION, .. })));
    }

    #[test]
    fn which_methods_carry_a_name() {
        let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": {"uri": "file:///projects/myapp/config.json"}});
        let h = hdrs("2026-07-28", "resources/read", Some("file:///projects/myapp/config.json"));
        assert_eq!(check(&h, &read), Ok(()));
        let get = json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
            "params": {"taskId": "786512e2-9e0d-44bd-8f29-789f320fe840"}});
        let h = hdrs("2026-07-28", "tasks/get", None);
        assert_eq!(check(&h, &get), Err(HeaderProblem::Missing(NAME)));
        let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}});
        assert_eq!(check(&hdrs("2026-07-28", "tools/list", None), &list), Ok(()));
        assert_eq!(name_param("prompts/get"), Some("name"));
        assert_eq!(name_param("tasks/update"), Some("taskId"));
        assert_eq!(name_param("tasks/result"), None);
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
        let only_version = RequestHeaders { protocol_version: Some(b"2026-07-28"), ..Default::default() };
        assert_eq!(check(&only_version, &note), Ok(()), "a notification: only the version is required");
    }

    #[test]
    fn a_client_sets_what_the_server_checks() {
        for body in [call("get_weather"), call("Hello, 世界"), call(" padded ")] {
            let set = for_body(&body);
            let find = |h: &str| set.iter().find(|(n, _)| *n == h).map(|(_, v)| v.as_bytes());
            let h = RequestHeaders { protocol_version: find(PROTOCOL_VERSION), method: find(METHOD), name: find(NAME) };
            assert_eq!(check(&h, &body), Ok(()), "{set:?}");
        }
        let set = for_body(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}));
        assert_eq!(set, vec![(METHOD.into(), "tools/list".to_string())]);
    }

    #[test]
    fn param_headers_follow_the_spec_example_and_rules() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "query": {"type": "string"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                                                      "n": {"type": "integer", "x-mcp-header": "N"}}}}});
        let decl = ParamHeaders::of_schema(&schema).unwrap();
        let set =
            decl.for_arguments(&json!({"region": "us-west1", "query": "SELECT 1", "opts": {"dry": false, "n": -7}}));
        let find = |h: &str| set.iter().find(|(n, _)| n == h).map(|(_, v)| v.as_str());
        assert_eq!(find("Mcp-Param-Region"), Some("us-west1"));
        assert_eq!(find("Mcp-Param-Dry-Run"), Some("false"));
        assert_eq!(find("Mcp-Param-N"), Some("-7"));
        assert_eq!(set.len(), 3);
        let set = decl.for_arguments(&json!({"region": "Hello, 世界", "opts": {"dry": null}}));
        assert_eq!(
            set,
            vec![("Mcp-Param-Region".into(), "=?base64?SGVsbG8sIOS4lueVjA==?=".to_string())],
            "null and absent: omitted"
        );
        let bad = |s: Value| ParamHeaders::of_schema(&json!({"type": "object", "properties": s})).unwrap_err();
        bad(json!({"a": {"type": "string", "x-mcp-header": ""}}));
        bad(json!({"a": {"type": "string", "x-mcp-header": "a b"}}));
        bad(json!({"a": {"type": "number", "x-mcp-header": "A"}}));
        bad(json!({"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}));
        bad(json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}));
        bad(json!({"a": {"oneOf": [{"type": "string", "x-mcp-header": "A"}]}}));
        assert!(ParamHeaders::of_schema(&json!({"type": "object"})).unwrap().is_empty());
    }

    #[test]
    fn a_server_checks_param_headers_against_the_body() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                                                      "n": {"type": "integer", "x-mcp-header": "N"}}}}});
        let decl = ParamHeaders::of_schema(&schema).unwrap();
        let args = json!({"region": "Hello, 世界", "opts": {"dry": true, "n": 42}});
        let sent = |pairs: &[(&str, &str)]| -> Vec<(String, Vec<u8>)> {
            pairs.iter().map(|(n, v)| (n.to_string(), v.as_bytes().to_vec())).collect()
        };
        let good = [
            ("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            ("Mcp-Param-Dry-Run", "true"),
            ("MCP-PARAM-N", "42"),
        ];
        assert_eq!(decl.check(&args, &sent(&good)), Ok(()));
        // What the gateway itself sends passes its own check.
        let own: Vec<(String, Vec<u8>)> =
            decl.for_arguments(&args).into_iter().map(|(n, v)| (n.into_owned(), v.into_bytes())).collect();
        assert_eq!(decl.check(&args, &own), Ok(()));
        assert_eq!(decl.check(&json!({"opts": {"n": 42}}), &sent(&[("Mcp-Param-N", "42.0")])), Ok(()), "numerically");
        assert_eq!(decl.check(&json!({"region": null}), &sent(&[("Mcp-Param-Other", "x")])), Ok(()), "not declared");
        let problem = |args: Value, pairs: &[(&str, &str)]| match decl.check(&args, &sent(pairs)) {
            Err(HeaderProblem::Param { header, problem }) => format!("{header} {problem}"),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            problem(json!({"region": "us"}), &[]),
            "Mcp-Param-Region is required: the body's argument is \"us\""
        );
        assert!(problem(json!({"region": "us"}), &[("Mcp-Param-Region", "eu")]).contains("says 'eu'"));
        assert!(problem(json!({"region": "us"}), &[("Mcp-Param-Region", "=?base64?!!?=")]).contains("malformed"));
        assert!(
            problem(json!({"region": "us"}), &[("Mcp-Param-Region", "us"), ("mcp-param-region", "us")])
                .contains("more than once")
        );
        assert!(problem(json!({}), &[("Mcp-Param-Region", "us")]).contains("no value"));
        assert!(problem(json!({"opts": {"dry": false}}), &[("Mcp-Param-Dry-Run", "False")]).contains("says 'False'"));
        assert!(decl.names("mcp-param-dry-run") && !decl.names("Mcp-Param-Other") && !decl.names("Region"));
        assert!(is_param_header("MCP-PARAM-x") && !is_param_header("Mcp-Param-") && !is_param_header("Mcp-Name"));
    }
}
