//! The drain of a graceful shutdown: the listener closed, each request counted as an
//! exchange (`downstream::exchanges`) and one that comes during the drain refused, and the
//! wait for those in flight, and for every session's requests, up to `drain_timeout`.
//!
//! A GET stream is not an exchange: it carries no answer of its own, and shutdown ends it.
//! A request counts once its headers are in: a keep-alive connection idle when the drain
//! begins is closed at once, and a new one's first request is read on and refused (hyper's
//! graceful shutdown).

use super::{HttpServer, HttpSession};
use crate::downstream::exchanges::{holding, refused};
use crate::downstream::http_body::Body;
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::time::Instant;

impl HttpServer {
    /// One request, counted as an exchange; one that comes during the drain is refused.
    pub(super) async fn handle(self: &Arc<Self>, req: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        if self.stopping.is_cancelled() {
            return refused();
        }
        let (exchange, post) = (self.busy.begin(), req.method() == Method::POST);
        let resp = self.route(req, peer).await;
        if post { holding(resp, exchange) } else { resp }
    }

    /// Shutdown begins: the listener closes (the task of [`HttpServer::serve`] ends), and each
    /// open connection closes once its current exchange is done; idle ones at once.
    pub fn stop_accepting(&self) {
        self.stopping.cancel();
    }

    /// Waits until no exchange is in flight and every session's requests are answered, or
    /// `deadline`; says which, and how many were left.
    pub(super) async fn drain(&self, deadline: Instant) {
        let waited = self.gateway.limits().drain_timeout;
        loop {
            // Requests still being read may start sessions or requests: looked at again.
            let sessions = self.all_sessions();
            let answered = |s: &Arc<HttpSession>| s.streams.awaiting_responses() == 0;
            if self.busy.open() == 0 && sessions.iter().all(answered) {
                tracing::info!("drained: every request in flight was answered");
                return;
            }
            let drained = async {
                futures_util::future::join_all(sessions.iter().map(|s| s.streams.all_answered())).await;
                self.busy.none().await;
            };
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                let owed: usize = self.all_sessions().iter().map(|s| s.streams.awaiting_responses()).sum();
                let open = self.busy.open();
                tracing::warn!(
                    "drain_timeout ({waited:?}) reached with {open} exchanges open and {owed} session requests unanswered: answering them with an error and exiting"
                );
                return;
            }
        }
    }
}
