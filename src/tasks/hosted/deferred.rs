//! What a long call (a plain call answered with a deferred result, `gateway::session::
//! long_calls`) asks of its hosted task: a snapshot of where it stands, keep-alive progress
//! while the upstream is silent, and the end of the client's token once the call is
//! answered without its result.

use super::{Hosted, Running};
use crate::jsonrpc::{self, Id, Method};
use crate::mcp::long_calls::Snapshot;
use crate::upstream::client::{ClientSession, Route};
use crate::upstream::progress::MADE_UP_STEP;
use serde_json::json;
use std::sync::Weak;
use std::time::Duration;

/// A progress value just above `v`: by the gateway's made-up step, or where that is below
/// the spacing of floats that large, by a relative one.
pub(super) fn above(v: f64) -> f64 {
    let next = v + MADE_UP_STEP.max(v.abs() * 1e-12);
    if next > v { next } else { f64::MAX }
}

impl Hosted {
    /// Where a task's progress goes: on the stream of a request the creator has waiting on
    /// it (a `tasks/result`, or a long call's own), else the creator's own.
    pub(super) fn progress_route(r: &Running) -> Route {
        r.result_waiters
            .iter()
            .find(|(s, _)| s.ptr_eq(&r.creator))
            .map(|(_, id)| Route::Related(id.clone()))
            .unwrap_or(Route::Unrelated)
    }

    /// Where the task stands: its status and message as `tasks/get` shows them, and its
    /// latest progress while it runs here. `None`: unknown (or the store failed, logged).
    pub async fn snapshot(&self, task_id: &str) -> Option<Snapshot> {
        let (status, message) = self.status(task_id).await?;
        let progress = self.running.lock().unwrap().get(task_id).and_then(|r| r.progress_numbers);
        Some(Snapshot { task_id: task_id.into(), status, message, progress })
    }

    /// If the upstream has sent no progress for `quiet`, a progress notification of the
    /// gateway's goes to the client's token: a value above every one sent (never past the
    /// total) and `message`. `false`: none was due or could be made.
    pub fn keep_alive(&self, task_id: &str, quiet: Duration, message: &str) -> bool {
        let mut running = self.running.lock().unwrap();
        let Some(r) = running.get_mut(task_id) else { return false };
        let Some(token) = r.token.clone() else { return false };
        if r.heard.elapsed() < quiet {
            return false;
        }
        let next = above(r.sent.unwrap_or(0.0));
        if r.progress_numbers.and_then(|(_, total)| total).is_some_and(|total| next > total) {
            return false;
        }
        r.sent = Some(next);
        // The next keep-alive is a whole `quiet` away, as if the upstream had spoken.
        r.heard = tokio::time::Instant::now();
        let route = Self::progress_route(r);
        let Some(s) = r.creator.upgrade() else { return false };
        drop(running);
        let msg = jsonrpc::notification(
            Method::Progress,
            json!({"progressToken": token.to_value(), "progress": next, "message": message}),
        );
        s.to_client(crate::jsonrpc::Message::made(msg), route);
        true
    }

    /// What [`Hosted::result`] answers, if the task has ended already (a wait that runs out
    /// as it ends sees it ended before its end is stored, and waits for that); `None` if it
    /// still runs.
    pub async fn result_if_ended(
        &self,
        task_id: &str,
        waiter: Weak<dyn ClientSession>,
        id: &Id,
    ) -> Option<serde_json::Value> {
        let (status, _) = self.status(task_id).await?;
        if !status.is_terminal() {
            return None;
        }
        Some(self.result(task_id, waiter, id).await)
    }

    /// Request `id` of `waiter` no longer waits on the task (its answer went without the
    /// result): the task's questions and progress stop going to its stream.
    pub fn stop_waiting(&self, task_id: &str, waiter: &Weak<dyn ClientSession>, id: &Id) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.result_waiters.retain(|(s, i)| !(s.ptr_eq(waiter) && i == id));
        }
    }

    /// The call that carried the client's progress token was answered: the token is spent,
    /// and the task's progress from now on is kept for its status alone.
    pub fn release_token(&self, task_id: &str) {
        let mut running = self.running.lock().unwrap();
        if let Some(r) = running.get_mut(task_id) {
            Self::stop_progress(r);
            r.token = None;
        }
    }
}
