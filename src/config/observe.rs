//! The operating settings of `[server]`: TLS on the listener (`[server.tls]`), where traces
//! are exported (`[server.otlp]`), and the origins CORS admits (`cors_origins`). Raw, checked
//! and defaulted here, apart from the limits in `load`.

use super::error::{ConfigError, err};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// `[server.tls]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub(super) cert: Option<String>,
    pub(super) key: Option<String>,
}

/// `[server.otlp]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOtlp {
    pub(super) endpoint: Option<String>,
    pub(super) service_name: Option<String>,
}

/// The listener's certificate chain and private key, PEM files (`[server.tls]`). They are
/// read when the server starts, not when the config is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where spans are exported over OTLP/HTTP (`[server.otlp]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`; spans go to `/v1/traces`
    /// under it unless it already ends so.
    pub endpoint: String,
    /// The `service.name` resource attribute (`taskgate` by default).
    pub service_name: String,
}

impl OtlpConfig {
    /// The URL the traces are posted to.
    pub fn traces_url(&self) -> String {
        let base = self.endpoint.trim_end_matches('/');
        if base.ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") }
    }
}

/// The most entries `cors_origins` may have.
pub const MAX_CORS_ORIGINS: usize = 64;

pub(super) fn tls(raw: Option<RawTls>, base: Option<&Path>) -> Result<Option<TlsFiles>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let path = |key: &str, v: Option<String>| -> Result<PathBuf, ConfigError> {
        match v {
            None => err(format!("server.tls.{key}: missing (a PEM file; [server.tls] needs both cert and key)")),
            Some(s) if s.trim().is_empty() => err(format!("server.tls.{key}: must not be empty")),
            Some(s) => Ok(match base {
                Some(b) if Path::new(&s).is_relative() => b.join(s),
                _ => PathBuf::from(s),
            }),
        }
    };
    Ok(Some(TlsFiles { cert: path("cert", raw.cert)?, key: path("key", raw.key)? }))
}

pub(super) fn otlp(raw: Option<RawOtlp>) -> Result<Option<OtlpConfig>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let Some(endpoint) = raw.endpoint else {
        return err("server.otlp.endpoint: missing (e.g. \"http://127.0.0.1:4318\")");
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || endpoint.len() < "http://x".len() {
        return err(format!("server.otlp.endpoint: \"{endpoint}\" is not an http:// or https:// URL"));
    }
    let service_name = raw.service_name.unwrap_or_else(|| "taskgate".into());
    if service_name.is_empty() {
        return err("server.otlp.service_name: must not be empty");
    }
    Ok(Some(OtlpConfig { endpoint, service_name }))
}

pub(super) fn cors_origins(raw: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    let origins = raw.unwrap_or_default();
    if origins.len() > MAX_CORS_ORIGINS {
        return err(format!(
            "server.cors_origins: {} entries, more than the limit of {MAX_CORS_ORIGINS}",
            origins.len()
        ));
    }
    for o in &origins {
        if o != "*" && !(o.starts_with("http://") || o.starts_with("https://")) {
            return err(format!(
                "server.cors_origins: \"{o}\" is not an origin (scheme://host[:port], e.g. \"https://tasks.example\") or \"*\""
            ));
        }
        if o.ends_with('/') {
            return err(format!("server.cors_origins: \"{o}\" must not end in '/' (an origin has no path)"));
        }
    }
    Ok(origins)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_paths_are_relative_to_the_config_and_need_both() {
        let t =
            tls(Some(RawTls { cert: Some("c.pem".into()), key: Some("/k.pem".into()) }), Some(Path::new("/etc/tg")))
                .unwrap()
                .unwrap();
        assert_eq!(t.cert, PathBuf::from("/etc/tg/c.pem"));
        assert_eq!(t.key, PathBuf::from("/k.pem"));
        let e = tls(Some(RawTls { cert: Some("c.pem".into()), key: None }), None).unwrap_err();
        assert!(e.0.starts_with("server.tls.key"), "{}", e.0);
    }

    #[test]
    fn otlp_endpoint_is_checked_and_traces_url_derived() {
        let o = otlp(Some(RawOtlp { endpoint: Some("http://127.0.0.1:4318/".into()), service_name: None }))
            .unwrap()
            .unwrap();
        assert_eq!(o.traces_url(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(o.service_name, "taskgate");
        assert!(otlp(Some(RawOtlp { endpoint: Some("127.0.0.1:4318".into()), service_name: None })).is_err());
    }

    #[test]
    fn cors_origins_must_be_origins() {
        assert_eq!(cors_origins(None).unwrap(), Vec::<String>::new());
        assert!(cors_origins(Some(vec!["https://a.example".into(), "*".into()])).is_ok());
        assert!(cors_origins(Some(vec!["a.example".into()])).unwrap_err().0.starts_with("server.cors_origins"));
        assert!(cors_origins(Some(vec!["https://a.example/".into()])).is_err());
    }
}
