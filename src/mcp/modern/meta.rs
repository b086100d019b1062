//! A modern request's per-request fields in `params._meta`: read once into [`RequestMeta`]
//! (what the legacy era said once in `initialize`), and written back for a modern upstream.
//!
//! Required on every request: `io.modelcontextprotocol/protocolVersion` and
//! `io.modelcontextprotocol/clientCapabilities`; missing either is -32602. Optional:
//! `io.modelcontextprotocol/clientInfo` and `io.modelcontextprotocol/logLevel`. A version the
//! gateway does not serve statelessly is -32022. `server/discover` is a request like any
//! other here: its params are `RequestParams`, so it carries the same fields.
//!
//! Capabilities are per request: "Servers MUST NOT infer capabilities from prior requests".
//! A session serving a modern client reads them from each request, never from the last one.

use super::{MODERN_VERSIONS, ModernError, key};
use serde_json::{Map, Value};

/// `LoggingLevel`, lowest first (RFC 5424 severities).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    pub fn parse(s: &str) -> Option<LogLevel> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

/// The per-request fields of one modern request.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestMeta {
    /// One of [`MODERN_VERSIONS`].
    pub version: &'static str,
    /// The client's `ClientCapabilities` for this request (`{}`: none).
    pub capabilities: Map<String, Value>,
    /// The client's `Implementation`, as sent (`name` and `version` checked to be strings).
    pub client_info: Option<Value>,
    /// `None`: the server must send no `notifications/message` for this request.
    pub log_level: Option<LogLevel>,
}

/// Whether a request is modern: its `params._meta` names a protocol version. This is how a
/// dual-era front tells the eras apart per request ("A request carrying modern per-request
/// `_meta` is served statelessly"; an `initialize` selects legacy semantics).
pub fn is_modern(params: Option<&Value>) -> bool {
    params.and_then(|p| p.get("_meta")).and_then(|m| m.get(key::PROTOCOL_VERSION)).is_some()
}

impl RequestMeta {
    /// Reads the fields from a request's `params`: -32602 for a missing or malformed field,
    /// -32022 for a version the gateway does not serve. The version is checked first: what
    /// else a request must carry is that version's to say.
    pub fn read(params: Option<&Value>) -> Result<RequestMeta, ModernError> {
        let meta = params.and_then(|p| p.get("_meta")).and_then(Value::as_object);
        let field = |k: &'static str| meta.and_then(|m| m.get(k));
        let requested = match field(key::PROTOCOL_VERSION) {
            None => return Err(ModernError::MissingMeta(key::PROTOCOL_VERSION)),
            Some(Value::String(s)) => s,
            Some(_) => return Err(ModernError::BadMeta { field: key::PROTOCOL_VERSION, why: "must be a string" }),
        };
        let version = MODERN_VERSIONS
            .into_iter()
            .find(|v| v == requested)
            .ok_or_else(|| ModernError::UnsupportedVersion { requested: requested.clone() })?;
        let capabilities = match field(key::CLIENT_CAPABILITIES) {
            None => return Err(ModernError::MissingMeta(key::CLIENT_CAPABILITIES)),
            Some(Value::Object(c)) => c.clone(),
            Some(_) => return Err(ModernError::BadMeta { field: key::CLIENT_CAPABILITIES, why: "must be an object" }),
        };
        let client_info = match field(key::CLIENT_INFO) {
            None => None,
            Some(info) if ["name", "version"].iter().all(|k| info.get(k).is_some_and(Value::is_string)) => {
                Some(info.clone())
            }
            Some(_) => {
                return Err(ModernError::BadMeta {
                    field: key::CLIENT_INFO,
                    why: "must be an object with string name and version",
                });
            }
        };
        let log_level = match field(key::LOG_LEVEL) {
            None => None,
            Some(l) => Some(l.as_str().and_then(LogLevel::parse).ok_or(ModernError::BadMeta {
                field: key::LOG_LEVEL,
                why: "must be one of debug, info, notice, warning, error, critical, alert, emergency",
            })?),
        };
        Ok(RequestMeta { version, capabilities, client_info, log_level })
    }

    /// Whether the client declared an extension (`capabilities.extensions[id]`, an object).
    pub fn has_extension(&self, id: &str) -> bool {
        self.capabilities.get("extensions").and_then(|e| e.get(id)).is_some_and(Value::is_object)
    }

    /// Writes the fields into a request's `params._meta` (creating `params` and `_meta` as
    /// needed), replacing those keys and leaving every other `_meta` key as it was.
    pub fn write_into(&self, request: &mut Value) {
        let Some(msg) = request.as_object_mut() else { return };
        let params = msg.entry("params").or_insert_with(|| Value::Object(Map::new()));
        let Some(params) = params.as_object_mut() else { return };
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        let Some(meta) = meta.as_object_mut() else { return };
        meta.insert(key::PROTOCOL_VERSION.into(), self.version.into());
        meta.insert(key::CLIENT_CAPABILITIES.into(), Value::Object(self.capabilities.clone()));
        match &self.client_info {
            Some(info) => meta.insert(key::CLIENT_INFO.into(), info.clone()),
            None => meta.remove(key::CLIENT_INFO),
        };
        match self.log_level {
            Some(l) => meta.insert(key::LOG_LEVEL.into(), l.as_str().into()),
            None => meta.remove(key::LOG_LEVEL),
        };
    }
}

