//! Translation of a message from its sender's protocol version to its receiver's, from one
//! table ([`table::TABLE`]) of what each version added, read from the schemas.
//!
//! Each session calls [`cross`] on every message between its client and its upstream, which
//! negotiate their versions apart.
//!
//! **Downgrade** (a newer sender, an older receiver) is where the work is:
//! - a field, capability or `_meta` key the receiver's version lacks is removed;
//! - a content block type it lacks (`audio`, `resource_link`, `tool_use`, `tool_result`) is
//!   replaced by a text block that says what was there, e.g. `[audio: audio/wav, 12 KiB]`;
//! - `structuredContent`, for a receiver older than 2025-06-18, becomes a text block with the
//!   JSON, unless a text block already carries it;
//! - a request the receiver's version lacks (`elicitation/create` before 2025-06-18, `tasks/*`
//!   before 2025-11-25), or a form of one it cannot express (URL-mode elicitation, sampling
//!   with tools, a multi-select elicitation), is not delivered: [`Verdict::Refuse`] carries the
//!   error its sender gets;
//! - a notification it lacks is dropped ([`Verdict::Drop`]), and a response it cannot take (a
//!   task where it asked for none) becomes an error for its request ([`Verdict::Fail`]).
//!
//! What a receiver's version has is left as it is, including fields a sender adds beyond its
//! schema (every version allows extra keys); only what the table names is touched.
//!
//! **Upgrade** (an older sender, a newer receiver) needs nothing, so [`translate`] leaves such
//! a message as it is. Every field the schemas added from 2025-03-26 to 2025-11-25 is
//! optional; what changed in place only widened: `CancelledNotification.params.requestId`
//! became optional, `SamplingMessage.content` may also be an array, `ResourceReference` was
//! renamed `ResourceTemplateReference` with the same `ref/resource` on the wire, an
//! `elicitation` capability of `{}` still means form mode, and form-mode elicitation params
//! without `mode` are valid 2025-11-25 params.
//!
//! Not here: JSON-RPC batches (2025-03-26 only) are split and joined by the framing, per
//! [`ProtocolVersion::allows_batches`]; `initialize`'s `protocolVersion` is the session's
//! to negotiate; which tools a client without tasks is shown, and the tasks the gateway
//! hosts, are [`crate::mcp::shaping`]'s. Error responses pass as they are. JSON Schema
//! keywords inside `inputSchema` and `outputSchema` (`$schema`, added to the 2025-11-25
//! schema) are kept: they are part of a schema an older client reads as JSON Schema anyway.

mod blocks;
pub mod table;
#[cfg(test)]
mod tests;

use crate::jsonrpc::{Message, Method, RpcError};
use crate::mcp::ProtocolVersion;
use serde_json::{Map, Value};
use table::{Older, Place, Shape};

/// What to do with a message once translated.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Deliver it. `edited`: it was changed (if not, its bytes may pass as they came).
    Deliver { edited: bool },
    /// A notification the receiver's version lacks: drop it. The words say why, for the log.
    Drop(String),
    /// A request the receiver's version cannot take: do not forward it; answer its sender with
    /// this error.
    Refuse(RpcError),
    /// A response the receiver's version cannot take: answer the receiver's request with this
    /// error instead.
    Fail(RpcError),
}

const UNCHANGED: Verdict = Verdict::Deliver { edited: false };

/// Why [`cross`] did not deliver a message: the [`Verdict`]s other than delivery.
#[derive(Debug)]
pub enum Stopped {
    Drop(String),
    Refuse(RpcError),
    Fail(RpcError),
}

