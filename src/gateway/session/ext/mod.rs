//! The extension-tasks strategy: a legacy client in front of a 2026-07-28 upstream that
//! declares the tasks extension (`io.modelcontextprotocol/tasks`), the plan's
//! `TaskPolicy::ExtBridged` and `TaskPolicy::ExtTranslated`. [`ExtTasks`] owns what the
//! session keeps for that upstream ([`ExtState`]): the input requests of its bridged tasks
//! waiting for the client, the extension tasks a core-tasks client made, and the signal that
//! stops their followers when the session ends.
//!
//! - `bridged`: a blocking `tools/call` the upstream wants as a task, bridged through an
//!   extension task, its input requests relayed to the client.
//! - `translated`: a core-tasks client's tasks translated to the extension's and back.
//! - `follow`: those tasks followed while they run, and cancelled when the session ends.
//!
//! Its methods take the session core as `s` (its link, sink, hosted tasks, versions); the
//! session keeps the strategy as its field `ext`, built with it. This file knows nothing of
//! the session: the submodules import it, never the other way.
//!
//! Locks: the strategy's own lock is taken for a moment and never held across an `.await`.
//! Where the session's `state` and the strategy's are needed at once (an input request's
//! bound and id, counted with the server's own requests), the session's is taken first, then
//! the strategy's; never the other way. The followed tasks' map (`Following`) is taken
//! before the strategy's lock, never while it is held.

use crate::clock::Schedule;
use crate::locks::Mutex;
use crate::tasks::store::FollowedTask;
use std::collections::HashMap;
use std::sync::MutexGuard;
use std::time::Duration;
use table::ExtState;
use tokio::sync::OwnedSemaphorePermit;

mod bridged;
mod follow;
pub(super) mod table;
mod translated;

/// The extension-tasks strategy of one session, and its state (see the module doc).
#[derive(Default)]
pub(super) struct ExtTasks {
    state: Mutex<ExtState>,
    following: Following,
}

/// The tasks the session follows (`follow`): when each is looked at next, on one
/// schedule whose waiter (started with the first) starts each look, and for each its permit
/// of the gateway's `max_followed` and its poll interval.
#[derive(Default)]
struct Following {
    clock: Schedule<String>,
    tasks: Mutex<HashMap<String, (OwnedSemaphorePermit, Duration)>>,
}

impl ExtTasks {
    /// The strategy's state, for a moment (see the module doc for the lock order).
    fn lock(&self) -> MutexGuard<'_, ExtState> {
        self.state.lock().unwrap()
    }

    /// The bounds of the extension task table: tasks (the upstream's configuration), bytes.
    pub(super) fn set_limit(&self, limit: usize, bytes: table::Bytes) {
        self.lock().table.set_limit(limit, bytes);
    }

    /// What the store keeps of the extension tasks the session follows.
    pub(super) fn followed(&self) -> Vec<FollowedTask> {
        self.lock().table.followed()
    }

    /// The extension tasks of a session from before a restart, its table bounded by `limit`
    /// (see `relink`): the tasks that have not ended for the client, to follow again.
    pub(super) fn revive(&self, limit: usize, bytes: table::Bytes, tasks: &[FollowedTask]) -> Vec<String> {
        let mut st = self.lock();
        if !tasks.is_empty() {
            st.table.set_limit(limit, bytes);
            st.table.revive(tasks);
        }
        st.table.open_tasks()
    }

    /// A bridged call ended: the input requests of its task the client has not answered are
    /// moot now.
    pub(super) fn drop_moot_inputs(&self) {
        self.lock().inputs.retain(|_, w| !w.answers.is_closed());
    }
}
