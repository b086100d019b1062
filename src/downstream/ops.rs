//! The operator's routes of the HTTP front, answered before any MCP path and outside its
//! guards (no `Host`/`Origin` check, no session, and no authentication where there is some),
//! so that probes and scrapers reach them by address: `GET /healthz` (the process serves),
//! `GET /readyz` (every configured upstream can be reached, see
//! [`readiness`](crate::gateway::readiness), and the task store keeps what it is given) and `GET /metrics` (Prometheus text format).
//! They tell nothing of any session's content.

use crate::downstream::http_body::{Body, plain};
use crate::gateway::Gateway;
use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Response, StatusCode};

/// The response to an operator's route, or `None` if `path` is not one.
pub(crate) async fn route(gateway: &Gateway, method: &Method, path: &str, stopping: bool) -> Option<Response<Body>> {
    let known = matches!(path, "/healthz" | "/readyz" | "/metrics");
    if !known {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    Some(match path {
        "/healthz" if stopping => plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n"),
        "/healthz" => plain(StatusCode::OK, "ok\n"),
        "/readyz" => ready(gateway, stopping).await,
        _ => metrics(),
    })
}

async fn ready(gateway: &Gateway, stopping: bool) -> Response<Body> {
    if stopping {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    let upstreams = gateway.live().upstreams().to_vec();
    let down = gateway.readiness.unreachable(&upstreams).await;
    let store = gateway.hosted.store().failing();
    if down.is_empty() && store.is_none() {
        return plain(StatusCode::OK, "ok\n");
    }
    let mut text = String::new();
    if let Some(why) = store {
        text.push_str(&format!("task store failing: {why}\n"));
    }
    if !down.is_empty() {
        text.push_str("unreachable upstreams:\n");
    }
    for (name, why) in down {
        text.push_str(&format!("{name}: {why}\n"));
    }
    text_response(StatusCode::SERVICE_UNAVAILABLE, text, "text/plain; charset=utf-8")
}

fn metrics() -> Response<Body> {
    let text = crate::metrics::global().encode();
    text_response(StatusCode::OK, text, "application/openmetrics-text; version=1.0.0; charset=utf-8")
}

fn text_response(status: StatusCode, text: String, content_type: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Some(Bytes::from(text))));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}
