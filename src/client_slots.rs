//! Places counted twice: in all (`max_sessions`, `max_links`) and per client
//! (`max_sessions_per_client`, `max_links_per_client`), so that one client (a principal,
//! else an address) cannot take every place. A place is given back when its [`Slot`] drops.
//! The per-client counts hold only clients that hold a place, so they are bounded by the
//! total.

use crate::locks::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

pub struct ClientSlots {
    max: usize,
    per_client: usize,
    st: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    by_client: HashMap<Arc<str>, usize>,
}

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place is taken (the total, its limit).
    All(usize),
    /// The client holds its share (its limit).
    Client(usize),
}

/// One place, given back when dropped.
pub struct Slot {
    slots: Arc<ClientSlots>,
    /// `None`: a place counted in the total only (no client to charge: a shared link).
    client: Option<Arc<str>>,
}

impl ClientSlots {
    pub fn new(max: usize, per_client: usize) -> Arc<ClientSlots> {
        Arc::new(ClientSlots { max, per_client: per_client.max(1), st: Mutex::default() })
    }

    /// A place for `client` (`None`: nobody's own, the total alone bounds it).
    pub fn take(self: &Arc<Self>, client: Option<&str>) -> Result<Slot, Full> {
        let mut st = self.st.lock().unwrap();
        if st.total >= self.max {
            return Err(Full::All(self.max));
        }
        let client = match client {
            None => None,
            Some(c) => {
                let key = match st.by_client.get_key_value(c) {
                    Some((_, n)) if *n >= self.per_client => return Err(Full::Client(self.per_client)),
                    Some((k, _)) => k.clone(),
                    None => Arc::from(c),
                };
                *st.by_client.entry(key.clone()).or_default() += 1;
                Some(key)
            }
        };
        st.total += 1;
        Ok(Slot { slots: self.clone(), client })
    }

    /// Places taken now.
    pub fn taken(&self) -> usize {
        self.st.lock().unwrap().total
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.st.lock().unwrap();
        st.total -= 1;
        if let Some(c) = &self.client
            && let Some(n) = st.by_client.get_mut(c)
        {
            *n -= 1;
            if *n == 0 {
                st.by_client.remove(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_its_share_and_all_at_most_the_total() {
        let slots = ClientSlots::new(4, 2);
        let a1 = slots.take(Some("a")).unwrap();
        let _a2 = slots.take(Some("a")).unwrap();
        assert_eq!(slots.take(Some("a")).err(), Some(Full::Client(2)));
        let _b = slots.take(Some("b")).unwrap();
        let _none = slots.take(None).unwrap();
        assert_eq!(slots.take(Some("c")).err(), Some(Full::All(4)));
        drop(a1);
        assert_eq!(slots.taken(), 3);
        let _a3 = slots.take(Some("a")).unwrap();
        assert_eq!(slots.st.lock().unwrap().by_client.len(), 2);
    }

    #[test]
    fn a_client_with_no_place_is_forgotten() {
        let slots = ClientSlots::new(10, 3);
        let held: Vec<Slot> = (0..3).map(|_| slots.take(Some("x")).unwrap()).collect();
        drop(held);
        assert!(slots.st.lock().unwrap().by_client.is_empty());
        assert_eq!(slots.taken(), 0);
    }
}