/// Removes the per-request fields from a request's `params._meta`, for a legacy receiver
/// (which learnt them in `initialize`); `_meta` goes too if that empties it.
pub fn strip(request: &mut Value) {
    let Some(params) = request.get_mut("params").and_then(Value::as_object_mut) else { return };
    let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) else { return };
    for k in [key::PROTOCOL_VERSION, key::CLIENT_CAPABILITIES, key::CLIENT_INFO, key::LOG_LEVEL] {
        meta.remove(k);
    }
    if meta.is_empty() {
        params.remove("_meta");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `tools/call` of `basic/transports/streamable-http.mdx` ("Standard Request Headers").
    fn weather() -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "get_weather",
            "arguments": {"location": "Seattle, WA"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "ExampleClient", "version": "1.0.0"},
                "io.modelcontextprotocol/clientCapabilities": {}
            }
        }})
    }

    fn with_meta(k: &str, v: Value) -> Value {
        let mut r = weather();
        r["params"]["_meta"][k] = v;
        r
    }

    fn without_meta(k: &str) -> Value {
        let mut r = weather();
        r["params"]["_meta"].as_object_mut().unwrap().remove(k);
        r
    }

    #[test]
    fn reads_the_spec_example() {
        let r = weather();
        assert!(is_modern(r.get("params")));
        let m = RequestMeta::read(r.get("params")).unwrap();
        assert_eq!(m.version, "2026-07-28");
        assert!(m.capabilities.is_empty());
        assert_eq!(m.client_info, Some(json!({"name": "ExampleClient", "version": "1.0.0"})));
        assert_eq!(m.log_level, None);
        assert!(!m.has_extension("io.modelcontextprotocol/tasks"));
        let r = with_meta(key::CLIENT_CAPABILITIES, json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
        assert!(RequestMeta::read(r.get("params")).unwrap().has_extension("io.modelcontextprotocol/tasks"));
        let r = with_meta(key::LOG_LEVEL, json!("warning"));
        assert_eq!(RequestMeta::read(r.get("params")).unwrap().log_level, Some(LogLevel::Warning));
        assert!(LogLevel::Debug < LogLevel::Emergency);
    }

    #[test]
    fn missing_and_malformed_fields_are_invalid_params() {
        use ModernError::*;
        let read = |r: Value| RequestMeta::read(r.get("params")).unwrap_err();
        let e = read(without_meta(key::PROTOCOL_VERSION));
        assert_eq!((e.clone(), e.code()), (MissingMeta(key::PROTOCOL_VERSION), -32602));
        assert_eq!(read(without_meta(key::CLIENT_CAPABILITIES)), MissingMeta(key::CLIENT_CAPABILITIES));
        assert_eq!(read(json!({"method": "tools/list"})), MissingMeta(key::PROTOCOL_VERSION));
        assert_eq!(read(json!({"method": "tools/list", "params": {"_meta": []}})), MissingMeta(key::PROTOCOL_VERSION));
        for (k, v) in [
            (key::PROTOCOL_VERSION, json!(20260728)),
            (key::CLIENT_CAPABILITIES, json!([])),
            (key::CLIENT_INFO, json!("ExampleClient")),
            (key::CLIENT_INFO, json!({"name": "ExampleClient"})),
            (key::LOG_LEVEL, json!("verbose")),
        ] {
            let e = read(with_meta(k, v));
            assert!(matches!(e, BadMeta { field, .. } if field == k), "{k}: {e:?}");
            assert_eq!(e.code(), -32602);
        }
        let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}});
        assert!(!is_modern(Some(&initialize)));
    }

    #[test]
    fn an_unsupported_version_is_minus_32022_before_anything_else() {
        let mut r = with_meta(key::PROTOCOL_VERSION, json!("1900-01-01"));
        r["params"]["_meta"].as_object_mut().unwrap().remove(key::CLIENT_CAPABILITIES);
        let e = RequestMeta::read(r.get("params")).unwrap_err();
        assert_eq!(e, ModernError::UnsupportedVersion { requested: "1900-01-01".into() });
        assert_eq!(e.code(), -32022);
        let legacy = with_meta(key::PROTOCOL_VERSION, json!("2025-11-25"));
        assert_eq!(RequestMeta::read(legacy.get("params")).unwrap_err().code(), -32022, "legacy needs initialize");
    }

    #[test]
    fn written_back_and_stripped_without_touching_other_keys() {
        let m = RequestMeta::read(weather().get("params")).unwrap();
        let mut up = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        m.write_into(&mut up);
        assert_eq!(RequestMeta::read(up.get("params")).unwrap(), m);
        let mut r = weather();
        r["params"]["_meta"]["progressToken"] = json!("p");
        let mut quiet = m.clone();
        quiet.client_info = None;
        quiet.write_into(&mut r);
        assert!(r["params"]["_meta"].get(key::CLIENT_INFO).is_none());
        assert_eq!(r["params"]["_meta"]["progressToken"], "p");
        strip(&mut r);
        assert_eq!(r["params"]["_meta"], json!({"progressToken": "p"}));
        let mut r = weather();
        strip(&mut r);
        assert!(r["params"].get("_meta").is_none());
        assert_eq!(r["params"]["name"], "get_weather");
    }
}
