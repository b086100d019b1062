//! Tasks the gateway keeps: the store, tasks hosted for upstreams that have none, and plain
//! calls bridged onto the tasks of upstreams that require them.

pub mod bridge;
pub mod hosted;
pub mod store;
