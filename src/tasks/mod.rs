//! Tasks the gateway keeps: the store, and tasks hosted for upstreams that have none.

pub mod hosted;
pub mod store;
