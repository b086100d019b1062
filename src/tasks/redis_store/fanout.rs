//! One subscriber connection per gateway, on the store's status channel, fanned out to
//! this process's watchers: a `tasks/result` here wakes when any replica ends the task.
//! Changes made by other replicas are also passed on ([`RemoteChange`]), for what only the
//! replica running a task can do (cancel its upstream call).
//!
//! Each watched task has one `watch::Sender` and the version of the record it last showed:
//! a change is shown only if it is newer, so a late message cannot undo a newer read. The
//! senders are bounded by `max_tasks` (the store holds no more tasks than that); a sender
//! whose receivers are all gone is dropped when room is needed.

use super::codec::{Published, parse_published};
use crate::locks::Mutex;
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::RemoteChange;
use std::collections::HashMap;
use tokio::sync::{broadcast, watch};

/// Remote changes queued for a slow listener before it starts missing them (it is told,
/// and logs it).
pub(super) const REMOTE_QUEUE: usize = 1024;

pub(super) struct Fanout {
    senders: Mutex<HashMap<String, (u64, watch::Sender<TaskStatus>)>>,
    max: usize,
    /// This replica's id: its own changes are not "remote".
    pub origin: String,
    remote: broadcast::Sender<RemoteChange>,
}

impl Fanout {
    pub fn new(max: usize, origin: String) -> Fanout {
        Fanout { senders: Mutex::new(HashMap::new()), max, origin, remote: broadcast::channel(REMOTE_QUEUE).0 }
    }

    pub fn remote(&self) -> broadcast::Receiver<RemoteChange> {
        self.remote.subscribe()
    }

    /// A receiver for task `id`, before its record is read (so no change falls between the
    /// read and the subscription); `None` if the bound is reached.
    pub fn subscribe(&self, id: &str) -> Option<watch::Receiver<TaskStatus>> {
        let mut senders = self.senders.lock().unwrap();
        if let Some((_, tx)) = senders.get(id) {
            return Some(tx.subscribe());
        }
        if senders.len() >= self.max {
            senders.retain(|_, (_, tx)| tx.receiver_count() > 0);
            if senders.len() >= self.max {
                return None;
            }
        }
        let (tx, rx) = watch::channel(TaskStatus::Working);
        senders.insert(id.to_string(), (0, tx));
        Some(rx)
    }

    /// Shows version `ver` of task `id` (read, written or published): newer versions only. A
    /// terminal status closes the channel after it is shown, as nothing changes after it;
    /// `None` (removed) closes it at once.
    pub fn show(&self, id: &str, status: Option<TaskStatus>, ver: u64) {
        let mut senders = self.senders.lock().unwrap();
        let Some((seen, tx)) = senders.get_mut(id) else { return };
        match status {
            Some(s) if ver > *seen => {
                *seen = ver;
                tx.send_if_modified(|cur| std::mem::replace(cur, s) != s);
                if s.is_terminal() {
                    senders.remove(id);
                }
            }
            Some(_) => {}
            None => {
                senders.remove(id);
            }
        }
    }

    /// Forgets task `id`'s sender if nobody watches it (a watch that found no task).
    pub fn forget_unwatched(&self, id: &str) {
        let mut senders = self.senders.lock().unwrap();
        if senders.get(id).is_some_and(|(_, tx)| tx.receiver_count() == 0) {
            senders.remove(id);
        }
    }

    /// The tasks watched now (re-read after the subscriber reconnects: what changed while it
    /// was away was not heard).
    pub fn watched(&self) -> Vec<String> {
        self.senders.lock().unwrap().keys().cloned().collect()
    }

    /// A message from the channel.
    pub fn heard(&self, text: &str) {
        let Some(Published { id, status, ver, origin }) = parse_published(text) else {
            tracing::warn!(message = %text.escape_debug(), "unreadable message on the redis store's channel");
            return;
        };
        self.show(id, status, ver);
        if let Some(status) = status
            && origin != self.origin
        {
            // Nobody listening is fine: a process without hosted tasks.
            let _ = self.remote.send(RemoteChange { id: id.to_string(), status });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_only_and_terminal_closes() {
        let f = Fanout::new(2, "me".into());
        let mut remote = f.remote();
        let rx = f.subscribe("a").unwrap();
        f.show("a", Some(TaskStatus::InputRequired), 3);
        f.show("a", Some(TaskStatus::Working), 2);
        assert_eq!(*rx.borrow(), TaskStatus::InputRequired, "a late message does not undo a newer one");
        f.heard("a\ncancelled\n4\nother");
        assert_eq!(*rx.borrow(), TaskStatus::Cancelled);
        assert!(rx.has_changed().is_err(), "closed once terminal");
        assert_eq!(remote.try_recv().unwrap().status, TaskStatus::Cancelled);
        f.heard("b\ncompleted\n4\nme");
        assert!(remote.try_recv().is_err(), "its own changes are not remote");
        // Bounded: unwatched senders make room, watched ones do not.
        let _b = f.subscribe("b").unwrap();
        let _c = f.subscribe("c").unwrap();
        assert!(f.subscribe("d").is_none());
        drop(_c);
        assert!(f.subscribe("d").is_some());
    }
}
