//! Input requests of a modern (2026-07-28) upstream, relayed to a legacy client as server
//! requests: the rounds (`rounds`) and what the session keeps of them (`state`).

mod rounds;
pub(super) mod state;
