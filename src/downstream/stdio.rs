//! The stdio front (`taskgate stdio`): one client on this process's stdin/stdout, in front of
//! one upstream. Lines are framed by `transport::lines` and written through
//! `transport::own_stdio`; this module turns them into a session's traffic, with backpressure
//! both ways.

use crate::downstream::stdio_modern::ModernCalls;
use crate::downstream::stdout::{InFlight, StdoutSink};
use crate::gateway::Gateway;
use crate::gateway::session::Session;
use crate::jsonrpc::{self, INVALID_REQUEST, Kind, Message, PARSE_ERROR, RpcError};
use crate::transport::lines::{BadKind, Line, LineReader};
use crate::transport::own_stdio;
use crate::upstream::client::{ClientSink, Route};
use std::sync::Arc;

/// How long the stdin front waits for one of `max_in_flight` requests to be answered before
/// it reads the next line anyway.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Why `taskgate stdio` cannot serve at all. (Everything that goes wrong once it serves is
/// answered to the client.)
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("no upstream named \"{0}\" in the config")]
    UnknownUpstream(String),
}

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
) -> Result<(), StdioError> {
    let cfg = gateway.config.upstream(upstream).ok_or_else(|| StdioError::UnknownUpstream(upstream.into()))?;
    let cfg = Arc::new(cfg.clone());
    let out = own_stdio::OutQueue::spawn_stdout(own_stdio::OUT_BOUND);
    own_stdio::set_client_output(out.clone());
    let in_flight = Arc::new(InFlight::default());
    let sink = Arc::new(StdoutSink { out: out.clone(), in_flight: in_flight.clone() });
    let session = Session::new(gateway.clone(), cfg.clone(), sink.clone());
    let _counted = crate::metrics::global().session_opened(crate::metrics::Transport::Stdio);
    let modern = ModernCalls::new(gateway.clone(), cfg, sink.clone());
    let mut legacy = false;
    let max_in_flight = gateway.limits().max_in_flight;
    let limits = gateway.limits();
    let mut lines = LineReader::new(own_stdio::stdin(), limits.max_body_bytes).with_max_values(limits.max_body_values);
    let reply = |e: RpcError, id: Option<&jsonrpc::Id>| {
        sink.deliver(e.response_message(id), Route::Unrelated);
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
        let line = match line {
            Ok(line) => line,
            // A bad line is answered and skipped; the session goes on.
            Err(bad) => {
                tracing::warn!("skipping a stdin {bad}");
                if let (BadKind::TooLong(_), Some(id)) = (&bad.kind, bad.answers()) {
                    // The client's answer to a server request, too long to read: the request
                    // it answers fails now rather than waiting for its timeout. (A response
                    // gets no response of its own.)
                    let err = RpcError::new(INVALID_REQUEST, format!("the client's response {}", bad.kind));
                    session.handle(Message::made(err.response(Some(id)))).await;
                    continue;
                }
                match (&bad.kind, &bad.id) {
                    (BadKind::TooLong(_) | BadKind::TooManyValues(_), Some(id)) if bad.has_method => reply(
                        RpcError::new(INVALID_REQUEST, format!("invalid request: the message {}", bad.kind)),
                        Some(id),
                    ),
                    (BadKind::TooManyValues(_), _) => {
                        reply(RpcError::new(INVALID_REQUEST, format!("invalid request: the line {}", bad.kind)), None)
                    }
                    _ => reply(RpcError::new(PARSE_ERROR, format!("parse error: the line {}", bad.kind)), None),
                }
                continue;
            }
        };
        let items = match line {
            Line { is_batch: true, .. } if !session.version().is_some_and(|v| v.allows_batches()) => {
                reply(
                    RpcError::new(
                        INVALID_REQUEST,
                        "invalid request: JSON-RPC batches are only accepted in 2025-03-26 sessions",
                    ),
                    None,
                );
                continue;
            }
            line => line.messages,
        };
        for m in items {
            match m {
                Ok(f) => {
                    legacy |= f.method() == jsonrpc::Method::Initialize;
                    if modern.takes(&f, legacy) {
                        if let (Kind::Request, Some(id)) = (f.kind(), f.id()) {
                            in_flight.started(id);
                        } else if let Some(id) = f.request_id_param() {
                            in_flight.answered(&id);
                        }
                        modern.serve(f).await;
                        continue;
                    }
                    match (f.kind(), f.id()) {
                        (Kind::Request, Some(id)) => in_flight.started(id),
                        // No response is due for a request the client cancelled.
                        (Kind::Notification, _) if f.method() == jsonrpc::Method::Cancelled => {
                            if let Some(id) = f.request_id_param() {
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
                Err(r) => reply(r.error, r.id.as_ref()),
            }
        }
    }
    // A listen lasts as long as its client wants: it ends now, with its answer.
    modern.end_listens();
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
    gateway.close_links().await;
    // What is queued reaches the client, if it still reads (briefly: it may have gone).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), out.drained()).await;
    Ok(())
}
