//! Why a link refuses or fails a request, and the one place where that becomes the JSON-RPC
//! error a client (or a hosted task) sees: its code, and a message that names the upstream
//! and the cause. A transport error arrives here as the cause and goes no further.

use crate::jsonrpc::{GATEWAY_BUSY, INVALID_REQUEST, Id, REQUEST_TIMEOUT, RpcError, UPSTREAM_UNAVAILABLE};
use crate::transport;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// The connection could not be opened.
    #[error("upstream '{upstream}' is unavailable: {cause}")]
    Unavailable { upstream: Arc<str>, cause: transport::Error },
    /// A message could not be sent, or a request failed on its way.
    #[error("upstream '{upstream}': {cause}")]
    Transport { upstream: Arc<str>, cause: transport::Error },
    /// The link is closed.
    #[error("upstream '{upstream}' closed: {reason}")]
    Closed { upstream: Arc<str>, reason: CloseReason },
    /// A request ran past its time without an answer.
    #[error("request timed out: upstream '{upstream}' sent {timeout}")]
    TimedOut { upstream: Arc<str>, timeout: Timeout },
    /// A request of the gateway's own was not answered within `request_timeout`.
    #[error(
        "request timed out: upstream '{upstream}' did not answer the gateway's {method} within request_timeout ({})",
        crate::config::fmt_duration(*after)
    )]
    NoAnswer { upstream: Arc<str>, method: String, after: Duration },
    /// `max_in_flight` requests already wait for this upstream.
    #[error("too many requests in flight to upstream '{upstream}' (limit {limit})")]
    InFlight { upstream: Arc<str>, limit: usize },
    /// The client holds its share of a shared link's requests in flight.
    #[error(
        "too many requests in flight from this client to upstream '{upstream}' (limit {limit} of the link's, max_in_flight_per_client)"
    )]
    ClientShare { upstream: Arc<str>, limit: usize },
    /// `max_links` links are open.
    #[error("too many upstream links open (max_links {0}); try again when running tasks have ended")]
    TooManyLinks(usize),
    /// The client's sessions hold `max_links_per_client` links.
    #[error("too many upstream links for this client (limit {0}, server.max_links_per_client)")]
    TooManyLinksForClient(usize),
    /// The upstream answered the gateway's `initialize` with an error.
    #[error("upstream '{upstream}' refused to initialize: {error}")]
    InitRefused { upstream: Arc<str>, error: String },
    /// The upstream chose a protocol version the gateway does not speak.
    #[error(
        "upstream '{upstream}' negotiated protocol version {version:?}, which the gateway does not speak (it speaks {})",
        crate::mcp::ProtocolVersion::ALL.map(|v| v.as_str()).join(", ")
    )]
    UnknownVersion { upstream: Arc<str>, version: String },
    /// The handshake did not finish within `connect_timeout`.
    #[error("upstream '{upstream}' did not initialize within connect_timeout ({})", crate::config::fmt_duration(*after))]
    InitTimedOut { upstream: Arc<str>, after: Duration },
    /// The client reused the id of a request still in flight.
    #[error("request id {0} is already in use")]
    IdInUse(Id),
}

/// Why a link closed. Requests that find it closed fail with it.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CloseReason {
    /// The connection ended; the transport says why.
    #[error("{0}")]
    Lost(Arc<transport::Error>),
    /// Its session ended.
    #[error("the session ended")]
    SessionEnded,
    /// The gateway is shutting down.
    #[error("the gateway is shutting down")]
    ShuttingDown,
}

/// Which time a request ran past: what it "sent no result" within.
#[derive(Debug)]
pub(crate) enum Timeout {
    /// `request_timeout` since the request or its last progress.
    Idle(Duration),
    /// `max_request_time` in all.
    Lifetime(Duration),
    /// `max_request_time`, with a broken response stream that cannot be resumed before it.
    Unresumable(Duration),
}

impl std::fmt::Display for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::config::fmt_duration;
        match self {
            Timeout::Idle(d) => write!(f, "no result or progress within request_timeout ({})", fmt_duration(*d)),
            Timeout::Lifetime(d) => write!(f, "no result within max_request_time ({})", fmt_duration(*d)),
            Timeout::Unresumable(d) => write!(
                f,
                "no result, and its response stream cannot be resumed within max_request_time ({})",
                fmt_duration(*d)
            ),
        }
    }
}

