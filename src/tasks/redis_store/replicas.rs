//! What a replica does about the others and about itself in the shared store: renewing its
//! heartbeat, failing the running tasks of replicas whose heartbeat lapsed ([`ORPHANED`]),
//! and failing those the store maps to it that it no longer runs ([`LOST_END`]).

use super::conn::bounded;
use super::{Core, LOST_END, ORPHANED};
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::StoreError;
use redis::AsyncCommands;
use std::sync::Arc;

impl Core {
    /// This replica is alive, for [`Timing::heartbeat_ttl`].
    pub(super) async fn heartbeat(&self) -> Result<(), StoreError> {
        let mut c = self.conn.clone();
        let key = self.keys.k(&format!("replica:{}", self.fanout.origin));
        bounded(c.pset_ex(key, 1, self.timing.heartbeat_ttl.as_millis() as u64)).await
    }

    /// Fails the running tasks of replicas whose heartbeat lapsed (a failure is logged; the
    /// next sweep tries again). Each is failed by a compare-and-set like any change: if two
    /// replicas notice at once, one fails it and the other finds it terminal.
    pub(super) async fn fail_orphans(&self) {
        let mut c = self.conn.clone();
        let running: Vec<(String, String)> = match bounded(c.hgetall(self.keys.k("running"))).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "redis task store: cannot list running tasks");
                return;
            }
        };
        let mut alive: std::collections::HashMap<String, bool> = std::collections::HashMap::new();
        for (id, replica) in running {
            if replica == self.fanout.origin {
                // Running here by the store's account: if not by this replica's own, the store
                // lost the end this replica wrote.
                if !self.mine.lock().unwrap().contains(&id) {
                    self.fail_running(&id, LOST_END).await;
                }
                continue;
            }
            let live = match alive.get(&replica) {
                Some(l) => *l,
                None => {
                    let key = self.keys.k(&format!("replica:{replica}"));
                    let Ok(l) = bounded(c.exists::<_, bool>(key)).await else { return };
                    alive.insert(replica.clone(), l);
                    l
                }
            };
            if !live {
                self.fail_running(&id, ORPHANED).await;
            }
        }
    }

    /// Fails running task `id` with `why` (a task already ended stays as it ended).
    async fn fail_running(&self, id: &str, why: &str) {
        // Ended meanwhile (its end removed it from `running` after the listing): nothing to do.
        if let Ok(Some((r, _))) = self.read(id).await
            && r.status.is_terminal()
        {
            return;
        }
        let now = crate::clock::wall_now();
        let err = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": crate::jsonrpc::INTERNAL_ERROR, "message": why}});
        let err: Arc<str> = err.to_string().into();
        let mut failed = false;
        let res = self
            .do_update(id, &mut |r| {
                failed = !r.status.is_terminal();
                if failed {
                    r.status = TaskStatus::Failed;
                    r.status_message = Some(why.into());
                    r.outcome = Some(err.clone());
                    r.last_updated_at = now;
                }
            })
            .await;
        match res {
            Ok(_) if failed => tracing::warn!(task = %id, "{why}: task failed"),
            Ok(_) => {}
            Err(e) => tracing::warn!(task = %id, error = %e, "redis task store: cannot fail a task"),
        }
    }
}
