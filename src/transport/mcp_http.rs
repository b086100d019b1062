//! The header names of MCP's Streamable HTTP transport, shared by the downstream server and
//! the upstream client.

/// The session id a server assigns at `initialize` and the client sends back on every request.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The negotiated protocol version, sent by the client after `initialize`.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
