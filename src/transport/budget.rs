//! The inline budget's timer (see [`inline`](crate::transport::inline)): one [`Deadlines`]
//! per runtime, awaited by one task that wakes the requests whose budget has passed. A tokio
//! timer per request would do, but arming one that is due before every other makes the
//! runtime wake its I/O driver (a system call per request); here a request arms nothing
//! while the waiting task already looks at an earlier budget, so calls that follow one
//! another cost one wake-up per budget, shared, and none while no request runs.

use crate::clock::Deadlines;
use crate::locks::Mutex;
use futures_util::task::AtomicWaker;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;
use std::time::Duration;
use tokio::runtime::{Handle, Id};

/// One watched request: whether its budget has passed, and whom to tell.
pub(crate) struct Ticket {
    expired: AtomicBool,
    waker: AtomicWaker,
    /// The runtime's budgets, which it is watched by.
    by: Arc<Deadlines<Key>>,
}

impl Ticket {
    /// Whether the budget has passed; else `waker` is woken when it does.
    pub(crate) fn expired(&self, waker: &Waker) -> bool {
        self.waker.register(waker);
        self.expired.load(Ordering::Acquire)
    }
}

/// A ticket as a key of the deadlines: itself, compared by address.
#[derive(Clone)]
pub(crate) struct Key(Arc<Ticket>);

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        Arc::as_ptr(&self.0).cmp(&Arc::as_ptr(&other.0))
    }
}
impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        Arc::as_ptr(&self.0).hash(h)
    }
}

thread_local! {
    /// This thread's last runtime and its budgets: looked up once per thread and runtime.
    static LOCAL: RefCell<Option<(Id, Arc<Deadlines<Key>>)>> = const { RefCell::new(None) };
}

/// The current runtime's budgets, and the task that wakes them started with them.
fn budgets() -> Arc<Deadlines<Key>> {
    let rt = Handle::current();
    let id = rt.id();
    LOCAL.with_borrow_mut(|local| match local {
        Some((at, d)) if *at == id => d.clone(),
        _ => {
            let d = shared(&rt);
            *local = Some((id, d.clone()));
            d
        }
    })
}

/// The runtime's budgets, made once per runtime whichever thread asks first.
fn shared(rt: &Handle) -> Arc<Deadlines<Key>> {
    static ALL: Mutex<Vec<(Id, std::sync::Weak<Deadlines<Key>>)>> = Mutex::new(Vec::new());
    let mut all = ALL.lock().unwrap();
    all.retain(|(_, d)| d.strong_count() > 0);
    if let Some(d) = all.iter().find(|(id, _)| *id == rt.id()).and_then(|(_, d)| d.upgrade()) {
        return d;
    }
    let d = Arc::new(Deadlines::new(Duration::MAX, Duration::MAX));
    all.push((rt.id(), Arc::downgrade(&d)));
    // The task holds the budgets: they live as long as the runtime runs it.
    let mine = d.clone();
    rt.spawn(async move {
        while let Some((Key(t), _)) = mine.expired().await {
            t.expired.store(true, Ordering::Release);
            t.waker.wake();
        }
    });
    d
}

/// Watches a request whose budget ends `budget` from now, until [`unwatch`].
pub(crate) fn watch(budget: Duration) -> Arc<Ticket> {
    let by = budgets();
    let ticket = Arc::new(Ticket { expired: AtomicBool::new(false), waker: AtomicWaker::new(), by: by.clone() });
    let now = tokio::time::Instant::now();
    by.insert_until(Key(ticket.clone()), now.checked_add(budget).unwrap_or(now));
    ticket
}

pub(crate) fn unwatch(ticket: &Arc<Ticket>) {
    ticket.by.remove(&Key(ticket.clone()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::task::Poll;

    #[tokio::test(start_paused = true)]
    async fn a_budget_passes_on_tokio_clock_and_an_unwatched_one_never_does() {
        let start = tokio::time::Instant::now();
        let short = watch(Duration::from_millis(5));
        let gone = watch(Duration::from_millis(1));
        unwatch(&gone);
        poll_fn(|cx| if short.expired(cx.waker()) { Poll::Ready(()) } else { Poll::Pending }).await;
        assert_eq!(start.elapsed(), Duration::from_millis(5), "woken when the budget passed, on paused time");
        assert!(!gone.expired.load(Ordering::Acquire), "an unwatched request is not woken");
        unwatch(&short);
        assert!(Arc::ptr_eq(&budgets(), &short.by), "one set of budgets per runtime");
    }
}
