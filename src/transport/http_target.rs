//! Where an HTTP upstream's requests go: the settings an HTTP connection is made with, its URL
//! read once into what a request needs (the origin to dial, the request target, the `Host`
//! header, the URL as logs may show it), and the legacy HTTP+SSE `endpoint` event's URI
//! resolved against the SSE URL, on the same origin only.

use crate::transport::Error;
use crate::transport::http_conn::BoxError;
use hyper::Uri;
use hyper::header::{HeaderName, HeaderValue};
use std::time::Duration;

/// What a connection to an HTTP upstream is made with, whichever HTTP transport carries it.
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// The upstream's name, for logs.
    pub name: String,
    pub url: String,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Bounds connecting, a request's response head where it is short (notifications,
    /// responses, the legacy transport's POSTs), and the legacy `endpoint` event.
    pub connect_timeout: Duration,
    /// The longest a request may take; bounds resuming its response stream.
    pub max_request_time: Duration,
    /// Requests in flight at once, and so connections in use.
    pub max_in_flight: usize,
    /// Messages in one JSON-RPC batch from the upstream.
    pub max_batch: usize,
    /// The client's `Authorization`, sent with every request when the upstream is
    /// configured to receive it (`authorization = "pass"`).
    pub credential: Option<std::sync::Arc<crate::transport::credential::Credential>>,
}

/// An HTTP URL, read once into what each request needs.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The URL as given (scheme and authority are what is dialled).
    pub(crate) uri: Uri,
    /// The request target: path and query (origin form).
    pub(crate) path: Uri,
    pub(crate) host: HeaderValue,
    /// The URL as errors and logs show it: without user-info or query, which may hold secrets.
    pub(crate) shown: String,
}

impl Target {
    pub(crate) fn parse(url: &str) -> Result<Target, Error> {
        let shown = crate::config::redact_url(url);
        let bad_url = |reason: BoxError| Error::BadUrl { url: shown.clone(), reason };
        let uri: Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| bad_url(e.into()))?;
        let Some(hostname) = uri.host() else { return Err(bad_url("no host".into())) };
        let host = match uri.port_u16().filter(|p| *p != default_port(&uri)) {
            Some(port) => HeaderValue::from_str(&format!("{hostname}:{port}")),
            None => HeaderValue::from_str(hostname),
        }
        .map_err(|e| bad_url(e.into()))?;
        let path = match uri.path_and_query() {
            Some(pq) => Uri::from(pq.clone()),
            None => Uri::from_static("/"),
        };
        Ok(Target { uri, path, host, shown })
    }

    /// Resolves `reference` (the data of a legacy `endpoint` event: most often an absolute
    /// path with a query, `/messages/?session_id=…`) against this URL, as RFC 3986 §5.2
    /// resolves a URI reference. The result must be on this URL's origin: an endpoint
    /// elsewhere would receive every message, and the configured headers (credentials among
    /// them), of a server that only had to send one event.
    pub(crate) fn resolve(&self, reference: &str) -> Result<Target, Error> {
        let bad = |reason: &str| Error::BadEndpoint {
            url: self.shown.clone(),
            endpoint: crate::config::redact_url(reference),
            reason: reason.into(),
        };
        let reference = reference.trim();
        let reference = reference.split_once('#').map_or(reference, |(r, _)| r);
        let scheme = self.uri.scheme_str().unwrap_or("http");
        let authority = self.uri.authority().map(|a| a.as_str()).unwrap_or("");
        let resolved = if has_scheme(reference) {
            reference.to_string()
        } else if reference.starts_with("//") {
            format!("{scheme}:{reference}")
        } else {
            let (ref_path, ref_query) = match reference.split_once('?') {
                Some((p, q)) => (p, Some(q)),
                None => (reference, None),
            };
            let base_path = self.uri.path();
            let path = if ref_path.is_empty() {
                base_path.to_string()
            } else if ref_path.starts_with('/') {
                remove_dot_segments(ref_path)
            } else {
                let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
                remove_dot_segments(&format!("/{}{ref_path}", dir.trim_start_matches('/')))
            };
            let query = match ref_query {
                Some(q) => Some(q),
                None if ref_path.is_empty() => self.uri.query(),
                None => None,
            };
            match query {
                Some(q) => format!("{scheme}://{authority}{path}?{q}"),
                None => format!("{scheme}://{authority}{path}"),
            }
        };
        let target = Target::parse(&resolved).map_err(|e| match e {
            Error::BadUrl { reason, .. } => bad(&reason.to_string()),
            other => other,
        })?;
        if !matches!(target.uri.scheme_str(), Some("http" | "https")) {
            return Err(bad("not an http:// or https:// URI"));
        }
        if !self.same_origin(&target) {
            return Err(Error::ForeignEndpoint { url: self.shown.clone(), endpoint: target.shown });
        }
        Ok(target)
    }

    /// Same scheme, host and port (a port left out is the scheme's default).
    fn same_origin(&self, other: &Target) -> bool {
        let scheme = |t: &Target| t.uri.scheme_str().map(str::to_ascii_lowercase);
        let host = |t: &Target| t.uri.host().map(str::to_ascii_lowercase);
        let port = |t: &Target| t.uri.port_u16().unwrap_or_else(|| default_port(&t.uri));
        scheme(self) == scheme(other) && host(self) == host(other) && port(self) == port(other)
    }
}

