//! What a session's input rounds keep (see `rounds`, which does them), under the strategy's
//! own lock ([`super::InputRounds`]): the exchanges in progress and the questions out to the
//! client.

use crate::jsonrpc::{Id, Message};
use crate::upstream::link::Shape;
use serde_json::{Map, Value};
use std::collections::HashMap;
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// The session's exchanges in progress. Bounded: `max_in_flight` exchanges, each with at
/// most the upstream's `max_input_requests` questions out.
#[derive(Default)]
pub(super) struct Exchanges {
    pub(super) exchanges: HashMap<Id, Exchange>,
    /// A request sent to the client, by the id the client knows: its exchange (by client
    /// request id) and key.
    pub(super) questions: HashMap<Id, (Id, String)>,
    pub(super) next_serial: u64,
}

pub(super) struct Exchange {
    pub(super) serial: u64,
    /// The request as it first went upstream (translated for it).
    pub(super) request: Message,
    pub(super) shape: Shape,
    pub(super) capabilities: Map<String, Value>,
    /// Rounds answered with `input_required` so far.
    pub(super) rounds: u32,
    pub(super) started: Instant,
    /// Set while the client is being asked; `None` while a round is upstream.
    pub(super) asking: Option<Asking>,
    /// The last progress value the client got for the request, in any round: a retry is a
    /// new request upstream, whose progress may start again below it.
    pub(super) last_progress: Option<f64>,
    /// Ends the exchange at `max_request_time` (armed at its first input request).
    pub(super) _lifetime: Option<AbortOnDrop>,
}

pub(super) struct Asking {
    pub(super) state: Option<String>,
    /// Key → (the id the client knows, the method).
    pub(super) outstanding: HashMap<String, (Id, String)>,
    pub(super) responses: Map<String, Value>,
    pub(super) _timer: AbortOnDrop,
}

pub(super) struct AbortOnDrop(pub(super) AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Exchanges {
    /// Removes an exchange and its questions; the ids of those still unanswered.
    pub(super) fn remove(&mut self, client_id: &Id) -> Option<(Exchange, Vec<Id>)> {
        let ex = self.exchanges.remove(client_id)?;
        let ids: Vec<Id> = ex.asking.iter().flat_map(|a| a.outstanding.values().map(|(id, _)| id.clone())).collect();
        for id in &ids {
            self.questions.remove(id);
        }
        Some((ex, ids))
    }
}
