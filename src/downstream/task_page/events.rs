//! The task page's event stream: a snapshot at once, then every `refresh` the tasks are
//! listed again (one store listing of at most `max_tasks`) and a snapshot sent if they
//! changed; a comment every `sse_keepalive` while nothing did. It ends when the server
//! begins to shut down, and gives back its viewer's place when it ends.

use super::snapshot::{self, Viewer};
use crate::gateway::Gateway;
use crate::transport::sse;
use bytes::Bytes;
use futures_util::Stream;
use std::pin::Pin;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

struct State {
    gateway: Arc<Gateway>,
    /// Cancelled when the server begins to shut down.
    stopping: CancellationToken,
    viewer: Viewer,
    _permit: OwnedSemaphorePermit,
    /// The rows (or the failure) last sent (`None`: nothing sent yet).
    last: Option<String>,
    tick: tokio::time::Interval,
    last_sent: Instant,
}

/// The stream of one viewer, holding its place (`permit`) while it lasts, until `stopping`.
pub(super) fn stream(
    gateway: Arc<Gateway>,
    stopping: CancellationToken,
    viewer: Viewer,
    permit: OwnedSemaphorePermit,
) -> Pin<Box<dyn Stream<Item = Bytes> + Send>> {
    let mut tick = tokio::time::interval(gateway.config.server.task_page.refresh);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let state = State { gateway, stopping, viewer, _permit: permit, last: None, tick, last_sent: Instant::now() };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        let frame = st.next_frame().await?;
        Some((frame, st))
    }))
}

impl State {
    /// The next frame to send; `None` once the server shuts down.
    async fn next_frame(&mut self) -> Option<Bytes> {
        let keepalive = self.gateway.limits().sse_keepalive;
        loop {
            tokio::select! {
                _ = self.stopping.cancelled() => return None,
                _ = self.tick.tick() => {}
            }
            let max = self.gateway.config.tasks.max_tasks;
            // What a change is told by: the rows, or the store's failure (told to the
            // viewer once; the next looks try again).
            let (seen, data) = match self.gateway.hosted.overview(max).await {
                Ok((rows, truncated)) => {
                    let rows = snapshot::rows_text(&self.viewer, &rows);
                    let data = snapshot::snapshot(&self.viewer, &rows, truncated);
                    (rows, data)
                }
                Err(e) => {
                    let data = serde_json::json!({ "error": e.message }).to_string();
                    (data.clone(), data)
                }
            };
            if self.last.as_deref() != Some(seen.as_str()) {
                self.last = Some(seen);
                self.last_sent = Instant::now();
                return Some(sse::encode_event(None, data.as_bytes()));
            }
            if self.last_sent.elapsed() >= keepalive {
                self.last_sent = Instant::now();
                return Some(Bytes::from_static(sse::KEEPALIVE));
            }
        }
    }
}
