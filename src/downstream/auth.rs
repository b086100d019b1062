//! Inbound authentication of the HTTP fronts (`[server.auth]`): who a request comes from.
//!
//! - `bearer`: `Authorization: Bearer <token>` compared, in constant time, with each
//!   configured token; the match names the principal.
//! - `jwt`: the token verified as a JSON Web Token (`auth::jwt`): signature by the configured
//!   key or the issuer's JWKS, `iss`, `aud`, `exp` and `nbf`; the principal is a claim.
//! - A request without a valid token gets 401 with `WWW-Authenticate: Bearer` naming the
//!   OAuth Protected Resource Metadata (RFC 9728), which is served, unauthenticated, at
//!   `/.well-known/oauth-protected-resource` (and under each served path's suffix), as the
//!   MCP authorization spec asks of a resource server.
//!
//! Tokens are never logged: a refusal logs the reason, not the token.

use crate::config::{AuthConfig, AuthMode, BearerToken};
use crate::downstream::http_body::Body;
use bytes::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use std::sync::Arc;

mod jwt;

/// Where the metadata document is served (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Who a request comes from, once authenticated: its name, and when the credential that
/// said so expires (a JWT's `exp`, with the leeway), after which a stream it opened ends.
/// Principals are the same when their names are.
#[derive(Clone, Debug)]
pub struct Principal {
    pub name: Arc<str>,
    pub expires: Option<std::time::SystemTime>,
}

impl Principal {
    pub fn named(name: &str) -> Principal {
        Principal { name: name.into(), expires: None }
    }

    /// When a stream this principal opens must end, as a tokio deadline.
    pub fn stream_deadline(&self) -> Option<tokio::time::Instant> {
        let left = self.expires?.duration_since(crate::clock::wall_now()).unwrap_or_default();
        tokio::time::Instant::now().checked_add(left)
    }
}

impl PartialEq for Principal {
    fn eq(&self, other: &Principal) -> bool {
        self.name == other.name
    }
}

impl Eq for Principal {}

/// The authenticator of one HTTP server.
/// The authentication in effect, which a reload replaces whole (`downstream::reload`).
pub type LiveAuth = std::sync::Arc<arc_swap::ArcSwap<Auth>>;

pub struct Auth {
    check: Check,
    /// The configured public base URL; without one, the listener's scheme and the
    /// request's `Host`.
    resource: Option<String>,
    /// The listener serves TLS.
    https: bool,
    /// The metadata document without its `resource`.
    metadata: serde_json::Map<String, serde_json::Value>,
}

enum Check {
    None,
    Bearer(Vec<BearerToken>),
    Jwt(Box<jwt::Verifier>),
}

/// Why a request was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No `Authorization: Bearer` header.
    Missing,
    /// A token that is not valid here, and why (logged, not sent).
    Invalid(String),
}

impl Auth {
    /// The authenticator `cfg` describes, for a listener that serves TLS if `https`. A JWKS
    /// is fetched when the first token needs it.
    pub fn new(cfg: &AuthConfig, https: bool) -> Arc<Auth> {
        let mut metadata = serde_json::Map::new();
        metadata.insert("authorization_servers".into(), cfg.authorization_servers.clone().into());
        metadata.insert("bearer_methods_supported".into(), serde_json::json!(["header"]));
        if !cfg.scopes.is_empty() {
            metadata.insert("scopes_supported".into(), cfg.scopes.clone().into());
        }
        let check = match &cfg.mode {
            AuthMode::None => Check::None,
            AuthMode::Bearer(tokens) => Check::Bearer(tokens.clone()),
            AuthMode::Jwt(j) => Check::Jwt(Box::new(jwt::Verifier::new(j))),
        };
        Arc::new(Auth { check, resource: cfg.resource.clone(), https, metadata })
    }

    /// The protected resource's URL, as a request with `headers` reaches it.
    fn resource(&self, headers: &HeaderMap) -> String {
        match &self.resource {
            Some(r) => r.clone(),
            None => {
                let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost");
                format!("{}://{host}", if self.https { "https" } else { "http" })
            }
        }
    }

    /// Whether requests are authenticated at all.
    pub fn enabled(&self) -> bool {
        !matches!(self.check, Check::None)
    }

