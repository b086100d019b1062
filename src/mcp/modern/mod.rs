//! The 2026-07-28 era ("modern"): the facts of it the gateway acts on, named once.
//!
//! A modern peer has no `initialize` and no session. Every request carries its protocol
//! version, the client's capabilities and (optionally) its identity and log level in
//! `params._meta` ([`meta`]); over Streamable HTTP, selected body fields are mirrored into
//! headers that must agree with the body ([`headers`]); every result names its shape in
//! `resultType` ([`ResultType`]); a server answers `server/discover` with the versions it
//! speaks ([`discover_result`]); and three error codes are the era's own ([`ModernError`]).
//!
//! Read from `schema/2026-07-28/schema.ts` (`RequestMetaObject`, `ResultType`, `Result`, the
//! MCP error codes, `DiscoverResult`, `CacheableResult`) and from the 2026-07-28 pages
//! `basic/index.mdx` (per-request fields, -32602 for a missing one), `basic/versioning.mdx`
//! (-32022 and its `data`) and `basic/transports/streamable-http.mdx` (the headers).
//!
//! # How the era will join [`ProtocolVersion`](super::ProtocolVersion)
//!
//! Not yet: `ProtocolVersion::LATEST` is what the gateway offers in `initialize`, and the
//! modern era has no `initialize`. Adding `V2026_07_28` to that enum today would make the
//! handshake offer a version that cannot be negotiated that way. When the session learns the
//! modern era, the version type grows an era: `ProtocolVersion::era()` returning `Legacy` for
//! the four handshake versions and `Modern` for 2026-07-28, `LATEST` split into
//! `LATEST_LEGACY` (what `initialize` offers) and `LATEST` (what `server/discover` lists
//! first), and [`MODERN_VERSIONS`] becomes the modern members of `ProtocolVersion::ALL`.
//! Until then the modern version is the string [`VERSION`] here, and nothing outside this
//! module knows it.

pub mod client;
pub mod headers;
pub mod input;
pub mod legacy;
pub mod meta;

use crate::jsonrpc::{INVALID_PARAMS, RpcError};
use serde_json::{Map, Value, json};

/// The modern protocol version this gateway implements.
pub const VERSION: &str = "2026-07-28";

/// The modern versions a request's `_meta` may name, newest first.
pub const MODERN_VERSIONS: [&str; 1] = [VERSION];

/// Every version the gateway speaks, newest first, modern then legacy: what `server/discover`
/// lists in `supportedVersions` and -32022 lists in `data.supported`. (The spec's own example
/// of -32022 lists a legacy version beside the modern one: a dual-era server names both.)
pub fn advertised_versions() -> Vec<&'static str> {
    let mut all: Vec<&'static str> = MODERN_VERSIONS.to_vec();
    all.extend(super::ProtocolVersion::ALL.iter().rev().map(|v| v.as_str()));
    all
}

/// The `_meta` keys the 2026-07-28 core defines (`basic/index.mdx`, "Reserved keys").
pub mod key {
    /// Request: the protocol version of this request. Required.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// Request: the client's `Implementation` (`name`, `version`). Optional (SHOULD).
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// Request: the client's capabilities for this request. Required (`{}` for none).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Request: the minimum log level for this request's `notifications/message`. Optional;
    /// absent means no log messages at all. Deprecated in 2026-07-28 (SEP-2577).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// Notification on a `subscriptions/listen` stream (and that stream's closing result):
    /// the id of the `subscriptions/listen` request.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// Result: the server's `Implementation`. Optional (SHOULD, on every result).
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    // `progressToken` is reserved too, unprefixed and as in every era (`jsonrpc` reads it).
}

