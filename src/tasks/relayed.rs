//! Upstream tasks relayed to clients that reach them by id alone: a 2026-07-28 client's
//! extension tasks that a 2025-11-25 upstream runs (`gateway::session::modern_tasks`). The
//! extension makes task ids bearer tokens, and an upstream's own need not be hard to guess,
//! so the client is given an id of the gateway's (128 bits, random) for each, kept here with
//! the upstream's id and the link it was created on: a task of a link that has since been
//! replaced is not asked about (its id may be another task's on the new one). Bounded by
//! `[tasks] max_tasks`, the least recently used forgotten first.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;

struct Relayed {
    upstream: String,
    generation: u64,
    upstream_id: String,
}

pub struct RelayedTasks {
    ids: Mutex<LruCache<String, Relayed>>,
}

impl RelayedTasks {
    pub fn new(capacity: usize) -> RelayedTasks {
        let cap = NonZeroUsize::new(capacity.max(1)).expect("at least one");
        RelayedTasks { ids: Mutex::new(LruCache::new(cap)) }
    }

    /// The id a client is given for task `upstream_id` of upstream `upstream`, created on its
    /// link of generation `generation`.
    pub fn mint(&self, upstream: &str, generation: u64, upstream_id: &str) -> String {
        let id = crate::random::id128();
        let relayed = Relayed { upstream: upstream.into(), generation, upstream_id: upstream_id.into() };
        self.ids.lock().unwrap().put(id.clone(), relayed);
        id
    }

    /// The upstream's id of the task a client knows as `id`, if it is one of upstream
    /// `upstream`'s on its link of generation `generation`.
    pub fn resolve(&self, id: &str, upstream: &str, generation: u64) -> Option<String> {
        let mut ids = self.ids.lock().unwrap();
        let r = ids.get(id)?;
        (r.upstream == upstream && r.generation == generation).then(|| r.upstream_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_handed_out_on_the_same_link_and_bounded() {
        let r = RelayedTasks::new(2);
        let a = r.mint("a", 1, "up-1");
        assert_ne!(a, "up-1");
        assert_eq!(r.resolve(&a, "a", 1).as_deref(), Some("up-1"));
        assert_eq!(r.resolve(&a, "b", 1), None, "per upstream");
        assert_eq!(r.resolve(&a, "a", 2), None, "a replaced link's task");
        assert_eq!(r.resolve("up-1", "a", 1), None, "the upstream's id is not the client's");
        let b = r.mint("a", 1, "up-2");
        let c = r.mint("a", 1, "up-3");
        assert_eq!(r.resolve(&a, "a", 1), None, "evicted");
        assert_eq!(r.resolve(&b, "a", 1).as_deref(), Some("up-2"));
        assert_eq!(r.resolve(&c, "a", 1).as_deref(), Some("up-3"));
    }
}
