//! Waiting for what a test expects instead of for a fixed time.

use super::{STEP, pace};

/// Waits until `cond` holds, looking every 10 ms, for at most [`STEP`]; then fails with
/// `what`. A fixed sleep before an assertion is slow when things go well and flaky when the
/// machine is busy.
pub async fn eventually(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    poll(what, async || cond().await.then_some(())).await
}

/// Asks `probe` every 10 ms, for at most [`STEP`], until it returns `Some`, and returns what
/// it held; then fails with `what`.
pub async fn poll<T>(what: &str, probe: impl AsyncFnMut() -> Option<T>) -> T {
    match pace::until_async(STEP, probe).await {
        Some(v) => v,
        None => panic!("still not so after {STEP:?}: {what}"),
    }
}
