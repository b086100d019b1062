//! A legacy upstream as a modern (2026-07-28) client sees it: what the gateway answers to
//! `server/discover`, what of a legacy server's messages a modern client can read, and which
//! of its requests the gateway refuses. The mirror of [`super::legacy`].
//!
//! - **`server/discover`** is answered from the upstream's `initialize` result, translated to
//!   2025-11-25 ([`discover_result`]): every version the gateway speaks, the server's
//!   identity in `_meta`, its instructions, and the capabilities a modern client can use
//!   ([`server_capabilities`]).
//! - **Results** get `resultType: "complete"`; tools lose `execution` (2026-07-28 has no
//!   `Tool.execution`) ([`for_modern`]).
//! - **Notifications**: only those of the request itself reach a modern client: progress,
//!   and log messages at or above the level its `_meta` asked for ([`reaches_modern`]).
//!   List changes and resource updates go only on a `subscriptions/listen` stream that asked
//!   for them ([`ListenFilter`]); so do the tasks extension's `notifications/tasks`, which
//!   the session makes (the upstream's core task status is not passed on as it is).
//! - **Requests the era removed** ([`refused`]): `ping`, `logging/setLevel`, resource
//!   subscriptions, core `tasks/result` and `tasks/list` get -32601; `initialize` is the
//!   legacy era's and never reaches a modern request's session.

use super::meta::LogLevel;
use super::{Discovery, advertised_versions};
use crate::jsonrpc::{METHOD_NOT_FOUND, Method, RpcError};
use serde_json::{Map, Value};

/// The capabilities a modern client is shown: the upstream's, without core `tasks` (not the
/// modern era's); `listChanged` and `resources.subscribe` stay, delivered on
/// `subscriptions/listen` ([`ListenFilter`]). `extensions` pass only from a modern upstream
/// (`keep_extensions`), whose requests the gateway relays as they are.
pub fn server_capabilities(caps: &Value, keep_extensions: bool) -> Value {
    let mut caps = caps.as_object().cloned().unwrap_or_default();
    caps.remove("tasks");
    if !keep_extensions {
        caps.remove("extensions");
    }
    Value::Object(caps)
}

/// What a `subscriptions/listen` stream carries (`params.notifications`, a
/// `SubscriptionFilter`): list changes by kind, updates of the listed resources, and (the
/// tasks extension's `taskIds`) `notifications/tasks` for the listed tasks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListenFilter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    pub uris: Vec<String>,
    pub task_ids: Vec<String>,
}

impl ListenFilter {
    /// Reads `params.notifications`: -32602 if it is missing or malformed, or lists more
    /// than `max_uris` resources or task ids; keys the gateway does not know (another
    /// extension's) are not granted.
    pub fn read(params: Option<&Value>, max_uris: usize) -> Result<ListenFilter, RpcError> {
        let bad = |why: &str| RpcError::new(crate::jsonrpc::INVALID_PARAMS, format!("subscriptions/listen: {why}"));
        let n = params.and_then(|p| p.get("notifications")).and_then(Value::as_object);
        let Some(n) = n else { return Err(bad("params.notifications must be an object")) };
        let flag = |k: &str| match n.get(k) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(&format!("notifications.{k} must be a boolean"))),
        };
        let strings = |k: &str| match n.get(k) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) if a.len() <= max_uris => a
                .iter()
                .map(|u| u.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad(&format!("notifications.{k} must hold strings"))),
            Some(Value::Array(_)) => Err(bad(&format!("at most {max_uris} {k}"))),
            Some(_) => Err(bad(&format!("notifications.{k} must be an array"))),
        };
        Ok(ListenFilter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris: strings("resourceSubscriptions")?,
            task_ids: strings("taskIds")?,
        })
    }

    /// What of it the upstream can deliver (by its capabilities). Task ids are the
    /// session's to grant, task by task (none here).
    pub fn granted(&self, caps: &Value) -> ListenFilter {
        let has = |p: &str| caps.pointer(p).is_some_and(|v| v.as_bool() == Some(true));
        ListenFilter {
            tools: self.tools && has("/tools/listChanged"),
            prompts: self.prompts && has("/prompts/listChanged"),
            resources: self.resources && has("/resources/listChanged"),
            uris: if has("/resources/subscribe") { self.uris.clone() } else { Vec::new() },
            task_ids: Vec::new(),
        }
    }

    /// As a `SubscriptionFilter` (only what is granted).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(k.into(), true.into());
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), self.uris.clone().into());
        }
        if !self.task_ids.is_empty() {
            m.insert("taskIds".into(), self.task_ids.clone().into());
        }
        Value::Object(m)
    }

    /// Whether a notification from the upstream belongs on the stream.
    pub fn carries(&self, method: Method, params: Option<&Value>) -> bool {
        match method {
            Method::ToolsListChanged => self.tools,
            Method::PromptsListChanged => self.prompts,
            Method::ResourcesListChanged => self.resources,
            Method::ResourcesUpdated => {
                let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str);
                uri.is_some_and(|u| self.uris.iter().any(|s| s == u))
            }
            _ => false,
        }
    }
}

