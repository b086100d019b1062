//! Upstream tasks relayed to clients that reach them by id alone: a 2026-07-28 client's
//! extension tasks that a 2025-11-25 upstream runs (`gateway::session::modern_tasks`). The
//! era has no session to scope a task to, and an upstream's ids need not be hard to guess,
//! so only ids the gateway handed out are passed upstream: one created for a modern client
//! is known here (by upstream and id) until it is evicted, least recently used first,
//! past `[tasks] max_tasks`.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;

pub struct RelayedTasks {
    ids: Mutex<LruCache<(String, String), ()>>,
}

impl RelayedTasks {
    pub fn new(capacity: usize) -> RelayedTasks {
        let cap = NonZeroUsize::new(capacity.max(1)).expect("at least one");
        RelayedTasks { ids: Mutex::new(LruCache::new(cap)) }
    }

    /// Task `id` of upstream `upstream` was handed to a client.
    pub fn remember(&self, upstream: &str, id: &str) {
        self.ids.lock().unwrap().put((upstream.to_string(), id.to_string()), ());
    }

    /// Whether task `id` of upstream `upstream` is one the gateway handed out.
    pub fn knows(&self, upstream: &str, id: &str) -> bool {
        self.ids.lock().unwrap().get(&(upstream.to_string(), id.to_string())).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_handed_out_and_bounded() {
        let r = RelayedTasks::new(2);
        r.remember("a", "1");
        assert!(r.knows("a", "1"));
        assert!(!r.knows("b", "1"), "per upstream");
        r.remember("a", "2");
        r.remember("a", "3");
        assert!(!r.knows("a", "1"), "evicted");
        assert!(r.knows("a", "3"));
    }
}