/// [`translate`] on a message on its way: its bytes pass as they came unless the table
/// changed something. `method` as for [`translate`] (see [`answered`]).
pub fn cross(
    msg: Message,
    method: Option<Method>,
    from: ProtocolVersion,
    to: ProtocolVersion,
) -> Result<Message, Stopped> {
    if !needs_downgrade(from, to) {
        return Ok(msg);
    }
    // The tree is taken, not copied; an unedited message passes as it came, its bytes not
    // read again.
    let mut msg = msg;
    let mut tree = msg.take_value();
    match downgrade(&mut tree, method, to) {
        Verdict::Deliver { edited: false } => Ok(msg),
        Verdict::Deliver { edited: true } => Message::from_value(tree)
            .map_err(|r| Stopped::Drop(format!("the translated message could not be written: {}", r.error.message))),
        Verdict::Drop(why) => Err(Stopped::Drop(why)),
        Verdict::Refuse(e) => Err(Stopped::Refuse(e)),
        Verdict::Fail(e) => Err(Stopped::Fail(e)),
    }
}

/// [`cross`] for a message from a modern (2026-07-28) upstream to a legacy `to` receiver: a
/// response first loses what the era added to every result
/// ([`crate::mcp::modern::legacy::for_legacy`]; a result shape a legacy client cannot read
/// fails its request), then everything crosses as from 2025-11-25, the newest legacy version
/// and the one whose fields a modern message otherwise has. Every response is rewritten
/// (each carries `resultType`); notifications pass as from 2025-11-25.
pub fn cross_from_modern(msg: Message, method: Option<Method>, to: ProtocolVersion) -> Result<Message, Stopped> {
    if msg.kind() != crate::jsonrpc::Kind::Response || msg.is_error() {
        return cross(msg, method, ProtocolVersion::LATEST, to);
    }
    let mut tree = msg.into_value();
    crate::mcp::modern::legacy::for_legacy(&mut tree).map_err(Stopped::Fail)?;
    match translate(&mut tree, method, ProtocolVersion::LATEST, to) {
        Verdict::Deliver { .. } => Message::from_value(tree)
            .map_err(|r| Stopped::Drop(format!("the translated message could not be written: {}", r.error.message))),
        Verdict::Drop(why) => Err(Stopped::Drop(why)),
        Verdict::Refuse(e) => Err(Stopped::Refuse(e)),
        Verdict::Fail(e) => Err(Stopped::Fail(e)),
    }
}

/// `method` if the table rewrites its results (see [`Cx::result`]): what to keep with a
/// request in flight, so its response can be translated (`None`: its result passes as it
/// is, `_meta` aside).
pub fn answered(method: Method) -> Option<Method> {
    rewrites_result(method).then_some(method)
}

/// Whether [`Cx::result`] has a rewrite for the results of `method`.
pub const fn rewrites_result(method: Method) -> bool {
    use Method::*;
    matches!(
        method,
        Initialize
            | ToolsList
            | ToolsCall
            | ResourcesList
            | ResourcesTemplatesList
            | ResourcesRead
            | PromptsList
            | PromptsGet
            | SamplingCreateMessage
            | ElicitationCreate
            | RootsList
    )
}

/// A client's capabilities as its version `v` has them: what `v` lacks is removed, so that
/// a client that declares more than its version carries is not asked for it.
pub fn client_capabilities(caps: &mut Value, v: ProtocolVersion) {
    Cx { to: v, edited: false }.capabilities(Some(caps), Shape::ClientCapabilities);
}

/// Whether a message from a `from` sender needs any rewriting for a `to` receiver: only when
/// the receiver is older. The hot path skips the rest when this is false.
pub fn needs_downgrade(from: ProtocolVersion, to: ProtocolVersion) -> bool {
    from > to
}

/// A message from a `from` sender, made fit for a `to` receiver. `method` is the request's
/// method when `msg` is a response to it ([`Method::ToolsList`], [`Method::ToolsCall`], …);
/// requests and notifications carry their own.
pub fn translate(msg: &mut Value, method: Option<Method>, from: ProtocolVersion, to: ProtocolVersion) -> Verdict {
    if needs_downgrade(from, to) { downgrade(msg, method, to) } else { UNCHANGED }
}

