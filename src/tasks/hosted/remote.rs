//! What other replicas sharing the store did to the tasks this one runs.

use super::Hosted;
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
        if !change.status.is_terminal() {
            return;
        }
        let Some(r) = self.running.lock().unwrap().remove(change.id.as_str()) else { return };
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
}
