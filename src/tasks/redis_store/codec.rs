//! A task record in Redis: a hash whose field `m` holds the record's fields as JSON (all
//! but `seq` and the outcome), `seq` its creation order, `ver` its version (each change
//! adds one, for the compare-and-set of `update`), `out` its outcome's text, as is.

use crate::mcp::tasks::TaskStatus;
use crate::tasks::store::TaskRecord;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Serialize, Deserialize)]
struct Meta {
    id: String,
    owner: String,
    client: String,
    upstream: String,
    status: String,
    status_message: Option<String>,
    created_ms: u64,
    updated_ms: u64,
    ttl_ms: u64,
    poll_ms: u64,
    ttl_from_end: bool,
}

pub(super) fn ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// The `m` field of a record.
pub(super) fn meta(r: &TaskRecord) -> String {
    serde_json::to_string(&Meta {
        id: r.id.clone(),
        owner: r.owner.clone(),
        client: r.client.clone(),
        upstream: r.upstream.clone(),
        status: r.status.as_str().into(),
        status_message: r.status_message.clone(),
        created_ms: ms(r.created_at),
        updated_ms: ms(r.last_updated_at),
        ttl_ms: r.ttl.as_millis() as u64,
        poll_ms: r.poll_interval.as_millis() as u64,
        ttl_from_end: r.ttl_from_end,
    })
    .expect("records serialize")
}

/// A record from its hash fields (`None`: unreadable).
pub(super) fn decode(m: &str, seq: u64, out: Option<String>) -> Option<TaskRecord> {
    let s: Meta = serde_json::from_str(m).ok()?;
    Some(TaskRecord {
        id: s.id,
        owner: s.owner,
        client: s.client,
        upstream: s.upstream,
        seq,
        status: TaskStatus::parse(&s.status)?,
        status_message: s.status_message,
        created_at: at(s.created_ms),
        last_updated_at: at(s.updated_ms),
        ttl: Duration::from_millis(s.ttl_ms),
        poll_interval: Duration::from_millis(s.poll_ms),
        outcome: out.map(Arc::from),
        ttl_from_end: s.ttl_from_end,
    })
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
