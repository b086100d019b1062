//! What a viewer of the task page sees: which tasks (all of them, or a principal's own on
//! every upstream), and each as a row of JSON. An owner is shown by name, never by its key:
//! a principal's name, or for a session without authentication a short label derived from
//! its key (which is the session's secret).

use crate::gateway::session::Session;
use crate::tasks::hosted::overview::Overview;
use crate::tasks::record_fields::ms;
use crate::tasks::store::TaskRecord;
use serde_json::{Value, json};
use std::sync::Arc;

/// Who watches, and so which tasks they see.
#[derive(Clone, Debug)]
pub(crate) enum Viewer {
    /// Every task: without authentication (`operator: None`), or one of `operators`.
    Everyone { operator: Option<Arc<str>> },
    /// The principal's own tasks, on every upstream.
    Principal(Arc<str>),
}

impl Viewer {
    pub(crate) fn sees(&self, rec: &TaskRecord) -> bool {
        match self {
            Viewer::Everyone { .. } => true,
            Viewer::Principal(p) => rec.owner == Session::owner_of(p, &rec.upstream),
        }
    }

    /// The authenticated principal watching, if any.
    pub(crate) fn principal(&self) -> Option<&Arc<str>> {
        match self {
            Viewer::Everyone { operator: None } => None,
            Viewer::Everyone { operator: Some(p) } | Viewer::Principal(p) => Some(p),
        }
    }

    /// How a cancel names who made it.
    pub(crate) fn name(&self) -> &str {
        match self {
            Viewer::Everyone { operator: None } => "the operator",
            Viewer::Everyone { operator: Some(p) } | Viewer::Principal(p) => p,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Viewer::Everyone { operator: None } => json!({"principal": null, "operator": true, "auth": false}),
            Viewer::Everyone { operator: Some(p) } => json!({"principal": &**p, "operator": true, "auth": true}),
            Viewer::Principal(p) => json!({"principal": &**p, "operator": false, "auth": true}),
        }
    }
}

/// The owner as the page names it.
fn owner_label(rec: &TaskRecord) -> String {
    if Session::is_principal_owner(&rec.owner) {
        let prefix = Session::owner_of("", &rec.upstream);
        if let Some(name) = rec.owner.strip_prefix(&prefix) {
            return name.to_string();
        }
    }
    // A session's own key is its secret: a few digits of its hash tell sessions apart
    // without giving it away.
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    rec.owner.hash(&mut h);
    let tag = format!("{:06x}", h.finish() & 0xff_ffff);
    if rec.client != rec.owner && !Session::is_principal_owner(&rec.client) {
        format!("session {tag} ({})", rec.client)
    } else {
        format!("session {tag}")
    }
}

/// One task as the page shows it (times in milliseconds since the Unix epoch).
pub(crate) fn row(rec: &TaskRecord, progress: Option<(f64, Option<f64>)>) -> Value {
    json!({
        "id": rec.id,
        "tool": rec.tool,
        "upstream": rec.upstream,
        "owner": owner_label(rec),
        "status": rec.status.as_str(),
        "statusMessage": rec.status_message,
        "progress": progress.map(|p| p.0),
        "total": progress.and_then(|p| p.1),
        "createdAt": ms(rec.created_at),
        "lastUpdatedAt": ms(rec.last_updated_at),
        "ttlMs": rec.ttl.as_millis() as u64,
        // A running task is kept until its ttl after it ends: no date yet.
        "expiresAt": rec.status.is_terminal().then(|| ms(rec.expires_at())),
    })
}

/// The rows `viewer` sees of `rows`, as the JSON array's text (what a change is told by), at
/// most `max_bytes` of it; and whether rows were left out to keep to that.
pub(crate) fn rows_text(viewer: &Viewer, rows: &[Overview], max_bytes: usize) -> (String, bool) {
    let mut out = String::from("[");
    for o in rows.iter().filter(|o| viewer.sees(&o.rec)) {
        let text = row(&o.rec, o.progress).to_string();
        if out.len() + text.len() + 2 > max_bytes {
            out.push(']');
            return (out, true);
        }
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&text);
    }
    out.push(']');
    (out, false)
}

/// A snapshot event's data: the rows (`rows_text`), the viewer, and the server's clock.
pub(crate) fn snapshot(viewer: &Viewer, rows_text: &str, truncated: bool) -> String {
    format!(
        "{{\"sentAt\":{},\"viewer\":{},\"truncated\":{truncated},\"tasks\":{rows_text}}}",
        ms(crate::clock::wall_now()),
        viewer.to_json()
    )
}
