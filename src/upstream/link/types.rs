//! The link's types: the handle sessions hold ([`Link`]), the part the transport calls into
//! ([`LinkCore`]), who waits for what ([`LinkState`]), the sessions it serves (by
//! [`SessionTag`]; a client request is a [`ClientRef`]), and the traits of those the link
//! reports to ([`LinkEvents`], [`TaskCalls`], [`TaskFollower`], [`RelayedTaskEvents`]). Their behaviour is in the
//! sibling modules: `outbound` (what goes upstream), `inbound` (what comes back), `routes`
//! (where server messages and progress go) and `share` (what a shared link adds).

use super::error::CloseReason;
use crate::clock::Deadlines;
use crate::config::ServerConfig;
use crate::jsonrpc::{Id, Message, ProgressToken, TaskId};
use crate::locks::Mutex;
use crate::transport::http_client::HttpClient;
use crate::upstream::connect::Upstream;
use crate::upstream::progress::ProgressGate;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How a forwarded request's response is shaped on its way back: the session's choice,
/// which the link carries with the request and hands back with its response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    AsIs,
    ToolsList,
    /// A `tasks/list` page from the upstream, continuing the gateway's own pages.
    UpstreamTaskPage,
    /// A modern upstream's `server/discover` result, answering a modern client: the versions
    /// listed are those the gateway serves on this endpoint.
    Discover,
    /// A plain `tools/call` that may come back saying it must be a task (then it is retried
    /// as a bridged call, once).
    MayNeedTask,
}

/// A session's tag, unique in the process: how a link tells the sessions it serves apart.
pub type SessionTag = u64;

/// A client request as a link knows it: the session that sent it and its id there. Sessions
/// of one shared link may use the same ids; their requests never meet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientRef {
    pub session: SessionTag,
    pub id: Id,
}

/// What a link reports to its session. All calls are synchronous and short.
pub trait LinkEvents: Send + Sync + 'static {
    /// The response to a client request, already carrying the client's id. `answers`: the
    /// request's method, when its result is one the version table rewrites.
    fn response(&self, client_id: Id, msg: Message, shape: Shape, answers: Option<crate::jsonrpc::Method>);
    /// A request from the server (sampling, elicitation, roots, ping). `related` is the client
    /// request it belongs to, when known.
    fn server_request(&self, link: &Arc<Link>, upstream_id: Id, msg: Message, related: Option<Id>);
    /// A notification from the server; `related` as above.
    fn notification(&self, msg: Message, related: Option<Id>);
    /// The connection died; everything in flight has already been answered with an error.
    fn closed(&self, generation: u64, reason: &CloseReason);
    /// Who the session's requests are for (the principal, else the session or, for modern
    /// clients, the upstream's one owner): a question the server sends is never placed by
    /// elimination with another owner's request given up on (`LinkState::abandoned`).
    fn owner(&self) -> &str;
}

/// The subscriber for the background calls of hosted tasks: what the link hears for a call
/// started with [`Link::start_task_call`], by task id.
pub trait TaskCalls: Send + Sync + 'static {
    /// The call's response (or the error it failed with: timeout, lost connection).
    fn outcome(&self, task_id: &str, msg: Value);
    /// Progress under the call's token, already through the progress discipline.
    fn progress(&self, task_id: &str, msg: Value);
    /// A request the server sent while serving the call (elicitation, sampling).
    fn input_request(&self, task_id: &str, link: &Arc<Link>, upstream_id: Id, msg: Value);
    /// A response the gateway would send a modern upstream, which takes none (its server
    /// sends no requests): the answer to an input request of a round a call was answered
    /// with (multi round-trip), under the id its subscriber gave that input request.
    fn input_answer(&self, answer: Value);
    /// The owner of running task `task_id` (see [`LinkEvents::owner`]), if known.
    fn owner(&self, task_id: &str) -> Option<Arc<str>>;
}