/// `HeaderMismatch`: HTTP headers disagree with the body, or a required one is missing or
/// malformed (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// `MissingRequiredClientCapability`: the request needs a capability its `_meta` did not
/// declare; `data.requiredCapabilities` names it (HTTP 400).
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// `UnsupportedProtocolVersion`: `data {supported: string[], requested: string}` (HTTP 400).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// Why a modern request is refused before it is served. Each maps to one JSON-RPC error
/// ([`ModernError::to_rpc`]), and over HTTP every one of them is a `400 Bad Request`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModernError {
    /// A required per-request `_meta` field is absent (or `params`/`_meta` itself): -32602.
    #[error("invalid params: missing params._meta[\"{0}\"]")]
    MissingMeta(&'static str),
    /// A per-request `_meta` field has the wrong shape: -32602.
    #[error("invalid params: params._meta[\"{field}\"] {why}")]
    BadMeta { field: &'static str, why: &'static str },
    /// The version in `_meta` is not one the gateway serves statelessly: -32022. A legacy
    /// version is one the gateway speaks, but only after `initialize`; the message says so.
    #[error("unsupported protocol version: {requested}{}", legacy_hint(requested))]
    UnsupportedVersion { requested: String },
    /// A header is missing, malformed or disagrees with the body: -32020.
    #[error("header mismatch: {0}")]
    HeaderMismatch(#[from] HeaderProblem),
    /// Serving the request needs a capability the client did not declare: -32021.
    /// `required` is a `ClientCapabilities` object naming what is missing.
    #[error("missing required client capability")]
    MissingCapability { required: Value },
}

fn legacy_hint(requested: &str) -> &'static str {
    match super::ProtocolVersion::parse(requested) {
        Some(_) => " in per-request _meta (it is served after initialize)",
        None => "",
    }
}

impl ModernError {
    pub fn code(&self) -> i64 {
        match self {
            ModernError::MissingMeta(_) | ModernError::BadMeta { .. } => INVALID_PARAMS,
            ModernError::UnsupportedVersion { .. } => UNSUPPORTED_PROTOCOL_VERSION,
            ModernError::HeaderMismatch(_) => HEADER_MISMATCH,
            ModernError::MissingCapability { .. } => MISSING_REQUIRED_CLIENT_CAPABILITY,
        }
    }

    /// The JSON-RPC error, with the `data` the schema defines for -32021 and -32022.
    pub fn to_rpc(&self) -> RpcError {
        let mut e = RpcError::new(self.code(), self.to_string());
        e.data = match self {
            ModernError::UnsupportedVersion { requested } => {
                Some(Box::new(json!({"supported": advertised_versions(), "requested": requested})))
            }
            ModernError::MissingCapability { required } => Some(Box::new(json!({"requiredCapabilities": required}))),
            _ => None,
        };
        e
    }
}

/// Why a request's mirrored headers do not fit its body ([`headers::check`]): -32020,
/// HTTP 400.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderProblem {
    #[error("the {0} header is required")]
    Missing(&'static str),
    #[error("the {header} header is malformed: {why}")]
    Invalid { header: &'static str, why: &'static str },
    #[error("the {header} header says '{header_value}' but the body says '{body_value}'")]
    Mismatch { header: &'static str, header_value: String, body_value: String },
    /// An `Mcp-Param-{Name}` header a tool's `x-mcp-header` declares: `problem` says what
    /// is wrong with it (missing, malformed, or not what the body says).
    #[error("the {header} header {problem}")]
    Param { header: String, problem: String },
}

/// Whether a JSON-RPC error object is one only a modern server sends. A dual-era client
/// (the gateway probing an upstream) stays modern on one of these and falls back to
/// `initialize` on anything else (`basic/versioning.mdx`, "Backward Compatibility").
pub fn is_modern_error(error: &Value) -> bool {
    let code = error.get("code").and_then(Value::as_i64);
    match code {
        Some(HEADER_MISMATCH | MISSING_REQUIRED_CLIENT_CAPABILITY) => true,
        Some(UNSUPPORTED_PROTOCOL_VERSION) => error.pointer("/data/supported").is_some_and(Value::is_array),
        _ => false,
    }
}

/// `Result.resultType`: which shape a result has. Required on every modern result; a result
/// without it (from a legacy peer) counts as [`ResultType::Complete`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultType {
    /// The final result of the request.
    Complete,
    /// An `InputRequiredResult` (multi round-trip): `inputRequests` and/or `requestState`;
    /// the client retries the request, with a new id, carrying `inputResponses`.
    InputRequired,
    /// A `CreateTaskResult` of the tasks extension (only where the client declared it).
    Task,
}

