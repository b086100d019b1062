//! The response bodies of the downstream HTTP server: a whole body or an event stream, and
//! the small constructors every handler uses.

use crate::downstream::streams::Outgoing;
use crate::jsonrpc::{Id, RpcError};
use crate::transport::mcp_http::SESSION_HEADER;
use crate::transport::sse;
use bytes::Bytes;
use hyper::body::Frame as BodyFrame;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Every response body the server sends: a whole body, or an event stream.
pub enum Body {
    Full(Option<Bytes>),
    Sse(SseBody),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<BodyFrame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(BodyFrame::data(b)))),
            Body::Sse(s) => s.poll_next(cx).map(|o| o.map(|b| Ok(BodyFrame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }
}

/// An SSE body: ready-made frames, then replayed events, then the live channel, with
/// keep-alive comments while idle. Ends when the channel's sender is dropped.
pub struct SseBody {
    frames: VecDeque<Bytes>,
    events: VecDeque<Outgoing>,
    rx: Option<mpsc::Receiver<Outgoing>>,
    keepalive: tokio::time::Interval,
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
        SseBody { frames, events, rx, keepalive }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
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
    let mut r = json_response(Bytes::from(serde_json::to_vec(&e.response(id)).unwrap()), None);
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

pub(crate) fn sse_response(body: SseBody, session: Option<String>) -> Response<Body> {
    let mut r = Response::new(Body::Sse(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(s) = session {
        h.insert(SESSION_HEADER, HeaderValue::from_str(&s).expect("hex is a valid header"));
    }
    r
}