/// A message rewritten into `to`'s shape: everything the table says `to` lacks is treated,
/// whatever the sender's version (so what a lax sender leaks goes too).
pub fn downgrade(msg: &mut Value, method: Option<Method>, to: ProtocolVersion) -> Verdict {
    let mut cx = Cx { to, edited: false };
    let Some(obj) = msg.as_object_mut() else { return UNCHANGED };
    let own = obj.get("method").and_then(Value::as_str).map(Method::parse);
    let outcome = match own {
        Some(m) if obj.contains_key("id") => cx.request(m, obj.get_mut("params")),
        Some(m) => cx.notification(m, obj.get_mut("params")),
        None => match obj.get_mut("result").and_then(Value::as_object_mut) {
            Some(result) => cx.result(method, result),
            None => Ok(()),
        },
    };
    match outcome {
        Ok(()) => Verdict::Deliver { edited: cx.edited },
        Err(v) => v,
    }
}

/// One downgrade under way: the receiver's version, and whether anything changed.
struct Cx {
    to: ProtocolVersion,
    edited: bool,
}

fn objects<'a>(obj: &'a mut Map<String, Value>, key: &str) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    obj.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

impl Cx {
    fn has(&self, place: Place<'_>) -> bool {
        table::has(self.to, place)
    }

    /// `Err` with the verdict of `place`'s row when the receiver's version lacks it.
    fn check(&self, place: Place<'_>) -> Result<(), Verdict> {
        let Some(row) = table::TABLE.iter().find(|r| r.place == place) else { return Ok(()) };
        if row.since <= self.to {
            return Ok(());
        }
        let why = format!(
            "{}: the receiver speaks protocol version {}, which predates it (added in {})",
            place.describe().replace('`', ""),
            self.to,
            row.since
        );
        Err(match row.older {
            Older::Refused(code) => Verdict::Refuse(RpcError::new(code, why)),
            Older::Failed(code) => Verdict::Fail(RpcError::new(code, why)),
            Older::Dropped => Verdict::Drop(why),
            Older::Removed | Older::Described(_) | Older::Rewritten(_) => {
                unreachable!("{place:?} is rewritten, not checked: its message is still delivered")
            }
        })
    }

    fn remove(&mut self, obj: &mut Map<String, Value>, key: &str) -> Option<Value> {
        let v = obj.remove(key);
        self.edited |= v.is_some();
        v
    }

    /// Removes the fields of `shape` the receiver's version lacks.
    fn strip(&mut self, obj: &mut Map<String, Value>, shape: Shape) {
        for f in table::removed_fields(shape, self.to) {
            self.remove(obj, f);
        }
    }

    fn strip_in(&mut self, v: Option<&mut Value>, shape: Shape) {
        if let Some(obj) = v.and_then(Value::as_object_mut) {
            self.strip(obj, shape);
        }
    }

    /// Removes the `_meta` keys the receiver's version lacks (and `_meta` if that empties it).
    fn meta(&mut self, obj: &mut Map<String, Value>) {
        let Some(meta) = obj.get_mut("_meta").and_then(Value::as_object_mut) else { return };
        let before = meta.len();
        for r in table::TABLE {
            if let Place::MetaKey(k) = r.place
                && r.since > self.to
            {
                meta.remove(k);
            }
        }
        if meta.len() < before {
            self.edited = true;
            if meta.is_empty() {
                obj.remove("_meta");
            }
        }
    }

    fn capabilities(&mut self, caps: Option<&mut Value>, shape: Shape) {
        let Some(caps) = caps.and_then(Value::as_object_mut) else { return };
        for path in table::removed_capabilities(shape, self.to) {
            match path {
                [key] => {
                    self.remove(caps, key);
                }
                [key, sub] => {
                    if let Some(inner) = caps.get_mut(*key).and_then(Value::as_object_mut) {
                        self.remove(inner, sub);
                    }
                }
                _ => unreachable!("capability paths in the table are one or two keys long"),
            }
        }
    }

