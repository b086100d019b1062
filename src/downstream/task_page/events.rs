//! The task page's event stream: a snapshot at once (or with the next listing), then one
//! each time the listing (`listing`, one per `refresh` for all viewers) shows this viewer
//! something new; a comment every `sse_keepalive` while nothing changed. It ends when the
//! server begins to shut down, and gives back its viewer's place when it ends.
//!
//! A task of the viewer's own makes the frames and hands them to the response body one
//! at a time: a viewer that takes none for `unread_timeout` while one waits (it does not
//! read, and the connection's buffers are full) is dropped, and its place given back.

use super::listing::Watched;
use super::snapshot::{self, Viewer};
use crate::gateway::Gateway;
use crate::transport::sse;
use bytes::Bytes;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

struct State {
    gateway: Arc<Gateway>,
    /// Cancelled when the server begins to shut down.
    stopping: CancellationToken,
    viewer: Viewer,
    listings: Watched,
    /// The rows (or the failure) last sent (`None`: nothing sent yet).
    last: Option<String>,
    last_sent: Instant,
}

/// The stream of one viewer, holding its place (`held`) while it lasts, until `stopping`.
pub(super) fn stream(
    gateway: Arc<Gateway>,
    stopping: CancellationToken,
    viewer: Viewer,
    listings: Watched,
    held: Box<dyn Send>,
) -> Pin<Box<dyn Stream<Item = Bytes> + Send>> {
    let unread = gateway.config.server.task_page.unread_timeout;
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let mut state = State { gateway, stopping, viewer, listings, last: None, last_sent: Instant::now() };
    tokio::spawn(async move {
        let _held = held;
        loop {
            let frame = tokio::select! {
                f = state.next_frame() => match f {
                    Some(f) => f,
                    None => return,
                },
                _ = tx.closed() => return,
            };
            match tokio::time::timeout(unread, tx.send(frame)).await {
                Ok(Ok(())) => {}
                // The viewer went.
                Ok(Err(_)) => return,
                Err(_) => {
                    crate::metrics::global().task_page_viewer_dropped();
                    tracing::info!(
                        viewer = state.viewer.name(),
                        "task page: dropped a viewer that read nothing for {unread:?} (server.task_page.unread_timeout)"
                    );
                    return;
                }
            }
        }
    });
    Box::pin(futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) }))
}

impl State {
    /// The next frame to send; `None` once the server shuts down.
    async fn next_frame(&mut self) -> Option<Bytes> {
        let keepalive = self.gateway.limits().sse_keepalive;
        let max_bytes = self.gateway.config.server.task_page.max_snapshot_bytes;
        loop {
            tokio::select! {
                _ = self.stopping.cancelled() => return None,
                changed = self.listings.changed() => changed.ok()?,
                _ = tokio::time::sleep_until(self.last_sent + keepalive) => {
                    self.last_sent = Instant::now();
                    return Some(Bytes::from_static(sse::KEEPALIVE));
                }
            }
            let Some(listed) = self.listings.borrow_and_update().clone() else { continue };
            // What a change is told by: the rows, or the store's failure (told to the
            // viewer once; the next listings try again).
            let (seen, data) = match &*listed {
                Ok((rows, truncated)) => {
                    let (rows, cut) = snapshot::rows_text(&self.viewer, rows, max_bytes);
                    let data = snapshot::snapshot(&self.viewer, &rows, *truncated || cut);
                    (rows, data)
                }
                Err(message) => {
                    let data = serde_json::json!({ "error": message }).to_string();
                    (data.clone(), data)
                }
            };
            if self.last.as_deref() != Some(seen.as_str()) {
                self.last = Some(seen);
                self.last_sent = Instant::now();
                return Some(sse::encode_event(None, data.as_bytes()));
            }
        }
    }
}
