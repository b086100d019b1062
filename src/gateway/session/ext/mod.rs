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
//! Its methods are handed a [`Host`], `s`: what it needs of its session (its link, the path
//! to its client, the hosted tasks, its bridged calls), and no more; the session lends itself
//! as one (`session/contexts.rs`) and keeps the strategy as its field `ext`, built with it.
//! The strategy names no session type.
//!
//! Locks: the strategy's own lock is taken for a moment and never held across an `.await`.
//! Where the session's `state` and the strategy's are needed at once (an input request's
//! bound and id, counted with the server's own requests), the session's is taken first, then
//! the strategy's; never the other way. The followed tasks' map (`Following`) is taken
//! before the strategy's lock, never while it is held.

use super::bridged_calls;
use super::reach::Hosting;
use crate::clock::Schedule;
use crate::jsonrpc::{Id, Message};
use crate::locks::Mutex;
use crate::tasks::hosted::RoundPolicy;
use crate::tasks::store::FollowedTask;
use std::collections::HashMap;
use std::future::Future;
use std::sync::MutexGuard;
use std::time::Duration;
use table::ExtState;
use tokio::sync::OwnedSemaphorePermit;

mod bridged;
mod follow;
pub(super) mod table;
mod translated;

/// What the extension-tasks strategy needs of its session beyond what a strategy that hosts
/// tasks and bridges calls reaches: its narrow context.
pub(super) trait Host: Hosting + bridged_calls::Host {
    /// The session's own extension-tasks strategy.
    fn ext(&self) -> &ExtTasks;
    /// Keeps client call `frame` (`id`) in case its answer asks for the extension: `false`,
    /// and nothing kept, when `max_in_flight` calls are kept already.
    fn keep_for_retry(&self, id: &Id, frame: &Message) -> bool;
    /// The call kept for client request `id`, no longer kept.
    fn take_retry(&self, id: &Id) -> Option<Message>;
    /// Why the client cannot be asked `msg` (a request of the server's, made while serving
    /// client request `related`), if it cannot.
    fn cannot_ask(&self, msg: &Message, related: &Id) -> Option<String>;
    /// `f`'s value, given the number of the server's own requests that wait for the client,
    /// under the session's lock: the strategy's questions are counted with them. `f` runs
    /// under that lock, so it takes only the strategy's own and calls nothing of the host's
    /// that may take the session's (the std mutex is not reentrant).
    fn with_server_requests<R>(&self, f: impl FnOnce(usize) -> R) -> R;
    /// Asks the client `msg` under `id`, related to its request `related` (a 2026-07-28
    /// client, in its request's next answer: see [`Host::asked_all`]).
    fn ask(&self, id: Id, msg: Message, related: &Id);
    /// Every question of a bridged task is out: a 2026-07-28 client is asked them now.
    fn asked_all(&self);
    /// A permit to follow one more task, if one of the gateway's `max_followed` (all sessions
    /// together) is free.
    fn follow_permit(&self) -> Option<OwnedSemaphorePermit>;
    /// The store notes the extension tasks the session follows (for a restart).
    fn remember_followed(&self) -> impl Future<Output = ()> + Send;
    /// How a hosted task's input rounds go.
    fn round_policy(&self) -> RoundPolicy;
}

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
