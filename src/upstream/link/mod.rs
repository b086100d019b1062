//! One upstream connection as the gateway uses it: request-id mapping, pending requests,
//! progress routes (with the progress discipline), and failing everything in flight when the
//! connection dies.
//!
//! Ids sent upstream are the link's own integers, so requests the gateway makes itself never
//! collide with the client's. What comes back is mapped to its destination: a client request
//! (via [`LinkEvents`], the session), a hosted task's background call (via [`TaskCalls`]), or a
//! request of the gateway's own (a oneshot).
//!
//! A link serves one session, or (`share = true`) every session of its upstream: then ids
//! and progress tokens are kept apart per session and server messages go only where they
//! belong (`share`).
//!
//! A link speaks the era its handshake found (`handshake`): a modern (2026-07-28) one
//! carries the per-request `_meta` and, over HTTP, the mirrored headers on every message it
//! sends, and keeps no upstream session (`modern`).
//!
//! Hosted tasks and bridged calls subscribe to it through [`TaskCalls`] and
//! [`TaskFollower`]: the link routes by key (request id, progress token, task id) and knows
//! nothing of what they do.

mod error;
mod handshake;
mod inbound;
mod modern;
mod outbound;
mod resource_listen;
mod routes;
mod share;
mod types;

pub use error::CloseReason;
pub use handshake::{HandshakeError, Negotiated};
pub use types::{ClientRef, Link, LinkEnv, LinkEvents, RelayedTaskEvents, SessionTag, Shape, TaskCalls, TaskFollower};
