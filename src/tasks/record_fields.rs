//! A task record's fields as the durable stores write them (JSON), apart from its creation
//! order and its outcome, which each store keeps its own way (`file_store`: after the
//! fields, as is; `redis_store`: fields of a hash of their own).

use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::TaskRecord;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Serialize, Deserialize)]
pub struct RecordFields {
    id: String,
    owner: String,
    client: String,
    upstream: String,
    /// Absent in records written before the tool was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool: Option<String>,
    status: String,
    status_message: Option<String>,
    created_ms: u64,
    updated_ms: u64,
    ttl_ms: u64,
    poll_ms: u64,
    ttl_from_end: bool,
}

/// Milliseconds since the Unix epoch (0 for an earlier time).
pub fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

impl RecordFields {
    pub fn of(r: &TaskRecord) -> RecordFields {
        RecordFields {
            id: r.id.clone(),
            owner: r.owner.clone(),
            client: r.client.clone(),
            upstream: r.upstream.clone(),
            tool: r.tool.clone(),
            status: r.status.as_str().into(),
            status_message: r.status_message.clone(),
            created_ms: ms(r.created_at),
            updated_ms: ms(r.last_updated_at),
            ttl_ms: r.ttl.as_millis() as u64,
            poll_ms: r.poll_interval.as_millis() as u64,
            ttl_from_end: r.ttl_from_end,
        }
    }

    /// The record, with its creation order and outcome (`None`: an unknown status).
    pub fn into_record(self, seq: u64, outcome: Option<Arc<str>>) -> Option<TaskRecord> {
        Some(TaskRecord {
            id: self.id,
            owner: self.owner,
            client: self.client,
            upstream: self.upstream,
            tool: self.tool,
            seq,
            status: TaskStatus::parse(&self.status)?,
            status_message: self.status_message,
            created_at: at(self.created_ms),
            last_updated_at: at(self.updated_ms),
            ttl: Duration::from_millis(self.ttl_ms),
            poll_interval: Duration::from_millis(self.poll_ms),
            outcome,
            ttl_from_end: self.ttl_from_end,
        })
    }
}
