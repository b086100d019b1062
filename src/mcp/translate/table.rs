//! The translation table: what each protocol version added over the one before it, and what a
//! receiver of an older version gets instead. One row per addition, read from the schemas:
//!
//! - 2024-11-05, the baseline: `schema/2024-11-05/schema.json` (modelcontextprotocol/
//!   modelcontextprotocol at 19a4ad9a; the index holds no `schema.ts` for this version);
//! - 2025-03-26: `schema/2025-03-26/schema.json` (19a4ad9a; no `schema.ts` in the index either);
//! - 2025-06-18: `schema/2025-06-18/schema.ts` (06a3ba5b);
//! - 2025-11-25: `schema/2025-11-25/schema.ts` (120687bc).
//!
//! A place that has no row is in every version. A row's `source` names the schema definition
//! that shows it; the file is `schema/<since>/`.

use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, Method};
use crate::mcp::ProtocolVersion::{self, V2025_03_26, V2025_06_18, V2025_11_25};
use crate::mcp::task_messages::RELATED_TASK;
use std::fmt::Write;

/// An object of the protocol whose fields changed between versions, named as the schema
/// names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Tool,
    CallToolResult,
    /// Every content block (`text`, `image`, `audio`, `resource`, `resource_link`).
    ContentBlock,
    /// `annotations` of content blocks, resources and resource templates.
    Annotations,
    /// A resource in `resources/list`, and a `resource_link` block (which extends it).
    Resource,
    ResourceTemplate,
    /// `resources/read` contents, and the `resource` of an embedded resource block.
    ResourceContents,
    Prompt,
    PromptArgument,
    /// `clientInfo` and `serverInfo`.
    Implementation,
    Root,
    ProgressParams,
    CallToolParams,
    CompleteParams,
    PromptReference,
    CreateMessageParams,
    SamplingMessage,
    ElicitParams,
    ElicitSchema,
    /// One property of an elicitation's `requestedSchema` (`PrimitiveSchemaDefinition`).
    ElicitProperty,
    CancelledParams,
    /// The answer to a task-augmented request.
    CreateTaskResult,
    ServerCapabilities,
    ClientCapabilities,
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Tool => "Tool",
            Shape::CallToolResult => "CallToolResult",
            Shape::ContentBlock => "ContentBlock",
            Shape::Annotations => "Annotations",
            Shape::Resource => "Resource",
            Shape::ResourceTemplate => "ResourceTemplate",
            Shape::ResourceContents => "ResourceContents",
            Shape::Prompt => "Prompt",
            Shape::PromptArgument => "PromptArgument",
            Shape::Implementation => "Implementation",
            Shape::Root => "Root",
            Shape::ProgressParams => "ProgressNotification.params",
            Shape::CallToolParams => "CallToolRequest.params",
            Shape::CompleteParams => "CompleteRequest.params",
            Shape::PromptReference => "PromptReference",
            Shape::CreateMessageParams => "CreateMessageRequest.params",
            Shape::SamplingMessage => "SamplingMessage",
            Shape::ElicitParams => "ElicitRequest.params",
            Shape::ElicitSchema => "ElicitRequest.params.requestedSchema",
            Shape::ElicitProperty => "PrimitiveSchemaDefinition",
            Shape::CancelledParams => "CancelledNotification.params",
            Shape::CreateTaskResult => "CreateTaskResult",
            Shape::ServerCapabilities => "ServerCapabilities",
            Shape::ClientCapabilities => "ClientCapabilities",
        }
    }
}

