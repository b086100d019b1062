//! [`Message`]: one JSON-RPC message kept as the bytes it arrived as, with the envelope read
//! from them once.
//!
//! The gateway routes by a few fields (`id`, `method`, some of `params`, `result.task`) and
//! passes everything else on untouched. So a message is parsed once into its envelope (the
//! positions of `id`, `params`, `result`, `error`, the [`Method`]), without building a tree;
//! a new id is spliced into the original bytes ([`Message::with_id`]); and the whole tree is
//! built only for the messages the gateway edits ([`Message::value`], [`Message::into_value`]).
//! What is forwarded unchanged leaves byte for byte as it came, but for line breaks between
//! tokens, which become spaces so that every message fits on one line (stdio, SSE `data:`).
//!
//! A key the gateway reads that appears twice is refused (-32600, with the id when it can be
//! told; -32602 for `params.task.ttl`, a parameter of the call): the gateway would read one
//! and the peer behind it, most often, the other. That is every envelope key (two `id`s, two
//! `method`s); in `params`, `name`, `task`, `taskId`, `requestId`, `progressToken`,
//! `protocolVersion`, `progress`, `total`, `status` and `_meta`; in `result` (read at once, in
//! one pass like `params`), `task`, `taskId`, `status`, `protocolVersion` and `_meta`; in
//! either `_meta`, `progressToken` and the related-task key, and that key's `taskId`; in
//! `result.task`, `taskId` and `ttl`; in `params.task`, `ttl`. A key the gateway never reads
//! may appear twice: the message passes on as it came, and what it means is the peer's
//! business. Where the gateway builds a tree (to edit a message), the last of two keys wins,
//! as it does for most peers, and the message it writes has one.

use super::checked::Checked;
use super::error::{INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, RpcError};
use super::fields::{Fields, Key, Of, Span, span_in};
use super::keys::{Id, Kind, ProgressToken, TaskId};
use super::method::Method;
use super::refused::{Refused, salvage};
use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;
use serde::de::Deserializer;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

/// One classified JSON-RPC message.
pub struct Message {
    text: Bytes,
    kind: Kind,
    /// Present for requests and responses (`None` for a response whose id is null).
    id: Option<Id>,
    id_at: Option<Span>,
    method: Method,
    /// The method's name, for a method the gateway does not know ([`Method::Other`]).
    other_name: Option<Box<str>>,
    params: Fields,
    result_at: Option<Span>,
    has_error: bool,
    /// The fields of `result` the gateway reads (a response's, when `result` is an object).
    result: Option<Box<Fields>>,
    /// The whole message as a tree, built on first use.
    tree: OnceLock<Box<Value>>,
}

/// The envelope as serde reads it: each value left as raw text, its key seen once.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A key that is present is `Some`, even when its value is `null` (serde's `Option` reads
/// `null` as absent; for `id` the two mean different things).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Where a message's text came from, which says what is left to check in it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Text {
    /// A peer's (or a test's): anything may be in it, line breaks included.
    Peer,
    /// Written by serde_json from a tree: compact (no line break outside a string), and
    /// holding only strings and numbers a tree can.
    Written,
}

/// A tree no deeper than this is read back by any parser (serde_json's limit is 128); one
/// deeper is checked as a peer's message would be.
const SHALLOW: usize = 100;

/// Whether `v` nests more than `limit` arrays and objects deep.
fn nests_deeper_than(v: &Value, limit: usize) -> bool {
    match v {
        Value::Array(a) => limit == 0 || a.iter().any(|c| nests_deeper_than(c, limit - 1)),
        Value::Object(o) => limit == 0 || o.values().any(|c| nests_deeper_than(c, limit - 1)),
        _ => false,
    }
}

/// A refusal of `text`, with its id when one can be read.
fn refused(text: &[u8], error: RpcError) -> Refused {
    match salvage(text) {
        Some(s) => Refused { id: s.id, is_response: !s.has_method, error, ids: s.ids },
        None => Refused::new(None, false, error),
    }
}

fn invalid(why: &str) -> RpcError {
    RpcError::new(INVALID_REQUEST, format!("invalid request: {why}"))
}

/// `Some(s)` when `raw` (JSON text) is a string.
pub fn as_str(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.starts_with('"') {
        return None;
    }
    serde_json::from_str::<Cow<str>>(raw).ok()
}

