//! Tasks the gateway keeps: the store, tasks hosted for upstreams that have none, and plain
//! calls bridged onto the tasks of upstreams that require them, and the upstream tasks
//! relayed to clients that reach them by id alone; for hosted and relayed tasks alike, the
//! upstream's questions held until a client answers them; and what the by-token dialects
//! keep (the progress-state proposal's states, SEP-1391's operations).

pub mod bridge;
pub mod ext_table;
pub mod held_inputs;
pub mod hosted;
pub mod hosting;
pub mod operations;
pub mod progress_state;
pub mod relayed;
pub mod store;
