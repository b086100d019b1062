//! The gateway proper: downstream sessions, upstream links, and what they share.
//!
//! Data flows one way through each layer: downstream transport → [`session`] → [`link`] →
//! upstream transport, and back the same way for responses, notifications and requests the
//! server sends to the client.

pub mod deadline;
pub mod link;
pub mod progress;
pub mod session;
pub mod upstream;

use crate::config::{Config, ServerConfig};
use crate::tasks::hosted::Hosted;
use crate::transport::http_client::HttpClient;
use std::sync::Arc;

/// What every session and link of one gateway process shares.
pub struct Gateway {
    pub config: Config,
    pub http: HttpClient,
    /// The task store and the hosted tasks of every session.
    pub hosted: Arc<Hosted>,
    /// One permit per open upstream link (`max_links`): a link outlives its session while
    /// hosted tasks run on it, so sessions alone do not bound upstream processes.
    pub links: Arc<tokio::sync::Semaphore>,
}

impl Gateway {
    pub fn new(config: Config) -> Arc<Gateway> {
        let connect_timeout =
            config.upstreams.iter().map(|u| u.connect_timeout).max().unwrap_or(std::time::Duration::from_secs(10));
        let hosted = Hosted::new(&config.tasks);
        if tokio::runtime::Handle::try_current().is_ok() {
            hosted.start_sweeper();
        }
        Arc::new(Gateway {
            http: HttpClient::new(config.server.max_body_bytes, connect_timeout),
            hosted,
            links: Arc::new(tokio::sync::Semaphore::new(config.server.max_links)),
            config,
        })
    }

    pub fn limits(&self) -> &ServerConfig {
        &self.config.server
    }

    /// Upstream links open now.
    pub fn open_links(&self) -> usize {
        self.config.server.max_links - self.links.available_permits()
    }
}

/// Serves one client on this process's stdin/stdout, in front of `upstream`, until stdin
/// closes or `stop` completes (SIGTERM); then the link is closed.
pub async fn serve_stdio(
    gateway: Arc<Gateway>,
    upstream: &str,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    use crate::jsonrpc::{self, INVALID_REQUEST, PARSE_ERROR, RpcError};
    use crate::transport::stdio;
    use serde_json::Value;

    let cfg =
        gateway.config.upstream(upstream).ok_or_else(|| format!("no upstream named \"{upstream}\" in the config"))?;
    let cfg = Arc::new(cfg.clone());
    let out = stdio::spawn_writer(tokio::io::stdout(), crate::transport::stdio::STDOUT_QUEUE);
    let sink = Arc::new(stdio::StdoutSink(out));
    let session = session::Session::new(gateway.clone(), cfg, sink.clone());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Value, stdio::BadLine>>(1024);
    let max = gateway.limits().max_body_bytes;
    tokio::spawn(async move {
        stdio::read_messages(tokio::io::stdin(), max, |line| {
            let _ = tx.try_send(line);
        })
        .await;
    });
    let reply = |e: RpcError, id: Option<&jsonrpc::Id>| {
        use session::ClientSink;
        sink.deliver(e.response(id), session::Route::Unrelated);
    };
    tokio::pin!(stop);
    loop {
        let line = tokio::select! {
            line = rx.recv() => match line {
                Some(line) => line,
                None => break,
            },
            _ = &mut stop => {
                tracing::info!("shutting down");
                break;
            }
        };
        let v = match line {
            Ok(v) => v,
            // A bad line is answered and skipped; the session goes on.
            Err(bad) => {
                tracing::warn!("skipping a stdin {bad}");
                match (&bad.kind, &bad.id) {
                    (stdio::BadKind::TooLong(_), Some(id)) if bad.has_method => reply(
                        RpcError::new(INVALID_REQUEST, format!("invalid request: the message {}", bad.kind)),
                        Some(id),
                    ),
                    _ => reply(RpcError::new(PARSE_ERROR, format!("parse error: the line {}", bad.kind)), None),
                }
                continue;
            }
        };
        let items = match v {
            Value::Array(items) => {
                if items.is_empty() || !session.version().is_some_and(|v| v.allows_batches()) {
                    reply(
                        RpcError::new(
                            INVALID_REQUEST,
                            "invalid request: JSON-RPC batches are only accepted in 2025-03-26 sessions",
                        ),
                        None,
                    );
                    continue;
                }
                items
            }
            v => vec![v],
        };
        for m in items {
            match jsonrpc::classify(m) {
                Ok(f) => session.handle(f).await,
                Err((id, e)) => reply(e, id.as_ref()),
            }
        }
    }
    session.close().await;
    Ok(())
}
