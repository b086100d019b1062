//! The upstream side: one [`link`] per upstream session (or one shared by all), the
//! connection it runs over ([`connect`]: stdio, Streamable HTTP, legacy SSE, the demo), the
//! progress discipline of what it relays ([`progress`]), and the handle a link answers a
//! downstream client through ([`client`]).
//!
//! Below `tasks/` and the session: it knows nothing of either. What the server sends comes
//! back through traits defined here and implemented above: the transport's `InboundSink`
//! (the link), [`link::LinkEvents`] (the session), [`link::TaskCalls`] /
//! [`link::TaskFollower`] / [`link::RelayedTaskEvents`] (hosted tasks, bridges, relayed
//! upstream tasks) and [`client::ClientSink`] (the fronts).

pub mod client;
pub mod connect;
pub mod link;
pub mod progress;
