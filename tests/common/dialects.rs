//! Requests and waits shared by the by-token dialect tests (`tests/dialects*.rs`).

use super::{StdioMcp, init_params};
use serde_json::{Value, json};

/// `initialize` params that opt in to SEP-1391.
pub fn sep_params(version: &str) -> Value {
    let mut p = init_params(version);
    p["capabilities"]["experimental"] = json!({"sep-1391": {}});
    p
}

/// The demo's `slow` tool, with `_meta`.
pub fn slow(ms: u64, steps: u64, meta: Value) -> Value {
    json!({"name": "slow", "arguments": {"duration_ms": ms, "steps": steps}, "_meta": meta})
}

/// The `progress/get` state of `token` over stdio (`""` for an error).
pub async fn stdio_state(c: &mut StdioMcp, token: &str) -> String {
    let out = c.request("progress/get", json!({"progressToken": token})).await;
    out.response.pointer("/result/_meta/progress/state").and_then(Value::as_str).unwrap_or("").to_string()
}

/// Polls `progress/get` over stdio until `token`'s state is `want`.
pub async fn stdio_state_becomes(c: &mut StdioMcp, token: &str, want: &str) {
    super::eventually(&format!("{token} becomes {want}"), async || stdio_state(c, token).await == want).await
}
