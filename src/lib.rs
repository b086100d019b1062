//! taskgate: an MCP gateway that adds task semantics where one side lacks them.
//!
//! The modules are layered, each importing only those below it (`tests/layers.rs` checks):
//!
//! - `downstream`: the fronts clients reach, Streamable HTTP (with legacy HTTP+SSE beside it)
//!   and stdio;
//! - `gateway` (sessions, links) and `tasks` (the store, hosted tasks, bridged calls);
//! - `demo`: the built-in demo server, started like any other upstream;
//! - `mcp`: protocol versions and what each defines;
//! - `transport`: bytes to and from upstreams (stdio children, the HTTP client, SSE);
//! - [`jsonrpc`]: the envelope;
//! - `clock` (every timer and the wall-clock time), `config`, `random`, `metrics` and
//!   `warn_limit`, which any layer may use.
//!
//! What is exported is what the binary, the tests, the benchmarks, the examples and the
//! fuzz targets use; everything else is private to the crate.

mod client_slots;
mod clock;
mod config;
mod demo;
mod downstream;
mod gateway;
mod huge_pages;
pub mod jsonrpc;
pub mod locks;
mod mcp;
mod metrics;
mod random;
mod tasks;
mod transport;
mod upstream;
mod warn_limit;

// The gateway, as the binary runs it.
pub use config::{
    Config, ConfigChange, ConfigError, McpServers, OtlpConfig, ServerConfig, StoreKind, UpstreamConfig, parse_duration,
};
// The docs the code writes (docs/configuration.md, docs/versions.md; tests/docs.rs checks them).
pub use config::{reference as config_reference, undescribed as undescribed_config_keys};
pub use demo::serve_stdio as serve_demo_stdio;
pub use downstream::http_server::{HttpServer, bind as bind_http, bind_with as bind_http_with, raise_open_file_limit};
pub use downstream::reload::{Reloaded, Reloader, pending as pending_reload, refuse_sighup};
pub use downstream::stdio::{StdioError, serve_stdio};
pub use downstream::tls::{TlsAcceptor, TlsError, acceptor as tls_acceptor};
pub use gateway::Gateway;
pub use gateway::eras::report as eras_report;
pub use huge_pages::off_for_the_gateway as huge_pages_off;
pub use mcp::translate::table::markdown as version_table;
pub use transport::stdio::all_children_exited;

// Parts the benchmarks, fuzz targets and examples drive on their own.
pub use mcp::task_messages::TaskStatus;
pub use mcp::{ProtocolVersion, shaping, translate};
pub use tasks::file_store::{DB_FILE, FileStore, RESTARTED};
pub use tasks::memory_store::MemoryStore;
pub use tasks::store::{TaskRecord, TaskStore};
pub use transport::http_client::{HttpClient, HttpConn};
pub use transport::http_target::HttpSettings;
pub use transport::{Error as TransportError, InboundSink, sse};
pub use upstream::progress::{Pace, ProgressGate};
