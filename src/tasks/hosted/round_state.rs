//! What a hosted task keeps of its call's input rounds (see `rounds`, which does them).
//! Apart from `hosted` so that its task records can name them.

use crate::mcp::modern::input::InputLimits;
use crate::upstream::link::Link;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How a hosted task's call on a modern link may go on with input rounds.
#[derive(Clone, Debug)]
pub struct RoundPolicy {
    pub limits: InputLimits,
    /// The client's time to answer one round (`request_timeout`).
    pub answer_within: Duration,
    /// The whole call, every round together (`max_request_time`).
    pub max_time: Duration,
    /// Whose share of a shared link each retry counts against (see [`Link::start_task_call`]).
    ///
    /// [`Link::start_task_call`]: crate::upstream::link::Link::start_task_call
    pub share: Option<Arc<str>>,
}

/// What a task keeps to retry its call.
pub(super) struct Rounds {
    /// The call as it first went up.
    pub(super) call: Value,
    pub(super) policy: RoundPolicy,
    /// Rounds answered with `input_required` so far.
    pub(super) done: u32,
    pub(super) started: Instant,
    pub(super) asking: Option<Asking>,
    last_progress: Option<f64>,
    /// Ends the call at `max_time` (armed at its first round).
    pub(super) _lifetime: Option<Armed>,
}

/// A round waiting for the client's answers.
pub(super) struct Asking {
    pub(super) state: Option<String>,
    pub(super) pending: HashSet<String>,
    pub(super) responses: Map<String, Value>,
    /// The link stays open for the retry.
    pub(super) _link: Retained,
    /// Ends the round at `answer_within`; none when the call's `max_time` comes first (the
    /// call's own timer ends the round then, with the call's reason).
    pub(super) _timer: Option<Armed>,
}

/// A timer of a task's rounds, on its host's round timers (`Hosted::round_timers`): when it
/// falls due the task fails if round `.1` still waits for its client (`None`: if its call,
/// every round together, still runs). A task's rounds only rise, so each key is set once.
pub(super) type RoundTimer = (Arc<str>, Option<u32>);

/// A round timer that is set, unset when this is dropped (the round was answered, or the
/// task ended, first).
pub(super) type Armed = crate::clock::Armed<RoundTimer>;

/// Keeps a link open (as a running call does) until dropped.
pub(super) struct Retained(Arc<Link>);

impl Retained {
    pub(super) fn new(link: &Arc<Link>) -> Retained {
        link.retain();
        Retained(link.clone())
    }
}

impl Drop for Retained {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Rounds {
    pub(super) fn new(call: Value, policy: RoundPolicy) -> Rounds {
        Rounds { call, policy, done: 0, started: Instant::now(), asking: None, last_progress: None, _lifetime: None }
    }

    /// Whether a progress value may go to the client: it rises past every earlier round's.
    pub(super) fn rises(&mut self, value: f64) -> bool {
        if self.last_progress.is_some_and(|last| value <= last) {
            return false;
        }
        self.last_progress = Some(value);
        true
    }
}
