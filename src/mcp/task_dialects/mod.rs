//! The two task dialects, and the translation between them: the experimental core tasks of
//! 2025-11-25 (SEP-1686, "core") and the tasks extension `io.modelcontextprotocol/tasks` of
//! the 2026-07-28 era (SEP-2663, "extension"). The two are not wire-compatible; this module
//! says how each message of one becomes the other's, as pure functions on JSON values:
//! [`task`] for the `Task` object and the results that carry it, [`flow`] for what happens
//! around a task (result retrieval, cancellation, input, status notifications), [`caps`] for
//! capabilities, tool listings and the calls that create tasks.
//!
//! Wired for legacy clients in front of an extension server: a blocking call bridged through
//! an extension task (`tasks::bridge::extension`, `gateway::session::ext::bridged`), and a
//! core client's tasks translated both ways (`gateway::session::ext::translated`, with the
//! state below in `gateway::session::ext::table`). An extension client's tasks (hosted, or on a core
//! server) are `gateway::session::modern_client::tasks`'. Items no wired direction uses yet
//! carry a `dead_code` expectation.
//!
//! Read from `schema/2025-11-25/schema.ts` and `basic/utilities/tasks.mdx` of the
//! specification, and from `specification/draft/tasks.md` and `schema/draft/schema.ts` of
//! the ext-tasks repository.
//!
//! # Every difference
//!
//! | | core (2025-11-25) | extension | translation |
//! |---|---|---|---|
//! | who decides | the requestor, per request, with `params.task {ttl?}` | the server, per request; the client only declares the extension | [`caps::core_call_to_ext`], [`caps::ext_call_to_core`] |
//! | requested retention | `params.task.ttl` | none | dropped toward the extension |
//! | task-augmentable requests | `tools/call`, `sampling/createMessage`, `elicitation/create` | `tools/call` | client-hosted tasks have no counterpart |
//! | per-tool flag | `Tool.execution.taskSupport` | none (no `Tool.execution`) | [`caps::tools_for_core`], [`caps::tools_for_ext`] |
//! | server capability | `tasks {list?, cancel?, requests.tools.call?}` in `initialize` | `extensions["io.modelcontextprotocol/tasks"] = {}` in `server/discover` | [`caps::server_caps_to_ext`], [`caps::server_caps_to_core`] |
//! | client capability | `tasks {list?, cancel?, requests.{sampling,elicitation}}`, once | `extensions["io.modelcontextprotocol/tasks"] = {}` in every request's `_meta` clientCapabilities | [`caps::declare`]; core client task capabilities are not carried |
//! | creation result | `CreateTaskResult {task: Task}`, nested | `Result & Task & {resultType: "task"}`, flat | [`task::create_to_ext`], [`task::create_to_core`] |
//! | `ttl` | `ttl: number \| null`, required, ms | `ttlMs: number \| null`, required, integer ms, may change | renamed; fractions cut toward the extension |
//! | poll interval | `pollInterval?: number`, ms | `pollIntervalMs?: number`, integer ms, may change | renamed; fractions cut |
//! | `taskId`, `statusMessage`, `createdAt`, `lastUpdatedAt` | as in the extension | same names, same types (ISO 8601 strings) | unchanged |
//! | status names | `working`, `input_required`, `completed`, `failed`, `cancelled` | the same five | unchanged, except: |
//! | a tool result with `isError: true` | `failed` | `completed`, the result inline | extension `completed` + `isError` → core `failed`; core `failed` → extension `completed` or `failed` by its payload |
//! | `failed` | any unsuccessful end | only a JSON-RPC error, inline as `error` | core payload needed: [`task::detailed_to_ext`] |
//! | `tasks/get` result | `Result & Task` | `Result & DetailedTask & {resultType: "complete"}`: `result` (completed), `error` (failed) or `inputRequests` (input_required) inline | [`task::get_to_ext`], [`task::get_to_core`] |
//! | result retrieval | `tasks/result`, blocks until terminal, answers exactly the underlying response, tagged with related-task | none (-32601 under 2026-07-28): the inline `result`/`error` | [`flow::core_payload`], [`flow::inline_from_core_payload`] |
//! | `tasks/list` | cursor-paged, gated by `tasks.list` | none | served from what the gateway has seen |
//! | `tasks/cancel` result | the `Task`, moved to `cancelled` before the answer; a terminal task is -32602 | empty ack `{resultType: "complete"}`; cooperative, may never reach `cancelled` | [`flow::cancel_to_core`], [`flow::cancel_to_ext`] |
//! | input during a task | server→client JSON-RPC requests tagged with related-task, while `input_required`, typically on the `tasks/result` stream | `inputRequests {key: {method, params}}` in `tasks/get`; keys unique over the task's life | [`flow::input_request_to_core`], [`flow::input_request_to_ext`] |
//! | input answers | JSON-RPC responses (a result or an error) to those requests | `tasks/update {taskId, inputResponses {key: result}}`, ack-only; partial sets allowed | [`flow::input_answer_to_ext`], [`flow::input_answer_to_core`]; an error answer has no counterpart |
//! | status notification | `notifications/tasks/status`, params `Task`, sent unsolicited (MAY) | `notifications/tasks`, params `DetailedTask`, only on a `subscriptions/listen` stream that asked for the task's id, `_meta` subscriptionId | [`flow::notification_to_core`], [`flow::notification_to_ext`] |
//! | related-task `_meta` | required on every message related to a task (not on `tasks/get\|list\|cancel`) | not used | removed toward the extension, added toward core |
//! | progress | the creating request's token lives until the task ends | "not supported on tasks" | a core client in front of an extension server gets no progress once the task exists |
//! | routing | — | over HTTP, `tasks/get\|update\|cancel` carry `Mcp-Name: <taskId>` | `modern::headers` |
//! | not allowed to declare | — | -32021 for `tasks/*` from a client that did not declare the extension | `modern::ModernError::MissingCapability` |
//! | expiry | the receiver may delete after `ttl` | the server may mark it `failed` after `ttlMs`, then delete | either way, -32602 for an id gone |
//! | `_meta` `io.modelcontextprotocol/model-immediate-response` | optional, on `CreateTaskResult` | none | left in `_meta` (an unknown key is harmless) |
//! | `_meta` `io.modelcontextprotocol/relatedTaskIds` | none | advisory list on a request, in `schema/draft/schema.ts` only | not translated |
//!
//! # What has no counterpart, and the rule the session will apply
//!
//! - **Core `tasks/list`** (core client, extension server): served from the tasks the
//!   gateway has relayed to that owner, each as last seen (its last `tasks/get` or
//!   notification, translated), paged by the gateway's own cursors; declared (`tasks.list`)
//!   only where the owner is known (the 2026-01-20 erratum). Toward an extension client,
//!   `tasks/list` is -32601.
//! - **Core `tasks/result`** under 2026-07-28 is -32601 (SEP-2663); for a core client in front
//!   of an extension server it is served by polling (below).
//! - **A task the client did not ask for.** An extension server may answer any `tools/call`
//!   with a task, but only to a client that declared the extension on that request. The
//!   gateway declares it upstream only when its own client can take a task (a core client
//!   that sent `params.task`, an extension client that declared it), or when retrying once a
//!   call refused with -32021 naming the extension. In the retry case, or if a server sends a
//!   task anyway, the call is bridged: the gateway follows the task by `tasks/get` and answers
//!   the original request with the inline result, or with the inline error as the JSON-RPC
//!   error (as a blocking call would have). Input requests of a bridged task reach the client
//!   as plain server→client requests of the original call, without related-task.
//! - **A core client that asked for a task, answered with a plain result** (the extension
//!   server chose not to create one): the client "MUST" get a `CreateTaskResult`, so the
//!   gateway hosts a task that is already `completed` (or `failed`, by `isError`) with that
//!   result, and serves `tasks/get|result|list|cancel` for it from its own store.
//! - **An extension client in front of a core server**: a tool listed `required` is always
//!   called as a task (bridged if the client did not declare the extension); one listed
//!   `optional` is called as a task when the client declared the extension, else plainly.
//! - **Client-hosted tasks** (core `sampling/createMessage` or `elicitation/create` with
//!   `params.task`): the modern era has no server→client requests and the extension hosts
//!   tasks on servers only, so the gateway never declares `tasks.requests.sampling|elicitation`
//!   to a core upstream on behalf of a modern client.
//! - **An error answer to an input request** (a core client answering an extension server's
//!   input request with a JSON-RPC error): `inputResponses` carries results only, and a
//!   task cannot proceed without its input. The gateway cancels the task upstream
//!   (`tasks/cancel`) and marks it cancelled for the client (sticky, below), with the error's
//!   message as `statusMessage`.
//! - **Progress** after a core `CreateTaskResult`, from an extension server: none exists.
//!   From a core server to an extension client: dropped once the task exists.
//!
//! # State the session must keep (not pure, not here: `gateway::session::ext::table` for a core client)
//!
//! Per task, keyed by the task id as the upstream gave it (ids pass through unchanged, so
//! `Mcp-Name` is the id the client sent; with `share = true` a link keeps tasks of different
//! sessions apart as it does today), bounded like the task store:
//!
//! - **owner**, dialect of each side, upstream, and the **last snapshot** seen (a core `Task`
//!   after translation, with its `lastUpdatedAt`), for `tasks/list`, for an answer to core
//!   `tasks/cancel` (an extension ack carries no task), and for deciding -32602 on a core
//!   cancel of a task already terminal.
//! - **the payload** once the task is terminal: the inline `result`/`error` of an extension
//!   `tasks/get` (a core client's `tasks/result` is answered from it, again if asked twice),
//!   or the answer of a core upstream's `tasks/result` (an extension client's `tasks/get` of a
//!   `completed`/`failed` task needs it inline; until it is fetched, [`task::detailed_to_ext`]
//!   refuses with [`DialectError::PayloadNeeded`] and the session fetches it; a core
//!   `tasks/result` on a terminal task answers at once).
//! - **a sticky `cancelled`**: a core client's `tasks/cancel` of an extension task answers a
//!   cancelled `Task` at once (core requires it), so every later core `tasks/get`, listing,
//!   notification and `tasks/result` of it says `cancelled`, whatever the server ends with.
//! - **one poller** per task followed by polling (a core client's blocking `tasks/result`, a
//!   bridged call, `notifications/tasks/status` for a core client whose extension server
//!   sends no notifications): `tasks/get` every `pollIntervalMs` (clamped by configuration,
//!   re-read from every answer, since it may change), on the one deadline mechanism, shared by
//!   all waiters, stopped when the task is terminal or no one waits. A core waiter gets
//!   [`flow::Payload::Pending`] until then; the poll's answer is also the snapshot.
//! - **one upstream `tasks/result`** kept open per task for an extension client in front of a
//!   core server, from the `CreateTaskResult` on: a core server delivers its input requests
//!   on that stream, and its answer is the payload.
//! - **input requests**: for an extension client, the core server's pending requests by a
//!   key the gateway mints (unique over the task's life; upstream JSON-RPC ids can repeat),
//!   each with the upstream request id to answer, and the keys already answered (answers to
//!   a key not outstanding are ignored, as the extension says); for a core client, the
//!   extension server's keys already relayed (a key is relayed once, though every poll
//!   repeats it) and, per relayed request, the id the gateway gave it → (task, key), so that
//!   the client's answer becomes `inputResponses[key]`.
//! - **subscriptions**: for an extension client, which `subscriptions/listen` stream asked
//!   for which task ids, so that a core server's `notifications/tasks/status` reaches only
//!   those streams, as `notifications/tasks` with that stream's subscriptionId.