    fn request(&mut self, method: Method, params: Option<&mut Value>) -> Result<(), Verdict> {
        self.check(Place::Request(method))?;
        let Some(params) = params.and_then(Value::as_object_mut) else { return Ok(()) };
        self.meta(params);
        match method {
            Method::Initialize => {
                self.capabilities(params.get_mut("capabilities"), Shape::ClientCapabilities);
                self.strip_in(params.get_mut("clientInfo"), Shape::Implementation);
            }
            Method::ToolsCall => self.strip(params, Shape::CallToolParams),
            Method::CompletionComplete => {
                self.strip(params, Shape::CompleteParams);
                if let Some(r) = params.get_mut("ref").and_then(Value::as_object_mut)
                    && r.get("type").and_then(Value::as_str) == Some("ref/prompt")
                {
                    self.strip(r, Shape::PromptReference);
                }
            }
            Method::SamplingCreateMessage => self.sampling_request(params)?,
            Method::ElicitationCreate => self.elicitation(params)?,
            _ => {}
        }
        Ok(())
    }

    fn notification(&mut self, method: Method, params: Option<&mut Value>) -> Result<(), Verdict> {
        self.check(Place::Notification(method))?;
        let Some(params) = params.and_then(Value::as_object_mut) else { return Ok(()) };
        self.meta(params);
        match method {
            Method::Progress => self.strip(params, Shape::ProgressParams),
            Method::Cancelled if !params.contains_key("requestId") => {
                self.check(table::CANCEL_WITHOUT_REQUEST_ID)?;
            }
            _ => {}
        }
        Ok(())
    }