/// The first message of a `subscriptions/listen` stream: what the gateway agreed to send.
pub fn acknowledged(granted: &ListenFilter, subscription: &Value) -> Value {
    let mut params = Map::new();
    params.insert("notifications".into(), granted.to_value());
    params.insert("_meta".into(), serde_json::json!({ super::key::SUBSCRIPTION_ID: subscription }));
    serde_json::json!({"jsonrpc": "2.0", "method": Method::SubscriptionsAcknowledged.as_str(), "params": params})
}

/// The answer that ends a `subscriptions/listen` stream on purpose (the server shuts down):
/// the empty `SubscriptionsListenResult`, tagged like the stream's notifications. A stream
/// that ends without it ended by accident; its client listens again.
pub fn listen_ended(subscription: &Value) -> Value {
    serde_json::json!({
        "resultType": super::ResultType::Complete.as_str(),
        "_meta": { super::key::SUBSCRIPTION_ID: subscription },
    })
}

/// Tags a notification with the stream it goes on (`_meta` subscriptionId).
pub fn tag_subscription(msg: &mut Value, subscription: &Value) {
    let Some(m) = msg.as_object_mut() else { return };
    let params = m.entry("params").or_insert_with(|| Value::Object(Map::new()));
    let Some(p) = params.as_object_mut() else { return };
    let meta = p.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(super::key::SUBSCRIPTION_ID.into(), subscription.clone());
    }
}

/// Takes a notification's stream tag (`_meta` subscriptionId) away, and `_meta` with it if
/// nothing else was in it.
pub fn untag_subscription(msg: &mut Value) {
    let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) else { return };
    let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) else { return };
    meta.remove(super::key::SUBSCRIPTION_ID);
    if meta.is_empty() {
        params.remove("_meta");
    }
}

/// The `server/discover` result, from the upstream's `initialize` result (as 2025-11-25 has
/// it). Not cacheable (`ttlMs: 0`): a relinked upstream may say otherwise.
pub fn discover_result(initialize: &Value, keep_extensions: bool) -> Value {
    let d = Discovery {
        supported_versions: advertised_versions().into_iter().map(str::to_string).collect(),
        capabilities: server_capabilities(initialize.get("capabilities").unwrap_or(&Value::Null), keep_extensions),
        instructions: initialize.get("instructions").and_then(Value::as_str).map(str::to_string),
        server_info: initialize.get("serverInfo").filter(|i| i.is_object()).cloned(),
        ttl_ms: 0,
        cache_scope: super::CacheScope::Private,
    };
    super::discover_result(&d)
}