/// Where in a message an addition lives. The table's places are `'static`; the code looks up
/// places named by the message it reads (a block's type, a method).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    /// A field of an object.
    Field(Shape, &'a str),
    /// A capability, by its path in the capabilities object.
    Capability(Shape, &'a [&'a str]),
    /// A content block type (its `type`).
    Block(&'a str),
    /// A request method.
    Request(Method),
    /// A notification method.
    Notification(Method),
    /// A form of a field's value that older versions do not allow: the object, the field,
    /// and the form in words.
    Form(Shape, &'a str, &'a str),
    /// A key of `_meta` (in any params or result).
    MetaKey(&'a str),
}

/// What a receiver whose version predates a row gets instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Older {
    /// The field (or capability, or meta key) is removed.
    Removed,
    /// Replaced by a text block that says what was there, of the form given.
    Described(&'static str),
    /// Rewritten into the older form, as the words say.
    Rewritten(&'static str),
    /// A request the receiver cannot take: not forwarded; its sender gets this error code.
    Refused(i64),
    /// A notification the receiver cannot take: dropped.
    Dropped,
    /// A response the receiver cannot take: it gets this error code for its request instead.
    Failed(i64),
}

/// One addition.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub since: ProtocolVersion,
    pub place: Place<'static>,
    pub older: Older,
    /// The definitions in `schema/<since>/` that show it, separated by ", ".
    pub source: &'static str,
}

const fn row(since: ProtocolVersion, place: Place<'static>, older: Older, source: &'static str) -> Row {
    Row { since, place, older, source }
}

use Older::{Described, Dropped, Failed, Refused, Removed, Rewritten};
use Place::{Block, Capability, Field, Form, MetaKey, Notification, Request};
use Shape::*;

// The places the translation treats in a way of their own, named once for the table and the
// code that reads it.
/// A client capability `path` that versions before `since` lack (and so do not send).
const fn client_capability(since: ProtocolVersion, path: &'static [&'static str], source: &'static str) -> Row {
    row(since, Capability(ClientCapabilities, path), Removed, source)
}

pub const STRUCTURED_CONTENT: Place<'static> = Field(CallToolResult, "structuredContent");
pub const CREATED_TASK: Place<'static> = Field(CreateTaskResult, "task");
pub const CANCEL_WITHOUT_REQUEST_ID: Place<'static> = Form(CancelledParams, "requestId", "absent");
pub const SAMPLING_TOOLS: Place<'static> = Field(CreateMessageParams, "tools");
pub const SAMPLING_TOOL_CHOICE: Place<'static> = Field(CreateMessageParams, "toolChoice");
pub const SAMPLING_CONTENT_ARRAY: Place<'static> = Form(SamplingMessage, "content", "as an array");
pub const ELICIT_URL_MODE: Place<'static> = Form(ElicitParams, "mode", "\"url\"");
pub const ELICIT_DEFAULT: Place<'static> = Form(ElicitProperty, "default", "on a string, number or enum");
pub const ELICIT_TITLED_ENUM: Place<'static> = Field(ElicitProperty, "oneOf");
pub const ELICIT_MULTI_SELECT: Place<'static> = Form(ElicitProperty, "type", "\"array\"");

