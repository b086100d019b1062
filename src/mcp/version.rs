//! MCP protocol versions the gateway speaks, and what each one allows.

use std::fmt;

/// A protocol version the gateway understands, oldest first (so `<` means "older").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    V2024_11_05,
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
}

impl ProtocolVersion {
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ];
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;
    /// What a Streamable HTTP server assumes when `MCP-Protocol-Version` is absent.
    pub const HTTP_DEFAULT: ProtocolVersion = ProtocolVersion::V2025_03_26;

    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
        }
    }

    /// JSON-RPC batches exist only in 2025-03-26 (added there, removed in 2025-06-18).
    pub fn allows_batches(self) -> bool {
        self == ProtocolVersion::V2025_03_26
    }

    /// Core (experimental) tasks exist from 2025-11-25.
    pub fn has_tasks(self) -> bool {
        self >= ProtocolVersion::V2025_11_25
    }
}

/// The answer to `server/discover`, the 2026-07-28 probe. Refusing it makes SDK clients fall
/// back to `initialize`, which keeps them on a version the gateway speaks and relays.
pub fn refuse_discover() -> crate::jsonrpc::RpcError {
    crate::jsonrpc::RpcError::new(
        crate::jsonrpc::METHOD_NOT_FOUND,
        "method not found: server/discover (this gateway speaks protocol versions up to 2025-11-25; use initialize)",
    )
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_orders() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(ProtocolVersion::parse("2026-07-28"), None);
        assert!(ProtocolVersion::V2024_11_05 < ProtocolVersion::V2025_11_25);
        assert!(ProtocolVersion::V2025_03_26.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.allows_batches());
        assert!(ProtocolVersion::V2025_11_25.has_tasks());
    }
}
