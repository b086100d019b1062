//! The keys messages are routed by, typed (a request [`Id`], a [`ProgressToken`], a
//! [`TaskId`]), and the [`Kind`] of a message: a progress token and a task id are never
//! confused with each other or with a request id, and a token is compared by its JSON value (`1` and
//! `"1"` are different tokens), not by a string made from it.

use serde_json::{Number, Value};
use std::fmt;

/// A JSON-RPC request id. MCP ids are strings or integers, never null.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => n.as_i64().map(Id::Num),
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => Value::from(*n),
            Id::Str(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// A progress token, `params._meta.progressToken`: a string or a number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProgressToken {
    Num(Number),
    Str(String),
}

impl ProgressToken {
    /// The token in `v`; `None` when `v` is neither a string nor a number.
    pub fn from_value(v: &Value) -> Option<ProgressToken> {
        match v {
            Value::Number(n) => Some(ProgressToken::Num(n.clone())),
            Value::String(s) => Some(ProgressToken::Str(s.clone())),
            _ => None,
        }
    }

    /// `params._meta.progressToken` of a request, if it carries a valid one.
    pub fn of_request(msg: &Value) -> Option<ProgressToken> {
        msg.get("params")?.get("_meta")?.get("progressToken").and_then(ProgressToken::from_value)
    }

    pub fn to_value(&self) -> Value {
        match self {
            ProgressToken::Num(n) => Value::Number(n.clone()),
            ProgressToken::Str(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for ProgressToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressToken::Num(n) => write!(f, "{n}"),
            ProgressToken::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// A task id (2025-11-25 `taskId`): an opaque string the receiver of the task request chose.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(String);

impl TaskId {
    pub fn new(id: impl Into<String>) -> TaskId {
        TaskId(id.into())
    }

    /// The string id in `v`; `None` for anything that is not a string.
    pub fn from_value(v: &Value) -> Option<TaskId> {
        v.as_str().map(TaskId::new)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::borrow::Borrow<str> for TaskId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_number_token_and_its_string_are_different_keys() {
        let n = ProgressToken::from_value(&json!(1)).unwrap();
        let s = ProgressToken::from_value(&json!("1")).unwrap();
        assert_ne!(n, s);
        assert_eq!(n.to_value(), json!(1));
        assert_eq!(s.to_value(), json!("1"));
    }

    #[test]
    fn only_strings_and_numbers_are_tokens() {
        for bad in [json!(null), json!(true), json!({}), json!([1])] {
            assert_eq!(ProgressToken::from_value(&bad), None, "{bad}");
        }
        let req = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}});
        assert_eq!(ProgressToken::of_request(&req), Some(ProgressToken::Str("p".into())));
        assert_eq!(ProgressToken::of_request(&json!({"params":{}})), None);
    }

    #[test]
    fn task_ids_look_up_by_str() {
        let mut m = std::collections::HashMap::new();
        m.insert(TaskId::new("t1"), 1);
        assert_eq!(m.get("t1"), Some(&1));
        assert_eq!(TaskId::from_value(&json!(7)), None);
    }
}
