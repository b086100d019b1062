//! Tasks the gateway keeps: the store (the async trait in `store`, its backends in
//! `memory_store`, `file_store` and `redis_store`), tasks hosted for upstreams that have none, and plain
//! calls bridged onto the tasks of upstreams that require them, and the upstream tasks
//! relayed to clients that reach them by id alone, and the principal each task a modern
//! upstream made for a modern client belongs to (`upstream_owners`); for hosted and relayed
//! tasks alike, the upstream's questions held until a client answers them; and the
//! progress-state proposal's states, kept across sessions. What one session keeps of its
//! tasks (an extension client's task table, its SEP-1391 operations) is the session's
//! (`gateway::session::{ext, by_token}`).

pub mod bridge;
pub mod file_store;
pub mod held_inputs;
pub mod hosted;
pub mod memory_store;
pub mod progress_state;
pub mod record_fields;
pub mod redis_store;
pub mod relayed;
pub mod store;
#[cfg(test)]
mod store_suite;
pub mod text_bounds;
pub mod upstream_owners;
