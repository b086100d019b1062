//! What can go wrong carrying messages to and from an upstream: one variant for each cause
//! the transports tell apart. A message is complete on its own (its cause, and for HTTP the
//! URL as shown, without secrets), since it is what an operator reads; the gateway names the
//! upstream and picks the JSON-RPC code, in one place (`upstream::link::error`).

use crate::transport::http_conn::{BoxError, ConnError, error_chain};
use crate::transport::lines::BadKind;
use hyper::StatusCode;
use std::fmt;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A stdio upstream's command could not be started.
    #[error("cannot start `{command}`: {cause}")]
    Spawn { command: String, cause: std::io::Error },
    /// A stdio upstream's process no longer takes messages.
    #[error("the process is not running")]
    NotRunning,
    /// A stdio upstream's process ended (its stdout closed).
    #[error("process {} {exit}", pid.map(|p| p.to_string()).unwrap_or_default())]
    Exited { pid: Option<u32>, exit: Exit },
    /// The server on the other end of an in-memory stream closed its end.
    #[error("the server closed its end of the stream")]
    StreamClosed,
    /// An HTTP upstream's URL cannot be used.
    #[error("bad url {url}: {reason}")]
    BadUrl { url: String, reason: BoxError },
    /// A configured header is not a valid HTTP header.
    #[error("{0}")]
    BadHeader(BoxError),
    /// The request could not be built.
    #[error("{0}")]
    Request(hyper::http::Error),
    /// The gateway has closed this upstream session.
    #[error("the upstream session is closed")]
    SessionClosed,
    /// No connection could be had, or it failed before a response came.
    #[error("cannot reach {url}: {cause}")]
    Unreachable { url: String, cause: ConnError },
    /// No response head within `wait`.
    #[error("no response from {url} within {wait:?}")]
    NoResponse { url: String, wait: Duration },
    /// An HTTP error status, with what an operator needs to fix it: the `WWW-Authenticate`
    /// challenge, if any, and the start of the body.
    #[error("HTTP {status} from {url}{}", status_detail(challenge.as_deref(), body))]
    Status { url: String, status: StatusCode, challenge: Option<String>, body: String },
    /// HTTP 404 to a request carrying the upstream's session id: that session is gone.
    #[error("the upstream session expired (HTTP 404 from {url})")]
    SessionExpired { url: String },
    /// HTTP 202 to a request: no answer will come.
    #[error("the upstream accepted the request without answering it")]
    Unanswered,
    /// The response stream ended before the response, and could not be resumed.
    #[error("the upstream closed the response stream before answering")]
    StreamEnded,
    /// The response stream broke and cannot be resumed before `max_request_time`.
    #[error(
        "the response stream cannot be resumed within max_request_time ({})",
        crate::config::fmt_duration(*max_request_time)
    )]
    Unresumable { max_request_time: Duration },
    /// A response (a body, an SSE event, a stdout line) over `max_body_bytes`.
    #[error("response exceeds max_body_bytes ({limit} bytes)")]
    TooLarge { limit: usize },
    /// A stdout line that answers a request is not UTF-8.
    #[error("response is not valid UTF-8")]
    NotUtf8,
    /// A stdout line that answers a request is not JSON (the parser's complaint).
    #[error("response is not JSON ({0})")]
    NotJson(String),
    /// The connection broke while a response body was read.
    #[error("the response body broke off: {}", error_chain(.0.as_ref()))]
    BodyBroken(BoxError),
    /// A response body that is not JSON-RPC (the parser's complaint).
    #[error("unreadable response body: {0}")]
    BadBody(String),
    /// A response (in a body, an SSE event or a stdout line) that the gateway refuses to read
    /// (why, as the parser says it: a key it reads twice, a number beyond `f64`, ...).
    #[error("unreadable response: {0}")]
    BadResponse(String),
    /// A batch (JSON array) from the upstream with more messages than `max_batch`: dropped
    /// whole; the requests its responses answered fail.
    #[error("the upstream sent a batch of {len} messages, more than max_batch ({limit})")]
    BatchTooLarge { limit: usize, len: usize },
    /// Legacy HTTP+SSE: the GET on the SSE URL was not answered with an event stream.
    #[error("GET {url} is not an event stream (content-type {content_type:?})")]
    NotEventStream { url: String, content_type: String },
    /// Legacy HTTP+SSE: no `endpoint` event within `connect_timeout`.
    #[error("no `endpoint` event from {url} within connect_timeout ({})", crate::config::fmt_duration(*wait))]
    NoEndpoint { url: String, wait: Duration },
    /// Legacy HTTP+SSE: the `endpoint` event names a URI that cannot be used.
    #[error("the `endpoint` event from {url} is not a usable URI ({endpoint:?}): {reason}")]
    BadEndpoint { url: String, endpoint: String, reason: String },
    /// Legacy HTTP+SSE: the `endpoint` event names another origin (scheme, host, port) than
    /// the SSE URL's. Refused: the gateway would otherwise send everything, with the
    /// configured headers, to wherever the event points.
    #[error("the `endpoint` event from {url} points to another origin ({endpoint}); refused")]
    ForeignEndpoint { url: String, endpoint: String },
    /// Legacy HTTP+SSE: the event stream ended; the transport has no way to resume it.
    #[error("the HTTP+SSE event stream from {url} ended{}", cause.as_ref().map(|c| format!(": {c}")).unwrap_or_default())]
    EventStreamEnded { url: String, cause: Option<String> },
    /// `transport = "auto"`: the first POST was refused as a legacy server would refuse it
    /// (400, 404, 405), and the legacy HTTP+SSE transport at the same URL failed too.
    #[error("neither transport works: Streamable HTTP got {post}; legacy HTTP+SSE: {sse}")]
    NoTransport { post: Box<Error>, sse: Box<Error> },
}

