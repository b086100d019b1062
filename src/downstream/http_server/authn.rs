//! What the HTTP server answers outside its routes: the OAuth Protected Resource Metadata
//! while authentication is on (`downstream::auth`), else 404.

use super::HttpServer;
use crate::downstream::auth::is_metadata_path;
use crate::downstream::http_body::{Body, plain};
use crate::downstream::http_guard;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};

impl HttpServer {
    /// A request for a path no upstream is served at.
    pub(super) fn unrouted(&self, req: &Request<Incoming>, path: &str) -> Response<Body> {
        let auth = self.auth.load();
        if auth.enabled() && is_metadata_path(path) && req.method() == Method::GET {
            // Its `resource` may come from `Host`: checked as for the MCP paths.
            if let Err(refused) = http_guard::check_host_and_origin(self.gateway.limits(), req.headers()) {
                return refused.into_response();
            }
            return auth.metadata(req.headers(), path);
        }
        plain(StatusCode::NOT_FOUND, "not found: upstreams are served at /mcp/<name> and /sse/<name>\n")
    }
}
