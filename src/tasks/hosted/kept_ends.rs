//! The ends of hosted tasks that the store did not take, as data: each end, where it is
//! (running, unstored, stored) and the queue they are written again from. The retrying is
//! `unstored`'s; this module imports nothing of `hosted` so that `hosted` may hold them.

use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::TaskRecord;
use crate::upstream::client::ClientSession;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::SystemTime;
use tokio::sync::watch;

/// Where a hosted task's end is, as its `tasks/result` waiters see it.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum EndState {
    /// The task runs, or its end is being written for the first time.
    Running,
    /// The store did not take it (why): it is written again until it does.
    Unstored(String),
    /// The store has it.
    Stored,
}

/// A task's end, as it is written to its record.
#[derive(Clone)]
pub(super) struct End {
    pub(super) status: TaskStatus,
    pub(super) message: Option<String>,
    pub(super) outcome: Arc<str>,
    pub(super) at: SystemTime,
}

impl End {
    /// Ends `r` with it, unless `r` has ended already.
    pub(super) fn apply(&self, r: &mut TaskRecord) {
        if !r.status.is_terminal() {
            r.status = self.status;
            // A progress message describes work in progress, not the outcome.
            r.status_message.clone_from(&self.message);
            r.outcome = Some(self.outcome.clone());
            r.last_updated_at = self.at;
        }
    }
}

/// An end kept until the store takes it, and who hears when it does.
pub(super) struct Kept {
    pub(super) end: End,
    pub(super) state: watch::Sender<EndState>,
    /// Its creator and its waiters, told of its status once it is stored.
    pub(super) sessions: Vec<Weak<dyn ClientSession>>,
}

/// The ends kept, oldest first.
#[derive(Default)]
pub(super) struct Unstored {
    pub(super) kept: HashMap<Arc<str>, Kept>,
    pub(super) order: VecDeque<Arc<str>>,
    /// Bytes of the outcomes kept.
    pub(super) bytes: usize,
    /// The task writing them again runs.
    pub(super) rewriting: bool,
}

impl Unstored {
    /// The state of task `id`'s end, if it is kept here.
    pub(super) fn subscribe(&self, id: &str) -> Option<watch::Receiver<EndState>> {
        self.kept.get(id).map(|k| k.state.subscribe())
    }

    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }
}