    fn result(&mut self, method: Option<Method>, result: &mut Map<String, Value>) -> Result<(), Verdict> {
        self.meta(result);
        let Some(method) = method else { return Ok(()) };
        let augmentable =
            matches!(method, Method::ToolsCall | Method::SamplingCreateMessage | Method::ElicitationCreate);
        if augmentable && result.get("task").is_some_and(Value::is_object) {
            self.check(table::CREATED_TASK)?;
        }
        match method {
            Method::Initialize => {
                self.capabilities(result.get_mut("capabilities"), Shape::ServerCapabilities);
                self.strip_in(result.get_mut("serverInfo"), Shape::Implementation);
            }
            Method::ToolsList => {
                for tool in objects(result, "tools") {
                    self.strip(tool, Shape::Tool);
                }
            }
            Method::ToolsCall => self.call_result(result),
            Method::ResourcesList => {
                for r in objects(result, "resources") {
                    self.strip(r, Shape::Resource);
                    self.strip_in(r.get_mut("annotations"), Shape::Annotations);
                }
            }
            Method::ResourcesTemplatesList => {
                for t in objects(result, "resourceTemplates") {
                    self.strip(t, Shape::ResourceTemplate);
                    self.strip_in(t.get_mut("annotations"), Shape::Annotations);
                }
            }
            Method::ResourcesRead => {
                for c in objects(result, "contents") {
                    self.strip(c, Shape::ResourceContents);
                }
            }
            Method::PromptsList => {
                for p in objects(result, "prompts") {
                    self.strip(p, Shape::Prompt);
                    for a in objects(p, "arguments") {
                        self.strip(a, Shape::PromptArgument);
                    }
                }
            }
            Method::PromptsGet => {
                for m in objects(result, "messages") {
                    if let Some(b) = m.get_mut("content") {
                        self.block(b);
                    }
                }
            }
            Method::SamplingCreateMessage => self.sampling_result(result),
            Method::RootsList => {
                for r in objects(result, "roots") {
                    self.strip(r, Shape::Root);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A content block: replaced by text if the receiver's version lacks its type, else its
    /// fields stripped.
    fn block(&mut self, b: &mut Value) {
        let Some(ty) = b.get("type").and_then(Value::as_str) else { return };
        if !self.has(Place::Block(ty)) {
            *b = blocks::as_text(b);
            self.edited = true;
        }
        let Some(obj) = b.as_object_mut() else { return };
        self.strip(obj, Shape::ContentBlock);
        self.strip_in(obj.get_mut("annotations"), Shape::Annotations);
        match obj.get("type").and_then(Value::as_str) {
            Some("resource") => self.strip_in(obj.get_mut("resource"), Shape::ResourceContents),
            // A resource link is a Resource with a `type`.
            Some("resource_link") => self.strip(obj, Shape::Resource),
            _ => {}
        }
    }

    fn call_result(&mut self, result: &mut Map<String, Value>) {
        if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
            for b in content.iter_mut() {
                self.block(b);
            }
        }
        if self.has(table::STRUCTURED_CONTENT) {
            return;
        }
        let Some(structured) = self.remove(result, "structuredContent") else { return };
        let content = result.entry("content").or_insert_with(|| Value::Array(Vec::new()));
        if let Some(content) = content.as_array_mut()
            && !blocks::carries(content, &structured)
        {
            content.push(serde_json::json!({"type": "text", "text": structured.to_string()}));
        }
    }

    fn sampling_request(&mut self, params: &mut Map<String, Value>) -> Result<(), Verdict> {
        for place in [table::SAMPLING_TOOLS, table::SAMPLING_TOOL_CHOICE] {
            if let Place::Field(_, f) = place
                && params.contains_key(f)
            {
                self.check(place)?;
            }
        }
        self.strip(params, Shape::CreateMessageParams);
        let Some(messages) = params.get_mut("messages").and_then(Value::as_array_mut) else { return Ok(()) };
        if !self.has(table::SAMPLING_CONTENT_ARRAY) && messages.iter().any(|m| m["content"].is_array()) {
            // One message per block, each with the role of the message it came from.
            *messages = std::mem::take(messages)
                .into_iter()
                .flat_map(|m| match m.get("content").and_then(Value::as_array) {
                    Some(blocks) if blocks.is_empty() => vec![with_content(&m, blocks::joined(&[]))],
                    Some(blocks) => blocks.iter().map(|b| with_content(&m, b.clone())).collect(),
                    None => vec![m],
                })
                .collect();
            self.edited = true;
        }
        for m in messages.iter_mut().filter_map(Value::as_object_mut) {
            self.strip(m, Shape::SamplingMessage);
            if let Some(b) = m.get_mut("content") {
                self.block(b);
            }
        }
        Ok(())
    }

    fn sampling_result(&mut self, result: &mut Map<String, Value>) {
        let Some(content) = result.get_mut("content") else { return };
        if let Some(blocks) = content.as_array()
            && !self.has(table::SAMPLING_CONTENT_ARRAY)
        {
            *content = blocks::joined(blocks);
            self.edited = true;
        }
        self.block(content);
    }

    fn elicitation(&mut self, params: &mut Map<String, Value>) -> Result<(), Verdict> {
        if params.get("mode").and_then(Value::as_str) == Some("url") {
            self.check(table::ELICIT_URL_MODE)?;
        }
        self.strip(params, Shape::ElicitParams);
        let Some(schema) = params.get_mut("requestedSchema").and_then(Value::as_object_mut) else { return Ok(()) };
        self.strip(schema, Shape::ElicitSchema);
        let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) else { return Ok(()) };
        for p in props.values_mut().filter_map(Value::as_object_mut) {
            let ty = p.get("type").and_then(Value::as_str);
            if ty == Some("array") {
                self.check(table::ELICIT_MULTI_SELECT)?;
            }
            if ty != Some("boolean") && !self.has(table::ELICIT_DEFAULT) {
                self.remove(p, "default");
            }
            if !self.has(table::ELICIT_TITLED_ENUM)
                && let Some(Value::Array(options)) = self.remove(p, "oneOf")
            {
                // A titled single-select is the older `enum` with `enumNames`.
                let (values, names): (Vec<Value>, Vec<Value>) = options
                    .iter()
                    .filter_map(|o| {
                        let value = o.get("const")?.as_str()?;
                        let name = o.get("title").and_then(Value::as_str).unwrap_or(value);
                        Some((Value::from(value), Value::from(name)))
                    })
                    .unzip();
                p.insert("enum".into(), Value::Array(values));
                p.insert("enumNames".into(), Value::Array(names));
            }
        }
        Ok(())
    }
}

/// A copy of sampling message `m` with another `content`.
fn with_content(m: &Value, content: Value) -> Value {
    let mut m = m.clone();
    m["content"] = content;
    m
}
