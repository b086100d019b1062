//! `[server.auth]`: who may use the gateway over HTTP. Bearer tokens are read here, from
//! the environment or a file, once; they are never printed (`Debug` and `taskgate check`
//! show only their principals).

use super::duration::parse_duration;
use super::error::{ConfigError, err};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    mode: Option<String>,
    resource: Option<String>,
    authorization_servers: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
    tokens: Option<Vec<RawToken>>,
    jwks_url: Option<String>,
    key_file: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
    principal_claim: Option<String>,
    leeway: Option<String>,
    jwks_refresh: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToken {
    principal: Option<String>,
    env: Option<String>,
    file: Option<String>,
}

/// How HTTP clients authenticate (`[server.auth]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AuthConfig {
    pub mode: AuthMode,
    /// The gateway's public base URL (`resource`): the protected resource its metadata
    /// names, and where that metadata is found. `None`: `http://` + the listen address.
    pub resource: Option<String>,
    /// Authorization servers the metadata names.
    pub authorization_servers: Vec<String>,
    /// Scopes the metadata names as supported.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub enum AuthMode {
    /// Anyone who reaches the listener: a task is its session's.
    #[default]
    None,
    /// Static bearer tokens, each with its principal.
    Bearer(Vec<BearerToken>),
    /// JSON Web Tokens, verified against a key.
    Jwt(JwtSettings),
}

#[derive(Clone, PartialEq)]
pub struct BearerToken {
    pub principal: String,
    pub token: String,
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BearerToken {{ principal: {:?}, token: <redacted> }}", self.principal)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct JwtSettings {
    pub key: JwtKey,
    /// The `iss` a token must carry.
    pub issuer: String,
    /// The `aud` a token must carry (one of its values).
    pub audience: String,
    /// The claim that names the principal (`sub` by default).
    pub principal_claim: String,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// Scopes a token must grant (`scope` or `scp`): `[server.auth] scopes`.
    pub scopes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum JwtKey {
    /// A JWKS document, fetched at start and every `refresh` (and, at most once a `refresh`
    /// / 10, when a token names a key id it lacks).
    Jwks { url: String, refresh: Duration },
    /// A public key (RSA, EC or Ed25519, PEM), read from `key_file` at load time.
    Pem(String),
}

/// `[server.auth]`; `base` is the config file's directory (where a relative token or key
/// file is), `env` the environment.
pub(super) fn auth_config(
    raw: Option<RawAuth>,
    env: &dyn Fn(&str) -> Option<String>,
    base: Option<&Path>,
) -> Result<AuthConfig, ConfigError> {
    let Some(r) = raw else { return Ok(AuthConfig::default()) };
    let file = |p: &str| match base {
        Some(b) if Path::new(p).is_relative() => b.join(p),
        _ => p.into(),
    };
    let jwt_keys = [
        ("jwks_url", r.jwks_url.is_some()),
        ("key_file", r.key_file.is_some()),
        ("issuer", r.issuer.is_some()),
        ("audience", r.audience.is_some()),
        ("principal_claim", r.principal_claim.is_some()),
        ("leeway", r.leeway.is_some()),
        ("jwks_refresh", r.jwks_refresh.is_some()),
    ];
    let mode = r.mode.as_deref().unwrap_or("none");
    if mode != "jwt"
        && let Some((key, _)) = jwt_keys.iter().find(|(_, set)| *set)
    {
        return err(format!("server.auth.{key}: only mode = \"jwt\" has a {key}"));
    }
    if mode != "bearer" && r.tokens.is_some() {
        return err("server.auth.tokens: only mode = \"bearer\" has tokens");
    }
    if let Some(url) = &r.resource
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return err(format!("server.auth.resource: \"{url}\" is not an http(s) URL"));
    }
    let mode = match mode {
        "none" => AuthMode::None,
        "bearer" => AuthMode::Bearer(bearer_tokens(r.tokens.unwrap_or_default(), env, &file)?),
        "jwt" => {
            let key = match (r.jwks_url, r.key_file) {
                (Some(url), None) => {
                    jwks_url_allowed(&url)
                        .map_err(|why| ConfigError(format!("server.auth.jwks_url: \"{url}\" {why}")))?;
                    let refresh = match r.jwks_refresh {
                        None => Duration::from_secs(300),
                        Some(t) => match parse_duration(&t) {
                            Some(d) if d >= Duration::from_secs(1) => d,
                            _ => {
                                return err(format!(
                                    "server.auth.jwks_refresh: \"{t}\" is not a duration of 1s or more"
                                ));
                            }
                        },
                    };
                    JwtKey::Jwks { url, refresh }
                }
                (None, Some(path)) => {
                    let path = file(&path);
                    let pem = std::fs::read_to_string(&path).map_err(|e| {
                        ConfigError(format!("server.auth.key_file: cannot read {}: {e}", path.display()))
                    })?;
                    JwtKey::Pem(pem)
                }
                (Some(_), Some(_)) => return err("server.auth.key_file: give jwks_url or key_file, not both"),
                (None, None) => return err("server.auth.jwks_url: mode = \"jwt\" needs jwks_url or key_file"),
            };
            let Some(issuer) = r.issuer.filter(|i| !i.is_empty()) else {
                return err("server.auth.issuer: mode = \"jwt\" needs the issuer its tokens must carry");
            };
            let Some(audience) = r.audience.filter(|a| !a.is_empty()) else {
                return err("server.auth.audience: mode = \"jwt\" needs the audience its tokens must be issued for");
            };
            let leeway = match r.leeway {
                None => Duration::from_secs(30),
                Some(t) => match parse_duration(&t) {
                    Some(d) if d <= Duration::from_secs(600) => d,
                    _ => return err(format!("server.auth.leeway: \"{t}\" is not a duration of at most 10m")),
                },
            };
            let principal_claim = r.principal_claim.unwrap_or_else(|| "sub".into());
            let scopes = r.scopes.clone().unwrap_or_default();
            AuthMode::Jwt(JwtSettings { key, issuer, audience, principal_claim, leeway, scopes })
        }
        other => return err(format!("server.auth.mode: \"{other}\" is not one of \"none\", \"bearer\", \"jwt\"")),
    };
    Ok(AuthConfig {
        mode,
        resource: r.resource.map(|u| u.trim_end_matches('/').to_string()),
        authorization_servers: r.authorization_servers.unwrap_or_default(),
        scopes: r.scopes.unwrap_or_default(),
    })
}