/// The results that are `CacheableResult`s in 2026-07-28 (`ttlMs` and `cacheScope`
/// required), besides `server/discover`'s.
const CACHEABLE: [Method; 5] = [
    Method::ToolsList,
    Method::PromptsList,
    Method::ResourcesList,
    Method::ResourcesTemplatesList,
    Method::ResourcesRead,
];

/// An error for a modern client, in the codes 2026-07-28 allows: "resource not found" is
/// -32602 (it was -32002); -32042 (URL elicitation required), which the era must not send,
/// and the legacy, implementation-defined range -32000..-32019 (an upstream's, or the
/// gateway's own: a closed upstream, a timeout, a limit) become -32603 with the message kept
/// and the code it had in `data.originalCode`. Every other passes as it is. `true` if it was
/// rewritten.
pub fn error_for_modern(msg: &mut Value) -> bool {
    let Some(err) = msg.get_mut("error").and_then(Value::as_object_mut) else { return false };
    let Some(code) = err.get("code").and_then(Value::as_i64) else { return false };
    if !needs_modern_code(code) {
        return false;
    }
    if code == RESOURCE_NOT_FOUND {
        err.insert("code".into(), crate::jsonrpc::INVALID_PARAMS.into());
        return true;
    }
    err.insert("code".into(), crate::jsonrpc::INTERNAL_ERROR.into());
    match err.get_mut("data") {
        Some(Value::Object(data)) => {
            data.entry("originalCode").or_insert(code.into());
        }
        None | Some(Value::Null) => {
            err.insert("data".into(), serde_json::json!({"originalCode": code}));
        }
        // Data of another shape is the sender's: kept as it is.
        Some(_) => {}
    }
    true
}

/// Whether an error code is one a modern client must not get as it is (see
/// [`error_for_modern`]).
pub fn needs_modern_code(code: i64) -> bool {
    code == URL_ELICITATION_REQUIRED || (-32019..=-32000).contains(&code)
}

/// URL-mode elicitation required (2025-11-25), which 2026-07-28 carries as an input request.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The legacy code for an unknown resource (`resources/read`), before 2026-07-28.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// A response for a modern client (`answers`: the method of its request, where known):
/// `resultType` set where absent, a cacheable result marked not to be cached (a legacy
/// server says nothing of how long its lists hold, and another client's may differ), and
/// `execution` gone from listed tools, as are tools whose `x-mcp-header` declarations break
/// the rules. Errors pass.
pub fn for_modern(msg: &mut Value, answers: Option<Method>) {
    let Some(result) = msg.get_mut("result") else { return };
    super::fill_result_type(result);
    if let Some(obj) = result.as_object_mut()
        && answers.is_some_and(|m| CACHEABLE.contains(&m))
    {
        obj.entry("ttlMs").or_insert(0.into());
        obj.entry("cacheScope").or_insert(super::CacheScope::Private.as_str().into());
    }
    if answers == Some(Method::ToolsList) {
        // The gateway is the server that processes their headers: one it could not check
        // is not offered.
        super::headers::drop_invalid_declarations(result);
        if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
            for t in tools.iter_mut().filter_map(Value::as_object_mut) {
                t.remove("execution");
            }
        }
    }
}

/// Whether a notification from the upstream reaches a modern client: only one sent while
/// serving its request (`related`), and a log message only at or above `level` (none when
/// the request asked for none).
pub fn reaches_modern(method: Method, params: Option<&Value>, related: bool, level: Option<LogLevel>) -> bool {
    if !related {
        return false;
    }
    match method {
        Method::Progress => true,
        Method::LogMessage => {
            let got = params.and_then(|p| p.get("level")).and_then(Value::as_str).and_then(LogLevel::parse);
            matches!((got, level), (Some(got), Some(min)) if got >= min)
        }
        _ => false,
    }
}