    /// The request's principal; `Ok(None)` when authentication is off.
    pub async fn principal(&self, headers: &HeaderMap) -> Result<Option<Principal>, Refused> {
        if let Check::None = self.check {
            return Ok(None);
        }
        let token = bearer(headers).ok_or(Refused::Missing)?;
        match &self.check {
            Check::None => Ok(None),
            Check::Bearer(tokens) => {
                // Every token compared, so that the time taken says nothing of which matched.
                let mut found = None;
                for t in tokens {
                    if bool::from(subtle::ConstantTimeEq::ct_eq(t.token.as_bytes(), token.as_bytes())) {
                        found = Some(t.principal.as_str());
                    }
                }
                found.map(|p| Some(Principal::named(p))).ok_or_else(|| Refused::Invalid("unknown bearer token".into()))
            }
            Check::Jwt(v) => v
                .verify(token)
                .await
                .map(|(name, exp)| Some(Principal { name: name.into(), expires: Some(exp) }))
                .map_err(Refused::Invalid),
        }
    }

    /// The 401 for a request (with `headers`) refused for `why`.
    pub fn refusal(&self, why: &Refused, headers: &HeaderMap) -> Response<Body> {
        let (extra, text) = match why {
            Refused::Missing => ("", "unauthorized: this gateway needs an Authorization: Bearer token\n"),
            Refused::Invalid(reason) => {
                tracing::info!("refused a request: {reason}");
                (", error=\"invalid_token\"", "unauthorized: the bearer token is not valid here\n")
            }
        };
        let url = format!("{}{METADATA_PATH}", self.resource(headers));
        let challenge = HeaderValue::from_str(&format!("Bearer resource_metadata=\"{url}\"{extra}"))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer"));
        let mut r = crate::downstream::http_body::plain(StatusCode::UNAUTHORIZED, text);
        r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        r
    }

    /// The Protected Resource Metadata document asked for at `path`, for a request with
    /// `headers`: under a served path's suffix, that path's resource (RFC 9728 §3.3).
    pub fn metadata(&self, headers: &HeaderMap, path: &str) -> Response<Body> {
        let mut doc = self.metadata.clone();
        let suffix = path.strip_prefix(METADATA_PATH).unwrap_or("");
        doc.insert("resource".into(), format!("{}{suffix}", self.resource(headers)).into());
        let body = Bytes::from(serde_json::Value::Object(doc).to_string());
        let mut r = Response::new(Body::Full(Some(body)));
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        r
    }
}

/// Whether `path` asks for the metadata document: at [`METADATA_PATH`], or with a served
/// path as its suffix (RFC 9728 §3.1, e.g. `/.well-known/oauth-protected-resource/mcp/demo`).
pub fn is_metadata_path(path: &str) -> bool {
    path == METADATA_PATH || path.strip_prefix(METADATA_PATH).is_some_and(|rest| rest.starts_with('/'))
}

/// The request's `Authorization` as it came, for an upstream that receives the client's
/// (`authorization = "pass"`; `gateway::session::credential`).
pub(crate) fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()
}

/// The token of an `Authorization: Bearer` header (the scheme is case-insensitive).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer_auth() -> Arc<Auth> {
        let tokens = vec![
            BearerToken { principal: "alice".into(), token: "alice-token-0123456789".into() },
            BearerToken { principal: "bob".into(), token: "bob-token-0123456789".into() },
        ];
        let cfg = AuthConfig { mode: AuthMode::Bearer(tokens), ..AuthConfig::default() };
        Auth::new(&cfg, false)
    }

    fn with(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[tokio::test]
    async fn bearer_tokens_name_their_principals() {
        let a = bearer_auth();
        assert_eq!(a.principal(&with("Bearer alice-token-0123456789")).await, Ok(Some(Principal::named("alice"))));
        assert_eq!(a.principal(&with("bearer bob-token-0123456789")).await, Ok(Some(Principal::named("bob"))));
        assert_eq!(a.principal(&HeaderMap::new()).await, Err(Refused::Missing));
        assert_eq!(a.principal(&with("Basic YWxpY2U6eA==")).await, Err(Refused::Missing));
        assert!(matches!(a.principal(&with("Bearer alice-token-012345678")).await, Err(Refused::Invalid(_))));
        let off = Auth::new(&AuthConfig::default(), false);
        assert_eq!(off.principal(&HeaderMap::new()).await, Ok(None));
    }

    #[test]
    fn a_refusal_points_at_the_metadata() {
        let a = bearer_auth();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8700"));
        let r = a.refusal(&Refused::Missing, &headers);
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let h = r.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert_eq!(h, "Bearer resource_metadata=\"http://127.0.0.1:8700/.well-known/oauth-protected-resource\"");
        let r = a.refusal(&Refused::Invalid("x".into()), &headers);
        assert!(r.headers()[header::WWW_AUTHENTICATE].to_str().unwrap().ends_with("error=\"invalid_token\""));
        assert!(is_metadata_path(METADATA_PATH) && is_metadata_path("/.well-known/oauth-protected-resource/mcp/a"));
        assert!(!is_metadata_path("/.well-known/oauth-protected-resourcex"));
    }
}
