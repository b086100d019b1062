//! HTTP sessions across a restart: each initialized session is remembered in the task store
//! (`TaskStore::put_session`) and forgotten when it ends (deleted, idle); a request naming
//! a session this process does not know, but the store remembers from before a restart, on
//! the same path, revives it (`Session::revive`), so that its client reaches its tasks
//! again. With the memory store nothing is remembered, and such a request gets 404.

use super::{HttpServer, HttpSession, short};
use crate::config::UpstreamConfig;
use crate::downstream::http_guard;
use crate::downstream::streams::Streams;
use crate::gateway::session::Session;
use crate::transport::mcp_http::SESSION_HEADER;
use hyper::header::HeaderMap;
use std::sync::Arc;

impl HttpServer {
    /// The session an `initialize` just started is remembered (queued before the session's
    /// first task can be, so that the task's durable write carries it).
    pub(super) async fn remember(&self, sid: &str, hs: &HttpSession) {
        if let Some(rec) = hs.session.identity(sid, &hs.path) {
            self.gateway.hosted.store().put_session(rec).await;
        }
        self.gateway.hosted.hold_session(hs.session.owner(), hs.session.clone());
    }

    /// The session ended: it is not revived.
    pub(super) async fn forget(&self, sid: &str) {
        self.gateway.hosted.store().remove_session(sid).await;
    }

    /// The session named in `Mcp-Session-Id`, revived from the store, if it remembers it
    /// on `path` from before a restart (and a session slot is free).
    pub(super) async fn revive(
        &self,
        headers: &HeaderMap,
        path: &str,
        upstream: &Arc<UpstreamConfig>,
    ) -> Option<(String, Arc<HttpSession>)> {
        let id = headers.get(SESSION_HEADER)?.to_str().ok()?;
        let rec = self.gateway.hosted.store().get_session(id).await?;
        if rec.path != path {
            return None;
        }
        let slot = self.slots.take().ok()?;
        let limits = self.gateway.limits();
        let streams = Arc::new(Streams::with_limits(limits.event_buffer, limits.event_buffer_bytes));
        let session = Session::revive(self.gateway.clone(), upstream.clone(), streams.clone(), &rec)?;
        http_guard::check_protocol_version(headers, session.version()).ok()?;
        let hs = Arc::new(HttpSession { session, streams, path: path.to_string(), _slot: slot });
        // Two requests may revive it at once: the first one's session is kept.
        let hs = self.sessions.lock().unwrap().entry(id.to_string()).or_insert(hs).clone();
        self.idle.insert(id.to_string());
        self.gateway.hosted.hold_session(hs.session.owner(), hs.session.clone());
        tracing::info!(upstream = hs.session.upstream_name(), "session {} revived after a restart", short(id));
        Some((id.to_string(), hs))
    }
}