/// How a child process ended, as far as the gateway learnt it.
#[derive(Debug)]
pub enum Exit {
    Status(std::process::ExitStatus),
    WaitFailed(std::io::Error),
    /// It closed its stdout, and did not exit soon after.
    Unknown,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Status(s) => write!(f, "{s}"),
            Exit::WaitFailed(e) => write!(f, "wait failed: {e}"),
            Exit::Unknown => f.write_str("closed its stdout"),
        }
    }
}

/// A stdout line that answered a request and could not be read.
impl From<BadKind> for Error {
    fn from(kind: BadKind) -> Error {
        match kind {
            BadKind::TooLong(limit) => Error::TooLarge { limit },
            // (Upstream lines are not counted: a client's only.)
            kind @ BadKind::TooManyValues(_) => Error::NotJson(kind.to_string()),
            BadKind::InvalidUtf8 => Error::NotUtf8,
            BadKind::NotJson(e) => Error::NotJson(e),
        }
    }
}

/// The challenge and the start of the body (300 characters) of an HTTP error.
fn status_detail(challenge: Option<&str>, body: &str) -> String {
    let mut out = String::new();
    if let Some(c) = challenge {
        out.push_str(&format!(" (WWW-Authenticate: {c})"));
    }
    let text = body.trim();
    if !text.is_empty() {
        out.push_str(": ");
        out.extend(text.chars().take(300));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_error_shows_its_challenge_and_the_start_of_its_body() {
        let e = Error::Status {
            url: "http://h/mcp".into(),
            status: StatusCode::UNAUTHORIZED,
            challenge: Some("Bearer error=\"invalid_token\"".into()),
            body: format!(" {} ", "x".repeat(400)),
        };
        let want = format!(
            "HTTP 401 Unauthorized from http://h/mcp (WWW-Authenticate: Bearer error=\"invalid_token\"): {}",
            "x".repeat(300)
        );
        assert_eq!(e.to_string(), want);
        let bare =
            Error::Status { url: "u".into(), status: StatusCode::BAD_GATEWAY, challenge: None, body: " ".into() };
        assert_eq!(bare.to_string(), "HTTP 502 Bad Gateway from u");
    }

    #[test]
    fn a_bad_stdout_line_is_the_same_error_as_a_bad_http_response() {
        assert!(matches!(Error::from(BadKind::TooLong(64)), Error::TooLarge { limit: 64 }));
        assert!(matches!(Error::from(BadKind::InvalidUtf8), Error::NotUtf8));
        assert_eq!(Error::from(BadKind::TooLong(64)).to_string(), "response exceeds max_body_bytes (64 bytes)");
    }
}
