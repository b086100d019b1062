//! Where the parts of a message the gateway reads stand in its bytes: [`Span`]s, and the
//! [`Key`]s of `params` (or `result`) it routes by, found in one pass over that object.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::ops::Range;

/// Where a part of the message stands in its bytes (a message is far below 4 GiB: every
/// body and line is bounded by `max_body_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: u32,
    pub(super) end: u32,
}

impl Span {
    pub(super) fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    pub(super) fn len(self) -> usize {
        (self.end - self.start) as usize
    }
}

/// A key of `params` (or `result`) the gateway reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Name,
    Task,
    TaskId,
    RequestId,
    ProgressToken,
    Meta,
    ProtocolVersion,
    Progress,
    Total,
    Status,
}

const KEYS: usize = 10;

/// Where the values of the [`Key`]s of one object stand in the message's bytes.
#[derive(Default, Clone, Debug)]
pub(super) struct Fields([Option<Span>; KEYS]);

#[derive(Deserialize)]
struct RawFields<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    task: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "taskId")]
    task_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "requestId")]
    request_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "protocolVersion")]
    protocol_version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    progress: Option<&'a RawValue>,
    #[serde(borrow, default)]
    total: Option<&'a RawValue>,
    #[serde(borrow, default)]
    status: Option<&'a RawValue>,
}

pub(super) fn span_in(text: &[u8], part: &RawValue) -> Span {
    let start = part.get().as_ptr() as usize - text.as_ptr() as usize;
    Span { start: start as u32, end: (start + part.get().len()) as u32 }
}

impl Fields {
    /// The keys of the object at `at` in `text`; `None` if it is not an object or repeats one.
    pub(super) fn read(text: &[u8], at: Span) -> Option<Fields> {
        let obj = &text[at.range()];
        if obj.first() != Some(&b'{') {
            return Some(Fields::default());
        }
        let r: RawFields = serde_json::from_slice(obj).ok()?;
        // In the order of `Key`.
        let values = [
            r.name,
            r.task,
            r.task_id,
            r.request_id,
            r.progress_token,
            r.meta,
            r.protocol_version,
            r.progress,
            r.total,
            r.status,
        ];
        Some(Fields(values.map(|v| v.map(|v| span_in(text, v)))))
    }

    pub(super) fn get(&self, key: Key) -> Option<Span> {
        self.0[key as usize]
    }
}

impl Fields {
    pub(super) fn spans_mut(&mut self) -> impl Iterator<Item = &mut Option<Span>> {
        self.0.iter_mut()
    }
}