impl ResultType {
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::Complete => "complete",
            ResultType::InputRequired => "input_required",
            ResultType::Task => "task",
        }
    }

    /// The shape a result declares: absent is `Complete`; a value the gateway does not know
    /// is `Err` with it (a client "MUST" treat an unknown `resultType` as invalid).
    pub fn of(result: &Value) -> Result<ResultType, String> {
        match result.get("resultType") {
            None => Ok(ResultType::Complete),
            Some(Value::String(s)) => match s.as_str() {
                "complete" => Ok(ResultType::Complete),
                "input_required" => Ok(ResultType::InputRequired),
                "task" => Ok(ResultType::Task),
                other => Err(other.to_string()),
            },
            Some(other) => Err(other.to_string()),
        }
    }
}

/// Sets `resultType` on a result object, replacing any there.
pub fn set_result_type(result: &mut Value, ty: ResultType) {
    if let Some(obj) = result.as_object_mut() {
        obj.insert("resultType".into(), ty.as_str().into());
    }
}

/// A legacy result on its way to a modern receiver: `"complete"` unless it names a type.
pub fn fill_result_type(result: &mut Value) {
    if let Some(obj) = result.as_object_mut() {
        obj.entry("resultType").or_insert_with(|| ResultType::Complete.as_str().into());
    }
}

/// `CacheableResult.cacheScope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheScope {
    /// No user-specific data: any cache may share it across authorization contexts.
    Public,
    /// Reusable only within the same authorization context.
    Private,
}

impl CacheScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// What a `server/discover` answer says. `DiscoverResult extends CacheableResult`:
/// `supportedVersions`, `capabilities` and `instructions?` of its own, the required `ttlMs`
/// and `cacheScope` of a cacheable result, and the server's identity in
/// `_meta["io.modelcontextprotocol/serverInfo"]` (there is no `serverInfo` member).
#[derive(Clone, Debug, PartialEq)]
pub struct Discovery {
    pub supported_versions: Vec<String>,
    /// A modern `ServerCapabilities` object (extensions included).
    pub capabilities: Value,
    pub instructions: Option<String>,
    pub server_info: Option<Value>,
    /// How long a client may cache the answer, in milliseconds (0: always re-fetch).
    pub ttl_ms: u64,
    pub cache_scope: CacheScope,
}

/// The `result` of a `server/discover` response.
pub fn discover_result(d: &Discovery) -> Value {
    let mut r = Map::new();
    r.insert("resultType".into(), ResultType::Complete.as_str().into());
    r.insert("supportedVersions".into(), json!(d.supported_versions));
    r.insert("capabilities".into(), d.capabilities.clone());
    if let Some(i) = &d.instructions {
        r.insert("instructions".into(), i.clone().into());
    }
    r.insert("ttlMs".into(), d.ttl_ms.into());
    r.insert("cacheScope".into(), d.cache_scope.as_str().into());
    if let Some(info) = &d.server_info {
        r.insert("_meta".into(), json!({ key::SERVER_INFO: info }));
    }
    Value::Object(r)
}