/// The subscriber for upstream tasks relayed to clients that know them by an id of the
/// gateway's (`tasks::relayed`): what the server sends naming such a task (a question tagged
/// with related-task, a status notification) goes to it, whichever request's stream carried
/// it. Asked only on shared links, where those tasks are made. Calls must not block.
pub trait RelayedTaskEvents: Send + Sync + 'static {
    /// Whether upstream task `task_id` of `link` is one of its.
    fn relays(&self, link: &Link, task_id: &str) -> bool;
    /// A question the server asks during such a task.
    fn input_request(&self, link: &Arc<Link>, task_id: &str, upstream_id: Id, msg: Value);
    /// A `notifications/tasks/status` for such a task (`task`: its params).
    fn status(&self, link: &Arc<Link>, task_id: &str, task: Value);
}

/// A subscriber that follows one upstream task (a bridged call), from
/// [`Link::start_bridge`] to [`Link::end_bridge`]. Calls are synchronous and must not block.
pub trait TaskFollower: Send + Sync + 'static {
    /// A `notifications/tasks/status` for the task.
    fn status(&self, note: Value);
    /// Progress arrived under the call's token (a sign of life).
    fn progress(&self);
}

/// What a link needs of the gateway that opens it.
#[derive(Clone)]
pub struct LinkEnv<'a> {
    pub http: &'a HttpClient,
    /// One place per open link (`max_links`, and `max_links_per_client` for `client`).
    pub permits: &'a Arc<crate::client_slots::ClientSlots>,
    /// Whose the link is, for `max_links_per_client` (`None`: nobody's, a shared link).
    pub client: Option<&'a str>,
    pub limits: &'a ServerConfig,
    /// Where hosted tasks' calls report.
    pub tasks: Arc<dyn TaskCalls>,
    /// Where what concerns relayed upstream tasks goes.
    pub relayed: Arc<dyn RelayedTaskEvents>,
    /// The client's `Authorization`, for an HTTP upstream that receives it (a session's
    /// own link to an upstream with `authorization = "pass"`).
    pub credential: Option<Arc<crate::transport::credential::Credential>>,
}

/// Where progress for a token goes.
#[derive(Clone, Debug)]
pub(super) enum Dest {
    Client(ClientRef),
    Task(Arc<str>),
}

pub(super) enum Waiter {
    /// A client request: the session and id to restore, how to shape its response, and its
    /// method if the version table rewrites its result.
    Client { client: ClientRef, shape: Shape, answers: Option<crate::jsonrpc::Method> },
    /// The background call of a hosted task, and whose share of a shared link it holds.
    Task { task_id: Arc<str>, share: Option<Arc<str>> },
    /// A request the gateway made itself; what arrives related to it belongs to the client
    /// request `on_behalf_of`, if any (a bridged call's `tasks/result`).
    Internal { tx: oneshot::Sender<Value>, on_behalf_of: Option<ClientRef> },
}

pub(super) struct Pending {
    pub(super) waiter: Waiter,
    pub(super) token: Option<ProgressToken>,
    /// The upstream task a client's `tasks/get|result|cancel` names, and whether it is
    /// `tasks/result`: its answer may show the task ended.
    pub(super) about_task: Option<(TaskId, bool)>,
    /// Whose request it is, where a shared link places server messages by elimination
    /// (else `None`, also for the gateway's own requests).
    pub(super) owner: Option<Arc<str>>,
    /// On a shared link, the client whose share of `max_in_flight` it counts against.
    pub(super) client_key: Option<Arc<str>>,
    /// A `subscriptions/listen` on a modern link: a stream that lasts as long as its client
    /// keeps it (no deadlines), and the only request a server's stream tag may name.
    pub(super) listens: bool,
}

/// A progress token's route. Owned by a pending request (`owner`), or held by a bridged
/// call for the whole life of its upstream task (`owner: None`).
pub(super) struct TokenRoute {
    pub(super) dest: Dest,
    pub(super) gate: ProgressGate,
    pub(super) owner: Option<i64>,
    /// The bridged call following the task this token's call created.
    pub(super) activity: Option<Arc<dyn TaskFollower>>,
    /// The upstream sent progress under this token: the gateway makes up none.
    pub(super) upstream_progress: bool,
    /// On a shared link, the client's own token (the route's key is the link's, which the
    /// upstream sees).
    pub(super) client_token: Option<ProgressToken>,
}