fn bearer_tokens(
    raw: Vec<RawToken>,
    env: &dyn Fn(&str) -> Option<String>,
    file: &dyn Fn(&str) -> std::path::PathBuf,
) -> Result<Vec<BearerToken>, ConfigError> {
    if raw.is_empty() {
        return err("server.auth.tokens: mode = \"bearer\" needs at least one [[server.auth.tokens]]");
    }
    let mut out: Vec<BearerToken> = Vec::new();
    for (i, t) in raw.into_iter().enumerate() {
        let at = format!("server.auth.tokens[{i}]");
        let Some(principal) = t.principal.filter(|p| !p.is_empty() && !p.chars().any(char::is_control)) else {
            return err(format!("{at}.principal: missing; each token names the principal it stands for"));
        };
        let token = match (t.env, t.file) {
            (Some(var), None) => {
                env(&var).ok_or_else(|| ConfigError(format!("{at}.env: the environment variable {var} is not set")))?
            }
            (None, Some(path)) => {
                let path = file(&path);
                std::fs::read_to_string(&path)
                    .map_err(|e| ConfigError(format!("{at}.file: cannot read {}: {e}", path.display())))?
                    .trim()
                    .to_string()
            }
            _ => return err(format!("{at}: give the token's env or its file (one of them)")),
        };
        if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return err(format!("{at}: the token must be at least 16 printable characters, without spaces"));
        }
        if out.iter().any(|o| o.token == token) {
            return err(format!("{at}: the same token is given for two principals"));
        }
        out.push(BearerToken { principal, token });
    }
    Ok(out)
}

