//! The hosted tasks as an operator's view shows them (the task page, `downstream::
//! task_page`): every owner's tasks, each with what only this process's hot state knows (the
//! latest progress message and numbers), read-only.

use super::Hosted;
use crate::jsonrpc::RpcError;
use crate::tasks::store::TaskRecord;

/// One task as the overview shows it.
#[derive(Clone, Debug)]
pub struct Overview {
    /// The stored record with the hot state laid over it (see [`Hosted::get`]).
    pub rec: TaskRecord,
    /// The latest `progress` of its call, and its `total` if the upstream gave one: known
    /// while the task runs in this process.
    pub progress: Option<(f64, Option<f64>)>,
}

impl Hosted {
    /// Every owner's tasks, oldest first, at most `limit` (one store listing); and whether
    /// more were left out.
    pub async fn overview(&self, limit: usize) -> Result<(Vec<Overview>, bool), RpcError> {
        let (page, more) = self.store.list_all(0, limit).await.map_err(|e| self.store_failed(e))?;
        let rows = page
            .into_iter()
            .map(|rec| {
                let progress = if rec.status.is_terminal() {
                    None
                } else {
                    self.running.lock().unwrap().get(rec.id.as_str()).and_then(|r| r.progress_numbers)
                };
                Overview { rec: self.live(rec), progress }
            })
            .collect();
        Ok((rows, more))
    }
}