/// A bridged client call following its upstream task.
pub(super) struct Bridged {
    pub(super) client: ClientRef,
    pub(super) follower: Arc<dyn TaskFollower>,
    /// The key of its progress route (the link's token on a shared link), if it has one.
    pub(super) token: Option<ProgressToken>,
}

#[derive(Default)]
pub(super) struct LinkState {
    pub(super) next_id: i64,
    pub(super) pending: HashMap<i64, Pending>,
    pub(super) by_client_id: HashMap<ClientRef, i64>,
    /// Progress token → where its notifications go.
    pub(super) tokens: HashMap<ProgressToken, TokenRoute>,
    /// Upstream task id → the bridged client call following it.
    pub(super) bridges: HashMap<TaskId, Bridged>,
    /// Upstream task id → the progress token (key of `tokens`) its task-augmented call
    /// carried, kept until the task ends (or its ttl passes): the token stays in use for
    /// the task's whole life.
    pub(super) task_tokens: HashMap<TaskId, (ProgressToken, Instant)>,
    /// On a shared link that places server messages by elimination (a line stream), the
    /// requests the gateway gave up on (cancelled, timed out, their session ended), until
    /// when the upstream may still be serving them, and whose they were: while one of
    /// another owner's may be, nothing is placed by elimination, since what comes could be
    /// that request's and the one left in flight another owner's. (One of the same owner's
    /// is no reason to refuse: nothing would reach anyone who could not see it anyway.)
    pub(super) abandoned: HashMap<i64, (Instant, Option<Arc<str>>)>,
    /// Hosted tasks whose background call runs on this link.
    pub(super) tasks_running: usize,
    /// The session ended while tasks ran: close once the last one ends.
    pub(super) close_when_idle: bool,
    pub(super) closed: Option<CloseReason>,
    /// When the connection died (for the backoff before the next).
    pub(super) closed_at: Option<Instant>,
    /// The sessions this link serves: one, or (shared) all of its upstream's.
    pub(super) sessions: HashMap<SessionTag, Weak<dyn LinkEvents>>,
    /// What only a shared link keeps.
    pub(super) shared: Option<Box<Shared>>,
    /// On a modern link, the listen holding its legacy sessions' resource subscriptions.
    pub(super) resource_listen: ResourceListen,
}

/// What only a shared link keeps, under the link's lock.
#[derive(Default)]
pub(super) struct Shared {
    /// (session, the client's token) → the link's token its request went upstream with.
    pub(super) client_tokens: HashMap<(SessionTag, ProgressToken), ProgressToken>,
    /// Resource uri → the sessions subscribed to it.
    pub(super) subscribers: HashMap<String, Vec<SessionTag>>,
    /// Subscriptions per session (each at most the limit `Link::subscribe` is given).
    pub(super) subscriptions: HashMap<SessionTag, usize>,
    /// Resource uri → the lock that a subscribe or unsubscribe of it holds from its decision
    /// until the upstream answered, so that each decides on the last one's outcome (kept
    /// while one holds it).
    pub(super) subscription_gates: HashMap<String, Weak<tokio::sync::Mutex<()>>>,
    /// Session → the client it is (a principal, else the session itself), whose requests in
    /// flight count against one share (`max_in_flight_per_client`).
    pub(super) client_keys: HashMap<SessionTag, Arc<str>>,
    /// Client → its requests in flight (those above zero).
    pub(super) in_flight_by_client: HashMap<Arc<str>, usize>,
    /// Upstream task → the session whose request created it, and when (for eviction).
    pub(super) task_owners: HashMap<TaskId, (SessionTag, u64)>,
    pub(super) next_owned: u64,
}

