//! Whose each task of a 2026-07-28 upstream is, when a 2026-07-28 client of an authenticated
//! principal made it through the gateway: the upstream sees one client (the gateway), so
//! the gateway must keep the binding the upstream cannot
//! (`gateway::session::principal_tasks`). The client keeps the upstream's own ids (nothing is
//! translated); each one an upstream hands out through the gateway is remembered here with
//! its owner (`Session::owner_of`: the principal, on that upstream), and only that owner's
//! requests find it.
//!
//! Bounded twice, forgetting rather than refusing (the upstream has made the task by the time
//! the gateway hears of it): at most `per_owner` (the upstream's `max_tasks_per_owner`) per
//! owner, that owner's least recently used forgotten first, so that one principal alone cannot push
//! another's out; and at most `capacity` (`[tasks] max_tasks`) in all, the least recently
//! used forgotten first. A forgotten task is as unknown to its owner as to anyone. Kept in
//! memory only: a restart forgets every binding.

use crate::locks::Mutex;
use lru::LruCache;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

/// Upstream names are letters, digits, `-` and `_`: no task id can make one key two ways.
fn key(upstream: &str, task_id: &str) -> String {
    format!("{upstream}/{task_id}")
}

struct State {
    owners: LruCache<String, Arc<str>>,
    /// Tasks remembered per owner.
    counts: HashMap<Arc<str>, usize>,
}

impl State {
    fn forgot(&mut self, owner: &Arc<str>) {
        if let Some(n) = self.counts.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(owner);
            }
        }
    }
}

pub struct UpstreamOwners {
    st: Mutex<State>,
}

impl UpstreamOwners {
    pub fn new(capacity: usize) -> UpstreamOwners {
        let cap = NonZeroUsize::new(capacity.max(1)).expect("at least one");
        UpstreamOwners { st: Mutex::new(State { owners: LruCache::new(cap), counts: HashMap::new() }) }
    }

    /// Task `task_id` of upstream `upstream` was made for `owner` (the upstream reused an id:
    /// the newest task's owner has it), keeping at most `per_owner` of that owner's.
    pub fn remember(&self, upstream: &str, task_id: &str, owner: &str, per_owner: usize) {
        let k = key(upstream, task_id);
        let mut st = self.st.lock().unwrap();
        if let Some(old) = st.owners.pop(&k) {
            st.forgot(&old);
        }
        let owner: Arc<str> = match st.counts.get_key_value(owner) {
            Some((o, _)) => o.clone(),
            None => owner.into(),
        };
        if st.counts.get(&owner).is_some_and(|n| *n >= per_owner.max(1)) {
            // The owner's own least recently used goes (scanned only at its limit).
            let oldest = st.owners.iter().rev().find(|(_, o)| **o == owner).map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                st.owners.pop(&oldest);
                st.forgot(&owner);
            }
        }
        if let Some((_, evicted)) = st.owners.push(k, owner.clone()) {
            st.forgot(&evicted);
        }
        *st.counts.entry(owner).or_default() += 1;
    }

    /// Whether task `task_id` of upstream `upstream` is `owner`'s (a use: it is the most
    /// recently used now).
    pub fn owns(&self, upstream: &str, task_id: &str, owner: &str) -> bool {
        self.st.lock().unwrap().owners.get(&key(upstream, task_id)).is_some_and(|o| &**o == owner)
    }

    /// Tasks remembered, in all.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.st.lock().unwrap().owners.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_finds_a_task_and_nothing_grows_past_its_bounds() {
        let t = UpstreamOwners::new(4);
        t.remember("up", "task-1", "alice", 2);
        assert!(t.owns("up", "task-1", "alice"));
        assert!(!t.owns("up", "task-1", "bob"), "another owner's");
        assert!(!t.owns("other", "task-1", "alice"), "per upstream");
        assert!(!t.owns("up", "task-2", "alice"), "never made");

        // Past alice's own bound, her least recently used goes, not bob's.
        t.remember("up", "b-1", "bob", 2);
        t.remember("up", "task-2", "alice", 2);
        assert!(t.owns("up", "task-1", "alice"), "used now: task-2 is the older");
        t.remember("up", "task-3", "alice", 2);
        assert!(!t.owns("up", "task-2", "alice"), "alice's least recently used, forgotten");
        assert!(t.owns("up", "task-1", "alice") && t.owns("up", "task-3", "alice"));
        assert!(t.owns("up", "b-1", "bob"), "bob's untouched by alice's bound");
        assert_eq!(t.len(), 3);

        // Past the total bound, the least recently used of anyone's goes.
        t.remember("up", "c-1", "carol", 2);
        assert_eq!(t.len(), 4);
        t.remember("up", "c-2", "carol", 2);
        assert_eq!(t.len(), 4, "never more than the capacity");
        assert!(!t.owns("up", "task-1", "alice"), "the least recently used of all, forgotten");
        assert!(t.owns("up", "c-1", "carol") && t.owns("up", "c-2", "carol"));

        // A reused id belongs to its newest task's owner, counted once.
        t.remember("up", "c-1", "bob", 2);
        assert!(t.owns("up", "c-1", "bob") && !t.owns("up", "c-1", "carol"));
        assert_eq!(t.len(), 4);
        let counts = t.st.lock().unwrap().counts.clone();
        assert_eq!(counts.values().sum::<usize>(), 4, "the counts agree with the table: {counts:?}");
        assert_eq!(counts.get("bob").copied(), Some(2));
    }
}
