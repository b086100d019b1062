//! The clock: every timer of the gateway and the wall-clock time, on tokio's clock, so that
//! a test can pause time and advance it.
//!
//! Timers are [`Deadlines`]: entries with an idle deadline that signs of life push back, and a
//! lifetime that nothing does, kept in order of what expires first. Whoever owns one awaits
//! [`Deadlines::expired`] in one task, which sleeps until the earliest deadline (or until an
//! earlier one is set): no polling, no sweep, no thread. What is timed this way:
//! - a request to an upstream (idle and lifetime), and the progress a link holds back (per
//!   link);
//! - a bridged call (its own clock: the call's timeouts, its next poll, its next status made
//!   progress);
//! - a hosted task's retention, and a progress state's;
//! - a hosted task's input rounds on a modern upstream, each round's answer and the whole
//!   call (per host, `tasks/hosted/rounds.rs`);
//! - a downstream session's idle timeout;
//! - a modern request parked for its client's input (per front);
//! - a legacy client's input rounds, and the extension tasks it follows (per session);
//! - the inline budget of a request read on its caller's task (transport/budget.rs).
//!
//! Those kept per front, per session or per host, each entry at its own time, are a
//! [`Schedule`].
//!
//! A wait belongs here when it is a deadline: something falls due at its time whatever its
//! owner is doing then (a request or round fails, a record goes, a task is looked at), what
//! happens elsewhere moves or unsets it (a sign of life, an answer, an end), and without the
//! clock each would be a task of its own that only sleeps (as each task a session follows
//! was a loop that only slept, before it was a [`Schedule`]'s entry).
//!
//! What still sleeps on its own is a wait that is one task's own: the task is there for more
//! than the wait (a request, a stream, a loop that does its work at each step), only that
//! task starts or moves the wait (racing it against what else it awaits), and the wait goes
//! when the task's future is dropped. On a [`Schedule`] the task would stay, woken by the
//! schedule's waiter instead, with an entry to unset when it stops: more state and one more
//! hop, no task or timer less. These are:
//! - a loop's pace, beside what else the loop awaits: a core `tasks/result` waiting on an
//!   extension task looks at it again `pollInterval` after each look, or at once when an
//!   answer to its input went up (`session/ext/translated.rs`); a `subscriptions/listen`
//!   stream asks about a relayed task it watches when nothing was heard of it for its
//!   `pollInterval` (`session/modern_client/listen.rs`); a long call's keep-alive ticks; the
//!   task page's refresh and keep-alives; the config file's watch; the look at a retired
//!   shared link; the Redis store's sweep;
//! - a backoff before trying again: a dead link opened again (the request that needs the
//!   link waits it out itself), a resource listen reopened, a response stream resumed or an
//!   upstream's GET stream reopened, an end the store refused written again
//!   (`tasks/hosted/unstored.rs`), the Redis store's reconnect, a failed accept;
//! - a bound on one await (`tokio::time::timeout`, or a `sleep_until` raced beside it): a
//!   handshake, a request of the gateway's own, a header, body or TLS read, a long call's
//!   `defer_after`, a stream cut when its credential expires, the drains at shutdown.
//!
//! The file store's writer is a thread, not a task: it times its batched commits on the
//! system clock.
//!
//! The wall-clock time ([`wall_now`]) is read here only: the system time taken once, carried
//! on by tokio's clock. A time that is stored (a task's `createdAt`, when its retention
//! ends) therefore agrees with the timers, and moves with them when a test advances time.

use crate::locks::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio::time::Instant;

/// Which limit an entry ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No sign of life for the idle timeout.
    Idle,
    /// The lifetime ran out.
    Lifetime,
}

struct Entry {
    /// When the lifetime ends.
    end: Instant,
    /// When the idle timeout ends, unless pushed back.
    idle_end: Instant,
}

impl Entry {
    fn due(&self) -> (Instant, Expiry) {
        if self.end <= self.idle_end { (self.end, Expiry::Lifetime) } else { (self.idle_end, Expiry::Idle) }
    }
}

struct Inner<K> {
    entries: HashMap<K, Entry>,
    /// The entries by when they are due.
    order: BTreeSet<(Instant, K)>,
    /// When the waiter looks at `order` again at the latest (`None`: only when told). An
    /// entry due before that wakes it; one due later does not need to (a call after another
    /// one sets no timer of tokio's and wakes no thread).
    looks_by: Option<Instant>,
    closed: bool,
}

pub struct Deadlines<K> {
    inner: Mutex<Inner<K>>,
    changed: Notify,
    idle: Duration,
    lifetime: Duration,
}

