//! A session's life over Streamable HTTP: created by `initialize` (as the authenticated
//! principal's, if any), kept once the upstream accepted it, ended by its client's DELETE
//! or its idle timeout.

use super::*;

impl HttpServer {
    /// Ends each session once it is idle: its deadline is checked when it comes (no sweep of
    /// every session), and a session still in use is watched again until it may be idle.
    /// Its requests only note the time: they cost the deadlines nothing.
    pub(super) async fn expire_idle(self: Arc<Self>) {
        let idle = self.idle.idle();
        while let Some((id, _)) = self.idle.expired().await {
            let expired = {
                let mut map = self.sessions.lock().unwrap();
                match map.get(&id).map(|s| s.streams.idle_until(idle)) {
                    Some(None) => map.remove(&id),
                    Some(Some(at)) => {
                        self.idle.insert_until(id.clone(), at);
                        None
                    }
                    None => None,
                }
            };
            if let Some(s) = expired {
                tracing::info!(upstream = s.session.upstream_name(), "session {} idled out", short(&id));
                self.forget(&id).await;
                s.streams.close();
                s.session.close().await;
            }
        }
    }

    /// Keeps a session created by `initialize` only if the upstream accepted it.
    pub(super) async fn keep_new_session(&self, sid: &str, hs: &Arc<HttpSession>) -> bool {
        if hs.session.version().is_some() {
            tracing::info!(upstream = hs.session.upstream_name(), "session {} started", short(sid));
            return true;
        }
        self.sessions.lock().unwrap().remove(sid);
        self.idle.remove(&sid.to_string());
        hs.streams.close();
        hs.session.close().await;
        false
    }

    pub(super) fn create_session(
        &self,
        upstream: Arc<UpstreamConfig>,
        path: String,
        peer: SocketAddr,
        principal: Option<Principal>,
    ) -> Result<(String, Arc<HttpSession>), Refusal> {
        let slot = self.slots.take(&http_guard::client_of(principal.as_ref(), peer.ip()))?;
        let limits = self.gateway.limits();
        let streams = Arc::new(Streams::with_limits(limits.event_buffer, limits.event_buffer_bytes));
        let (gateway, sink) = (self.gateway.clone(), streams.clone());
        let session = match &principal {
            Some(p) => Session::for_principal(gateway, upstream, sink, &p.name),
            // Without authentication a client is its remote address: per-client limits hold
            // across all its sessions.
            None => {
                Session::for_client(gateway, upstream, sink, Some(crate::downstream::http_guard::address_of(peer.ip())))
            }
        };
        let id = crate::random::id128();
        let hs = Arc::new(HttpSession { session, streams, path, principal, _slot: slot, _counted: counted() });
        self.sessions.lock().unwrap().insert(id.clone(), hs.clone());
        self.idle.insert(id.clone());
        Ok((id, hs))
    }

    pub(super) async fn delete(
        &self,
        req: Request<Incoming>,
        path: &str,
        principal: Option<&Principal>,
    ) -> Response<Body> {
        let (id, _) = match self.lookup(req.headers(), path, principal) {
            Ok(x) => x,
            Err(r)
                if r.status == StatusCode::NOT_FOUND
                    && self.forget_remembered(req.headers(), path, principal).await =>
            {
                return empty(StatusCode::OK);
            }
            Err(refused) => return refused.into_response(),
        };
        let removed = self.sessions.lock().unwrap().remove(&id);
        self.idle.remove(&id);
        if let Some(hs) = removed {
            tracing::info!(upstream = hs.session.upstream_name(), "session {} deleted by the client", short(&id));
            self.forget(&id).await;
            hs.streams.close();
            hs.session.close().await;
        }
        empty(StatusCode::OK)
    }
}
