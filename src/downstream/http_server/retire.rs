//! What a reload changes in the HTTP front: the sessions of upstreams it removed end once
//! what they have in flight is answered (meanwhile their new requests get 404, as the path
//! does; answers to the server's questions, notifications and streams still reach them), and
//! new connections take the certificate read again.

use super::HttpServer;
use crate::config::UpstreamConfig;
use crate::downstream::tls::TlsAcceptor;
use crate::jsonrpc::{self, RpcError};
use crate::transport::mcp_http::SESSION_HEADER;
use hyper::header::HeaderMap;
use std::sync::Arc;

impl HttpServer {
    /// The gateway it serves.
    pub fn gateway(&self) -> &Arc<crate::gateway::Gateway> {
        &self.gateway
    }

    /// New connections are served over TLS with `tls` (a reload read the certificate again);
    /// those open keep the one they began with.
    pub fn replace_tls(&self, tls: TlsAcceptor) {
        self.tls.store(Some(Arc::new(tls)));
    }

    /// Requests from now on are authenticated by `[server.auth]` as `config` has it (a reload
    /// read it, its token and key files included); sessions stay bound to their principals.
    pub fn replace_auth(&self, config: &crate::config::AuthConfig) {
        let https = self.gateway.config.server.tls.is_some();
        self.auth.store(crate::downstream::auth::Auth::new(config, https));
    }

    /// The tool policy of upstreams `changed` changed: their open sessions (both transports)
    /// are told their tool list changed, so that clients list again and see what they may
    /// call now.
    pub fn announce_tool_changes(&self, changed: &[String]) {
        if changed.is_empty() {
            return;
        }
        let mut told = 0;
        let http = self.all_sessions().into_iter().map(|hs| hs.session.clone());
        for s in http.chain(self.legacy.sessions_of(changed)) {
            if changed.iter().any(|c| c == s.upstream_name()) && s.tools_changed() {
                told += 1;
            }
        }
        tracing::info!(upstreams = ?changed, sessions = told, "told open sessions their tool list changed");
    }

    /// Ends the sessions of the upstreams `removed` (both transports): each once its requests
    /// in flight are answered, or `drain_timeout` has passed (the rest answered with -32000),
    /// or shutdown begins. Meanwhile they take answers and notifications, not new requests
    /// ([`Session::drain`](crate::gateway::session::Session::drain)). Their hosted tasks run
    /// on to their end.
    pub fn end_sessions_of(self: &Arc<Self>, removed: &[String]) {
        if removed.is_empty() {
            return;
        }
        let ending: Vec<_> = self
            .all_sessions()
            .into_iter()
            .filter(|hs| removed.iter().any(|r| r == hs.session.upstream_name()))
            .collect();
        for hs in &ending {
            hs.session.drain();
        }
        let me = self.clone();
        let removed = removed.to_vec();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + me.gateway.limits().drain_timeout;
            let legacy = me.legacy.end_sessions_of(&removed, deadline, me.stopping.clone());
            let http = async {
                let answered = futures_util::future::join_all(ending.iter().map(|hs| hs.streams.all_answered()));
                tokio::select! {
                    _ = tokio::time::timeout_at(deadline, answered) => {}
                    _ = me.stopping.cancelled() => {}
                }
                let gone = RpcError::new(jsonrpc::UPSTREAM_UNAVAILABLE, "the upstream was removed from the config");
                let mut ended = 0;
                for hs in &ending {
                    let id =
                        me.sessions.lock().unwrap().iter().find(|(_, s)| Arc::ptr_eq(s, hs)).map(|(id, _)| id.clone());
                    // Gone already if its client deleted it, or it idled out.
                    let Some(id) = id else { continue };
                    me.sessions.lock().unwrap().remove(&id);
                    me.idle.remove(&id);
                    hs.streams.answer_pending(|rid| gone.response(Some(rid)));
                    hs.streams.close();
                    me.forget(&id).await;
                    hs.session.close().await;
                    ended += 1;
                }
                if ended > 0 {
                    tracing::info!(upstreams = ?removed, "ended {ended} sessions of removed upstreams");
                }
            };
            tokio::join!(legacy, http);
        });
    }

    /// The upstream of the session a request names on `path`, if that session is draining
    /// (its upstream was removed): its client may still answer and stream.
    pub(super) fn draining_route(&self, headers: &HeaderMap, path: &str) -> Option<Arc<UpstreamConfig>> {
        let id = headers.get(SESSION_HEADER)?.to_str().ok()?;
        let hs = self.sessions.lock().unwrap().get(id).cloned()?;
        (hs.path == path && hs.session.is_draining()).then(|| hs.session.upstream_config().clone())
    }
}