impl<K: Clone + Ord + Hash> Deadlines<K> {
    /// Entries expire `idle` after their last sign of life, and `lifetime` after they began.
    pub fn new(idle: Duration, lifetime: Duration) -> Deadlines<K> {
        Deadlines {
            inner: Mutex::new(Inner { entries: HashMap::new(), order: BTreeSet::new(), looks_by: None, closed: false }),
            changed: Notify::new(),
            idle,
            lifetime,
        }
    }

    /// Starts watching `key` from now.
    pub fn insert(&self, key: K) {
        self.insert_since(key, Instant::now());
    }

    /// Watches `key` as one whose lifetime began at `began`: its idle timeout starts now,
    /// its lifetime ends as it would have (e.g. a request that was being set up until now).
    pub fn insert_since(&self, key: K, began: Instant) {
        let now = Instant::now();
        self.put(key, Entry { end: later(began, self.lifetime), idle_end: later(now, self.idle) });
    }

    /// Watches `key` until `end`, whatever the idle timeout (e.g. a retention).
    pub fn insert_until(&self, key: K, end: Instant) {
        self.put(key, Entry { end, idle_end: end });
    }

    fn put(&self, key: K, entry: Entry) {
        let mut st = self.inner.lock().unwrap();
        let due = entry.due().0;
        if let Some(old) = st.entries.insert(key.clone(), entry) {
            st.order.remove(&(old.due().0, key.clone()));
        }
        st.order.insert((due, key));
        let sooner = st.looks_by.is_none_or(|at| due < at);
        if sooner {
            st.looks_by = Some(due);
        }
        drop(st);
        if sooner {
            self.changed.notify_one();
        }
    }

    /// A sign of life of `key`: its idle deadline starts again (its lifetime does not).
    pub fn touch(&self, key: &K) {
        let now = Instant::now();
        let mut st = self.inner.lock().unwrap();
        let Some(e) = st.entries.get_mut(key) else { return };
        let before = e.due().0;
        e.idle_end = later(now, self.idle);
        let after = e.due().0;
        if after != before {
            st.order.remove(&(before, key.clone()));
            st.order.insert((after, key.clone()));
        }
    }

    /// Stops watching `key`.
    pub fn remove(&self, key: &K) {
        let mut st = self.inner.lock().unwrap();
        if let Some(e) = st.entries.remove(key) {
            st.order.remove(&(e.due().0, key.clone()));
        }
    }

    /// Ends [`Deadlines::expired`]: it returns `None` from now on.
    pub fn close(&self) {
        self.inner.lock().unwrap().closed = true;
        self.changed.notify_one();
    }

