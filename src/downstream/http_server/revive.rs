//! HTTP sessions across a restart: each initialized session is remembered in the task store
//! (`TaskStore::put_session`) and forgotten when it ends (deleted, idle); a request naming
//! a session this process does not know, but the store remembers from before a restart, on
//! the same path, revives it (`Session::revive`), so that its client reaches its tasks
//! again. With the memory store nothing is remembered, and such a request gets 404.

use super::{HttpServer, HttpSession, short};
use crate::config::UpstreamConfig;
use crate::downstream::auth::Principal;
use crate::downstream::http_body::Refusal;
use crate::downstream::http_guard;
use crate::downstream::streams::Streams;
use crate::gateway::session::Session;
use crate::mcp::ProtocolVersion;
use crate::tasks::store::SessionRecord;
use crate::transport::mcp_http::SESSION_HEADER;
use hyper::header::HeaderMap;
use std::sync::Arc;

impl HttpServer {
    /// The session an `initialize` just started is remembered (queued before the session's
    /// first task can be, so that the task's durable write carries it).
    pub(super) async fn remember(&self, sid: &str, hs: &HttpSession) {
        if let Some(rec) = hs.session.identity(sid, &hs.path) {
            hs.session.remembered_as(sid, &hs.path);
            self.gateway.hosted.store().put_session(rec).await;
        }
        self.gateway.hosted.hold_session(hs.session.owner(), hs.session.clone());
    }

    /// The session ended: it is not revived.
    pub(super) async fn forget(&self, sid: &str) {
        self.gateway.hosted.store().remove_session(sid).await;
    }

    /// The session named in `Mcp-Session-Id`, revived from the store, if it remembers it
    /// on `path` from before a restart; else `unknown` (the 404 the lookup gave). A request
    /// with another `MCP-Protocol-Version` than the session's gets 400, as it would had the
    /// session never gone away, and one that finds `max_sessions` taken 503: a 404 would tell
    /// the client to initialize again, giving its tasks up.
    pub(super) async fn revive(
        &self,
        headers: &HeaderMap,
        path: &str,
        upstream: &Arc<UpstreamConfig>,
        principal: Option<&Principal>,
        unknown: Refusal,
    ) -> Result<(String, Arc<HttpSession>), Refusal> {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else { return Err(unknown) };
        let found = self.gateway.hosted.store().get_session(id).await;
        let Some(rec) = found.filter(|r| r.path == path && owned_by(r, principal, &upstream.name)) else {
            return Err(unknown);
        };
        if ProtocolVersion::parse(&rec.version).is_none() {
            return Err(unknown);
        }
        http_guard::check_protocol_version(headers)?;
        let hs = {
            // Checked and inserted under one lock: of requests reviving it at once, the first
            // revives it (taking one slot), and the others find its session.
            let mut sessions = self.sessions.lock().unwrap();
            if let Some(hs) = sessions.get(id) {
                return if hs.path == path { Ok((id.to_string(), hs.clone())) } else { Err(unknown) };
            }
            let slot = self.slots.take(&rec.client)?;
            let limits = self.gateway.limits();
            let streams = Arc::new(Streams::with_limits(limits.event_buffer, limits.event_buffer_bytes));
            let Some(session) = Session::revive(self.gateway.clone(), upstream.clone(), streams.clone(), &rec) else {
                return Err(unknown);
            };
            let principal = principal.cloned();
            let hs = Arc::new(HttpSession {
                session,
                streams,
                path: path.to_string(),
                principal,
                _slot: slot,
                _counted: super::counted(),
            });
            sessions.insert(id.to_string(), hs.clone());
            hs
        };
        self.idle.insert(id.to_string());
        self.gateway.hosted.hold_session(hs.session.owner(), hs.session.clone());
        tracing::info!(upstream = hs.session.upstream_name(), "session {} revived after a restart", short(id));
        Ok((id.to_string(), hs))
    }

    /// A DELETE of a session the store remembers from before a restart: it is not revived,
    /// but it ended, and is not revived later either. `false` if none is remembered there.
    pub(super) async fn forget_remembered(
        &self,
        headers: &HeaderMap,
        path: &str,
        principal: Option<&Principal>,
    ) -> bool {
        let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else { return false };
        let Some(upstream) = self.routes.get(&self.gateway, path) else { return false };
        let found = self.gateway.hosted.store().get_session(id).await;
        if found.is_none_or(|r| r.path != path || !owned_by(&r, principal, &upstream.name)) {
            return false;
        }
        // A request may have revived it meanwhile: that session ends too.
        let revived = self.sessions.lock().unwrap().remove(id);
        self.idle.remove(&id.to_string());
        self.forget(id).await;
        if let Some(hs) = revived {
            hs.streams.close();
            hs.session.close().await;
        }
        tracing::info!("session {} (from before a restart) deleted by the client", short(id));
        true
    }
}

/// Whether remembered session `rec` is `principal`'s (made by it on `upstream`), or, without
/// authentication, one made without it: a session is revived only for whoever made it.
fn owned_by(rec: &SessionRecord, principal: Option<&Principal>, upstream: &str) -> bool {
    match principal {
        Some(p) => rec.owner == Session::owner_of(&p.name, upstream),
        None => !Session::is_principal_owner(&rec.owner),
    }
}
