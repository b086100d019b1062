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

/// How long the stdin front waits for one of `max_in_flight` requests to be answered before
/// it reads the next line anyway.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Serves one client on this process's stdin/stdout, in front of `upstream`, until stdin
/// closes or `stop` completes (SIGTERM); then the link is closed. At the end of stdin, the
/// requests already read are still answered (for at most `drain_timeout`), so that
/// `taskgate stdio < requests` answers every request before it exits.
///
/// Backpressure: no line is read from stdin while more than [`own_stdio::OUT_BOUND`] bytes
/// wait for the client to read them, nor while `max_in_flight` of its requests wait for
/// their answers. A fast client is slowed to the gateway's pace and a client that stops
/// reading stops being served; neither loses a message. (The wait for an in-flight slot is
/// bounded by [`IN_FLIGHT_WAIT`]: the line that frees one may be the next on stdin.)
pub async fn serve_stdio(
    gateway: Arc<Gateway>,
    upstream: &str,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    use crate::jsonrpc::{self, INVALID_REQUEST, Kind, PARSE_ERROR, RpcError};
    use crate::transport::{own_stdio, stdio};
    use serde_json::Value;

    let cfg =
        gateway.config.upstream(upstream).ok_or_else(|| format!("no upstream named \"{upstream}\" in the config"))?;
    let cfg = Arc::new(cfg.clone());
    let out = own_stdio::OutQueue::spawn_stdout(own_stdio::OUT_BOUND);
    own_stdio::set_client_output(out.clone());
    let in_flight = Arc::new(stdio::InFlight::default());
    let sink = Arc::new(stdio::StdoutSink { out: out.clone(), in_flight: in_flight.clone() });
    let session = session::Session::new(gateway.clone(), cfg, sink.clone());
    let max_in_flight = gateway.limits().max_in_flight;
    let mut lines = stdio::LineReader::new(own_stdio::stdin(), gateway.limits().max_body_bytes);
    let reply = |e: RpcError, id: Option<&jsonrpc::Id>| {
        use session::ClientSink;
        sink.deliver(e.response(id), session::Route::Unrelated);
    };
    tokio::pin!(stop);
    let mut stopped = false;
    'lines: loop {
        let next = async {
            out.room().await;
            // Bounded: the line that frees a slot may be on stdin itself (the client's answer
            // to a server request its calls wait for); after a second, the session may refuse.
            let _ = tokio::time::timeout(IN_FLIGHT_WAIT, in_flight.below(max_in_flight)).await;
            lines.next().await
        };
        let line = tokio::select! {
            biased;
            _ = &mut stop => {
                stopped = true;
                break;
            }
            line = next => match line {
                Some(line) => line,
                None => break,
            },
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
                Ok(f) => {
                    match (&f.kind, &f.id) {
                        (Kind::Request, Some(id)) => in_flight.started(id),
                        // No response is due for a request the client cancelled.
                        (Kind::Notification, _) if f.method() == "notifications/cancelled" => {
                            if let Some(id) =
                                f.params().and_then(|p| p.get("requestId")).and_then(jsonrpc::Id::from_value)
                            {
                                in_flight.answered(&id);
                            }
                        }
                        _ => {}
                    }
                    // A client that does not read can hold up the upstream, and through it this
                    // hand-over: SIGTERM still ends it.
                    tokio::select! {
                        biased;
                        _ = &mut stop => {
                            stopped = true;
                            break 'lines;
                        }
                        // Sent on its way without waiting for it: the next line waits behind it.
                        _ = crate::transport::inline::serially(session.handle(f)) => {}
                    }
                }
                Err((id, e)) => reply(e, id.as_ref()),
            }
        }
    }
    if stopped {
        tracing::info!("shutting down");
    } else {
        let drain = gateway.limits().drain_timeout;
        tokio::select! {
            _ = tokio::time::timeout(drain, in_flight.none()) => {}
            _ = &mut stop => tracing::info!("shutting down"),
        }
    }
    session.close().await;
    // What is queued reaches the client, if it still reads (briefly: it may have gone).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), out.drained()).await;
    Ok(())
}
