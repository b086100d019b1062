//! What other replicas sharing the store did to the tasks this one runs.

use super::Hosted;
use crate::jsonrpc;
use crate::upstream::client::{ClientSession, Route};
use serde_json::Value;
use std::sync::Arc;

impl Hosted {
    /// Follows the status changes other replicas make (a shared store only).
    pub(super) fn follow_remote_changes(self: &Arc<Self>) {
        if let Some(mut changes) = self.store.remote_changes() {
            let me = Arc::downgrade(self);
            tokio::spawn(async move {
                loop {
                    let change = match changes.recv().await {
                        Ok(c) => c,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::warn!(missed = n, "status changes of other replicas came faster than handled");
                            continue;
                        }
                        Err(_) => return,
                    };
                    let Some(h) = me.upgrade() else { return };
                    h.remote_change(change).await;
                }
            });
        }
    }

    /// Another replica sharing the store changed a task's status. If it ended a task whose
    /// call runs here (a `tasks/cancel` it served), the call is cancelled upstream and this
    /// replica's sessions hear the status, as after a local cancel.
    async fn remote_change(&self, change: crate::tasks::store::RemoteChange) {
        let running = change.status.is_terminal().then(|| self.running.lock().unwrap().remove(change.id.as_str()));
        let Some(Some(r)) = running else {
            if !self.runs(&change.id) {
                self.tell_held_sessions(&change.id).await;
            }
            return;
        };
        tracing::info!(task = %change.id, status = change.status.as_str(), "task ended by another replica");
        Self::stop_progress(&r);
        match self.store.get(&change.id).await {
            Ok(Some(rec)) => {
                self.expire_when_due(&rec);
                self.announce(&rec, &r);
            }
            Ok(None) => {}
            Err(e) => {
                self.store_failed(e);
            }
        }
        if let Some(up) = r.upstream_id {
            r.link.cancel(up, "the task was cancelled").await;
        }
    }

    /// A session this replica holds (initialized or revived here): with a shared store, it
    /// hears of status changes other replicas make to its owner's tasks. Bounded by the
    /// sessions alive (`max_sessions`): the ones gone are dropped at each call.
    pub fn hold_session(&self, owner: &str, session: Arc<dyn ClientSession>) {
        if self.store.remote_changes().is_none() {
            return;
        }
        let mut held = self.held_sessions.lock().unwrap();
        held.retain(|_, v| {
            v.retain(|s| s.strong_count() > 0);
            !v.is_empty()
        });
        held.entry(owner.to_string()).or_default().push(Arc::downgrade(&session));
    }

    /// `notifications/tasks/status` to this replica's sessions of the task's owner, for a
    /// change another replica made to a task whose call does not run here.
    async fn tell_held_sessions(&self, task_id: &str) {
        let rec = match self.store.get(task_id).await {
            Ok(Some(rec)) => rec,
            Ok(None) => return,
            Err(e) => {
                self.store_failed(e);
                return;
            }
        };
        let sessions: Vec<Arc<dyn ClientSession>> = {
            let held = self.held_sessions.lock().unwrap();
            held.get(&rec.owner).map(|v| v.iter().filter_map(|s| s.upgrade()).collect()).unwrap_or_default()
        };
        if sessions.is_empty() {
            return;
        }
        if rec.status.is_terminal() {
            self.expire_when_due(&rec);
        }
        let note = crate::jsonrpc::Message::made(jsonrpc::notification(
            crate::jsonrpc::Method::TaskStatus,
            Value::Object(rec.to_json()),
        ));
        for s in sessions {
            s.to_client(note.clone(), Route::Unrelated);
        }
    }
}