pub const TABLE: &[Row] = &[
    // 2025-03-26 over 2024-11-05 (schema/2025-03-26/schema.json against schema/2024-11-05/schema.json).
    row(V2025_03_26, Field(Tool, "annotations"), Removed, "Tool.annotations: ToolAnnotations"),
    row(V2025_03_26, Block("audio"), Described("`[audio: <mimeType>, <size>]`"), "AudioContent"),
    row(V2025_03_26, Field(ProgressParams, "message"), Removed, "ProgressNotification.params.message"),
    row(V2025_03_26, Capability(ServerCapabilities, &["completions"]), Removed, "ServerCapabilities.completions"),
    // 2025-06-18 over 2025-03-26 (schema/2025-06-18/schema.ts). `title` comes with
    // BaseMetadata, which Tool, Resource, ResourceTemplate, Prompt, PromptArgument,
    // Implementation and PromptReference extend; `_meta` is new on every object below.
    row(V2025_06_18, Field(Tool, "title"), Removed, "Tool extends BaseMetadata"),
    row(V2025_06_18, Field(Tool, "outputSchema"), Removed, "Tool.outputSchema"),
    row(V2025_06_18, Field(Tool, "_meta"), Removed, "Tool._meta"),
    row(
        V2025_06_18,
        STRUCTURED_CONTENT,
        Described("its JSON, unless one already carries it"),
        "CallToolResult.structuredContent",
    ),
    row(V2025_06_18, Block("resource_link"), Described("`[resource link: <uri> (<name>)]`"), "ResourceLink"),
    row(
        V2025_06_18,
        Field(ContentBlock, "_meta"),
        Removed,
        "TextContent._meta, ImageContent._meta, AudioContent._meta, EmbeddedResource._meta",
    ),
    row(V2025_06_18, Field(Annotations, "lastModified"), Removed, "Annotations.lastModified"),
    row(V2025_06_18, Field(Resource, "title"), Removed, "Resource extends BaseMetadata"),
    row(V2025_06_18, Field(Resource, "_meta"), Removed, "Resource._meta"),
    row(V2025_06_18, Field(ResourceTemplate, "title"), Removed, "ResourceTemplate extends BaseMetadata"),
    row(V2025_06_18, Field(ResourceTemplate, "_meta"), Removed, "ResourceTemplate._meta"),
    row(V2025_06_18, Field(ResourceContents, "_meta"), Removed, "ResourceContents._meta"),
    row(V2025_06_18, Field(Prompt, "title"), Removed, "Prompt extends BaseMetadata"),
    row(V2025_06_18, Field(Prompt, "_meta"), Removed, "Prompt._meta"),
    row(V2025_06_18, Field(PromptArgument, "title"), Removed, "PromptArgument extends BaseMetadata"),
    row(V2025_06_18, Field(Implementation, "title"), Removed, "Implementation extends BaseMetadata"),
    row(V2025_06_18, Field(Root, "_meta"), Removed, "Root._meta"),
    row(V2025_06_18, Field(CompleteParams, "context"), Removed, "CompleteRequest.params.context"),
    row(V2025_06_18, Field(PromptReference, "title"), Removed, "PromptReference extends BaseMetadata"),
    row(V2025_06_18, Capability(ClientCapabilities, &["elicitation"]), Removed, "ClientCapabilities.elicitation"),
    row(V2025_06_18, Request(Method::ElicitationCreate), Refused(METHOD_NOT_FOUND), "ElicitRequest"),
    // 2025-11-25 over 2025-06-18 (schema/2025-11-25/schema.ts). `icons` comes with Icons,
    // which Tool, Resource, ResourceTemplate, Prompt and Implementation extend.
    row(V2025_11_25, Field(Tool, "icons"), Removed, "Tool extends Icons"),
    row(V2025_11_25, Field(Tool, "execution"), Removed, "Tool.execution: ToolExecution"),
    row(V2025_11_25, Field(Resource, "icons"), Removed, "Resource extends Icons"),
    row(V2025_11_25, Field(ResourceTemplate, "icons"), Removed, "ResourceTemplate extends Icons"),
    row(V2025_11_25, Field(Prompt, "icons"), Removed, "Prompt extends Icons"),
    row(V2025_11_25, Field(Implementation, "icons"), Removed, "Implementation extends Icons"),
    row(V2025_11_25, Field(Implementation, "description"), Removed, "Implementation.description"),
    row(V2025_11_25, Field(Implementation, "websiteUrl"), Removed, "Implementation.websiteUrl"),
    row(V2025_11_25, Capability(ServerCapabilities, &["tasks"]), Removed, "ServerCapabilities.tasks"),
    row(V2025_11_25, Capability(ClientCapabilities, &["tasks"]), Removed, "ClientCapabilities.tasks"),
    client_capability(V2025_11_25, &["elicitation", "form"], "ClientCapabilities.elicitation.form"),
    client_capability(V2025_11_25, &["elicitation", "url"], "ClientCapabilities.elicitation.url"),
    client_capability(V2025_11_25, &["sampling", "context"], "ClientCapabilities.sampling.context"),
    client_capability(V2025_11_25, &["sampling", "tools"], "ClientCapabilities.sampling.tools"),
    row(
        V2025_11_25,
        Field(CallToolParams, "task"),
        Removed,
        "CallToolRequestParams extends TaskAugmentedRequestParams",
    ),
    row(V2025_11_25, Field(CreateMessageParams, "task"), Removed, "CreateMessageRequestParams.task"),
    row(V2025_11_25, Field(ElicitParams, "task"), Removed, "ElicitRequestFormParams.task"),
    row(V2025_11_25, CREATED_TASK, Failed(INTERNAL_ERROR), "CreateTaskResult.task"),
    row(V2025_11_25, MetaKey(RELATED_TASK), Removed, "RelatedTaskMetadata"),
    row(V2025_11_25, Request(Method::TasksGet), Refused(METHOD_NOT_FOUND), "GetTaskRequest"),
    row(V2025_11_25, Request(Method::TasksResult), Refused(METHOD_NOT_FOUND), "GetTaskPayloadRequest"),
    row(V2025_11_25, Request(Method::TasksList), Refused(METHOD_NOT_FOUND), "ListTasksRequest"),
    row(V2025_11_25, Request(Method::TasksCancel), Refused(METHOD_NOT_FOUND), "CancelTaskRequest"),
    row(V2025_11_25, Notification(Method::TaskStatus), Dropped, "TaskStatusNotification"),
    row(V2025_11_25, Notification(Method::ElicitationComplete), Dropped, "ElicitationCompleteNotification"),
    row(V2025_11_25, CANCEL_WITHOUT_REQUEST_ID, Dropped, "CancelledNotificationParams.requestId?"),
    row(V2025_11_25, SAMPLING_TOOLS, Refused(INVALID_PARAMS), "CreateMessageRequestParams.tools"),
    row(V2025_11_25, SAMPLING_TOOL_CHOICE, Refused(INVALID_PARAMS), "CreateMessageRequestParams.toolChoice"),
    row(V2025_11_25, Field(SamplingMessage, "_meta"), Removed, "SamplingMessage._meta"),
    row(
        V2025_11_25,
        SAMPLING_CONTENT_ARRAY,
        Rewritten("a request: one message per block; a result: one text block"),
        "SamplingMessage.content: SamplingMessageContentBlock[]",
    ),
    row(V2025_11_25, Block("tool_use"), Described("`[tool use <id>: <name> <input>]`"), "ToolUseContent"),
    row(V2025_11_25, Block("tool_result"), Described("`[tool result <toolUseId>: <content>]`"), "ToolResultContent"),
    row(V2025_11_25, Field(ElicitParams, "mode"), Removed, "ElicitRequestFormParams.mode"),
    row(V2025_11_25, ELICIT_URL_MODE, Refused(INVALID_PARAMS), "ElicitRequestURLParams"),
    row(V2025_11_25, Field(ElicitSchema, "$schema"), Removed, "ElicitRequestFormParams.requestedSchema.$schema"),
    row(
        V2025_11_25,
        ELICIT_DEFAULT,
        Removed,
        "StringSchema.default, NumberSchema.default, UntitledSingleSelectEnumSchema.default",
    ),
    // 2025-06-18's EnumSchema has `enumNames` (2025-11-25 keeps it as LegacyTitledEnumSchema).
    row(V2025_11_25, ELICIT_TITLED_ENUM, Rewritten("`enum` and `enumNames`"), "TitledSingleSelectEnumSchema"),
    row(V2025_11_25, ELICIT_MULTI_SELECT, Refused(INVALID_PARAMS), "MultiSelectEnumSchema"),
];

