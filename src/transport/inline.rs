//! Running a request on the task that sends it. An upstream that answers at once is read
//! on the caller's task: no task is spawned and no other thread is woken. What takes longer
//! than a short budget (a long call, an event stream, a resumption), or outlives its caller,
//! goes on in a task of its own, so the caller is never held for long.

use crate::transport::budget;
use futures_util::task::AtomicWaker;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

pub(crate) type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

tokio::task_local! {
    /// Set while a caller sends its requests one after another (see [`serially`]).
    static SERIAL: ();
}

/// Runs `fut`, a caller that sends its requests one after another (the entries of a batch,
/// the lines of `taskgate stdio`): a request it sends goes to a task of its own at once
/// instead of being waited for here, since the next request would wait behind it (up to
/// the budget for each slow one).
pub(crate) async fn serially<F: Future>(fut: F) -> F::Output {
    SERIAL.scope((), fut).await
}

/// Runs `job` here for at most `budget`; the rest of it runs in a task of its own, for at
/// most `limit` in all. Under [`serially`], all of it runs in a task of its own.
pub(crate) async fn run(job: Job, budget: Duration, limit: Duration) {
    let mut slot = Handoff(Some(job), tokio::time::Instant::now().checked_add(limit));
    if SERIAL.try_with(|_| ()).is_ok() {
        return;
    }
    let quiet = Quiet::new();
    let mut watched = Watched(None);
    poll_fn(|cx| {
        let Some(job) = slot.0.as_mut() else { return Poll::Ready(()) };
        if quiet.poll(job.as_mut(), cx).is_ready() {
            slot.0 = None;
            return Poll::Ready(());
        }
        let ticket = watched.0.get_or_insert_with(|| budget::watch(budget));
        if ticket.expired(cx.waker()) { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
}

/// The budget's ticket, given back however `run` ends.
struct Watched(Option<Arc<budget::Ticket>>);

impl Drop for Watched {
    fn drop(&mut self) {
        if let Some(t) = &self.0 {
            budget::unwatch(t);
        }
    }
}

/// A job not finished where it started, and when it must end: dropping this hands it to a
/// task of its own.
struct Handoff(Option<Job>, Option<tokio::time::Instant>);

impl Drop for Handoff {
    fn drop(&mut self) {
        if let Some(job) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            match self.1 {
                Some(end) => rt.spawn(async move {
                    let _ = tokio::time::timeout_at(end, job).await;
                }),
                None => rt.spawn(job),
            };
        }
    }
}

/// Runs `fut` with wake-ups it causes itself answered by polling again at once (see
/// [`Quiet`]): for a connection's whole life, e.g. a downstream one whose handler waits on
/// the body the connection reads.
pub(crate) async fn quietly<F: Future>(fut: F) -> F::Output {
    let quiet = Quiet::new();
    let mut fut = pin!(fut);
    poll_fn(|cx| quiet.poll(fut.as_mut(), cx)).await
}

const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// Polls a future with a waker of its own. A wake-up that comes while the future is being
/// polled (a connection handing a response to the request waiting on it, in the same task)
/// is answered by polling again at once instead of rescheduling the task, which would wake
/// another worker thread. Wake-ups from elsewhere (the reactor) wake the task as usual.
struct Quiet {
    flag: Arc<Flag>,
    waker: Waker,
}

struct Flag {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.fetch_or(WOKEN, SeqCst) & POLLING == 0 {
            self.task.wake();
        }
    }
}

/// How often in a row a future that wakes itself is polled before the task yields.
const MAX_REPOLLS: usize = 16;

impl Quiet {
    fn new() -> Quiet {
        let flag = Arc::new(Flag { state: AtomicU8::new(0), task: AtomicWaker::new() });
        Quiet { waker: Waker::from(flag.clone()), flag }
    }

    fn poll<F: Future + ?Sized>(&self, mut fut: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.flag.task.register(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..MAX_REPOLLS {
            self.flag.state.store(POLLING, SeqCst);
            let p = fut.as_mut().poll(&mut inner);
            let state = self.flag.state.swap(0, SeqCst);
            if p.is_ready() || state & WOKEN == 0 {
                return p;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[tokio::test]
    async fn a_quick_job_finishes_on_the_caller_and_a_slow_one_in_a_task() {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        run(Box::pin(async move { d.store(true, SeqCst) }), Duration::from_secs(5), Duration::MAX).await;
        assert!(done.load(SeqCst));

        // A job that waits for the test itself: the caller must be let go first.
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = async move {
            let _ = go_rx.await;
            let _ = tx.send(());
        };
        tokio::time::timeout(Duration::from_secs(10), run(Box::pin(job), Duration::from_millis(5), Duration::MAX))
            .await
            .expect("the caller is let go while the job still waits");
        go_tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_future_that_always_wakes_itself_lets_other_tasks_run() {
        // On this one-thread runtime the other task runs only if this one yields.
        let other_ran = Arc::new(AtomicBool::new(false));
        let flag = other_ran.clone();
        tokio::spawn(async move { flag.store(true, SeqCst) });
        let mut polls = 0;
        let spin = quietly(poll_fn(|cx| {
            polls += 1;
            if other_ran.load(SeqCst) {
                Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }));
        tokio::time::timeout(Duration::from_secs(10), spin).await.expect("the other task ran");
        assert!(polls <= MAX_REPOLLS + 1, "polled {polls} times before yielding");
    }

    #[tokio::test]
    async fn a_serial_caller_does_not_wait_for_its_job() {
        // The job waits for the test, after run() returns: it cannot have run here.
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = async move {
            let _ = go_rx.await;
            let _ = tx.send(std::thread::current().id());
        };
        let polled_here = Arc::new(AtomicBool::new(false));
        let flag = polled_here.clone();
        let job = async move {
            flag.store(true, SeqCst);
            job.await
        };
        serially(run(Box::pin(job), Duration::from_secs(5), Duration::MAX)).await;
        assert!(!polled_here.load(SeqCst), "the job was not started on the caller's task");
        go_tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), rx).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_job_whose_caller_goes_away_still_finishes() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            let _ = tx.send(());
        };
        let _ =
            tokio::time::timeout(Duration::from_millis(5), run(Box::pin(job), Duration::from_secs(5), Duration::MAX))
                .await;
        tokio::time::timeout(Duration::from_secs(5), rx).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_self_wake_during_the_poll_is_answered_by_polling_again() {
        let mut n = 0;
        let fut = poll_fn(|cx| {
            n += 1;
            if n < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(n)
            }
        });
        let quiet = Quiet::new();
        let mut fut = pin!(fut);
        let mut outer = 0;
        let got = poll_fn(|cx| {
            outer += 1;
            quiet.poll(fut.as_mut(), cx)
        })
        .await;
        assert_eq!((got, outer), (3, 1), "polled again at once, without going through the scheduler");
    }
}
