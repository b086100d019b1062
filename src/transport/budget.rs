//! A coarse clock for the inline budget (see [`inline`](crate::transport::inline)): one
//! thread that, every few milliseconds while requests run inline, wakes those whose budget has
//! passed. A tokio timer per request would do, but arming one that is due before every other
//! makes the runtime wake its I/O driver (a system call per request); this thread costs a
//! sleep per tick, shared by every request in that tick, and sleeps for good when idle.

use futures_util::task::AtomicWaker;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

/// How often the clock looks at the requests it watches.
const TICK: Duration = Duration::from_millis(5);

/// Ticks without a request to watch before the thread sleeps until the next one.
const IDLE_TICKS: u32 = 200;

/// One watched request: its deadline, and whether it has passed.
pub(crate) struct Ticket {
    deadline: Instant,
    expired: AtomicBool,
    waker: AtomicWaker,
}

impl Ticket {
    /// Whether the budget has passed; else `waker` is woken when it does.
    pub(crate) fn expired(&self, waker: &Waker) -> bool {
        self.waker.register(waker);
        self.expired.load(Ordering::Acquire)
    }
}

#[derive(Default)]
struct Clock {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    watched: Vec<Arc<Ticket>>,
    asleep: bool,
}

fn clock() -> &'static Clock {
    static CLOCK: OnceLock<&'static Clock> = OnceLock::new();
    CLOCK.get_or_init(|| {
        let clock: &'static Clock = Box::leak(Box::default());
        std::thread::Builder::new()
            .name("taskgate-budget".into())
            .spawn(move || run(clock))
            .expect("a thread for the inline budget");
        clock
    })
}

/// Watches a request whose budget ends `budget` from now, until [`unwatch`].
pub(crate) fn watch(budget: Duration) -> Arc<Ticket> {
    let ticket = Arc::new(Ticket {
        deadline: Instant::now() + budget,
        expired: AtomicBool::new(false),
        waker: AtomicWaker::new(),
    });
    let clock = clock();
    let mut st = clock.state.lock().unwrap();
    st.watched.push(ticket.clone());
    if std::mem::take(&mut st.asleep) {
        clock.wake.notify_one();
    }
    ticket
}

pub(crate) fn unwatch(ticket: &Arc<Ticket>) {
    let mut st = clock().state.lock().unwrap();
    if let Some(i) = st.watched.iter().rposition(|t| Arc::ptr_eq(t, ticket)) {
        st.watched.swap_remove(i);
    }
}

fn run(clock: &'static Clock) {
    let mut idle = 0u32;
    loop {
        std::thread::sleep(TICK);
        let now = Instant::now();
        let mut due = Vec::new();
        clock.state.lock().unwrap().watched.retain(|t| {
            let keep = t.deadline > now;
            if !keep {
                due.push(t.clone());
            }
            keep
        });
        for t in due {
            t.expired.store(true, Ordering::Release);
            t.waker.wake();
        }
        let mut st = clock.state.lock().unwrap();
        idle = if st.watched.is_empty() { idle + 1 } else { 0 };
        if idle >= IDLE_TICKS {
            st.asleep = true;
            while st.asleep {
                st = clock.wake.wait(st).unwrap();
            }
            idle = 0;
        }
    }
}