impl Message {
    /// Reads one message (a JSON object) from `text`. Malformed JSON is -32700; what is not
    /// a JSON-RPC message is -32600; either with the id when one can be read.
    pub fn parse(text: Bytes) -> Result<Message, Refused> {
        // Before the check's pass over it: `read` refuses it too, for a message made here.
        if text.len() > u32::MAX as usize {
            return Err(Refused::new(None, false, invalid("the message is larger than 4 GiB")));
        }
        // What a tree could not hold is refused here, as a tree parser would refuse it, so
        // that every message can be read whole later (and no peer is sent what it could not).
        if let Err(e) = serde_json::from_slice::<Checked>(&text) {
            return Err(refused(&text, RpcError::new(PARSE_ERROR, format!("parse error: {e}"))));
        }
        Message::read(text, Text::Peer)
    }

    /// Reads the envelope of `text`, JSON a tree can hold (checked, or written from a tree).
    fn read(text: Bytes, from: Text) -> Result<Message, Refused> {
        // Spans are `u32`s.
        if text.len() > u32::MAX as usize {
            return Err(Refused::new(None, false, invalid("the message is larger than 4 GiB")));
        }
        let refused = |error: RpcError| refused(&text, error);
        // Not left to serde, which reads a struct from an array too (`["2.0",1,"ping"]`).
        if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(Refused::new(None, false, invalid("message is not an object")));
        }
        let env: Envelope = match serde_json::from_slice(&text) {
            Ok(e) => e,
            // Valid JSON, an object, that is not an envelope: a key twice.
            Err(e) if e.is_data() => return Err(refused(invalid("a key of the envelope appears twice"))),
            Err(e) => return Err(refused(RpcError::new(PARSE_ERROR, format!("parse error: {e}")))),
        };
        let id = env.id.and_then(|raw| Id::from_raw(raw.get()));
        // A null method is no method, as the salvage of an unreadable message has it.
        let is_response = env.method.is_none_or(|m| m.get() == "null");
        let refuse = |id: Option<Id>, error: RpcError| Refused::new(id, is_response, error);
        if env.jsonrpc.and_then(|v| as_str(v.get())).as_deref() != Some("2.0") {
            return Err(refuse(id, invalid("\"jsonrpc\" must be \"2.0\"")));
        }
        let id_at = env.id.map(|raw| span_in(&text, raw));
        let params_at = env.params.map(|raw| span_in(&text, raw));
        let result_at = env.result.map(|raw| span_in(&text, raw));
        let (kind, method, other_name) = if let Some(m) = env.method {
            let Some(name) = as_str(m.get()) else {
                return Err(refuse(id, invalid("\"method\" must be a string")));
            };
            if let Some(p) = env.params
                && !matches!(p.get().as_bytes().first(), Some(b'{' | b'['))
            {
                return Err(refuse(id, invalid("\"params\" must be an object or array")));
            }
            let method = Method::parse(&name);
            let other = (method == Method::Other).then(|| name.into_owned().into_boxed_str());
            let kind = match env.id {
                None => Kind::Notification,
                Some(_) if id.is_some() => Kind::Request,
                Some(_) => return Err(refuse(None, invalid("\"id\" must be a string or integer"))),
            };
            (kind, method, other)
        } else {
            if env.result.is_some() == env.error.is_some() || env.id.is_none() {
                return Err(refuse(id, invalid("neither a request, a notification nor a response")));
            }
            if env.id.is_some_and(|raw| raw.get() != "null") && id.is_none() {
                return Err(refuse(
                    None,
                    RpcError::new(INVALID_REQUEST, "invalid response: \"id\" must be a string or integer"),
                ));
            }
            (Kind::Response, Method::Other, None)
        };
        let twice = |id: Option<Id>, of: &str, path: &str| {
            let what = format!("\"{of}.{path}\" appears twice (the gateway reads it)");
            // A task's ttl is a parameter of the call, not of the envelope: -32602, as for a
            // ttl of the wrong type.
            if of == "params" && path.starts_with("task.") {
                return refuse(id, RpcError::new(INVALID_PARAMS, format!("invalid params: {what}")));
            }
            refuse(id, invalid(&what))
        };
        let params = match &params_at {
            Some(at) => match Fields::read(&text, *at, Of::Params) {
                Ok(f) => f,
                Err(r) => return Err(twice(id, "params", r.0)),
            },
            None => Fields::default(),
        };
        // A response's result is read at once, in one pass: what the gateway routes it by
        // (a created or ended task, the negotiated version) is known before it is passed on.
        let result = match &result_at {
            Some(at) if kind == Kind::Response => match Fields::read(&text, *at, Of::Result) {
                Ok(f) => Some(Box::new(f)),
                Err(r) => return Err(twice(id, "result", r.0)),
            },
            _ => None,
        };
        let has_error = env.error.is_some();
        // A line break in valid JSON text is white space between tokens (inside strings it is
        // escaped): made a space, every message fits one line of stdio or of an SSE `data:`,
        // and every span stays where it was.
        let text = if from == Text::Peer && memchr::memchr2(b'\n', b'\r', &text).is_some() {
            Bytes::from(text.iter().map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }).collect::<Vec<u8>>())
        } else {
            text
        };
        Ok(Message {
            text,
            kind,
            id,
            id_at,
            method,
            other_name,
            params,
            result_at,
            has_error,
            result,
            tree: OnceLock::new(),
        })
    }

    /// A message the gateway made (or edited) as a tree. Its bytes are written once, here.
    pub fn from_value(v: Value) -> Result<Message, Refused> {
        let text = Bytes::from(serde_json::to_vec(&v).expect("values serialize"));
        // Written from a tree, the text holds only what a tree can (nothing to check again),
        // unless it nests deeper than a parser reads: then it is checked as a peer's would be.
        let m =
            if nests_deeper_than(&v, SHALLOW) { Message::parse(text)? } else { Message::read(text, Text::Written)? };
        let _ = m.tree.set(Box::new(v));
        Ok(m)
    }

    /// A message the gateway made itself, known to be well formed.
    ///
    /// # Panics
    /// If `v` is not a JSON-RPC message: a programming error.
    pub fn made(v: Value) -> Message {
        Message::from_value(v).unwrap_or_else(|r| panic!("the gateway made a malformed message: {}", r.error))
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// What the gateway knows the method as ([`Method::Other`] for a response too).
    pub fn method(&self) -> Method {
        self.method
    }

    /// The method's name as the message spells it, `""` for a response.
    pub fn method_name(&self) -> &str {
        match (&self.other_name, self.method.name()) {
            (Some(n), _) => n,
            (None, Some(n)) if self.kind != Kind::Response => n,
            _ => "",
        }
    }

    pub fn is_error(&self) -> bool {
        self.has_error
    }

    /// The message as it will be sent.
    pub fn bytes(&self) -> &Bytes {
        &self.text
    }

    pub fn into_bytes(self) -> Bytes {
        self.text
    }

    /// The whole message as a tree (built on first use). `null` in the one case where the
    /// text holds what a tree cannot (a number beyond `f64`, which the envelope skipped).
    pub fn value(&self) -> &Value {
        self.tree.get_or_init(|| Box::new(self.build_tree().unwrap_or(Value::Null)))
    }

    fn build_tree(&self) -> Option<Value> {
        match serde_json::from_slice(&self.text) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("a message cannot be read as a whole ({e}); it passes on unedited");
                None
            }
        }
    }

    /// The whole message as a tree (`null` as in [`Message::value`]).
    pub fn into_value(mut self) -> Value {
        self.take_value()
    }

    /// The whole message as a tree to edit (`null` as in [`Message::value`]), the message
    /// left as it came: a caller that changed nothing passes it on without reading its
    /// bytes again; one that changed something makes a new one ([`Message::from_value`]).
    pub fn take_value(&mut self) -> Value {
        match self.tree.take() {
            Some(v) => *v,
            None => serde_json::from_slice(&self.text).unwrap_or(Value::Null),
        }
    }

    /// The message with its tree edited by `f`, written out again. A message whose tree cannot
    /// be built, or that `f` leaves malformed, is returned as it was.
    pub fn edit(mut self, f: impl FnOnce(&mut Value)) -> Message {
        let mut tree = match self.tree.take() {
            Some(v) => *v,
            None => match self.build_tree() {
                Some(v) => v,
                None => return self,
            },
        };
        // An integer id beyond `i64` stands in the tree as a float: unless `f` changed it, it
        // is written back as it came.
        let big = self.id.clone().filter(Id::is_big);
        let before = big.as_ref().and_then(|_| tree.get("id").cloned());
        f(&mut tree);
        let keep = big.filter(|_| before.is_some() && tree.get("id") == before.as_ref());
        if let (Some(_), Some(obj)) = (&keep, tree.as_object_mut()) {
            obj.insert("id".into(), Value::from(0));
        }
        match Message::from_value(tree) {
            Ok(m) => match keep {
                Some(id) => m.with_id(&id),
                None => m,
            },
            Err(r) => {
                tracing::warn!("an edit left a message malformed ({}); it passes on unedited", r.error);
                self
            }
        }
    }

    /// The same message under another id, the rest of its bytes unchanged.
    pub fn with_id(mut self, id: &Id) -> Message {
        if self.id.as_ref() == Some(id) {
            return self;
        }
        let Some(at) = self.id_at else { return self };
        let new = id.to_json();
        let mut out = BytesMut::with_capacity(self.text.len() - at.len() + new.len());
        out.put_slice(&self.text[..at.start as usize]);
        out.put_slice(new.as_bytes());
        out.put_slice(&self.text[at.end as usize..]);
        let (grown, shrunk) = (new.len() as u32, at.len() as u32);
        let shift = |s: &mut Span| {
            if s.start >= at.end {
                *s = Span { start: s.start + grown - shrunk, end: s.end + grown - shrunk };
            }
        };
        for s in self.params.spans_mut().chain([&mut self.result_at]).flatten() {
            shift(s);
        }
        if let Some(f) = &mut self.result {
            for s in f.spans_mut().flatten() {
                shift(s);
            }
        }
        if let Some(tree) = self.tree.get_mut()
            && let Some(obj) = tree.as_object_mut()
        {
            obj.insert("id".into(), id.to_value());
        }
        self.text = out.freeze();
        self.id_at = Some(Span { start: at.start, end: at.start + grown });
        self.id = Some(id.clone());
        self
    }

    /// The same message with its progress token (as [`Message::progress_token`] reads it)
    /// replaced by `token`, the rest of its bytes unchanged; as it was if it has none.
    pub fn with_progress_token(self, token: &ProgressToken) -> Message {
        let key = if self.method == Method::Progress { Key::ProgressToken } else { Key::MetaProgressToken };
        let Some(at) = self.params.get(key) else { return self };
        let new = serde_json::to_vec(&token.to_value()).expect("tokens serialize");
        let mut out = BytesMut::with_capacity(self.text.len() - at.len() + new.len());
        out.put_slice(&self.text[..at.start as usize]);
        out.put_slice(&new);
        out.put_slice(&self.text[at.end as usize..]);
        // Read again: the envelope's places moved (a token is valid JSON in valid JSON).
        Message::parse(out.freeze()).unwrap_or(self)
    }

    fn raw(&self, at: Option<Span>) -> Option<&str> {
        // The spans are of values serde read from this UTF-8 text.
        at.map(|s| std::str::from_utf8(&self.text[s.range()]).expect("a JSON value is UTF-8"))
    }

    /// `params[key]` as JSON text.
    pub fn param(&self, key: Key) -> Option<&str> {
        self.raw(self.params.get(key))
    }

    /// `result[key]` of a response as JSON text, for a key the gateway reads in `result`
    /// (`task`, `taskId`, `status`, `protocolVersion`, and those of `_meta`).
    pub fn result_field(&self, key: Key) -> Option<&str> {
        self.raw(self.result.as_ref()?.get(key))
    }

    /// `params.name` (the tool of a `tools/call`), if it is a string.
    pub fn tool_name(&self) -> Option<Cow<'_, str>> {
        self.param(Key::Name).and_then(as_str)
    }

    /// `params.task` (a task-augmented request), as JSON text.
    pub fn task_param(&self) -> Option<&str> {
        self.param(Key::Task).filter(|t| *t != "null")
    }

    /// `params.taskId`, if it is a string.
    pub fn task_id_param(&self) -> Option<TaskId> {
        self.param(Key::TaskId).and_then(as_str).map(TaskId::new)
    }

    /// `params.requestId` (of `notifications/cancelled`), if it is a valid id.
    pub fn request_id_param(&self) -> Option<Id> {
        Id::from_raw(self.param(Key::RequestId)?)
    }

    /// `params._meta.progressToken` of a request, or `params.progressToken` of a progress
    /// notification, if it is a string or a number.
    pub fn progress_token(&self) -> Option<ProgressToken> {
        let key = if self.method == Method::Progress { Key::ProgressToken } else { Key::MetaProgressToken };
        ProgressToken::from_value(&serde_json::from_str(self.param(key)?).ok()?)
    }

    /// `params.progress` and `params.total` of a progress notification, if they are numbers.
    pub fn progress_values(&self) -> (Option<f64>, Option<f64>) {
        let num = |key| self.param(key).and_then(|r| serde_json::from_str::<f64>(r).ok());
        (num(Key::Progress), num(Key::Total))
    }
}

impl Clone for Message {
    /// The bytes are shared; the tree, if built, is built again when needed.
    fn clone(&self) -> Message {
        Message {
            text: self.text.clone(),
            kind: self.kind,
            id: self.id.clone(),
            id_at: self.id_at,
            method: self.method,
            other_name: self.other_name.clone(),
            params: self.params.clone(),
            result_at: self.result_at,
            has_error: self.has_error,
            result: self.result.clone(),
            tree: OnceLock::new(),
        }
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Message").field("kind", &self.kind).field("text", &String::from_utf8_lossy(&self.text)).finish()
    }
}

#[cfg(test)]
mod tests;
