//! How a task record is written in the file store's database (its durable fields as JSON,
//! then the outcome's text as is), the store's error, and what a task that was running at a
//! restart says: what the store and its opening share, importing neither.

use crate::tasks::record_fields::RecordFields;
use crate::tasks::store::{StoreError, TaskRecord};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The status message (and error) of a task that was running when the gateway stopped.
pub const RESTARTED: &str = "the gateway restarted while the task was running";

/// The durable fields of a record, minus the outcome (stored after them, as is).
#[derive(Serialize, Deserialize)]
struct Stored {
    #[serde(flatten)]
    fields: RecordFields,
    seq: u64,
    has_outcome: bool,
}

/// `Stored` as JSON, a newline, then the outcome's text: the outcome is JSON text already,
/// and is not escaped a second time.
pub(super) fn encode(r: &TaskRecord) -> Vec<u8> {
    let s = Stored { fields: RecordFields::of(r), seq: r.seq, has_outcome: r.outcome.is_some() };
    let mut out = serde_json::to_vec(&s).expect("records serialize");
    if let Some(o) = &r.outcome {
        out.push(b'\n');
        out.extend_from_slice(o.as_bytes());
    }
    out
}

pub(super) fn decode(bytes: &[u8]) -> Option<TaskRecord> {
    let (head, outcome) = match bytes.iter().position(|&b| b == b'\n') {
        Some(i) => (&bytes[..i], Some(&bytes[i + 1..])),
        None => (bytes, None),
    };
    let s: Stored = serde_json::from_slice(head).ok()?;
    let outcome = match (s.has_outcome, outcome) {
        (true, Some(o)) => Some(Arc::from(std::str::from_utf8(o).ok()?)),
        _ => None,
    };
    s.fields.into_record(s.seq, outcome)
}

pub(super) fn backend(cause: impl std::fmt::Display) -> StoreError {
    StoreError::Backend { store: "file", cause: cause.to_string() }
}
