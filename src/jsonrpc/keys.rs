//! The keys messages are routed by, typed (a request [`Id`], a [`ProgressToken`], a
//! [`TaskId`]), and the [`Kind`] of a message: a progress token and a task id are never
//! confused with each other or with a request id, and a token is compared by its JSON value (`1` and
//! `"1"` are different tokens), not by a string made from it.

use serde_json::{Number, Value};
use std::fmt;

/// A JSON-RPC request id. MCP ids are strings or integers, never null.
///
/// JSON integers are unbounded: one outside `i64`, and `-0` (which a tree reads as the float
/// `-0.0`), is kept as the text it came as ([`Id::Big`]), compared as that text, and written
/// back as it came (a tree cannot hold it exactly: see [`Id::to_value`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    Num(i64),
    Str(String),
    /// An integer a tree cannot hold exactly, as its JSON text: one outside `i64`
    /// (`18446744073709551616`), or `-0`.
    Big(Box<str>),
}

impl Id {
    /// The id in a tree: a string, or an integer (one beyond `i64` that the tree holds
    /// exactly, a `u64`, as [`Id::Big`]). A number the tree made a float is none.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Some(Id::Num(i)),
                (None, Some(u)) => Some(Id::Big(u.to_string().into())),
                _ => None,
            },
            Value::String(s) => Some(Id::Str(s.clone())),
            _ => None,
        }
    }

    /// The id in its JSON text (valid JSON, as it stands in a message): a string, or an
    /// integer of any size (digits, a sign, no fraction or exponent).
    pub fn from_raw(raw: &str) -> Option<Id> {
        if raw.starts_with('"') {
            return serde_json::from_str::<String>(raw).ok().map(Id::Str);
        }
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        match raw.parse::<i64>() {
            // `-0` parses as 0, but is not the 0 a peer sent back would be read as by a tree.
            Ok(0) if raw.starts_with('-') => Some(Id::Big(raw.into())),
            Ok(n) => Some(Id::Num(n)),
            Err(_) => Some(Id::Big(raw.into())),
        }
    }

    /// The id as a tree holds it. A tree cannot hold a [`Id::Big`] exactly: it stands there
    /// as the string of its digits (`-0` as 0), and the bytes sent are given the id as it came
    /// ([`crate::jsonrpc::Message::with_id`], which the session's sink and the HTTP front's
    /// own answers apply to every response).
    pub fn to_value(&self) -> Value {
        match self {
            Id::Num(n) => Value::from(*n),
            Id::Str(s) => Value::String(s.clone()),
            // The one integer a tree reads as a float: where the id is copied into a body
            // (a subscription's id, a cancel's `requestId`), the client's parser reads the 0
            // it sent.
            Id::Big(text) if &**text == "-0" => Value::from(0),
            Id::Big(text) => Value::String(text.to_string()),
        }
    }

    /// The id as JSON text.
    pub fn to_json(&self) -> String {
        match self {
            Id::Num(n) => n.to_string(),
            Id::Str(s) => serde_json::to_string(s).expect("strings serialize"),
            Id::Big(text) => text.to_string(),
        }
    }

    /// Whether a tree cannot hold this id as it is (see [`Id::to_value`]).
    pub fn is_big(&self) -> bool {
        matches!(self, Id::Big(_))
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Big(text) => f.write_str(text),
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

/// An order of tokens (numbers first, then strings, each by their text), for a token kept
/// in an ordered index such as the progress states' retentions.
impl Ord for ProgressToken {
    fn cmp(&self, other: &ProgressToken) -> std::cmp::Ordering {
        match (self, other) {
            (ProgressToken::Num(a), ProgressToken::Num(b)) => a.to_string().cmp(&b.to_string()),
            (ProgressToken::Str(a), ProgressToken::Str(b)) => a.cmp(b),
            (ProgressToken::Num(_), ProgressToken::Str(_)) => std::cmp::Ordering::Less,
            (ProgressToken::Str(_), ProgressToken::Num(_)) => std::cmp::Ordering::Greater,
        }
    }
}

impl PartialOrd for ProgressToken {
    fn partial_cmp(&self, other: &ProgressToken) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
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
    fn an_integer_id_of_any_size_is_kept_as_its_text() {
        for (raw, id) in [
            ("7", Id::Num(7)),
            ("-9223372036854775808", Id::Num(i64::MIN)),
            ("9223372036854775808", Id::Big("9223372036854775808".into())),
            ("18446744073709551616", Id::Big("18446744073709551616".into())),
            ("-9223372036854775809", Id::Big("-9223372036854775809".into())),
            ("-0", Id::Big("-0".into())),
            ("0", Id::Num(0)),
            ("\"a\\\"b\"", Id::Str("a\"b".into())),
        ] {
            assert_eq!(Id::from_raw(raw), Some(id.clone()), "{raw}");
            assert_eq!(id.to_json(), raw, "written back as it came");
        }
        for bad in ["1.0", "1e3", "-", "null", "true", "{}", "[1]"] {
            assert_eq!(Id::from_raw(bad), None, "{bad}");
        }
        assert_eq!(Id::from_value(&json!(u64::MAX)), Some(Id::Big(u64::MAX.to_string().into())));
        assert_eq!(Id::from_value(&json!(1.5)), None);
        // In a body, `-0` is the 0 a client's parser reads it as.
        assert_eq!(Id::from_raw("-0").unwrap().to_value(), json!(0));
        assert_ne!(Id::from_raw("18446744073709551616"), Id::from_raw("\"18446744073709551616\""));
    }

    #[test]
    fn task_ids_look_up_by_str() {
        let mut m = std::collections::HashMap::new();
        m.insert(TaskId::new("t1"), 1);
        assert_eq!(m.get("t1"), Some(&1));
        assert_eq!(TaskId::from_value(&json!(7)), None);
    }
}