/// Whether keys may be fetched from `url`, parsed as the fetch will parse it: https, or
/// plain http to a loopback host (anyone on another path could serve keys of their own).
/// User info is refused: the fetch would not send it, and it can dress up a host as another.
fn jwks_url_allowed(url: &str) -> Result<(), &'static str> {
    let uri: hyper::Uri = url.parse().map_err(|_| "is not a URL")?;
    let authority = uri.authority().ok_or("is not an http(s) URL with a host")?;
    if authority.as_str().contains('@') {
        return Err("has user info (name:password@), which is not sent: remove it");
    }
    let after_host = authority.as_str().rsplit_once(']').map_or(authority.as_str(), |(_, rest)| rest);
    if after_host.contains(':') && authority.port_u16().is_none() {
        return Err("has a port that is not a number from 0 to 65535");
    }
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => Ok(()),
        Some(s) if s.eq_ignore_ascii_case("http") && is_loopback_host(authority.host()) => Ok(()),
        Some(s) if s.eq_ignore_ascii_case("http") => Err("is not an https URL (plain http only on the loopback)"),
        _ => Err("is not an http(s) URL"),
    }
}

/// Whether `host` (as a URI gives it: an IPv6 address in brackets) is the loopback:
/// `localhost`, 127.0.0.0/8 or ::1.
fn is_loopback_host(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::jwks_url_allowed;
    use crate::config::{AuthMode, Config, JwtKey};

    const UP: &str = "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n";

    fn parse(auth: &str) -> Result<Config, crate::config::ConfigError> {
        let env = |k: &str| (k == "ALICE_TOKEN").then(|| "alice-secret-token-123".to_string());
        Config::parse(&format!("[server.auth]\n{auth}\n{UP}"), &env)
    }

    #[test]
    fn bearer_tokens_come_from_the_environment_or_a_file_and_are_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let bob = dir.path().join("bob.token");
        std::fs::write(&bob, "bob-secret-token-4567\n").unwrap();
        let text = format!(
            "mode = \"bearer\"\n[[server.auth.tokens]]\nprincipal = \"alice\"\nenv = \"ALICE_TOKEN\"\n[[server.auth.tokens]]\nprincipal = \"bob\"\nfile = {:?}",
            bob.display().to_string()
        );
        let c = parse(&text).unwrap();
        let AuthMode::Bearer(tokens) = &c.server.auth.mode else { panic!("{:?}", c.server.auth.mode) };
        assert_eq!(tokens[0].principal, "alice");
        assert_eq!(tokens[0].token, "alice-secret-token-123");
        assert_eq!(tokens[1].token, "bob-secret-token-4567", "trimmed");
        let shown = format!("{:?}", c.server.auth);
        assert!(!shown.contains("secret"), "{shown}");
    }

    #[test]
    fn bad_auth_settings_name_their_key() {
        for (text, key) in [
            ("mode = \"basic\"", "server.auth.mode"),
            ("mode = \"bearer\"", "server.auth.tokens"),
            (
                "mode = \"bearer\"\n[[server.auth.tokens]]\nprincipal = \"a\"\nenv = \"NOPE\"",
                "server.auth.tokens[0].env",
            ),
            ("mode = \"bearer\"\n[[server.auth.tokens]]\nenv = \"ALICE_TOKEN\"", "server.auth.tokens[0].principal"),
            ("mode = \"bearer\"\n[[server.auth.tokens]]\nprincipal = \"a\"", "server.auth.tokens[0]"),
            ("mode = \"bearer\"\nissuer = \"x\"", "server.auth.issuer"),
            ("mode = \"none\"\n[[server.auth.tokens]]\nprincipal = \"a\"\nenv = \"ALICE_TOKEN\"", "server.auth.tokens"),
            ("mode = \"jwt\"\nissuer = \"i\"\naudience = \"a\"", "server.auth.jwks_url"),
            ("mode = \"jwt\"\njwks_url = \"https://k\"\naudience = \"a\"", "server.auth.issuer"),
            ("mode = \"jwt\"\njwks_url = \"https://k\"\nissuer = \"i\"", "server.auth.audience"),
            ("mode = \"jwt\"\njwks_url = \"ftp://k\"\nissuer = \"i\"\naudience = \"a\"", "server.auth.jwks_url"),
            (
                "mode = \"jwt\"\njwks_url = \"http://idp.example\"\nissuer = \"i\"\naudience = \"a\"",
                "server.auth.jwks_url",
            ),
            (
                "mode = \"jwt\"\njwks_url = \"http://127.0.0.1.evil\"\nissuer = \"i\"\naudience = \"a\"",
                "server.auth.jwks_url",
            ),
            (
                "mode = \"jwt\"\nkey_file = \"/nonexistent.pem\"\nissuer = \"i\"\naudience = \"a\"",
                "server.auth.key_file",
            ),
            (
                "mode = \"jwt\"\njwks_url = \"https://k\"\nissuer = \"i\"\naudience = \"a\"\nleeway = \"1h\"",
                "server.auth.leeway",
            ),
            ("resource = \"gw.example.com\"", "server.auth.resource"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.0.starts_with(key), "{key}: {e}");
        }
    }

    #[test]
    fn jwks_urls_are_parsed_before_their_host_is_checked() {
        for ok in [
            "https://idp.example/jwks",
            "HTTPS://idp.example:8443/jwks",
            "http://127.0.0.1/jwks",
            "http://127.0.0.1:8080/jwks",
            "HTTP://LOCALHOST:65535/jwks",
            "http://localhost./jwks",
            "http://127.1.2.3:1/jwks",
            "http://[::1]:9000/jwks",
            "http://[::1]/jwks",
        ] {
            assert_eq!(jwks_url_allowed(ok), Ok(()), "{ok}");
        }
        for bad in [
            "http://127.0.0.1:1@192.0.2.2:80/jwks",
            "http://127.0.0.1@192.0.2.2/jwks",
            "http://localhost:x@192.0.2.2/jwks",
            "http://[::1]:1@192.0.2.2/jwks",
            "https://127.0.0.1:1@192.0.2.2/jwks",
            "http://user:pw@127.0.0.1/jwks",
            "http://127.0.0.1.evil/jwks",
            "http://localhost.evil.example/jwks",
            "http://[::2]/jwks",
            "http://[::ffff:192.0.2.2]/jwks",
            "http://192.0.2.2/jwks?h=127.0.0.1",
            "http://192.0.2.2/127.0.0.1",
            "HTTP://192.0.2.2:8080/jwks",
            "http://127.0.0.1:99999/jwks",
            "http://127.0.0.1:/jwks",
            "http://127.0.0.1:80x/jwks",
            "ftp://127.0.0.1/jwks",
            "127.0.0.1/jwks",
            "http:///jwks",
            "",
        ] {
            assert!(jwks_url_allowed(bad).is_err(), "{bad}");
        }
        let e = parse(
            "mode = \"jwt\"\njwks_url = \"http://127.0.0.1:1@192.0.2.2:80/jwks\"\nissuer = \"i\"\naudience = \"a\"",
        )
        .unwrap_err();
        assert!(e.0.starts_with("server.auth.jwks_url: \"http://127.0.0.1:1@192.0.2.2:80/jwks\" has user info"), "{e}");
    }

    #[test]
    fn jwt_settings_default_sensibly() {
        let c = parse("mode = \"jwt\"\njwks_url = \"https://idp/jwks\"\nissuer = \"https://idp\"\naudience = \"https://gw\"\nresource = \"https://gw/\"").unwrap();
        let AuthMode::Jwt(j) = &c.server.auth.mode else { panic!() };
        assert!(matches!(&j.key, JwtKey::Jwks { refresh, .. } if refresh.as_secs() == 300));
        assert_eq!((j.principal_claim.as_str(), j.leeway.as_secs()), ("sub", 30));
        assert_eq!(c.server.auth.resource.as_deref(), Some("https://gw"));
    }
}
