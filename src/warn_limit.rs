//! Rate-limited warnings: a warning that can repeat as fast as a peer makes it happen (a
//! dropped notification, a malformed message, a failed accept) is written at most once per
//! interval per call site, the line carrying how many like it were left out since the last
//! one (`suppressed`). Knows nothing of the rest of the crate; any layer may use it.
//!
//! ```ignore
//! warn_limited!(upstream = %name, "dropping a malformed message from upstream: {why}");
//! ```
//!
//! The first occurrence is written at once; those within the interval after it are only
//! counted; the first after the interval is written with their count. A flood that stops
//! leaves its last count to the next occurrence. Uses tokio's clock, so that tests may
//! pause it.

use crate::locks::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// How often one call site's warning is written at most.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// One call site's limit.
pub struct WarnLimit {
    interval: Duration,
    state: Mutex<State>,
}

struct State {
    /// When the last line was written (`None`: never).
    last: Option<Instant>,
    /// Occurrences not written since then.
    suppressed: u64,
}

impl WarnLimit {
    /// At most one line per `interval`.
    pub const fn new(interval: Duration) -> WarnLimit {
        WarnLimit { interval, state: Mutex::new(State { last: None, suppressed: 0 }) }
    }

    /// One more occurrence: `Some(n)` if a line is to be written now, `n` being how many
    /// were left out since the last line; `None` if this one is only counted.
    pub fn hit(&self) -> Option<u64> {
        let now = Instant::now();
        self.state.lock().unwrap_or_else(|p| p.into_inner()).hit(now, self.interval)
    }
}

impl State {
    /// One more occurrence at `now` (see [`WarnLimit::hit`]).
    fn hit(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// A [`WarnLimit`] per key (a client and a tool, say), for at most `capacity` keys: past it
/// the key least recently seen is forgotten, and its next occurrence is written at once.
pub struct KeyedWarnLimit<K: std::hash::Hash + Eq> {
    interval: Duration,
    keys: Mutex<lru::LruCache<K, State>>,
}

impl<K: std::hash::Hash + Eq> KeyedWarnLimit<K> {
    pub fn new(interval: Duration, capacity: std::num::NonZeroUsize) -> Self {
        KeyedWarnLimit { interval, keys: Mutex::new(lru::LruCache::new(capacity)) }
    }

    /// One more occurrence of `key`: as [`WarnLimit::hit`], for that key alone.
    pub fn hit(&self, key: K) -> Option<u64> {
        let now = Instant::now();
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        keys.get_or_insert_mut(key, || State { last: None, suppressed: 0 }).hit(now, self.interval)
    }
}

/// `tracing::warn!` at most once per [`WARN_INTERVAL`] for this call site (each use has a
/// [`WarnLimit`] of its own): the line gets a `suppressed` field with the count of those
/// left out since the last.
macro_rules! warn_limited {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::warn_limit::WarnLimit =
            $crate::warn_limit::WarnLimit::new($crate::warn_limit::WARN_INTERVAL);
        if let Some(suppressed) = LIMIT.hit() {
            ::tracing::warn!(suppressed, $($arg)+);
        }
    }};
}

pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_key_has_its_own_interval_and_the_least_recent_is_forgotten() {
        let limit = KeyedWarnLimit::new(Duration::from_secs(60), std::num::NonZeroUsize::new(2).unwrap());
        assert_eq!(limit.hit(("alice", "rm")), Some(0));
        assert_eq!(limit.hit(("alice", "rm")), None);
        assert_eq!(limit.hit(("bob", "rm")), Some(0), "another client is written at once");
        assert_eq!(limit.hit(("alice", "ls")), Some(0), "and another tool");
        // Three keys for two places: alice's "rm" was forgotten, and is written again.
        assert_eq!(limit.hit(("alice", "rm")), Some(0));
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(limit.hit(("bob", "rm")), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn one_line_per_interval_with_the_count_left_out() {
        let limit = WarnLimit::new(Duration::from_secs(10));
        assert_eq!(limit.hit(), Some(0), "the first is written at once");
        for _ in 0..1000 {
            assert_eq!(limit.hit(), None);
        }
        tokio::time::advance(Duration::from_secs(9)).await;
        assert_eq!(limit.hit(), None, "still within the interval");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(limit.hit(), Some(1001), "the next line says how many were left out");
        assert_eq!(limit.hit(), None);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(limit.hit(), Some(1), "the count starts again after each line");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limit.hit(), Some(0));
    }
}