impl LinkError {
    /// Request failure `cause` reported by the transport (its answer will not come).
    pub(crate) fn failed(upstream: &Arc<str>, cause: transport::Error) -> LinkError {
        let upstream = upstream.clone();
        match cause {
            transport::Error::Unresumable { max_request_time } => {
                LinkError::TimedOut { upstream, timeout: Timeout::Unresumable(max_request_time) }
            }
            cause => LinkError::Transport { upstream, cause },
        }
    }

    pub(crate) fn code(&self) -> i64 {
        match self {
            LinkError::Unavailable { .. }
            | LinkError::Transport { .. }
            | LinkError::Closed { .. }
            | LinkError::InitRefused { .. }
            | LinkError::UnknownVersion { .. }
            | LinkError::InitTimedOut { .. } => UPSTREAM_UNAVAILABLE,
            LinkError::TimedOut { .. } | LinkError::NoAnswer { .. } => REQUEST_TIMEOUT,
            LinkError::InFlight { .. }
            | LinkError::ClientShare { .. }
            | LinkError::TooManyLinks(_)
            | LinkError::TooManyLinksForClient(_) => GATEWAY_BUSY,
            LinkError::IdInUse(_) => INVALID_REQUEST,
        }
    }
}

impl From<LinkError> for RpcError {
    fn from(e: LinkError) -> RpcError {
        RpcError::new(e.code(), e.to_string())
    }
}

impl LinkError {
    /// The error response for `id` (`None`: a hosted task's call, which has no client id).
    pub(crate) fn response(self, id: Option<&Id>) -> serde_json::Value {
        RpcError::from(self).response(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up() -> Arc<str> {
        "up".into()
    }

    #[test]
    fn each_failure_has_its_code_and_names_the_upstream() {
        let cases = [
            (LinkError::Unavailable { upstream: up(), cause: transport::Error::NotRunning }, UPSTREAM_UNAVAILABLE),
            (LinkError::failed(&up(), transport::Error::StreamEnded), UPSTREAM_UNAVAILABLE),
            (LinkError::Closed { upstream: up(), reason: CloseReason::SessionEnded }, UPSTREAM_UNAVAILABLE),
            (LinkError::TimedOut { upstream: up(), timeout: Timeout::Idle(Duration::from_secs(1)) }, REQUEST_TIMEOUT),
            (
                LinkError::failed(&up(), transport::Error::Unresumable { max_request_time: Duration::from_secs(60) }),
                REQUEST_TIMEOUT,
            ),
            (
                LinkError::NoAnswer { upstream: up(), method: "tools/list".into(), after: Duration::ZERO },
                REQUEST_TIMEOUT,
            ),
            (LinkError::InFlight { upstream: up(), limit: 4 }, GATEWAY_BUSY),
            (LinkError::ClientShare { upstream: up(), limit: 2 }, GATEWAY_BUSY),
        ];
        for (e, code) in cases {
            let shown = e.to_string();
            let rpc = RpcError::from(e);
            assert_eq!(rpc.code, code, "{shown}");
            assert!(rpc.message.contains("upstream 'up'"), "{shown}");
        }
        assert_eq!(RpcError::from(LinkError::TooManyLinks(2)).code, GATEWAY_BUSY);
        assert_eq!(RpcError::from(LinkError::IdInUse(Id::Num(1))).code, INVALID_REQUEST);
    }

    #[test]
    fn a_transport_failure_reads_as_it_did_before_it_was_typed() {
        let e = LinkError::failed(&up(), transport::Error::TooLarge { limit: 8 });
        assert_eq!(e.to_string(), "upstream 'up': response exceeds max_body_bytes (8 bytes)");
        let e = LinkError::failed(&up(), transport::Error::Unresumable { max_request_time: Duration::from_secs(60) });
        assert_eq!(
            e.to_string(),
            "request timed out: upstream 'up' sent no result, and its response stream cannot be resumed within \
             max_request_time (1m)"
        );
    }
}
