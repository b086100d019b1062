//! A modern (2026-07-28) upstream as a legacy client sees it: the session the gateway
//! synthesizes for it, and what of the modern era a legacy receiver lacks.
//!
//! - **`initialize`** is answered from the upstream's `server/discover` result
//!   ([`initialize_result`]): `serverInfo` from `_meta["io.modelcontextprotocol/serverInfo"]`,
//!   `instructions`, and the capabilities a legacy client can use ([`server_capabilities`]).
//! - **Results** carry `resultType` and, on cacheable ones, `ttlMs` and `cacheScope`; a
//!   legacy receiver lacks all three, and the server's identity in `_meta` ([`for_legacy`]).
//!   A result that is not `complete` (an extension task; an `InputRequiredResult` that
//!   reaches it, see below) is a shape a legacy client cannot read: its request fails with
//!   -32603 instead, where the session has not bridged it first (an extension task of a
//!   `tools/call`, see `tasks::bridge::extension`).
//! - **Methods 2026-07-28 removed** ([`removed`]): `ping` is answered by the gateway,
//!   `logging/setLevel` is kept by the session and sent as `_meta` `logLevel` on each
//!   request, and `notifications/roots/list_changed` is dropped (a modern server asks for
//!   roots per request, with MRTR). `resources/subscribe`/`unsubscribe`, replaced by
//!   `subscriptions/listen`, are kept by the link, which listens for them.
//!
//! Which capabilities the gateway declares to a modern upstream is [`client_capabilities`].
//! An `InputRequiredResult` is relayed to the client by the session (its input requests
//! become ordinary server requests, see `gateway::session::input_rounds`), or, for a hosted
//! task's background call, becomes the task's input (`tasks::hosted::rounds`); it reaches
//! [`for_legacy`] only where nothing can relay it: a request the session could not keep for
//! a retry (more than `max_in_flight` exchanges).

use super::{ResultType, key};
use crate::jsonrpc::{INTERNAL_ERROR, Method, RpcError};
use serde_json::{Map, Value, json};

/// What a legacy client's message becomes when its upstream is modern.
#[derive(Debug, PartialEq)]
pub enum Removed {
    /// The method exists in 2026-07-28 (or is not the era's concern): forward it.
    Forward,
    /// A request the gateway answers with this result.
    Answer(Value),
    /// `logging/setLevel`: the session keeps the level and answers `{}`.
    KeepLogLevel,
    /// A notification the era has not: dropped.
    Drop,
}

/// What becomes of a legacy client's `method` in front of a modern upstream. (Resource
/// subscriptions, which the era replaced with `subscriptions/listen`, are the link's: see
/// `upstream::link::resource_listen`.)
pub fn removed(method: Method) -> Removed {
    match method {
        Method::Ping => Removed::Answer(json!({})),
        Method::LoggingSetLevel => Removed::KeepLogLevel,
        Method::RootsListChanged => Removed::Drop,
        _ => Removed::Forward,
    }
}

/// The capabilities the gateway declares in a request's `_meta` to a modern upstream, from
/// the legacy client's own (`caps`, as its `initialize` declared them): `sampling`,
/// `elicitation` and `roots`, the input requests the gateway relays to the client (multi
/// round-trip requests, see `input`), so a modern server asks only for what the client can
/// answer. `sampling` and `elicitation` pass as the client declared them (`elicitation: {}`
/// is form mode in both eras; `url` only if the client has it); `roots` is `{}` (the era has
/// no `listChanged`). Nothing else here: the tasks extension is declared per request, where
/// the session follows the task (a `tools/call` retried after a -32021 naming it, a
/// 2025-11-25 client's task-augmented call, and the `tasks/*` requests that follow).
pub fn client_capabilities(caps: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for k in ["sampling", "elicitation"] {
        if let Some(c) = caps.get(k).filter(|c| c.is_object()) {
            out.insert(k.into(), c.clone());
        }
    }
    if caps.get("roots").is_some_and(Value::is_object) {
        out.insert("roots".into(), json!({}));
    }
    out
}

/// A modern `ServerCapabilities`, for a legacy client: without `extensions` (2026-07-28)
/// and `tasks` (not in the modern core). The `listChanged` flags and `resources.subscribe`
/// stay: the link listens for the list changes the server declares and for the uris its
/// sessions subscribe to (`subscriptions/listen`, `upstream::link::resource_listen`).
pub fn server_capabilities(caps: &Value) -> Value {
    let mut caps = caps.as_object().cloned().unwrap_or_default();
    caps.remove("extensions");
    caps.remove("tasks");
    Value::Object(caps)
}

/// The `initialize` result of the session the gateway synthesizes over a modern upstream, at
/// legacy version `version` (the session puts the client's own in its place). `fallback_name`
/// stands in `serverInfo` for a server that sent none.
pub fn initialize_result(d: &super::Discovery, version: &str, fallback_name: &str) -> Value {
    let mut r = Map::new();
    r.insert("protocolVersion".into(), version.into());
    r.insert("capabilities".into(), server_capabilities(&d.capabilities));
    let info = d
        .server_info
        .clone()
        .filter(|i| i.get("name").is_some_and(Value::is_string))
        .unwrap_or_else(|| json!({"name": fallback_name, "version": ""}));
    r.insert("serverInfo".into(), info);
    if let Some(i) = &d.instructions {
        r.insert("instructions".into(), i.clone().into());
    }
    Value::Object(r)
}

