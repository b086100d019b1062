//! taskgate: an MCP gateway that adds task semantics where one side lacks them.
//!
//! - [`config`]: the TOML configuration.
//! - [`jsonrpc`]: JSON-RPC frames, kept as raw JSON.
//! - [`mcp`]: protocol versions and what each defines.
//! - [`transport`]: stdio and Streamable HTTP, both directions.
//! - [`gateway`]: sessions (downstream) and links (upstream).
//! - [`tasks`]: the task store, hosted tasks and bridged tasks.
//! - [`demo`]: the built-in demo server.

// Error values (a JSON-RPC error, an HTTP error response) are built on cold paths only;
// boxing them would cost the readers more than it saves.
#![allow(clippy::result_large_err)]

pub mod config;
pub mod demo;
pub mod gateway;
pub mod jsonrpc;
pub mod mcp;
pub mod random;
pub mod tasks;
pub mod transport;
