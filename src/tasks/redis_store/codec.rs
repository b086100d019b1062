//! A task record in Redis: a hash whose field `m` holds the record's fields as JSON (all
//! but `seq` and the outcome), `seq` its creation order, `ver` its version (each change
//! adds one, for the compare-and-set of `update`), `out` its outcome's text, as is.

use crate::mcp::task_messages::TaskStatus;
use crate::tasks::record_fields::RecordFields;
pub(super) use crate::tasks::record_fields::ms;
use crate::tasks::store::TaskRecord;
use std::sync::Arc;

/// The `m` field of a record.
pub(super) fn meta(r: &TaskRecord) -> String {
    serde_json::to_string(&RecordFields::of(r)).expect("records serialize")
}

/// A record from its hash fields (`None`: unreadable).
pub(super) fn decode(m: &str, seq: u64, out: Option<String>) -> Option<TaskRecord> {
    serde_json::from_str::<RecordFields>(m).ok()?.into_record(seq, out.map(Arc::from))
}

/// A status change as published: `id`, status (or `gone`: removed), version, origin (the
/// replica that made it), one per line.
pub(super) struct Published<'a> {
    pub id: &'a str,
    /// `None`: the task was removed.
    pub status: Option<TaskStatus>,
    pub ver: u64,
    pub origin: &'a str,
}

pub(super) fn parse_published(text: &str) -> Option<Published<'_>> {
    let mut it = text.split('\n');
    let id = it.next()?;
    let status = match it.next()? {
        "gone" => None,
        s => Some(TaskStatus::parse(s)?),
    };
    let ver = it.next()?.parse().ok()?;
    let origin = it.next()?;
    Some(Published { id, status, ver, origin })
}

/// `ver` may be a placeholder the writing script fills in.
pub(super) fn published(id: &str, status: TaskStatus, ver: &str, origin: &str) -> String {
    format!("{id}\n{}\n{ver}\n{origin}", status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn records_and_messages_round_trip() {
        let mut r = TaskRecord::new(
            "t".into(),
            "o".into(),
            "c".into(),
            "up".into(),
            Duration::from_secs(60),
            Duration::from_secs(1),
        );
        r.status = TaskStatus::Completed;
        r.outcome = Some("{}".into());
        let back = decode(&meta(&r), 7, Some("{}".into())).unwrap();
        assert_eq!(
            (back.id.as_str(), back.seq, back.status, back.outcome.as_deref()),
            ("t", 7, TaskStatus::Completed, Some("{}"))
        );
        assert_eq!(back.expires_at(), r.expires_at().min(back.expires_at()));
        let text = published("t", TaskStatus::Cancelled, "3", "r1");
        let p = parse_published(&text).unwrap();
        assert_eq!((p.id, p.status, p.ver, p.origin), ("t", Some(TaskStatus::Cancelled), 3, "r1"));
        assert!(parse_published("t\ngone\n4\nr2").unwrap().status.is_none());
        assert!(parse_published("t\nbogus\n4\nr2").is_none());
    }
}
