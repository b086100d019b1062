//! The accept loop of the HTTP front: plain TCP, or TLS (`[server.tls]`) with each
//! connection's handshake run in that connection's own task, bounded by
//! `header_read_timeout`, so that a client that fails or stalls it costs the others nothing.

use super::HttpServer;
use super::fds;
use crate::downstream::tls::TlsAcceptor;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

impl HttpServer {
    /// Accepts connections until the listener fails; ends idle sessions meanwhile. Past
    /// `max_connections` a new connection is closed at once: waiting would hold it in the
    /// backlog where a client cannot tell it from a slow server, and the connections already
    /// served keep their share.
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        self.serve_with(listener, None).await
    }

    /// [`HttpServer::serve`], over TLS when `tls` is given (and with what a reload puts in
    /// its place, [`HttpServer::replace_tls`], from then on).
    pub async fn serve_with(self: Arc<Self>, listener: TcpListener, tls: Option<TlsAcceptor>) {
        if let Some(tls) = tls {
            self.tls.store(Some(Arc::new(tls)));
        }
        tokio::spawn(self.clone().expire_idle());
        let mut last_refusal_logged: Option<tokio::time::Instant> = None;
        let mut reserve = fds::Reserve::new();
        let mut out_of_fds = Refusals::default();
        let mut failed = Refusals::default();
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = self.stopping.cancelled() => return,
            };
            let (tcp, peer) = match accepted {
                Ok(c) => c,
                Err(e) if fds::out_of_fds(&e) => {
                    // Those waiting are refused now, not left to time out in the backlog.
                    let refused = reserve.shed(&listener);
                    if let Some(n) = out_of_fds.count(refused.max(1)) {
                        tracing::warn!(
                            "refused {n} new connections in {:?}: no file descriptor left ({e}); raise the open-file limit or lower server.max_connections",
                            fds::WARN_INTERVAL
                        );
                    }
                    if refused == 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    continue;
                }
                Err(e) => {
                    if let Some(n) = failed.count(1) {
                        tracing::warn!("accept failed {n} times in {:?}, last: {e}", fds::WARN_INTERVAL);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = self.connections.clone().try_acquire_owned() else {
                if last_refusal_logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    last_refusal_logged = Some(tokio::time::Instant::now());
                    let limit = self.gateway.limits().max_connections;
                    tracing::warn!(%peer, "closed a new connection: {limit} are open (server.max_connections)");
                }
                fds::refuse(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let server = self.clone();
            let tls = self.tls.load_full();
            tokio::spawn(async move {
                match tls {
                    None => server.serve_connection(tcp, peer).await,
                    Some(tls) => {
                        let within = server.gateway.limits().header_read_timeout;
                        match tokio::time::timeout(within, tls.accept(tcp)).await {
                            Ok(Ok(stream)) => server.serve_connection(stream, peer).await,
                            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake failed: {e}"),
                            Err(_) => tracing::debug!(%peer, "TLS handshake not done within {within:?}"),
                        }
                    }
                }
                drop(permit);
            });
        }
    }
}

/// Counts refusals of one kind; says when to log them: the first at once, then at most one
/// line per [`fds::WARN_INTERVAL`] with the count since the last.
#[derive(Default)]
struct Refusals {
    since: Option<tokio::time::Instant>,
    count: usize,
}

impl Refusals {
    /// Adds `n`; the count to log now, if a line is due.
    fn count(&mut self, n: usize) -> Option<usize> {
        self.count += n;
        if self.since.is_some_and(|t| t.elapsed() < fds::WARN_INTERVAL) {
            return None;
        }
        self.since = Some(tokio::time::Instant::now());
        Some(std::mem::take(&mut self.count))
    }
}