/// Reads an upstream's `server/discover` result. Only what the gateway needs is required
/// (`supportedVersions`, an array of strings; `capabilities`, an object); a missing
/// `ttlMs`/`cacheScope` reads as "do not cache" (0, private) rather than failing the probe.
/// `Err` says what is wrong, for the error the caller makes of it.
pub fn read_discover_result(result: &Value) -> Result<Discovery, &'static str> {
    let versions =
        result.get("supportedVersions").and_then(Value::as_array).ok_or("supportedVersions must be an array")?;
    let supported_versions = versions
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<Vec<_>>>()
        .ok_or("supportedVersions must hold strings")?;
    let capabilities =
        result.get("capabilities").filter(|c| c.is_object()).cloned().ok_or("capabilities must be an object")?;
    Ok(Discovery {
        supported_versions,
        capabilities,
        instructions: result.get("instructions").and_then(Value::as_str).map(str::to_string),
        server_info: result.pointer("/_meta").and_then(|m| m.get(key::SERVER_INFO)).cloned(),
        ttl_ms: result.get("ttlMs").and_then(Value::as_u64).unwrap_or(0),
        cache_scope: match result.get("cacheScope").and_then(Value::as_str) {
            Some("public") => CacheScope::Public,
            _ => CacheScope::Private,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_under_the_reserved_prefix() {
        let keys = [
            key::PROTOCOL_VERSION,
            key::CLIENT_INFO,
            key::CLIENT_CAPABILITIES,
            key::LOG_LEVEL,
            key::SUBSCRIPTION_ID,
            key::SERVER_INFO,
        ];
        for k in keys {
            let name = k.strip_prefix("io.modelcontextprotocol/").unwrap();
            assert!(name.chars().all(|c| c.is_ascii_alphanumeric()), "{k}");
        }
    }

    #[test]
    fn result_types_and_their_default() {
        assert_eq!(ResultType::of(&json!({"content": []})), Ok(ResultType::Complete));
        assert_eq!(ResultType::of(&json!({"resultType": "task"})), Ok(ResultType::Task));
        assert_eq!(ResultType::of(&json!({"resultType": "input_required"})), Ok(ResultType::InputRequired));
        assert_eq!(ResultType::of(&json!({"resultType": "later"})), Err("later".into()));
        assert!(ResultType::of(&json!({"resultType": 3})).is_err());
        let mut r = json!({"content": []});
        fill_result_type(&mut r);
        assert_eq!(r["resultType"], "complete");
        set_result_type(&mut r, ResultType::Task);
        fill_result_type(&mut r);
        assert_eq!(r["resultType"], "task", "fill keeps a type already named");
    }

    #[test]
    fn errors_carry_their_codes_and_data() {
        let e = ModernError::UnsupportedVersion { requested: "1900-01-01".into() }.to_rpc();
        assert_eq!(e.code, -32022);
        let data = e.data.as_deref().unwrap();
        assert_eq!(data["requested"], "1900-01-01");
        assert_eq!(data["supported"], json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]));
        assert_eq!(e.message, "unsupported protocol version: 1900-01-01");
        let legacy = ModernError::UnsupportedVersion { requested: "2025-11-25".into() }.to_rpc();
        assert!(legacy.message.ends_with("(it is served after initialize)"), "{}", legacy.message);
        let required = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        let e = ModernError::MissingCapability { required: required.clone() }.to_rpc();
        assert_eq!((e.code, e.data.as_deref()), (-32021, Some(&json!({"requiredCapabilities": required}))));
        assert_eq!(ModernError::MissingMeta(key::PROTOCOL_VERSION).code(), -32602);
        assert!(is_modern_error(&e.to_value()));
        assert!(is_modern_error(&ModernError::UnsupportedVersion { requested: "x".into() }.to_rpc().to_value()));
        assert!(!is_modern_error(&json!({"code": -32022, "message": "legacy reuse, no data"})));
        assert!(!is_modern_error(&json!({"code": -32601, "message": "method not found"})));
    }

    #[test]
    fn discover_round_trips() {
        let d = Discovery {
            supported_versions: advertised_versions().iter().map(|s| s.to_string()).collect(),
            capabilities: json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}),
            instructions: Some("use the weather tool".into()),
            server_info: Some(json!({"name": "taskgate", "version": "0.1.0"})),
            ttl_ms: 60_000,
            cache_scope: CacheScope::Private,
        };
        let r = discover_result(&d);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"][key::SERVER_INFO]["name"], "taskgate");
        assert!(r.get("serverInfo").is_none());
        assert_eq!(read_discover_result(&r).unwrap(), d);
        let minimal = read_discover_result(&json!({"supportedVersions": ["2026-07-28"], "capabilities": {}})).unwrap();
        assert_eq!((minimal.ttl_ms, minimal.cache_scope), (0, CacheScope::Private));
        assert!(read_discover_result(&json!({"supportedVersions": "2026-07-28", "capabilities": {}})).is_err());
        assert!(read_discover_result(&json!({"supportedVersions": [1], "capabilities": {}})).is_err());
        assert!(read_discover_result(&json!({"supportedVersions": []})).is_err());
    }
}
