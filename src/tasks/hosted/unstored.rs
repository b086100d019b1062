//! Task ends the store could not take (a shared store out of reach, a file store whose
//! commits fail): kept here and written again, oldest first, by one task that backs off
//! ([`FIRST_RETRY`] doubling to [`MAX_RETRY`]) while the store keeps failing, until it takes
//! them. Once an end is stored its task is retained, announced and counted as any finished
//! task. A `tasks/result` waiting on such an end waits at most `[tasks] store_outage_wait`
//! for it, then answers -32603 naming the store (`Hosted::result`).
//!
//! Bounded: only the tasks this process runs can end here, and those are in the store
//! already (at most `max_tasks`); the outcomes kept fill at most `max_store_bytes`, past
//! which an end keeps an error saying its result could not be kept instead.

use super::kept_ends::{End, EndState, Kept};
use super::{Hosted, Running};
use crate::jsonrpc::{self, RpcError};
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::TaskRecord;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// The first wait before an end the store refused is written again.
const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two attempts while the store fails.
const MAX_RETRY: Duration = Duration::from_secs(1);

impl Hosted {
    /// The store did not take task `task_id`'s end (`why`): kept, and written again until it
    /// does. `running` is what the task held while it ran (its link is let go now).
    pub(super) fn keep_unstored(&self, task_id: &str, mut end: End, why: String, running: Option<Running>) {
        let (state, sessions) = match running {
            Some(r) => {
                let sessions = std::iter::once(r.creator).chain(r.result_waiters.into_iter().map(|(s, _)| s)).collect();
                (r.end, sessions)
            }
            None => (watch::channel(EndState::Running).0, Vec::new()),
        };
        state.send_replace(EndState::Unstored(why));
        let mut u = self.unstored.lock().unwrap();
        if u.bytes + end.outcome.len() > self.max_store_bytes {
            let lost = format!(
                "the task ended while the task store was failing, and its result ({} bytes) could not be kept until it \
                 came back (max_store_bytes)",
                end.outcome.len()
            );
            tracing::warn!(task = %task_id, "{lost}");
            end.status = TaskStatus::Failed;
            end.outcome = RpcError::new(jsonrpc::INTERNAL_ERROR, lost.clone()).response(None).to_string().into();
            end.message = Some(lost);
        }
        u.bytes += end.outcome.len();
        let id: Arc<str> = task_id.into();
        if let Some(old) = u.kept.insert(id.clone(), Kept { end, state, sessions }) {
            u.bytes -= old.end.outcome.len();
        } else {
            u.order.push_back(id);
        }
        if !std::mem::replace(&mut u.rewriting, true) {
            let me = self.me.clone();
            tokio::spawn(rewrite(me));
        }
    }

    /// The store took a kept end: the task is retained, counted and announced as any that
    /// ended, and its waiters go on.
    fn stored(&self, kept: Kept, rec: Option<TaskRecord>) {
        if let Some(rec) = &rec {
            tracing::info!(task = %rec.id, status = rec.status.as_str(), "a task's end kept through a store failure is stored");
            self.expire_when_due(rec);
            if rec.status != TaskStatus::Cancelled {
                crate::metrics::global().task_entered(rec.status.as_str());
            }
            self.announce_to(rec, kept.sessions.iter());
        }
        kept.state.send_replace(EndState::Stored);
    }
}

/// Writes the kept ends again, oldest first, until none is left; backs off while the store
/// fails.
async fn rewrite(me: Weak<Hosted>) {
    let mut wait = FIRST_RETRY;
    loop {
        let Some(h) = me.upgrade() else { return };
        let next = {
            let mut u = h.unstored.lock().unwrap();
            match u.order.front().cloned() {
                None => {
                    u.rewriting = false;
                    return;
                }
                Some(id) => u.kept.get(&id).map(|k| (id, k.end.clone())),
            }
        };
        let Some((id, mut end)) = next else {
            h.unstored.lock().unwrap().order.pop_front();
            continue;
        };
        // Updated as it is stored: its retention's grace (and lastUpdatedAt) counts from
        // when it can be seen.
        end.at = crate::clock::wall_now();
        match h.store.update(&id, &mut |r| end.apply(r)).await {
            Ok(rec) => {
                let kept = {
                    let mut u = h.unstored.lock().unwrap();
                    u.order.pop_front();
                    let kept = u.kept.remove(&id);
                    if let Some(k) = &kept {
                        u.bytes -= k.end.outcome.len();
                    }
                    kept
                };
                if let Some(kept) = kept {
                    h.stored(kept, rec);
                }
                wait = FIRST_RETRY;
            }
            Err(_) => {
                drop(h);
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_RETRY);
            }
        }
    }
}
