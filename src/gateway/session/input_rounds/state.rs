//! What a session's input rounds keep (see `rounds`, which does them), under the strategy's
//! own lock ([`super::InputRounds`]): the exchanges in progress and the questions out to the
//! client.

use crate::jsonrpc::{Id, Message};
use crate::upstream::link::Shape;
use serde_json::{Map, Value};
use std::collections::HashMap;
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
    pub(super) _lifetime: Option<Armed>,
}

pub(super) struct Asking {
    pub(super) state: Option<String>,
    /// Key → (the id the client knows, the method).
    pub(super) outstanding: HashMap<String, (Id, String)>,
    pub(super) responses: Map<String, Value>,
    pub(super) _timer: Armed,
}

/// What a timer of the session's input rounds times: the client's answers to round `round`
/// of exchange `serial`, or (`round: None`) the whole exchange. Serials are the session's
/// own and never reused, so they alone tell timers apart; the client's request id rides along.
#[derive(Clone, Debug)]
pub(super) struct RoundTimer {
    pub(super) serial: u64,
    pub(super) round: Option<u32>,
    pub(super) client_id: Id,
}

impl RoundTimer {
    fn key(&self) -> (u64, Option<u32>) {
        (self.serial, self.round)
    }
}

impl PartialEq for RoundTimer {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for RoundTimer {}

impl PartialOrd for RoundTimer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RoundTimer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl std::hash::Hash for RoundTimer {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// A timer set on the session's input-round timers, unset when this is dropped (the
/// exchange, or its round of questions, ended first).
pub(super) type Armed = crate::clock::Armed<RoundTimer>;

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
