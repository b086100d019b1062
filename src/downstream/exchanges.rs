//! The exchanges in flight at the HTTP front, as a graceful shutdown counts them: an
//! exchange is one request being handled, and a POST's lasts until its response body is
//! done (a streamed answer, of a session or of a modern client, included). Also the answer
//! a request gets once the drain has begun. The drain itself is `http_server::drain`.

use crate::downstream::http_body::{Body, rpc_error};
use crate::jsonrpc::{self, RpcError};
use hyper::body::Body as _;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// The exchanges in flight; bounded by the connections (one at a time on each).
#[derive(Default)]
pub(crate) struct Exchanges {
    open: AtomicUsize,
    none_left: Notify,
}

/// One exchange in flight, until dropped.
pub(crate) struct Exchange(Arc<Exchanges>);

impl Drop for Exchange {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

impl Exchanges {
    pub(crate) fn begin(self: &Arc<Self>) -> Exchange {
        self.open.fetch_add(1, Ordering::AcqRel);
        Exchange(self.clone())
    }

    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    pub(crate) async fn none(&self) {
        loop {
            let notified = self.none_left.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.open() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A POST's response, holding its exchange until the body is done: a plain body is
/// written as it stands, so only a streamed one is wrapped.
pub(crate) fn holding(resp: Response<Body>, exchange: Exchange) -> Response<Body> {
    if matches!(resp.body(), Body::Full(_)) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let mut body = body;
    let stream = futures_util::stream::poll_fn(move |cx| {
        let _held = &exchange;
        Pin::new(&mut body)
            .poll_frame(cx)
            .map(|f| f.map(|f| f.ok().and_then(|f| f.into_data().ok()).unwrap_or_default()))
    });
    Response::from_parts(parts, Body::Frames(Box::pin(stream)))
}

/// The answer to a request that arrives on an open connection during the drain: 503, and
/// the connection closes after it (new connections are no longer accepted).
pub(crate) fn refused() -> Response<Body> {
    let e = RpcError::new(jsonrpc::UPSTREAM_UNAVAILABLE, "the gateway is shutting down: no new requests");
    let mut r = rpc_error(StatusCode::SERVICE_UNAVAILABLE, &e, None);
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
