//! The bodies of the downstream HTTP server, both transports: reading a request's (bounded),
//! and the responses: a whole body or an event stream, and the small constructors every
//! handler uses.

use crate::downstream::streams::Outgoing;
use crate::jsonrpc::{INVALID_REQUEST, Id, RpcError};
use crate::transport::mcp_http::SESSION_HEADER;
use crate::transport::sse;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Frame as BodyFrame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Every response body the server sends: a whole body, or an event stream (a Streamable
/// HTTP one, or another made frame by frame, such as the legacy transport's).
pub enum Body {
    Full(Option<Bytes>),
    Sse(SseBody),
    Frames(Pin<Box<dyn futures_util::Stream<Item = Bytes> + Send>>),
}

/// An empty body (what a CORS preflight answer carries).
impl Default for Body {
    fn default() -> Self {
        Body::Full(None)
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        let polled = match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take()),
            Body::Sse(s) => s.poll_next(cx),
            Body::Frames(s) => s.as_mut().poll_next(cx),
        };
        polled.map(|o| {
            o.map(|b| {
                crate::metrics::global().bytes_out(b.len());
                Ok(BodyFrame::data(b))
            })
        })
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }
}

/// An SSE body: ready-made frames, then replayed events, then the live channel, with
/// keep-alive comments while idle. Ends when the channel's sender is dropped, or at its
/// deadline ([`SseBody::until`]).
pub struct SseBody {
    frames: VecDeque<Bytes>,
    events: VecDeque<Outgoing>,
    rx: Option<mpsc::Receiver<Outgoing>>,
    keepalive: tokio::time::Interval,
    ends: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl SseBody {
    pub(crate) fn new(
        frames: VecDeque<Bytes>,
        events: VecDeque<Outgoing>,
        rx: Option<mpsc::Receiver<Outgoing>>,
        every: Duration,
    ) -> SseBody {
        let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        SseBody { frames, events, rx, keepalive, ends: None }
    }

    /// The body ends at `deadline` (when the credential that opened it expires), whatever
    /// is still to come; the client reconnects with a fresh one.
    pub(crate) fn until(mut self, deadline: Option<tokio::time::Instant>) -> SseBody {
        self.ends = deadline.map(|d| Box::pin(tokio::time::sleep_until(d)));
        self
    }

    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        if let Some(ends) = self.ends.as_mut()
            && ends.as_mut().poll(cx).is_ready()
        {
            self.rx = None;
            self.frames.clear();
            self.events.clear();
            return Poll::Ready(None);
        }
        if let Some(f) = self.frames.pop_front() {
            return Poll::Ready(Some(f));
        }
        if let Some(ev) = self.events.pop_front() {
            return Poll::Ready(Some(sse::encode_event(Some(&ev.event_id()), &ev.json)));
        }
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(None) };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(ev)) => Poll::Ready(Some(sse::encode_event(Some(&ev.event_id()), &ev.json))),
            Poll::Ready(None) => {
                self.rx = None;
                Poll::Ready(None)
            }
            Poll::Pending => match self.keepalive.poll_tick(cx) {
                Poll::Ready(_) => Poll::Ready(Some(Bytes::from_static(sse::KEEPALIVE))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

pub(crate) fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

pub(crate) fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::Full(None));
    *r.status_mut() = status;
    r
}

/// A request refused before it reaches a session: the HTTP status and the JSON-RPC error for
/// the body. Small, so it is returned as it is; it becomes a response only where it is sent.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub error: RpcError,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Refusal {
        Refusal { status, error: RpcError::new(code, message) }
    }

    pub(crate) fn into_response(self) -> Response<Body> {
        rpc_error(self.status, &self.error, None)
    }
}

/// An HTTP error whose body is a JSON-RPC error response.
pub(crate) fn rpc_error(status: StatusCode, e: &RpcError, id: Option<&Id>) -> Response<Body> {
    let mut r = json_response(e.response_bytes(id), None);
    *r.status_mut() = status;
    r
}

pub(crate) fn json_response(json: Bytes, session: Option<String>) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(json)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(s) = session {
        r.headers_mut().insert(SESSION_HEADER, HeaderValue::from_str(&s).expect("hex is a valid header"));
    }
    r
}