/// The error a modern client's request gets when its method is not the modern era's (`None`:
/// serve it).
pub fn refused(method: Method, name: &str) -> Option<RpcError> {
    let why = match method {
        Method::Ping | Method::LoggingSetLevel => "2026-07-28 removed it",
        Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            "2026-07-28 replaced resource subscriptions with subscriptions/listen (not served by this gateway yet)"
        }
        Method::TasksResult | Method::TasksList => "the tasks extension of 2026-07-28 has no such method",
        Method::Initialize => "an initialize selects the legacy era: send it without modern _meta",
        _ => return None,
    };
    Some(RpcError::new(METHOD_NOT_FOUND, format!("{name}: {why}")))
}

/// Removes `params.task` (2025-11-25 task augmentation, which 2026-07-28 servers "MUST
/// ignore"): a legacy upstream must not see a task asked for on a modern client's behalf.
pub fn strip_task_param(request: &mut Value) {
    if let Some(p) = request.get_mut("params").and_then(Value::as_object_mut) {
        p.remove("task");
    }
}

/// The client capabilities of a modern request, as the session keeps them (its legacy
/// `initialize` params' shape, `{"capabilities": …}`).
pub fn init_params(capabilities: &Map<String, Value>) -> Value {
    let mut p = Map::new();
    p.insert("capabilities".into(), Value::Object(capabilities.clone()));
    Value::Object(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn discover_from_an_initialize_result() {
        let init = json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}, "logging": {},
                "tasks": {"list": {}, "requests": {"tools": {"call": {}}}}, "extensions": {"x": {}}},
            "serverInfo": {"name": "demo", "version": "1"}, "instructions": "be brief"});
        let d = discover_result(&init, false);
        assert_eq!(d["resultType"], "complete");
        assert_eq!(d["supportedVersions"][0], "2026-07-28");
        assert!(d["supportedVersions"].as_array().unwrap().iter().any(|v| v == "2024-11-05"), "dual era: {d}");
        assert_eq!(
            d["capabilities"],
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}, "logging": {}})
        );
        assert_eq!(d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "demo");
        assert_eq!(d["instructions"], "be brief");
        assert_eq!((d["ttlMs"].as_u64(), d["cacheScope"].as_str()), (Some(0), Some("private")));
        assert!(d.get("serverInfo").is_none() && d.get("protocolVersion").is_none());
        let kept = discover_result(&init, true);
        assert_eq!(kept["capabilities"]["extensions"], json!({"x": {}}));
    }

    #[test]
    fn results_get_their_type_and_tools_lose_execution() {
        let mut m = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a", "execution": {"taskSupport": "optional"}}]}});
        for_modern(&mut m, Some(Method::parse("tools/list")));
        assert_eq!(
            m["result"],
            json!({"tools": [{"name": "a"}], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}});
        for_modern(&mut call, Some(Method::parse("tools/call")));
        assert_eq!(call["result"], json!({"content": [], "resultType": "complete"}), "not cacheable");
        let mut typed = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required"}});
        for_modern(&mut typed, Some(Method::parse("tools/call")));
        assert_eq!(typed["result"]["resultType"], "input_required");
        let mut err = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "m"}});
        for_modern(&mut err, None);
        assert!(err.get("result").is_none() && err["error"].get("resultType").is_none());
    }

    #[test]
    fn resource_not_found_takes_the_eras_code() {
        let mut e = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32002, "message": "no such resource"}});
        assert!(error_for_modern(&mut e));
        assert_eq!(e["error"]["code"], -32602);
        let mut other = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "m"}});
        assert!(!error_for_modern(&mut other));
    }

    #[test]
    fn legacy_range_and_url_elicitation_codes_become_internal_errors_that_keep_what_they_were() {
        for code in [-32000, -32001, -32004, -32019, -32042] {
            let mut e = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "upstream timed out"}});
            assert!(error_for_modern(&mut e), "{code}");
            assert_eq!(e["error"]["code"], -32603, "{code}");
            assert_eq!(e["error"]["message"], "upstream timed out");
            assert_eq!(e["error"]["data"]["originalCode"], code);
        }
        let mut with_data =
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32042, "message": "m", "data": {"elicitations": []}}});
        assert!(error_for_modern(&mut with_data));
        assert_eq!(with_data["error"]["data"], json!({"elicitations": [], "originalCode": -32042}));
        for code in [-32020, -32021, -32022, -32600, -32601, -32602, -32603, -31999, -32099, 1] {
            let mut e = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}});
            assert!(!error_for_modern(&mut e), "{code} passes as it is");
        }
    }

    #[test]
    fn only_the_requests_own_notifications_reach_it() {
        let log = |l: &str| json!({"level": l, "data": "x"});
        assert!(reaches_modern(Method::Progress, None, true, None));
        assert!(!reaches_modern(Method::Progress, None, false, None));
        assert!(!reaches_modern(Method::LogMessage, Some(&log("error")), true, None), "no level asked: no logs");
        assert!(reaches_modern(Method::LogMessage, Some(&log("error")), true, Some(LogLevel::Warning)));
        assert!(!reaches_modern(Method::LogMessage, Some(&log("info")), true, Some(LogLevel::Warning)));
        assert!(!reaches_modern(Method::ToolsListChanged, None, true, None));
        assert!(!reaches_modern(Method::TaskStatus, None, true, None));
    }

    #[test]
    fn removed_methods_are_refused() {
        for (m, n) in [
            (Method::Ping, "ping"),
            (Method::LoggingSetLevel, "logging/setLevel"),
            (Method::ResourcesSubscribe, "resources/subscribe"),
            (Method::TasksResult, "tasks/result"),
            (Method::TasksList, "tasks/list"),
        ] {
            assert_eq!(refused(m, n).map(|e| e.code), Some(METHOD_NOT_FOUND), "{n}");
        }
        assert!(refused(Method::ToolsCall, "tools/call").is_none());
        assert!(refused(Method::TasksGet, "tasks/get").is_none());
        assert!(refused(Method::Other, "subscriptions/listen").is_none());
    }

    #[test]
    fn listen_filters_are_read_granted_and_applied() {
        let params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["demo://a"], "taskIds": ["t"]}});
        let f = ListenFilter::read(Some(&params), 8).unwrap();
        let asked = ListenFilter {
            tools: true,
            prompts: true,
            resources: false,
            uris: vec!["demo://a".into()],
            task_ids: vec!["t".into()],
        };
        assert_eq!(f, asked);
        let caps = json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}});
        let mut g = f.granted(&caps);
        assert_eq!(
            g.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["demo://a"]}),
            "tasks: the session's to grant"
        );
        g.task_ids = vec!["t".into()];
        assert_eq!(g.to_value()["taskIds"], json!(["t"]));
        g.task_ids.clear();
        assert!(g.carries(Method::parse("notifications/tools/list_changed"), None));
        assert!(!g.carries(Method::parse("notifications/prompts/list_changed"), None), "not granted");
        assert!(g.carries(Method::parse("notifications/resources/updated"), Some(&json!({"uri": "demo://a"}))));
        assert!(!g.carries(Method::parse("notifications/resources/updated"), Some(&json!({"uri": "demo://b"}))));
        assert!(!g.carries(Method::parse("notifications/progress"), None));
        for bad in [
            json!({}),
            json!({"notifications": []}),
            json!({"notifications": {"toolsListChanged": 1}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"resourceSubscriptions": ["a", "b", "c"]}}),
            json!({"notifications": {"taskIds": "t"}}),
            json!({"notifications": {"taskIds": [1]}}),
            json!({"notifications": {"taskIds": ["a", "b", "c"]}}),
        ] {
            assert_eq!(ListenFilter::read(Some(&bad), 2).unwrap_err().code, crate::jsonrpc::INVALID_PARAMS, "{bad}");
        }
        let ack = acknowledged(&g, &json!(7));
        assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 7);
        let mut n = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        tag_subscription(&mut n, &json!("s"));
        assert_eq!(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "s");
    }
}
