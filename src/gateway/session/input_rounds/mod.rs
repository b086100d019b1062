//! Input requests of a modern (2026-07-28) upstream, for a legacy client: multi round-trip
//! requests (`mcp::modern::input`) relayed as the server requests the client's era has.
//!
//! A `tools/call`, `prompts/get` or `resources/read` forwarded to a modern link is kept (at
//! most `max_in_flight` per session; past that it goes up unkept, and an input request for it
//! fails as `legacy::for_legacy` says). When its answer is an `InputRequiredResult`:
//!
//! 1. Every input request is checked first: a method that is not one, one the client did not
//!    declare (`elicitation`, `elicitation.url` for URL mode, `sampling`, `roots`), or one the
//!    client's version cannot express fails the request at once, before the client is asked
//!    anything: the retry has no place for an error (`inputResponses` holds results), and
//!    the spec forbids a server to ask for what the client did not declare. The error is
//!    -32021 (`MissingRequiredClientCapability`, `data.requiredCapabilities`), as a server
//!    that checks answers it; a malformed result is -32603.
//! 2. Each is sent to the client as an ordinary server request under an id of the session's,
//!    translated to its version, related to the original request (HTTP: on its POST's stream).
//!    A URL-mode elicitation gets the `elicitationId` its legacy form requires (2026-07-28
//!    removed it); no `notifications/elicitation/complete` follows, as the era has none.
//! 3. Once every one is answered, the original request goes up again as a new request (the
//!    link gives it a new JSON-RPC id) with `inputResponses` and the `requestState` as the
//!    server sent it, on the session's live link (a retry is independent of the link the
//!    first round used). Its progress token is the client's, so progress reaches the client
//!    in every round, rising across rounds (a retry's that starts again below is dropped).
//!    A client's error answer fails the request with that error's code.
//! 4. Repeat while the upstream asks, at most the upstream's `max_input_rounds` times, with
//!    at most `max_input_requests` input requests a round (past either: -32603 naming the
//!    key); the client gets the last round's answer under its own id.
//!
//! Time, as for a server request of a legacy upstream (which restarts its request's idle
//! timer; the client's answer does not): each upstream round has `request_timeout` of
//! silence (progress resets it), the client has `request_timeout` from the moment the input
//! requests arrived to answer all of them, and `max_request_time` bounds the whole exchange
//! from its first send. Past either the request fails with -32001 and the client's
//! outstanding requests are cancelled (`notifications/cancelled`).
//!
//! The client's `notifications/cancelled` for its request ends the exchange in any round: the
//! upstream round in flight is cancelled under its current id, or the outstanding requests
//! to the client are cancelled and forgotten. An ended session forgets them all.
//!
//! [`InputRounds`] is the session's strategy for them. It owns what they keep (`state`: the
//! exchanges in progress and the questions out to the client) under a lock of its own, and
//! the limits its upstream sets; its methods (`rounds`) are handed a [`Host`], `s`: what it
//! needs of its session (its link, the path to its client, its versions and its ids), and no
//! more. The session's core hands it a request for a modern link (`dispatch`), each response
//! (`from_upstream`), the client's answers (`from_upstream`) and cancellations, and the
//! session's end.
//!
//! Locks: the strategy's is never held across an `.await`, nor while the session is called
//! (its `to_client` may take the session's `state`). It takes no lock of the session's: a
//! round's questions take their ids from the session's counter and read what its client
//! declared from its `sides`, neither under a lock.
//!
//! The strategy names no session type: the session lends itself as a [`Host`]
//! (`session/contexts.rs`).

use super::reach::Reach;
use crate::clock::Schedule;
use crate::config::UpstreamConfig;
use crate::locks::Mutex;
use crate::mcp::ProtocolVersion;
use crate::mcp::modern::input::InputLimits;

mod rounds;
mod state;

/// What input rounds need of their session beyond what every strategy may reach: its
/// narrow context.
pub(super) trait Host: Reach {
    /// The session's own input rounds.
    fn rounds(&self) -> &InputRounds;
    /// (client, upstream) versions, once the client's `initialize` arrived.
    fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)>;
}

/// A session's input rounds (see the module doc).
pub(super) struct InputRounds {
    state: Mutex<state::Exchanges>,
    /// An exchange was ever kept: until then a response ends none, and is let through
    /// without the lock (every response of a session whose upstream is legacy).
    kept_any: std::sync::atomic::AtomicBool,
    /// The upstream's bounds on one request's input rounds.
    limits: InputLimits,
    /// The session's timers of its exchanges and rounds, on the one clock: one waiter
    /// (`rounds::end_expired`, started with the first) for all of them, ended when the
    /// session goes.
    timers: Schedule<state::RoundTimer>,
}

impl InputRounds {
    /// The input rounds of a session of `upstream` (its limits, decided once).
    pub(super) fn new(upstream: &UpstreamConfig) -> InputRounds {
        InputRounds {
            state: Mutex::default(),
            kept_any: Default::default(),
            limits: InputLimits { rounds: upstream.max_input_rounds, requests: upstream.max_input_requests },
            timers: Schedule::default(),
        }
    }

    /// The upstream's bounds on one request's input rounds.
    pub(super) fn limits(&self) -> InputLimits {
        self.limits
    }

    /// Everything the session's exchanges hold, forgotten (the session ended).
    pub(super) fn end(&self) {
        // The exchanges' timers go with them; the clock stays, for an exchange a request
        // still on its way starts, until the session goes.
        let _ = std::mem::take(&mut *self.state.lock().unwrap());
    }
}
