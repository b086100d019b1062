//! What a reload changes in the HTTP front: the sessions of upstreams it removed end once
//! what they have in flight is answered (their new requests already get 404: the path is no
//! longer routed), and new connections take the certificate read again.

use super::HttpServer;
use crate::downstream::tls::TlsAcceptor;
use crate::jsonrpc::{self, RpcError};
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

    /// Ends the sessions of the upstreams `removed` (both transports): each once its requests
    /// in flight are answered, or `drain_timeout` has passed (the rest answered with -32000),
    /// or shutdown begins. Their hosted tasks run on to their end.
    pub fn end_sessions_of(self: &Arc<Self>, removed: &[String]) {
        if removed.is_empty() {
            return;
        }
        let ending: Vec<_> = {
            let mut sessions = self.sessions.lock().unwrap();
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, hs)| removed.iter().any(|r| r == hs.session.upstream_name()))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter().filter_map(|id| sessions.remove(&id).map(|hs| (id, hs))).collect()
        };
        let me = self.clone();
        let removed = removed.to_vec();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + me.gateway.limits().drain_timeout;
            let legacy = me.legacy.end_sessions_of(&removed, deadline, me.stopping.clone());
            let http = async {
                let answered = futures_util::future::join_all(ending.iter().map(|(_, hs)| hs.streams.all_answered()));
                tokio::select! {
                    _ = tokio::time::timeout_at(deadline, answered) => {}
                    _ = me.stopping.cancelled() => {}
                }
                let gone = RpcError::new(jsonrpc::UPSTREAM_UNAVAILABLE, "the upstream was removed from the config");
                for (id, hs) in &ending {
                    me.idle.remove(id);
                    hs.streams.answer_pending(|rid| gone.response(Some(rid)));
                    hs.streams.close();
                    me.forget(id).await;
                    hs.session.close().await;
                }
                if !ending.is_empty() {
                    tracing::info!(upstreams = ?removed, "ended {} sessions of removed upstreams", ending.len());
                }
            };
            tokio::join!(legacy, http);
        });
    }
}