/// The version that added `place`; `None` for what every version has.
pub fn since(place: Place<'_>) -> Option<ProtocolVersion> {
    TABLE.iter().find(|r| r.place == place).map(|r| r.since)
}

/// Whether version `v` has `place`.
pub fn has(v: ProtocolVersion, place: Place<'_>) -> bool {
    since(place).is_none_or(|s| s <= v)
}

/// The fields of `shape` that version `v` lacks and that are simply removed for it.
pub fn removed_fields(shape: Shape, v: ProtocolVersion) -> impl Iterator<Item = &'static str> {
    TABLE.iter().filter_map(move |r| match r.place {
        Field(s, f) if s == shape && r.since > v && r.older == Removed => Some(f),
        _ => None,
    })
}

/// The capability paths of `shape` (server or client capabilities) that version `v` lacks.
pub fn removed_capabilities(shape: Shape, v: ProtocolVersion) -> impl Iterator<Item = &'static [&'static str]> {
    TABLE.iter().filter_map(move |r| match r.place {
        Capability(s, path) if s == shape && r.since > v => Some(path),
        _ => None,
    })
}

impl Place<'_> {
    /// The place in words, for docs/versions.md.
    pub fn describe(self) -> String {
        match self {
            Field(s, f) => format!("`{}.{f}`", s.name()),
            Capability(s, path) => format!("`{}.{}`", s.name(), path.join(".")),
            Block(t) => format!("content block `{t}`"),
            Request(m) => format!("request `{m}`"),
            Notification(m) => format!("notification `{m}`"),
            Form(s, f, form) => format!("`{}.{f}` {form}", s.name()),
            MetaKey(k) => format!("`_meta` key `{k}`"),
        }
    }
}

impl Older {
    /// What an older receiver gets, in words, for docs/versions.md.
    pub fn describe(self) -> String {
        match self {
            Removed => "removed".into(),
            Described(form) => format!("as a text block: {form}"),
            Rewritten(how) => format!("rewritten: {how}"),
            Refused(code) => format!("not forwarded: the sender gets {code}"),
            Dropped => "dropped".into(),
            Failed(code) => format!("the requester gets {code} instead"),
        }
    }
}

/// The table as Markdown, as `taskgate versions` prints it and docs/versions.md shows it.
pub fn markdown() -> String {
    let mut out = String::from("| added in | what | an older receiver gets | schema |\n|---|---|---|---|\n");
    for r in TABLE {
        let source = r.source.split(", ").map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
        let _ = writeln!(out, "| {} | {} | {} | {source} |", r.since, r.place.describe(), r.older.describe());
    }
    out
}
