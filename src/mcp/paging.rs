//! Paged listings (`tools/list`, `tasks/list`, …): the cursor a request names, read once, and
//! the one error for a cursor the gateway cannot continue from.

use crate::jsonrpc::{INVALID_PARAMS, RpcError};
use serde_json::Value;

/// A listing request's `params.cursor`: `None` for the first page (absent or null); -32602
/// if it is not a string.
pub fn cursor(request: &Value) -> Result<Option<&str>, RpcError> {
    match request.get("params").and_then(|p| p.get("cursor")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(invalid_cursor()),
    }
}

/// -32602 for a cursor the gateway did not issue, or can no longer continue from.
pub fn invalid_cursor() -> RpcError {
    RpcError::new(INVALID_PARAMS, "invalid cursor")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cursor_is_a_string_or_none() {
        assert_eq!(cursor(&json!({"params": {}})).unwrap(), None);
        assert_eq!(cursor(&json!({"method": "tasks/list"})).unwrap(), None);
        assert_eq!(cursor(&json!({"params": {"cursor": null}})).unwrap(), None);
        assert_eq!(cursor(&json!({"params": {"cursor": "p:2"}})).unwrap(), Some("p:2"));
        let e = cursor(&json!({"params": {"cursor": 2}})).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (INVALID_PARAMS, "invalid cursor"));
    }
}
