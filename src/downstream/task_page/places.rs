//! How many task-page viewers each principal holds (`max_viewers_per_principal`), so that
//! one principal cannot take every place `max_viewers` allows. A [`Place`] is held by its
//! stream and gives its place back when dropped. The map holds one entry per principal
//! watching now, so at most `max_viewers` entries.

use crate::locks::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct Places {
    held: Mutex<HashMap<Arc<str>, usize>>,
}

/// One viewer's place, counted for its principal while it lives.
pub(super) struct Place {
    places: Arc<Places>,
    principal: Arc<str>,
}

impl Places {
    /// A place for `principal`, unless it holds `limit` already.
    pub(super) fn take(self: &Arc<Self>, principal: &Arc<str>, limit: usize) -> Option<Place> {
        let mut held = self.held.lock().unwrap();
        let n = held.entry(principal.clone()).or_default();
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(Place { places: self.clone(), principal: principal.clone() })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut held = self.places.held.lock().unwrap();
        if let Some(n) = held.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_holds_at_most_its_limit_and_gets_places_back() {
        let places = Arc::new(Places::default());
        let (alice, bob): (Arc<str>, Arc<str>) = ("alice".into(), "bob".into());
        let a1 = places.take(&alice, 2).unwrap();
        let _a2 = places.take(&alice, 2).unwrap();
        assert!(places.take(&alice, 2).is_none());
        let _b1 = places.take(&bob, 2).expect("another principal has places of its own");
        drop(a1);
        assert!(places.take(&alice, 2).is_some());
        drop(_a2);
        assert_eq!(places.held.lock().unwrap().get(&alice), None, "an entry goes with its last place");
    }
}
