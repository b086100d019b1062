//! How fast each client may call (`[server.limits]`, `[upstream.limits]`): a token bucket
//! per client (its principal with authentication, else its session, or for a 2026-07-28
//! client without a session its address), kept by `governor` on tokio's clock (so tests
//! pause time). A call past its bucket is refused with the time until the next one fits;
//! nothing of it goes upstream.
//!
//! The buckets of clients that are full again are forgotten once more than [`MAX_CLIENTS`]
//! are kept (looked at every [`PRUNE_EVERY`] calls): a client's state is only what it owes.

use crate::config::{Config, RateLimit};
use governor::clock::Clock;
use governor::{Quota, RateLimiter};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What marks a refusal by a rate limit: its error's `data` carries this (the time until
/// a call fits, in milliseconds).
pub const RETRY_AFTER_MS: &str = "retryAfterMs";

/// Buckets kept before the full ones are forgotten.
pub const MAX_CLIENTS: usize = 4096;

/// Tokio's clock, as `governor` reads time.
#[derive(Clone)]
struct TokioClock {
    start: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        self.start.elapsed()
    }
}

type Buckets = RateLimiter<
    Arc<str>,
    governor::state::keyed::HashMapStateStore<Arc<str>>,
    TokioClock,
    governor::middleware::NoOpMiddleware<Duration>,
>;

/// One table's buckets, one per client.
struct Limit {
    quota: RateLimit,
    buckets: Buckets,
    clock: TokioClock,
    /// Calls judged: the buckets kept are counted once per [`PRUNE_EVERY`] of them.
    judged: AtomicU64,
}

/// How often the number of buckets kept is looked at.
const PRUNE_EVERY: u64 = 256;

impl Limit {
    fn new(limits: RateLimit) -> Limit {
        let rate = NonZeroU32::new(limits.calls_per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
        let clock = TokioClock { start: tokio::time::Instant::now() };
        let quota = Quota::per_minute(rate).allow_burst(burst);
        Limit {
            quota: limits,
            buckets: RateLimiter::hashmap_with_clock(quota, clock.clone()),
            clock,
            judged: AtomicU64::new(0),
        }
    }

    /// Takes one call from `client`'s bucket, or says how long until one fits.
    fn take(&self, client: &Arc<str>) -> Result<(), Duration> {
        if self.judged.fetch_add(1, Ordering::Relaxed).is_multiple_of(PRUNE_EVERY) && self.buckets.len() > MAX_CLIENTS {
            self.buckets.retain_recent();
        }
        self.buckets.check_key(client).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

/// Which table refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Upstream,
    Server,
}

/// Every bucket of the gateway.
pub struct RateLimits {
    server: Option<Arc<Limit>>,
    upstreams: HashMap<String, Arc<Limit>>,
}

impl RateLimits {
    /// The buckets of `config`'s limits; those of `was` (the config before a reload) whose
    /// quota is unchanged are kept, with what each client owes.
    pub fn new(config: &Config, was: Option<&RateLimits>) -> RateLimits {
        let kept = |old: Option<&Arc<Limit>>, quota: RateLimit| match old {
            Some(l) if l.quota == quota => l.clone(),
            _ => Arc::new(Limit::new(quota)),
        };
        RateLimits {
            server: config.server.rate_limit.map(|q| kept(was.and_then(|w| w.server.as_ref()), q)),
            upstreams: config
                .upstreams
                .iter()
                .filter_map(|u| {
                    let old = was.and_then(|w| w.upstreams.get(&u.name));
                    Some((u.name.clone(), kept(old, u.rate_limit?)))
                })
                .collect(),
        }
    }

    /// Whether any limit is set for calls to `upstream`.
    pub fn limits(&self, upstream: &str) -> bool {
        self.server.is_some() || self.upstreams.contains_key(upstream)
    }

    /// Takes one call of `client` to `upstream` from its buckets (the upstream's, then the
    /// server's), or says which refused it and how long until a call fits.
    pub fn take(&self, upstream: &str, client: &Arc<str>) -> Result<(), (Scope, Duration)> {
        if let Some(l) = self.upstreams.get(upstream) {
            l.take(client).map_err(|d| (Scope::Upstream, d))?;
        }
        if let Some(l) = &self.server {
            l.take(client).map_err(|d| (Scope::Server, d))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_sustained_rate_per_client() {
        let l = Limit::new(RateLimit { calls_per_minute: 60, burst: 3 });
        let (alice, bob): (Arc<str>, Arc<str>) = ("alice".into(), "bob".into());
        for _ in 0..3 {
            assert!(l.take(&alice).is_ok());
        }
        let wait = l.take(&alice).unwrap_err();
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1), "{wait:?}");
        // Bob has his own bucket.
        assert!(l.take(&bob).is_ok());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(l.take(&alice).is_ok());
        assert!(l.take(&alice).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn full_buckets_are_forgotten_past_the_bound() {
        let l = Limit::new(RateLimit { calls_per_minute: 60_000, burst: 1 });
        for i in 0..=MAX_CLIENTS {
            l.take(&format!("c{i}").into()).unwrap();
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        for i in 0..PRUNE_EVERY {
            l.take(&format!("later{i}").into()).unwrap();
        }
        assert!(l.buckets.len() <= PRUNE_EVERY as usize + 1, "{}", l.buckets.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_keeps_the_buckets_whose_quota_is_unchanged() {
        let config = |a: u32, b: u32| {
            crate::config::Config::parse(
                &format!(
                    "[[upstream]]\nname = \"a\"\nbuiltin = \"demo\"\n[upstream.limits]\ncalls_per_minute = {a}\nburst = 1\n\
                     [[upstream]]\nname = \"b\"\nbuiltin = \"demo\"\n[upstream.limits]\ncalls_per_minute = {b}\nburst = 1\n"
                ),
                &|_| None,
            )
            .unwrap()
        };
        let first = RateLimits::new(&config(60, 60), None);
        let alice: Arc<str> = "alice".into();
        first.take("a", &alice).unwrap();
        first.take("b", &alice).unwrap();
        // "a" is unchanged: alice still owes its call; "b" has a new quota: a new bucket.
        let next = RateLimits::new(&config(60, 120), Some(&first));
        assert_eq!(next.take("a", &alice).unwrap_err().0, Scope::Upstream);
        assert!(next.take("b", &alice).is_ok());
    }
}
