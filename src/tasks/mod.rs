//! Tasks the gateway keeps: the store, tasks hosted for upstreams that have none, and plain
//! calls bridged onto the tasks of upstreams that require them, and the upstream tasks
//! relayed to clients that reach them by id alone; and, for hosted and relayed tasks alike,
//! the upstream's questions held until a client answers them.

pub mod bridge;
pub mod ext_table;
pub mod held_inputs;
pub mod hosted;
pub mod relayed;
pub mod store;
