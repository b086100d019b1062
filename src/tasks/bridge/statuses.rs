//! What a bridged call has seen of its task's statuses, and the status messages that become
//! progress for a client whose upstream reports none of its own.

use super::{BridgeLink, Timer};
use crate::clock::Deadlines;
use crate::jsonrpc::ProgressToken;
use crate::mcp::task_messages::TaskView;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;

/// A status message waits this long before it becomes progress: an upstream that reports
/// progress of its own does so by then, and its real values are passed on instead.
pub(super) const STATUS_AS_PROGRESS_DELAY: Duration = Duration::from_millis(200);

/// What the bridge has seen of its task's statuses. Statuses arrive by two paths (the
/// server's notifications and the bridge's own polls) and can overtake each other: a status
/// older than one already applied is ignored, and each message is news once. A message
/// becomes progress for the client after [`STATUS_AS_PROGRESS_DELAY`], and never once the
/// upstream reports progress of its own.
#[derive(Default)]
pub(super) struct StatusTracker {
    last_updated: Option<String>,
    announced: Vec<String>,
    /// Messages waiting to become progress, with when.
    unsent: std::collections::VecDeque<(Instant, String)>,
    upstream_progress: bool,
}

/// Messages remembered per bridged call, against repeats.
const MAX_ANNOUNCED: usize = 64;

impl StatusTracker {
    /// Takes in a `Task` as seen; returns whether it was news.
    pub(super) fn observe(&mut self, task: &Value) -> bool {
        let Some(msg) = self.fresh_message(task) else { return false };
        if !self.upstream_progress {
            if self.unsent.len() == MAX_ANNOUNCED {
                self.unsent.pop_front();
            }
            self.unsent.push_back((Instant::now() + STATUS_AS_PROGRESS_DELAY, msg));
        }
        true
    }

    pub(super) fn upstream_reports_progress(&mut self) {
        self.upstream_progress = true;
        self.unsent.clear();
    }

    fn next_due(&self) -> Option<Instant> {
        self.unsent.front().map(|(at, _)| *at)
    }

    /// Sets the call's [`Timer::Status`] to when the first message is due (unset: none is).
    pub(super) fn arm(&self, clock: &Deadlines<Timer>) {
        match self.next_due() {
            Some(at) => clock.insert_until(Timer::Status, at),
            None => clock.remove(&Timer::Status),
        }
    }

    fn take_due(&mut self, now: Instant) -> Vec<String> {
        let mut out = vec![];
        while self.unsent.front().is_some_and(|(at, _)| *at <= now) {
            out.extend(self.unsent.pop_front().map(|(_, m)| m));
        }
        out
    }

    /// The messages due now become progress under the call's token; without one they are
    /// dropped all the same (else their timer would stay due, and the bridge spin).
    pub(super) fn send_due<L: BridgeLink>(&mut self, link: &L, task_id: &str, token: Option<&ProgressToken>) {
        for msg in self.take_due(Instant::now()) {
            if token.is_some() {
                link.synthesize_progress(task_id, &msg);
            }
        }
    }

    pub(super) fn take_unsent(&mut self) -> Vec<String> {
        self.unsent.drain(..).map(|(_, m)| m).collect()
    }

    /// The task's status message if it is news.
    fn fresh_message(&mut self, task: &Value) -> Option<String> {
        let task = TaskView::of(task);
        if let Some(at) = task.last_updated_at() {
            // RFC 3339 timestamps of one server share a format, so they order as text.
            if let Some(last) = &self.last_updated
                && at.len() == last.len()
                && at < last.as_str()
            {
                return None;
            }
            self.last_updated = Some(at.to_string());
        }
        let msg = task.status_message()?;
        if self.announced.iter().any(|m| m == msg) {
            return None;
        }
        if self.announced.len() == MAX_ANNOUNCED {
            self.announced.remove(0);
        }
        self.announced.push(msg.to_string());
        Some(msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statuses_are_announced_once_and_never_backwards() {
        let mut t = StatusTracker::default();
        let st = |at: &str, m: &str| json!({"lastUpdatedAt": at, "statusMessage": m});
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:01.000Z", "a")).as_deref(), Some("a"));
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:03.000Z", "c")).as_deref(), Some("c"));
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:02.000Z", "b")), None, "older than what was applied");
        assert_eq!(t.fresh_message(&st("2026-01-01T00:00:04.000Z", "a")), None, "already announced");
        assert_eq!(t.fresh_message(&json!({"statusMessage": "d"})).as_deref(), Some("d"));
    }

    #[test]
    fn statuses_become_progress_only_while_the_upstream_reports_none() {
        let mut t = StatusTracker::default();
        assert!(t.observe(&json!({"statusMessage": "a"})));
        assert!(t.take_due(Instant::now()).is_empty(), "not before the delay");
        assert_eq!(t.take_due(Instant::now() + STATUS_AS_PROGRESS_DELAY), vec!["a".to_string()]);
        t.observe(&json!({"statusMessage": "b"}));
        t.upstream_reports_progress();
        t.observe(&json!({"statusMessage": "c"}));
        assert!(t.take_unsent().is_empty(), "the upstream's own progress replaces them");
    }
}
