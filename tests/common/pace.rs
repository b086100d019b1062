//! The pacing of the tests' bounded waits: the one place where a wait sleeps between two
//! looks at what it waits for. It depends on nothing else in the harness.

#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Asks `probe` every 10 ms until it returns `Some`, and returns that; `None` once `within`
/// has passed. For plain threads (child processes, `Drop`).
pub fn until<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`until`] for async probes, on tokio's clock.
pub async fn until_async<T>(within: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