/// A response from a modern upstream, made fit for a legacy receiver: `Ok(edited)`, or the
/// error its request gets instead when the result is not one a legacy client can read.
pub fn for_legacy(msg: &mut Value) -> Result<bool, RpcError> {
    let Some(result) = msg.get_mut("result") else { return Ok(false) };
    match ResultType::of(result) {
        Ok(ResultType::Complete) => {}
        // Only where nothing relays it (the module's doc says where).
        Ok(ResultType::InputRequired) => {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "the upstream asked for input (a 2026-07-28 multi round-trip request) where the gateway cannot relay it to the client",
            ));
        }
        // The session bridges a task it can (a blocking `tools/call`, see
        // `tasks::bridge::extension`) before its answer gets here; one that still arrives
        // answers a request nothing follows as a task (not a `tools/call`, or one past the
        // limit of calls kept for a retry), and a legacy client cannot read it.
        Ok(ResultType::Task) => {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                "the upstream answered with a task of the io.modelcontextprotocol/tasks extension where the gateway follows none (only tools/call is bridged)",
            ));
        }
        Err(other) => {
            return Err(RpcError::new(
                INTERNAL_ERROR,
                format!("the upstream's result has an unknown resultType {other}"),
            ));
        }
    }
    let Some(obj) = result.as_object_mut() else { return Ok(false) };
    let mut edited = false;
    for k in ["resultType", "ttlMs", "cacheScope"] {
        edited |= obj.remove(k).is_some();
    }
    if let Some(meta) = obj.get_mut("_meta").and_then(Value::as_object_mut)
        && meta.remove(key::SERVER_INFO).is_some()
    {
        edited = true;
        if meta.is_empty() {
            obj.remove("_meta");
        }
    }
    Ok(edited)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::modern::read_discover_result;

    /// rmcp 3.11's discover answer (tests/interop/README.md, "What rmcp 3.11 sends").
    fn rmcp_discover() -> Value {
        json!({"resultType":"complete","supportedVersions":["2024-11-05","2025-03-26","2025-06-18","2025-11-25","2026-07-28"],
            "capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}},"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"logging":{}},
            "ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"taskgate-interop-rmcp-server","version":"0.1.0"}}})
    }

    #[test]
    fn initialize_is_synthesized_from_discover() {
        let d = read_discover_result(&rmcp_discover()).unwrap();
        let r = initialize_result(&d, "2025-06-18", "up");
        assert_eq!(
            r,
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {"listChanged": true},
                    "resources": {"subscribe": true, "listChanged": true}, "logging": {}},
                "serverInfo": {"name": "taskgate-interop-rmcp-server", "version": "0.1.0"}}),
            "no extensions; listChanged and subscribe are the link's listen"
        );
        let mut bare = d.clone();
        bare.server_info = None;
        bare.instructions = Some("be kind".into());
        let r = initialize_result(&bare, "2024-11-05", "up");
        assert_eq!((r["serverInfo"]["name"].as_str(), r["instructions"].as_str()), (Some("up"), Some("be kind")));
    }

    #[test]
    fn results_lose_what_legacy_lacks_and_other_shapes_fail() {
        let mut m = json!({"jsonrpc":"2.0","id":1,"result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private",
            "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}});
        assert_eq!(for_legacy(&mut m), Ok(true));
        assert_eq!(m["result"], json!({"tools": []}));
        let mut keep = json!({"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"x":1}}});
        assert_eq!(for_legacy(&mut keep), Ok(false));
        let mut err = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m"}});
        assert_eq!(for_legacy(&mut err), Ok(false), "errors pass as they are");
        for ty in ["input_required", "task", "later"] {
            let mut m = json!({"jsonrpc":"2.0","id":1,"result":{"resultType": ty}});
            assert_eq!(for_legacy(&mut m).unwrap_err().code, INTERNAL_ERROR, "{ty}");
        }
    }

    #[test]
    fn removed_methods() {
        assert_eq!(removed(Method::Ping), Removed::Answer(json!({})));
        assert_eq!(removed(Method::LoggingSetLevel), Removed::KeepLogLevel);
        assert_eq!(removed(Method::ResourcesSubscribe), Removed::Forward, "the link's, not refused");
        assert_eq!(removed(Method::RootsListChanged), Removed::Drop);
        assert_eq!(removed(Method::ToolsCall), Removed::Forward);
        assert!(client_capabilities(&json!({})).is_empty());
        let caps = json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true},
            "tasks": {"requests": {}}, "experimental": {"x": {}}});
        assert_eq!(
            Value::Object(client_capabilities(&caps)),
            json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}})
        );
        assert_eq!(Value::Object(client_capabilities(&json!({"elicitation": {}}))), json!({"elicitation": {}}));
    }
}
