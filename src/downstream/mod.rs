//! The downstream fronts: how clients reach the gateway. The Streamable HTTP server (with its
//! batches, bodies, guards and per-session streams), the legacy HTTP+SSE transport beside it,
//! and the stdio front. They sit on top:
//! each turns its wire into calls on a [`Session`](crate::gateway::session::Session) and
//! implements [`ClientSink`](crate::upstream::client::ClientSink) for what goes back.

pub mod auth;
mod exchanges;
mod http_batch;
mod http_body;
mod http_guard;
mod http_modern;
pub mod http_server;
mod legacy_sse;
mod listens;
mod ops;
pub mod reload;
mod routes;
pub mod stdio;
mod stdio_modern;
mod stdout;
pub mod streams;
mod task_page;
pub mod tls;
