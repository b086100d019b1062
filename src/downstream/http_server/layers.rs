//! The tower layers around the HTTP front's handler, built once per server and applied to
//! each connection's service: request tracing (tower-http's `TraceLayer`, making the
//! `http_request` span; debug level, so free unless a layer wants spans, as OTLP export
//! does; failures are not logged twice, the handler logs what matters), and CORS for the
//! origins in `cors_origins` (none by default: no layer at all then), for browser pages
//! such as a task page at `/tasks`. The MCP paths keep their own `Origin` check
//! (`allowed_origins`, 403), which CORS does not loosen.
//!
//! Bodies are limited where they are read (`max_body_bytes`, `http_body::read_body`),
//! with a JSON-RPC error a client can read; no layer limits them a second time.

use super::HttpServer;
use crate::downstream::http_body::Body;
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Response};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::trace::TraceLayer;

/// The CORS layer for `origins` (`"*"`: any), or none when the list is empty.
fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let session = HeaderName::from_static("mcp-session-id");
    let version = HeaderName::from_static("mcp-protocol-version");
    let last_event = HeaderName::from_static("last-event-id");
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE])
            .allow_headers([
                header::CONTENT_TYPE,
                header::ACCEPT,
                header::AUTHORIZATION,
                last_event,
                session.clone(),
                version,
            ])
            .expose_headers([session, header::WWW_AUTHENTICATE])
            .max_age(Duration::from_secs(600)),
    )
}

impl HttpServer {
    /// The service one connection from `peer` is served by.
    pub(super) fn front(
        self: Arc<Self>,
        peer: SocketAddr,
    ) -> impl hyper::service::Service<
        Request<Incoming>,
        Response = Response<impl hyper::body::Body<Data = bytes::Bytes, Error = Infallible> + Send + 'static>,
        Error = Infallible,
        Future = impl Send,
    > {
        let cors = self.cors.get_or_init(|| cors(&self.gateway.limits().cors_origins)).clone();
        let server = self;
        let trace = TraceLayer::new_for_http()
        .make_span_with(|req: &Request<Incoming>| {
            tracing::debug_span!("http_request", method = %req.method(), path = req.uri().path())
        })
        .on_failure(());
        let handler = tower::service_fn(move |req: Request<Incoming>| {
            let server = server.clone();
            // Boxed once here: the layers and hyper move the future they are given, and a
            // moved future is copied whole (tens of KiB for a request's).
            let handled = Box::pin(async move { server.handle(req, peer).await });
            async move { Ok::<Response<Body>, Infallible>(handled.await) }
        });
        let stack = ServiceBuilder::new().layer(trace).option_layer(cors).service(handler);
        hyper_util::service::TowerToHyperService::new(stack)
    }
}