    /// Waits for the next entry to expire, and stops watching it. `None` once closed.
    pub async fn expired(&self) -> Option<(K, Expiry)> {
        loop {
            // Registered before looking, so that a change made meanwhile is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let next = {
                let mut st = self.inner.lock().unwrap();
                if st.closed {
                    return None;
                }
                match st.order.first().cloned() {
                    Some((at, key)) if at <= Instant::now() => {
                        st.order.remove(&(at, key.clone()));
                        let e = st.entries.remove(&key).expect("ordered entries exist");
                        return Some((key, e.due().1));
                    }
                    Some((at, _)) => {
                        st.looks_by = Some(at);
                        Some(at)
                    }
                    None => {
                        st.looks_by = None;
                        None
                    }
                }
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = &mut changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }

    pub fn idle(&self) -> Duration {
        self.idle
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().entries.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A [`Deadlines`] whose entries each fall due at their own time ([`Schedule::set`]), with
/// no idle timeout or lifetime, and the one waiter its owner starts ([`Schedule::start`]):
/// what a front's parked requests, a session's input rounds and the tasks it follows, and a
/// host's tasks' input rounds keep.
/// Dropping it (or [`Schedule::close`]) ends the waiter.
pub struct Schedule<K: Clone + Ord + Hash> {
    clock: std::sync::Arc<Deadlines<K>>,
    waiter: OnceLock<()>,
}

impl<K: Clone + Ord + Hash> Default for Schedule<K> {
    fn default() -> Schedule<K> {
        Schedule { clock: std::sync::Arc::new(Deadlines::new(Duration::MAX, Duration::MAX)), waiter: OnceLock::new() }
    }
}

impl<K: Clone + Ord + Hash> Schedule<K> {
    /// Spawns `waiter(the clock)` the first time it is called (it awaits
    /// [`Deadlines::expired`] until that says `None`); later calls do nothing.
    pub fn start<F>(&self, waiter: impl FnOnce(std::sync::Arc<Deadlines<K>>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.waiter.get_or_init(|| {
            tokio::spawn(waiter(self.clock.clone()));
        });
    }

    /// `key` falls due at `at` (instead of when it was to).
    pub fn set(&self, key: K, at: Instant) {
        self.clock.insert_until(key, at);
    }

    pub fn unset(&self, key: &K) {
        self.clock.remove(key);
    }

    /// Ends the waiter: nothing falls due from now on.
    pub fn close(&self) {
        self.clock.close();
    }

    /// The clock itself, for tests to look at what is set.
    #[cfg(test)]
    pub fn clock(&self) -> &std::sync::Arc<Deadlines<K>> {
        &self.clock
    }

    /// [`Schedule::set`], unset again when what it returns is dropped (what it timed ended
    /// first).
    pub fn arm(&self, key: K, at: Instant) -> Armed<K> {
        self.set(key.clone(), at);
        Armed { clock: self.clock.clone(), key }
    }
}

/// An entry of a [`Schedule`], unset when this is dropped.
pub struct Armed<K: Clone + Ord + Hash> {
    clock: std::sync::Arc<Deadlines<K>>,
    key: K,
}

impl<K: Clone + Ord + Hash> Drop for Armed<K> {
    fn drop(&mut self) {
        self.clock.remove(&self.key);
    }
}

impl<K: Clone + Ord + Hash> Drop for Schedule<K> {
    fn drop(&mut self) {
        self.close();
    }
}

/// The wall-clock time: the system time read once, carried on by tokio's clock (see the
/// module's doc). The one place the gateway reads the system clock.
pub fn wall_now() -> SystemTime {
    static BASE: OnceLock<(SystemTime, Instant)> = OnceLock::new();
    let (wall, at) = *BASE.get_or_init(|| (SystemTime::now(), Instant::now()));
    let now = Instant::now();
    match now.checked_duration_since(at) {
        Some(d) => wall + d,
        None => wall - at.duration_since(now),
    }
}

/// `d` from now on tokio's clock (a time too far away to matter when that overflows it).
pub fn from_now(d: Duration) -> Instant {
    later(Instant::now(), d)
}

/// `now + d`, or a time too far away to matter when that overflows the clock.
fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn idle_resets_on_signs_of_life_and_the_lifetime_does_not() {
        let d: Deadlines<u32> = Deadlines::new(ms(100), ms(250));
        d.insert(1);
        d.insert(2);
        tokio::time::sleep(ms(60)).await;
        d.touch(&1);
        let start = Instant::now();
        assert_eq!(d.expired().await, Some((2, Expiry::Idle)));
        assert_eq!(start.elapsed(), ms(40));
        tokio::time::sleep(ms(50)).await;
        d.touch(&1);
        tokio::time::sleep(ms(90)).await;
        d.touch(&1);
        // Touched at 200 ms, so idle until 300 ms; the lifetime ends first, at 250 ms.
        assert_eq!(d.expired().await, Some((1, Expiry::Lifetime)));
        assert_eq!(start.elapsed(), ms(190));
        assert!(d.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_entry_wakes_the_waiter_and_removed_ones_never_expire() {
        let d = std::sync::Arc::new(Deadlines::<u32>::new(ms(1000), ms(5000)));
        d.insert(1);
        let waiter = tokio::spawn({
            let d = d.clone();
            async move { d.expired().await }
        });
        tokio::task::yield_now().await;
        d.remove(&1);
        let short: Deadlines<u32> = Deadlines::new(ms(10), ms(10));
        short.insert(7);
        assert_eq!(short.expired().await, Some((7, Expiry::Lifetime)));
        d.insert(2);
        let start = Instant::now();
        assert_eq!(waiter.await.unwrap(), Some((2, Expiry::Idle)));
        assert_eq!(start.elapsed(), ms(1000), "1 was removed: 2 is the first to expire");
        d.close();
        assert_eq!(d.expired().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lifetime_can_have_begun_before_the_idle_timeout() {
        let d: Deadlines<u32> = Deadlines::new(ms(100), ms(250));
        let start = Instant::now();
        tokio::time::sleep(ms(200)).await;
        d.insert_since(1, start);
        d.insert_since(2, Instant::now());
        assert_eq!(d.expired().await, Some((1, Expiry::Lifetime)));
        assert_eq!(start.elapsed(), ms(250), "its lifetime counts from when it began");
        assert_eq!(d.expired().await, Some((2, Expiry::Idle)));
        assert_eq!(start.elapsed(), ms(300), "its idle timeout counts from when it was inserted");
    }

    #[tokio::test(start_paused = true)]
    async fn fixed_ends_ignore_the_idle_timeout() {
        let d: Deadlines<u32> = Deadlines::new(Duration::MAX, Duration::MAX);
        let start = Instant::now();
        d.insert_until(3, start + ms(300));
        d.insert_until(4, start + ms(100));
        d.touch(&3);
        assert_eq!(d.expired().await, Some((4, Expiry::Lifetime)));
        assert_eq!(d.expired().await, Some((3, Expiry::Lifetime)));
        assert_eq!(start.elapsed(), ms(300));
    }
}