pub mod caps;
pub mod flow;
pub mod task;

use crate::jsonrpc::{INTERNAL_ERROR, Method, RpcError};

/// The extension's identifier: its key in `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The extension's request carrying the client's input (`{taskId, inputResponses}`).
pub const TASKS_UPDATE: Method = Method::TasksUpdate;
/// The extension's status notification (params: a `DetailedTask`).
pub const EXT_NOTIFICATION: Method = Method::TasksNotification;
/// The core status notification (params: a `Task`).
pub const CORE_NOTIFICATION: Method = Method::TaskStatus;

/// A message of one dialect that cannot become the other's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DialectError {
    /// Not a task: `taskId` or `status` missing or not a string.
    #[error("not a task: {0}")]
    NotATask(&'static str),
    #[error("unknown task status {0:?}")]
    UnknownStatus(String),
    /// A terminal task whose payload (result or error) the gateway has not fetched yet.
    #[error("the task's outcome has not been fetched yet")]
    PayloadNeeded,
    /// A terminal extension task without the inline member its status requires.
    #[error("a {0} task without its inline {1}")]
    MissingInline(&'static str, &'static str),
    /// An input request the other dialect cannot carry.
    #[error("input request: {0}")]
    BadInput(&'static str),
    /// Something one dialect has and the other does not.
    #[error("no counterpart in the other dialect: {0}")]
    NoCounterpart(&'static str),
}

impl DialectError {
    /// What the requester gets: the peer sent something the gateway cannot translate.
    pub fn to_rpc(&self) -> RpcError {
        RpcError::new(INTERNAL_ERROR, format!("cannot translate the task message: {self}"))
    }
}