/// The part of a link that the transport calls into.
pub struct LinkCore {
    pub generation: u64,
    pub(super) upstream: Arc<str>,
    pub(super) state: Mutex<LinkState>,
    /// `state.closed` is set: what every request asks of its link, read without the lock.
    pub(super) is_closed: std::sync::atomic::AtomicBool,
    /// It serves every session of its upstream (`share = true`).
    pub(super) shared: bool,
    pub(super) tasks: Arc<dyn TaskCalls>,
    pub(super) relayed: Arc<dyn RelayedTaskEvents>,
    pub(super) link: OnceLock<Weak<Link>>,
    pub(super) progress_pace: crate::upstream::progress::Pace,
    /// A line stream (a stdio child, the in-process demo) says nothing about which request a
    /// server message belongs to; with exactly one request in flight, it belongs to that one.
    /// Set from the configured transport, and again once the handshake showed which one
    /// `auto` chose.
    pub(super) infer_related: std::sync::atomic::AtomicBool,
    /// Passed-through tasks whose progress route is kept at once.
    pub(super) max_task_routes: usize,
    /// This link's place among `max_links`, given back when it closes.
    pub(super) permit: Mutex<Option<crate::client_slots::Slot>>,
    /// `request_timeout` and `max_request_time` of the requests in flight, by upstream id.
    pub(super) deadlines: Arc<Deadlines<i64>>,
    /// Progress the gate holds back, by token: sent when its interval has passed.
    pub(super) held: Arc<Deadlines<ProgressToken>>,
}

pub struct Link {
    pub(super) core: Arc<LinkCore>,
    pub(super) conn: Upstream,
    pub(super) max_in_flight: usize,
    /// On a shared link, the requests in flight one client may hold.
    pub(super) client_share: usize,
    /// Bounds the requests the gateway makes on its own account (listings, task polls).
    pub(super) request_timeout: Duration,
    /// Set while the link speaks the modern era (from its `server/discover` probe on).
    pub(super) modern: ModernState,
}

/// The link's era and, when modern, the fields its requests carry.
#[derive(Default)]
pub struct ModernState {
    pub(super) on: std::sync::atomic::AtomicBool,
    pub(super) meta: Mutex<Option<crate::mcp::modern::meta::RequestMeta>>,
    /// Tool name → its `x-mcp-header` declarations (`Link::learn_param_headers`), on a link
    /// of either era: a modern link sends them, and for a legacy one the gateway is the
    /// server that checks what a modern client sends.
    pub(super) param_headers: Mutex<HashMap<String, Arc<crate::mcp::modern::headers::ParamHeaders>>>,
    /// A listing's last page was learned: a tool not in `param_headers` declares nothing.
    pub(super) listed: std::sync::atomic::AtomicBool,
}

impl Drop for LinkCore {
    fn drop(&mut self) {
        // Its timeout task ends with it.
        self.deadlines.close();
    }
}

/// What a modern link listens to for its legacy sessions (resource subscriptions, list
/// changes), under the link's lock (`resource_listen`).
#[derive(Default)]
pub(super) struct ResourceListen {
    /// The uris some session of the link holds.
    pub(super) uris: std::collections::BTreeSet<String>,
    /// The list changes the link's legacy sessions are told of (those the server declares),
    /// asked for once a legacy session is on the link, for the link's life; no uris.
    pub(super) lists: crate::mcp::modern::client::ListenFilter,
    /// The listens open, by number (the newest last): the one serving (acknowledged), and
    /// those opened since and not yet answered.
    pub(super) open: std::collections::BTreeMap<u64, OpenListen>,
    /// The number of the listen serving, if one is.
    pub(super) serving: Option<u64>,
    /// Listens opened so far: the newest is the `opened`-th.
    pub(super) opened: u64,
    /// How long to wait before the next listen after one ended or failed (doubling while
    /// they keep ending soon; zero: the first wait).
    pub(super) backoff: std::time::Duration,
    /// What became of the listens opened.
    pub(super) outcomes: tokio::sync::watch::Sender<Outcomes>,
}

/// One listen of [`ResourceListen`].
pub(super) struct OpenListen {
    /// Its task, which holds the request.
    pub(super) task: tokio::task::AbortHandle,
    /// Its upstream id, once registered.
    pub(super) up_id: Option<i64>,
    /// Whether it names the list changes (it was opened after they were asked for).
    pub(super) lists: bool,
}

impl Drop for ResourceListen {
    fn drop(&mut self) {
        for o in self.open.values() {
            o.task.abort();
        }
    }
}

/// What became of a link's resource listens: the newest acknowledged, and those refused
/// (the last few, each with why).
#[derive(Clone, Default)]
pub(super) struct Outcomes {
    pub(super) acknowledged: u64,
    pub(super) refused: std::collections::BTreeMap<u64, String>,
}
