//! Shared links (`share = true`): per upstream, one link the gateway holds for all of that
//! upstream's sessions. The first session's `initialize` opens it; it is initialized once,
//! on the gateway's behalf, declaring every client capability the gateway can relay (the
//! union of what its clients can serve: each session refuses, request by request, what its
//! own client cannot). A link that died is replaced on the next request that needs it, after
//! a backoff that grows while links keep dying. A session's end does not close it; shutdown
//! does ([`SharedLinks::close_all`]). It holds one place among `max_links`.
//!
//! A reload that changes or removes an upstream retires its link ([`SharedLinks::retire`]):
//! the next session opens a new one, and the retired link closes once nothing holds it (the
//! sessions and hosted tasks on it have ended), or at shutdown.

use crate::config::UpstreamConfig;
use crate::gateway::eras::{Eras, open_detecting};
use crate::jsonrpc::{RpcError, UPSTREAM_UNAVAILABLE};
use crate::locks::Mutex;
use crate::upstream::link::{CloseReason, Link, LinkEnv, Negotiated};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The shared link of each upstream configured with `share = true`.
#[derive(Default)]
pub struct SharedLinks {
    slots: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Slot>>>>,
    /// Shutdown began: no link opens, and a backoff under way ends at once (it holds the
    /// slot that shutdown waits for).
    stopping: CancellationToken,
    /// Links retired by a reload, until nothing else holds them.
    retired: Arc<Mutex<Vec<Arc<Link>>>>,
    /// The last generation given to a shared link, of any upstream.
    generations: std::sync::atomic::AtomicU64,
}

/// How often a retired link is looked at to see whether anything still holds it.
const RETIRED_CHECK: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Slot {
    link: Option<(Arc<Link>, Negotiated)>,
    generation: u64,
    /// When the last link died, and the delay before the next may start.
    backoff: Option<(Instant, Duration)>,
}

/// The client capabilities a shared link declares: all that the gateway relays.
pub fn relayed_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
}

impl SharedLinks {
    /// The live shared link of upstream `cfg` and what it negotiated, opening (and
    /// initializing) one if there is none or the last died. Sessions that ask meanwhile wait
    /// for the one being opened.
    pub async fn get(
        &self,
        env: LinkEnv<'_>,
        cfg: &UpstreamConfig,
        eras: &Eras,
    ) -> Result<(Arc<Link>, Negotiated), RpcError> {
        let slot = self.slots.lock().unwrap().entry(cfg.name.clone()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some((link, negotiated)) = &slot.link
            && !link.is_closed()
        {
            return Ok((link.clone(), negotiated.clone()));
        }
        let shutting_down = || RpcError::new(UPSTREAM_UNAVAILABLE, "the gateway is shutting down");
        if self.stopping.is_cancelled() {
            return Err(shutting_down());
        }
        if let Some((dead, _)) = slot.link.take() {
            let died = dead.closed_at().unwrap_or_else(Instant::now);
            let delay = match slot.backoff {
                Some((since, d)) if died.saturating_duration_since(since) < MAX_BACKOFF => (d * 2).min(MAX_BACKOFF),
                _ => FIRST_BACKOFF,
            };
            slot.backoff = Some((died, delay));
            tokio::select! {
                _ = tokio::time::sleep_until(died + delay) => {}
                _ = self.stopping.cancelled() => return Err(shutting_down()),
            }
        }
        let slot = &mut *slot;
        // A shared link serves modern clients too: a dual-era upstream is used in 2026-07-28.
        let generations = &self.generations;
        let opened = open_detecting(eras, cfg, false, |era, legacy_client| {
            // Counted across the slots a reload replaces: an upstream's relayed task ids name
            // the link's generation, and one of a retired link must never name the new one.
            slot.generation = generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            let generation = slot.generation;
            let env = env.clone();
            async move {
                let link = Link::connect(env, cfg, generation, true).await?;
                let handshake = link.handshake(
                    relayed_capabilities(),
                    cfg.client_info.to_value(),
                    era,
                    legacy_client,
                    cfg.connect_timeout,
                    cfg.probe_timeout,
                );
                match handshake.await {
                    Ok(negotiated) => Ok((link, negotiated)),
                    Err(e) => {
                        link.close().await;
                        Err(e)
                    }
                }
            }
        })
        .await;
        let (link, negotiated) = opened?;
        tracing::info!(upstream = %cfg.name, generation = slot.generation, version = %negotiated.version, "shared upstream link open");
        slot.link = Some((link.clone(), negotiated.clone()));
        Ok((link, negotiated))
    }

    /// Retires upstream `name`'s link (a reload changed or removed the upstream): sessions
    /// that hold it keep it; the next to ask gets a new one. It closes once only this holds it.
    pub fn retire(&self, name: &str) {
        let Some(slot) = self.slots.lock().unwrap().remove(name) else { return };
        let (retired, stopping) = (self.retired.clone(), self.stopping.clone());
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        handle.spawn(async move {
            // A link being opened now is retired once it is.
            let Some((link, _)) = slot.lock().await.link.take() else { return };
            retired.lock().unwrap().push(link.clone());
            let mut tick = tokio::time::interval(RETIRED_CHECK);
            // Held here and in `retired`: nothing else holds it.
            while Arc::strong_count(&link) > 2 && !link.is_closed() {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopping.cancelled() => return,
                }
            }
            retired.lock().unwrap().retain(|l| !Arc::ptr_eq(l, &link));
            tracing::info!(upstream = %link.upstream_name(), "retired shared link closed: nothing runs on it any more");
            link.close_because(CloseReason::SessionEnded).await;
        });
    }

    /// Closes every shared link (the gateway is shutting down): what is in flight on them
    /// fails saying so, and none is opened again.
    pub async fn close_all(&self) {
        self.stopping.cancel();
        let retired: Vec<_> = std::mem::take(&mut *self.retired.lock().unwrap());
        for link in retired {
            link.close_because(CloseReason::ShuttingDown).await;
        }
        let slots: Vec<_> = self.slots.lock().unwrap().values().cloned().collect();
        for slot in slots {
            let link = slot.lock().await.link.take();
            if let Some((link, _)) = link {
                link.close_because(CloseReason::ShuttingDown).await;
            }
        }
    }
}
