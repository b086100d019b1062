//! What a session keeps of its input rounds (see `input_rounds`, which does them): the
//! exchanges in progress and the questions out to the client. Apart from the session so that
//! its state can name them.

use crate::jsonrpc::{Id, Message};
use crate::upstream::link::Shape;
use serde_json::{Map, Value};
use std::collections::HashMap;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// The session's exchanges in progress. Bounded: `max_in_flight` exchanges, each with at
/// most the upstream's `max_input_requests` questions out.
#[derive(Default)]
pub(in crate::gateway::session) struct InputRounds {
    pub(in crate::gateway::session) exchanges: HashMap<Id, Exchange>,
    /// A request sent to the client, by the id the client knows: its exchange (by client
    /// request id) and key.
    pub(in crate::gateway::session) questions: HashMap<Id, (Id, String)>,
    pub(in crate::gateway::session) next_serial: u64,
}

pub(in crate::gateway::session) struct Exchange {
    pub(in crate::gateway::session) serial: u64,
    /// The request as it first went upstream (translated for it).
    pub(in crate::gateway::session) request: Message,
    pub(in crate::gateway::session) shape: Shape,
    pub(in crate::gateway::session) capabilities: Map<String, Value>,
    /// Rounds answered with `input_required` so far.
    pub(in crate::gateway::session) rounds: u32,
    pub(in crate::gateway::session) started: Instant,
    /// Set while the client is being asked; `None` while a round is upstream.
    pub(in crate::gateway::session) asking: Option<Asking>,
    /// The last progress value the client got for the request, in any round: a retry is a
    /// new request upstream, whose progress may start again below it.
    pub(in crate::gateway::session) last_progress: Option<f64>,
    /// Ends the exchange at `max_request_time` (armed at its first input request).
    pub(in crate::gateway::session) _lifetime: Option<AbortOnDrop>,
}

pub(in crate::gateway::session) struct Asking {
    pub(in crate::gateway::session) state: Option<String>,
    /// Key → (the id the client knows, the method).
    pub(in crate::gateway::session) outstanding: HashMap<String, (Id, String)>,
    pub(in crate::gateway::session) responses: Map<String, Value>,
    pub(in crate::gateway::session) _timer: AbortOnDrop,
}

pub(in crate::gateway::session) struct AbortOnDrop(pub(in crate::gateway::session) AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl InputRounds {
    /// Removes an exchange and its questions; the ids of those still unanswered.
    pub(in crate::gateway::session) fn remove(&mut self, client_id: &Id) -> Option<(Exchange, Vec<Id>)> {
        let ex = self.exchanges.remove(client_id)?;
        let ids: Vec<Id> = ex.asking.iter().flat_map(|a| a.outstanding.values().map(|(id, _)| id.clone())).collect();
        for id in &ids {
            self.questions.remove(id);
        }
        Some((ex, ids))
    }
}