/// A JSON response, with 429 and `Retry-After` where it is a rate limit's refusal (its
/// error's `data.retryAfterMs`); looked for only where a limit is set (`limited`).
pub(crate) fn json_or_limited(json: Bytes, session: Option<String>, limited: bool) -> Response<Body> {
    let retry_ms = limited.then(|| retry_after_ms(&json)).flatten();
    let mut r = json_response(json, session);
    if let Some(ms) = retry_ms {
        too_many_requests(&mut r, ms);
    }
    r
}

/// Makes `r` a 429 whose `Retry-After` is `ms`, in whole seconds.
pub(crate) fn too_many_requests(r: &mut Response<Body>, ms: u64) {
    *r.status_mut() = hyper::StatusCode::TOO_MANY_REQUESTS;
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(ms.div_ceil(1000).max(1)));
}

/// The `retryAfterMs` of a rate limit's refusal, if `json` is one.
pub(crate) fn retry_after_ms(json: &[u8]) -> Option<u64> {
    let key = crate::gateway::rate_limits::RETRY_AFTER_MS.as_bytes();
    if !json.windows(key.len()).any(|w| w == key) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    v.pointer("/error/data")?.get(crate::gateway::rate_limits::RETRY_AFTER_MS)?.as_u64()
}

pub(crate) fn sse_response(body: SseBody, session: Option<String>) -> Response<Body> {
    event_stream_response(Body::Sse(body), session)
}

/// An event stream response (`body` is one of the event stream bodies).
pub(crate) fn event_stream_response(body: Body, session: Option<String>) -> Response<Body> {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(s) = session {
        h.insert(SESSION_HEADER, HeaderValue::from_str(&s).expect("hex is a valid header"));
    }
    r
}

/// Whether a request's `Accept` allows an event stream (no `Accept` at all does).
pub(crate) fn accepts_event_stream(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT) else { return true };
    let accept = accept.to_str().unwrap_or("").to_ascii_lowercase();
    accept
        .split(',')
        .map(|r| r.split(';').next().unwrap_or("").trim())
        .any(|range| matches!(range, "text/event-stream" | "text/*" | "*/*"))
}

/// A `Content-Type`, if given, must be JSON (415 otherwise).
pub(crate) fn check_json_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    match headers.get(header::CONTENT_TYPE) {
        Some(ct) if !ct.to_str().unwrap_or("").to_ascii_lowercase().contains("application/json") => Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_REQUEST,
            "unsupported media type: send application/json",
        )),
        _ => Ok(()),
    }
}

/// Reads a request body of at most `limit` bytes within `timeout` of its headers: 413 when
/// it is larger, 408 (and the connection closed) when it is late.
pub(crate) async fn read_body(body: Incoming, limit: usize, timeout: Duration) -> Result<Bytes, Response<Body>> {
    match tokio::time::timeout(timeout, read_limited(body, limit)).await {
        Ok(read) => {
            if let Ok(b) = &read {
                crate::metrics::global().bytes_in(b.len());
            }
            read
        }
        Err(_) => {
            let mut r = rpc_error(
                StatusCode::REQUEST_TIMEOUT,
                &RpcError::new(INVALID_REQUEST, format!("request timeout: the body did not arrive within {timeout:?}")),
                None,
            );
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

async fn read_limited(body: Incoming, limit: usize) -> Result<Bytes, Response<Body>> {
    use hyper::body::Body as _;
    let too_large = || {
        rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &RpcError::new(INVALID_REQUEST, format!("payload too large: the limit is {limit} bytes")),
            None,
        )
    };
    if body.size_hint().lower() > limit as u64 {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => {
            Err(rpc_error(StatusCode::BAD_REQUEST, &RpcError::new(INVALID_REQUEST, format!("bad request: {e}")), None))
        }
    }
}

/// A body past `max_body_values`, refused before it is parsed.
pub(crate) fn too_many_values(max: usize) -> RpcError {
    RpcError::new(
        INVALID_REQUEST,
        format!("invalid request: the body holds more than {max} JSON values (server.max_body_values)"),
    )
}

/// A new request of a session whose upstream a reload removed (the path answers the same).
pub(crate) fn removed_upstream() -> Response<Body> {
    plain(StatusCode::NOT_FOUND, "not found: the upstream was removed from the config\n")
}
