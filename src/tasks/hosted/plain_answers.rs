//! Hosted tasks a 2026-07-28 client never learned of: its call was decided within
//! `plain_within` and answered with its own outcome (`gateway::session::modern_client`), so the
//! task is removed at once; and the tool a task calls, which a retry of its input round must
//! repeat.

use super::Hosted;

impl Hosted {
    /// The tool a task calls, if its record names one.
    pub async fn tool_of(&self, task_id: &str) -> Option<String> {
        let rec = self.store.get(task_id).await.map_err(|e| self.store_failed(e)).ok()??;
        rec.tool
    }

    /// A finished task whose outcome its creator got as a plain answer (it never learned the
    /// task's id): removed now, so that it takes no place among the owner's tasks or the
    /// store's. A task still running is left as it is.
    pub async fn discard_answered(&self, task_id: &str) {
        if self.runs(task_id) {
            return;
        }
        if let Err(e) = self.store.update(task_id, &mut |r| r.ttl = std::time::Duration::ZERO).await {
            self.store_failed(e);
            return;
        }
        let _ = self.store.remove_if_expired(task_id, std::time::SystemTime::now()).await;
    }
}