fn default_port(uri: &Uri) -> u16 {
    match uri.scheme_str() {
        Some(s) if s.eq_ignore_ascii_case("https") => 443,
        _ => 80,
    }
}

/// Whether a URI reference starts with a scheme (`scheme ":"`, RFC 3986 §3.1).
fn has_scheme(reference: &str) -> bool {
    let Some(colon) = reference.find(':') else { return false };
    let scheme = &reference[..colon];
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// An absolute path without its `.` and `..` segments (RFC 3986 §5.2.4).
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *s {
            "." | ".." => {
                if *s == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

/// The configured extra headers, checked.
pub(crate) fn parse_headers(headers: &[(String, String)]) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
    headers
        .iter()
        .map(|(k, v)| {
            Ok((
                HeaderName::from_bytes(k.as_bytes()).map_err(|e| Error::BadHeader(e.into()))?,
                HeaderValue::from_str(v).map_err(|e| Error::BadHeader(e.into()))?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(base: &str, reference: &str) -> Result<String, Error> {
        let t = Target::parse(base).unwrap().resolve(reference)?;
        Ok(format!("{} {} {}", t.uri, t.path, t.host.to_str().unwrap()))
    }

    #[test]
    fn endpoint_references_resolve_against_the_sse_url() {
        let base = "http://127.0.0.1:8000/mcp/sse?token=1";
        let cases = [
            // The Python SDK's and the TypeScript SDK's forms.
            ("/messages/?session_id=ab12", "http://127.0.0.1:8000/messages/?session_id=ab12"),
            ("/message?sessionId=x-1", "http://127.0.0.1:8000/message?sessionId=x-1"),
            ("messages?s=1", "http://127.0.0.1:8000/mcp/messages?s=1"),
            ("../up/./post", "http://127.0.0.1:8000/up/post"),
            ("/a/b/../../../c/", "http://127.0.0.1:8000/c/"),
            ("?s=2", "http://127.0.0.1:8000/mcp/sse?s=2"),
            ("", "http://127.0.0.1:8000/mcp/sse?token=1"),
            ("/post#frag", "http://127.0.0.1:8000/post"),
            ("//127.0.0.1:8000/x", "http://127.0.0.1:8000/x"),
            ("HTTP://127.0.0.1:8000/abs?q", "http://127.0.0.1:8000/abs?q"),
        ];
        for (reference, want) in cases {
            let got = resolve(base, reference).unwrap_or_else(|e| panic!("{reference:?}: {e}"));
            assert_eq!(got.split(' ').next().unwrap(), want, "{reference:?}");
            assert!(got.ends_with(" 127.0.0.1:8000"), "{got}");
        }
        // A default port written out is the same origin.
        assert!(resolve("https://h/sse", "https://h:443/post").is_ok());
        assert_eq!(resolve("https://h/sse", "/post").unwrap(), "https://h/post /post h");
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        let base = "http://127.0.0.1:8000/sse";
        for reference in [
            "http://127.0.0.1:8001/messages",
            "https://127.0.0.1:8000/messages",
            "http://evil.example/messages?session_id=1",
            "//localhost:8000/messages",
        ] {
            let e = resolve(base, reference).unwrap_err();
            assert!(matches!(e, Error::ForeignEndpoint { .. }), "{reference}: {e}");
        }
        let e = resolve(base, "http://evil.example/messages?session_id=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the `endpoint` event from http://127.0.0.1:8000/sse points to another origin (http://evil.example/messages?…); refused"
        );
        for reference in ["ftp://127.0.0.1:8000/x", "/has space", "mailto:x@y"] {
            let e = resolve(base, reference).unwrap_err();
            assert!(matches!(e, Error::BadEndpoint { .. } | Error::ForeignEndpoint { .. }), "{reference}: {e}");
        }
    }
}
