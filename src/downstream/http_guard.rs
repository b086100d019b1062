//! Who may talk to the downstream HTTP server, on either transport: the `Host` header (against
//! DNS rebinding), the `Origin` of browser requests, the `MCP-Protocol-Version` a request
//! names, and how many sessions may be open at once.

use crate::client_slots::{ClientSlots, Full};
use crate::config::ServerConfig;
use crate::downstream::http_body::Refusal;
use crate::jsonrpc::{GATEWAY_BUSY, INVALID_REQUEST};
use crate::mcp::ProtocolVersion;
use crate::transport::mcp_http::VERSION_HEADER;
use hyper::StatusCode;
use hyper::header::{self, HeaderMap};
use std::sync::Arc;

pub(crate) fn check_host_and_origin(limits: &ServerConfig, headers: &HeaderMap) -> Result<(), Refusal> {
    if !limits.allowed_hosts.iter().any(|h| h == "*") {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
        if !limits.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(host_name(host))) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                INVALID_REQUEST,
                format!("forbidden: Host {host:?} is not allowed"),
            ));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !limits.allowed_origins.iter().any(|pat| origin_matches(pat, origin)) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                INVALID_REQUEST,
                format!("forbidden: Origin {origin:?} is not allowed"),
            ));
        }
    }
    Ok(())
}

/// The request's `MCP-Protocol-Version`, which must name a version the gateway speaks: an
/// invalid or unsupported one is 400, on every request, `initialize` included. It need not be
/// the version the session negotiated: the spec asks 400 only for an invalid or unsupported
/// version, and says the header SHOULD (not MUST) be the negotiated one, as the reference
/// SDK's server takes it; the session goes on in the version it negotiated. An absent header
/// is accepted (the spec says to assume 2025-03-26 then). A 2026-07-28 request is not
/// checked here: it is served by `http_modern`, with its own header rules.
pub(crate) fn check_protocol_version(headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(v) = headers.get(VERSION_HEADER) else { return Ok(()) };
    let text = v.to_str().unwrap_or("");
    match ProtocolVersion::parse(text) {
        Some(_) => Ok(()),
        None => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            format!("bad request: unsupported MCP-Protocol-Version {text:?} (the gateway speaks {})", spoken()),
        )),
    }
}

/// A request that names two different protocol versions (`MCP-Protocol-Version` twice):
/// 400, before anything reads either.
pub(crate) fn check_one_version(headers: &HeaderMap) -> Result<(), Refusal> {
    let mut values = headers.get_all(VERSION_HEADER).iter();
    let Some(first) = values.next() else { return Ok(()) };
    if values.all(|v| v == first) {
        return Ok(());
    }
    Err(Refusal::new(
        StatusCode::BAD_REQUEST,
        INVALID_REQUEST,
        "bad request: MCP-Protocol-Version is given more than once, with different values",
    ))
}

/// The versions a legacy session may name, for the refusal's message.
fn spoken() -> String {
    ProtocolVersion::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
}

/// The open sessions of both transports, counted against `max_sessions` and, per client (a
/// principal, else an address), `max_sessions_per_client`.
pub(crate) struct SessionSlots(Arc<ClientSlots>);

/// One session's place, given back when it is dropped (with the last reference to its
/// session).
pub(crate) struct Slot(#[allow(dead_code)] crate::client_slots::Slot);

impl SessionSlots {
    pub(crate) fn new(max: usize, per_client: usize) -> Arc<SessionSlots> {
        Arc::new(SessionSlots(ClientSlots::new(max, per_client)))
    }

    /// A place for a new session of `client`: 503 when `max_sessions` are open, 429 when
    /// the client holds `max_sessions_per_client`.
    pub(crate) fn take(&self, client: &str) -> Result<Slot, Refusal> {
        match self.0.take(Some(client)) {
            Ok(slot) => Ok(Slot(slot)),
            Err(Full::All(max)) => Err(Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                GATEWAY_BUSY,
                format!("too many sessions (limit {max}, server.max_sessions)"),
            )),
            Err(Full::Client(max)) => Err(Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                GATEWAY_BUSY,
                format!("too many sessions for this client (limit {max}, server.max_sessions_per_client)"),
            )),
        }
    }
}

/// Who a session's client is, for per-client limits: its principal, else its address (as
/// `Session::client` names it).
pub(crate) fn client_of(principal: Option<&crate::downstream::auth::Principal>, peer: std::net::IpAddr) -> String {
    match principal {
        Some(p) => crate::gateway::session::Session::principal_client(&p.name),
        None => address_of(peer),
    }
}

/// An anonymous client's identity: its IPv4 address, or its IPv6 address's /64 (one host
/// commonly has a whole /64, and could otherwise be as many clients as it likes); an
/// IPv4-mapped IPv6 address is its IPv4 one.
pub(crate) fn address_of(ip: std::net::IpAddr) -> String {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

/// `pattern` is an origin, optionally ending in `:*` for any port.
fn origin_matches(pattern: &str, origin: &str) -> bool {
    match pattern.strip_suffix(":*") {
        Some(base) => {
            origin == base
                || origin.strip_prefix(base).is_some_and(|rest| {
                    rest.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
                })
        }
        None => pattern == "*" || pattern == origin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_hosts() {
        assert!(origin_matches("http://localhost:*", "http://localhost:3000"));
        assert!(origin_matches("http://localhost:*", "http://localhost"));
        assert!(!origin_matches("http://localhost:*", "http://localhost.evil.com"));
        assert!(!origin_matches("http://localhost:*", "http://localhost:80x"));
        assert!(origin_matches("https://app.example", "https://app.example"));
        assert_eq!(host_name("127.0.0.1:8700"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8700"), "::1");
        assert_eq!(host_name("localhost"), "localhost");
    }

    #[test]
    fn protocol_versions() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(VERSION_HEADER, v.parse().unwrap());
            h
        };
        assert!(check_protocol_version(&HeaderMap::new()).is_ok(), "absent is accepted");
        assert!(check_protocol_version(&with("2025-06-18")).is_ok());
        // Another version the gateway speaks than the session negotiated: accepted (it was
        // 400 "not the version this session negotiated"; the spec and the reference SDK take it).
        assert!(check_protocol_version(&with("2025-03-26")).is_ok());
        for bad in ["1999-01-01", "garbage", "", "2025-11-25 "] {
            let refused = check_protocol_version(&with(bad)).unwrap_err();
            assert_eq!((refused.status, refused.error.code), (StatusCode::BAD_REQUEST, INVALID_REQUEST), "{bad:?}");
        }
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(address_of(a), address_of(b));
        assert_eq!(address_of(a), "2001:db8:1:2::/64");
        assert_ne!(address_of("2001:db8:1:3::1".parse().unwrap()), address_of(a));
        assert_eq!(address_of("::ffff:10.0.0.1".parse().unwrap()), "10.0.0.1");
        assert_eq!(address_of("127.0.0.1".parse().unwrap()), "127.0.0.1");
    }

    #[test]
    fn slots_are_given_back() {
        let slots = SessionSlots::new(3, 2);
        let a = slots.take("a").unwrap();
        let _b = slots.take("a").unwrap();
        assert_eq!(slots.take("a").err().unwrap().status, StatusCode::TOO_MANY_REQUESTS);
        let _c = slots.take("c").unwrap();
        assert_eq!(slots.take("d").err().unwrap().status, StatusCode::SERVICE_UNAVAILABLE);
        drop(a);
        assert!(slots.take("a").is_ok());
    }
}
