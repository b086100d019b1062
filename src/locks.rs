//! The gateway's mutex: `std::sync::Mutex`, with each acquisition counted on the thread that
//! takes it, so that a test can say how many locks a message's path takes
//! ([`taken_on_this_thread`]). The count is a thread-local add: a few instructions against
//! the lock's own atomic exchange.

use std::cell::Cell;
use std::sync::{LockResult, MutexGuard, TryLockResult};

thread_local! {
    static TAKEN: Cell<u64> = const { Cell::new(0) };
    /// Where each acquisition was made, in debug builds (the tests'), to say which path
    /// took a count that grew.
    #[cfg(debug_assertions)]
    static PLACES: std::cell::RefCell<std::collections::HashMap<&'static std::panic::Location<'static>, u64>> =
        std::cell::RefCell::default();
}

/// How many [`Mutex`] acquisitions this thread has made since it started.
pub fn taken_on_this_thread() -> u64 {
    TAKEN.with(Cell::get)
}

/// This thread's acquisitions by the place that made them, most first (debug builds only;
/// empty otherwise).
pub fn places_on_this_thread() -> Vec<(String, u64)> {
    #[cfg(debug_assertions)]
    {
        let mut all: Vec<(String, u64)> =
            PLACES.with(|p| p.borrow().iter().map(|(l, n)| (l.to_string(), *n)).collect());
        all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all
    }
    #[cfg(not(debug_assertions))]
    Vec::new()
}

#[track_caller]
fn count() {
    TAKEN.with(|n| n.set(n.get().wrapping_add(1)));
    #[cfg(debug_assertions)]
    {
        let at = std::panic::Location::caller();
        PLACES.with(|p| *p.borrow_mut().entry(at).or_default() += 1);
    }
}

/// `std::sync::Mutex`, counted.
#[derive(Default)]
pub struct Mutex<T: ?Sized>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub const fn new(value: T) -> Mutex<T> {
        Mutex(std::sync::Mutex::new(value))
    }

    pub fn into_inner(self) -> LockResult<T> {
        self.0.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    #[track_caller]
    pub fn lock(&self) -> LockResult<MutexGuard<'_, T>> {
        count();
        self.0.lock()
    }

    #[track_caller]
    pub fn try_lock(&self) -> TryLockResult<MutexGuard<'_, T>> {
        count();
        self.0.try_lock()
    }

    pub fn get_mut(&mut self) -> LockResult<&mut T> {
        self.0.get_mut()
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Mutex<T> {
        Mutex::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_acquisition_is_counted_on_its_thread() {
        let m = Mutex::new(1);
        let before = taken_on_this_thread();
        *m.lock().unwrap() += 1;
        drop(m.try_lock());
        assert_eq!(taken_on_this_thread() - before, 2);
        let elsewhere = std::thread::spawn(move || {
            let before = taken_on_this_thread();
            drop(m.lock());
            taken_on_this_thread() - before
        });
        assert_eq!(elsewhere.join().unwrap(), 1);
    }
}
