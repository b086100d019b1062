//! One downstream session: the client's negotiated version and capabilities, its current
//! upstream link, and the routing of every message between the two.
//!
//! The client and the upstream negotiate their versions apart: the client with the session
//! (its `initialize` is answered by the gateway, from what the upstream said of itself), the
//! upstream with the link (the gateway's own `initialize`). The session answers what the
//! gateway answers itself (`server/discover`, `initialize`, hosted tasks), translates every
//! message between the two versions (`versions`), forwards the rest through its link, maps
//! the ids of requests the server sends the client, and replaces a dead link with a fresh
//! one on the client's next request. Its link is its own, or its upstream's shared link
//! (`crate::gateway::shared`), which it joins under its tag (`relink`; what a session does
//! differently there is `dispatch::shared`).

use crate::config::{HostedMode, RequiredMode, UpstreamConfig};
use crate::gateway::Gateway;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, INVALID_REQUEST, Id, Kind, Message, Method, RpcError};
use crate::locks::Mutex;
use crate::mcp::task_messages;
use crate::mcp::{ProtocolVersion, shaping};
use crate::tasks::hosted::{self, Hosted, hosts};
use crate::upstream::client::{ClientSession, ClientSink, Route};
use crate::upstream::link::{ClientRef, Link, LinkEvents, SessionTag, Shape};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The most `Mcp-Param-*` headers of one request that are read (the rest are ignored).
pub const MAX_PARAM_HEADERS: usize = 64;
/// The modern requests a front has parked for their client's input (see `modern_client`).
pub use modern_client::state::ParkedRequests;
use plan::{ByToken, ClientSide, Plan, UpstreamSide};
use sides::{Sides, SidesCell};
use state::{ServerRequest, SessionState};

mod bridged_calls;
mod by_token;
mod contexts;
mod dispatch;
mod ext;
mod from_upstream;
mod input_rounds;
mod long_calls;
mod modern_client;
mod plan;
mod policy;
mod principal_tasks;
mod reach;
mod relink;
mod sides;
mod state;
mod timed;
mod tools;
mod versions;

/// Tool listings are cached per session for task decisions; this bounds the cache.
const MAX_CACHED_TOOLS: usize = 10_000;
/// `tools/list` pages read for one task decision.
const MAX_LISTING_PAGES: usize = 10;
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Upstream task ids remembered per session for status notifications.
const MAX_KNOWN_TASKS: usize = 1024;
const CURSOR_UPSTREAM: &str = "up:";
/// How owners and clients named by authentication begin (others are random ids).
const PRINCIPAL_PREFIX: &str = "principal:";

pub struct Session {
    gateway: Arc<Gateway>,
    upstream: Arc<UpstreamConfig>,
    sink: Arc<dyn ClientSink>,
    /// `sink`, counting and timing each request until its response.
    timed: Arc<timed::TimedSink>,
    /// Whose tasks these are: the session itself, or with authentication its principal's
    /// (on this upstream).
    owner: String,
    /// What the progress states are keyed by: `owner`, or for a principal's session (whose
    /// owner its other sessions share) an id of its own.
    owner_key: Arc<str>,
    /// Who the client is, for per-client limits: its remote address (HTTP) until
    /// authentication exists.
    client: String,
    me: Weak<Session>,
    /// How links tell this session apart from the others (a shared link serves many).
    tag: SessionTag,
    /// A session for one request of a modern (2026-07-28) client: that request's `_meta`
    /// (see `modern_client`).
    modern: Option<modern_client::state::ModernClient>,
    /// Whether the session rides its upstream's shared link: with `share = true`, and for a
    /// modern request unless its upstream receives the client's own `Authorization` (then
    /// it has a link of its own, which speaks for that client alone; see the `credential` field).
    shared: bool,
    /// The by-token dialects its upstream enables, for a legacy client (`None`: none).
    by_token: Option<by_token::state::Dialects>,
    /// Long calls for a client without tasks, where its upstream turns them on.
    long_calls: Option<long_calls::state::LongCalls>,
    /// Who its client is authenticated as, for the tool policy (`[upstream.tools]`), which
    /// is read from the gateway's live config at each request (a reload applies at once).
    principal: Option<Arc<str>>,
    /// Whose rate-limit bucket its calls take from: the principal's with authentication,
    /// else the session's own (a legacy client), or its address (a 2026-07-28 client, which
    /// has no session).
    rate_key: Arc<str>,
    /// What each request meets before the plan (decided here, once).
    first_step: plan::FirstStep,
    state: Mutex<SessionState>,
    /// The next id of a request the gateway sends the client (the upstream's, mapped, and
    /// its own input requests).
    client_side_ids: std::sync::atomic::AtomicI64,
    /// Both sides' handshakes, the negotiated versions and the plan, read by every message
    /// without a lock (and changed under `state`'s; see `sides`).
    sides: SidesCell,
    /// What the session learned of its upstream's tools (see `tools`).
    tools: tools::ToolSupport,
    /// Its calls that follow an upstream task (see `bridged_calls`).
    bridged_calls: bridged_calls::BridgedCalls,
    /// The extension-tasks strategy, and what it keeps (see `ext`; its lock is taken after
    /// `state`, never before).
    ext: ext::ExtTasks,
    /// A legacy client's input rounds with a modern upstream, under a lock of their own
    /// (they take none of the session's; see `input_rounds`).
    rounds: input_rounds::InputRounds,
    /// Its current link, read by every request without a lock.
    link: arc_swap::ArcSwapOption<Link>,
    /// Held while a link is being (re)started, so only one starts at a time.
    relink: tokio::sync::Mutex<()>,
    /// The client's `Authorization`, which its links send, where the upstream receives it
    /// (`authorization = "pass"`): one for the session, which each of its links sends, and
    /// which the front sets from each request's header ([`Session::present_authorization`]),
    /// so the upstream hears the client's latest token. Such a session never rides a shared
    /// link: what goes up on it speaks for this client only.
    credential: Option<Arc<crate::transport::credential::Credential>>,
    /// Its upstream was removed by a reload: the fronts take no new request of it, only
    /// what finishes those in flight (see [`Session::drain`]).
    draining: std::sync::atomic::AtomicBool,
}

impl Session {
    pub fn new(gateway: Arc<Gateway>, upstream: Arc<UpstreamConfig>, sink: Arc<dyn ClientSink>) -> Arc<Session> {
        Self::for_client(gateway, upstream, sink, None)
    }

    /// A session of client `client` (its identity for per-client limits; `None`: the
    /// session is a client of its own).
    pub fn for_client(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        client: Option<String>,
    ) -> Arc<Session> {
        let owner = crate::random::id128();
        Self::build(gateway, upstream, sink, client, owner, None, Default::default())
    }

    /// A session serving modern request `id`, whose `_meta` is `meta`, answered on `sink`
    /// (and, after multi round-trips, on the sinks of its retries); `parked` is its front's
    /// (see `modern_client`).
    pub fn for_modern_request(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        who: crate::upstream::client::Requester<'_>,
        meta: crate::mcp::modern::meta::RequestMeta,
        id: Id,
        parked: Arc<ParkedRequests>,
    ) -> Arc<Session> {
        use crate::upstream::client::Requester;
        let (owner, client) = match who {
            Requester::Principal(p) => (Self::owner_of(p, &upstream.name), Some(format!("{PRINCIPAL_PREFIX}{p}"))),
            Requester::Anonymous(client) => (Self::modern_owner(None, &upstream.name), client),
        };
        let sides = Sides {
            version: Some(ProtocolVersion::LATEST),
            init_params: Some(Arc::new(crate::mcp::modern::client::init_params(&meta.capabilities))),
            ..Sides::default()
        };
        let client_side = modern_client::state::ModernClient::new(meta, sink, id, parked);
        let sink: Arc<dyn ClientSink> = client_side.rounds.clone();
        Self::build(gateway, upstream, sink, client, owner, Some(client_side), (SessionState::default(), sides))
    }

    /// Who owns a modern client's tasks on `upstream`: its principal, or without
    /// authentication every modern client there (their ids are bearer tokens).
    fn modern_owner(principal: Option<&str>, upstream: &str) -> String {
        match principal {
            Some(p) => Self::owner_of(p, upstream),
            None => format!("modern:{upstream}"),
        }
    }

    /// A session of an authenticated principal: its tasks are the principal's on this
    /// upstream (every session of the principal sees them, and no other), and its limits
    /// per client count all the principal's sessions.
    pub fn for_principal(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        principal: &str,
    ) -> Arc<Session> {
        let owner = Self::owner_of(principal, &upstream.name);
        let client = Some(format!("{PRINCIPAL_PREFIX}{principal}"));
        Self::build(gateway, upstream, sink, client, owner, None, Default::default())
    }

    /// The client identity of principal `principal`'s sessions (for per-client limits).
    pub fn principal_client(principal: &str) -> String {
        format!("{PRINCIPAL_PREFIX}{principal}")
    }

    /// Whether `owner` is a principal's (see [`Session::owner_of`]).
    pub fn is_principal_owner(owner: &str) -> bool {
        owner.starts_with(PRINCIPAL_PREFIX)
    }

    /// Who owns the tasks principal `principal` makes through `upstream`.
    pub fn owner_of(principal: &str, upstream: &str) -> String {
        format!("{PRINCIPAL_PREFIX}{upstream}:{principal}")
    }

    /// The principal's tasks on a modern upstream, if the session is bound to a principal
    /// (see `principal_tasks`).
    fn principal_tasks(&self) -> Option<principal_tasks::PrincipalTasks<'_>> {
        Self::is_principal_owner(&self.owner)
            .then(|| principal_tasks::PrincipalTasks::new(&self.gateway.upstream_owners, &self.upstream, &self.owner))
    }

    fn build(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        client: Option<String>,
        owner: String,
        modern: Option<modern_client::state::ModernClient>,
        (state, sides): (SessionState, Sides),
    ) -> Arc<Session> {
        static NEXT_TAG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let tag = NEXT_TAG.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A principal's sessions share its tasks, not their progress tokens.
        let owner_key =
            if owner.starts_with(PRINCIPAL_PREFIX) { crate::random::id128().into() } else { owner.as_str().into() };
        let timed =
            timed::TimedSink::new(sink, gateway.upstream_metrics(&upstream.name), gateway.limits().max_in_flight);
        let pass = upstream.authorization == crate::config::ClientAuthorization::Pass;
        let credential: Option<Arc<crate::transport::credential::Credential>> = pass.then(Default::default);
        let shared = upstream.share || (modern.is_some() && credential.is_none());
        let dialects = ByToken::of(&upstream, modern.is_some());
        let long_calls = long_calls::state::LongCalls::of(&upstream);
        let principal = client
            .as_deref()
            .and_then(|c| c.strip_prefix(PRINCIPAL_PREFIX))
            .filter(|_| Self::is_principal_owner(&owner))
            .map(Arc::from);
        let rate_key: Arc<str> = match &client {
            Some(c) if Self::is_principal_owner(&owner) || modern.is_some() => c.as_str().into(),
            _ => owner.as_str().into(),
        };
        let first_step = plan::FirstStep::of(modern.is_some(), dialects.on() || long_calls.is_some());
        let by_token = by_token::state::Dialects::of(dialects);
        let rounds = input_rounds::InputRounds::new(&upstream);
        Arc::new_cyclic(|me| Session {
            sink: timed.clone(),
            timed,
            gateway,
            upstream,
            client: client.unwrap_or_else(|| owner.clone()),
            owner_key,
            owner,
            me: me.clone(),
            tag,
            modern,
            shared,
            by_token,
            long_calls,
            principal,
            rate_key,
            first_step,
            state: Mutex::new(state),
            client_side_ids: std::sync::atomic::AtomicI64::new(1),
            sides: SidesCell::new(sides),
            tools: tools::ToolSupport::default(),
            bridged_calls: bridged_calls::BridgedCalls::default(),
            ext: ext::ExtTasks::default(),
            rounds,
            link: arc_swap::ArcSwapOption::empty(),
            relink: tokio::sync::Mutex::new(()),
            credential,
            draining: Default::default(),
        })
    }

    pub fn upstream_name(&self) -> &str {
        &self.upstream.name
    }

    /// The settings it was made with (a reload may have changed its upstream's since).
    pub fn upstream_config(&self) -> &Arc<UpstreamConfig> {
        &self.upstream
    }

    /// Its upstream was removed by a reload: from now on its fronts refuse its client's new
    /// requests (404), and take only answers, notifications and streams, until the requests
    /// in flight are answered and the session ends.
    pub fn drain(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The client's negotiated version, once `initialize` has been answered.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.sides.now().version
    }

    fn hosted(&self) -> &Arc<Hosted> {
        &self.gateway.hosted
    }

    /// A new id for a request the gateway sends the client.
    fn next_client_side_id(&self) -> Id {
        Id::Num(self.client_side_ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// Request `id` of this session's client, as its link knows it.
    fn client_ref(&self, id: Id) -> ClientRef {
        ClientRef { session: self.tag, id }
    }

    /// Handles one message from the client.
    pub async fn handle(&self, frame: Message) {
        match frame.kind() {
            Kind::Request => self.handle_request(frame).await,
            // Boxed, as every branch off the call's way: a future is moved whole, and the
            // largest branch sizes every call's.
            Kind::Notification => Box::pin(self.handle_notification(frame)).await,
            Kind::Response => Box::pin(self.handle_response(frame)).await,
        }
    }

    /// The session's plan (see [`Sides::plan`]).
    fn plan(&self) -> Plan {
        self.plan_of(&self.sides.now())
    }

    /// [`Session::plan`], of `sides`.
    fn plan_of(&self, sides: &Sides) -> Plan {
        sides.plan(self.modern.is_some(), &self.upstream, self.shared)
    }

    /// (client, upstream) versions, from the moment the client's `initialize` arrives (the
    /// upstream's the newest the gateway offers until a link has negotiated).
    fn versions(&self) -> Option<(ProtocolVersion, ProtocolVersion)> {
        self.sides.now().versions()
    }

    /// The crossing between the two versions as they are now (see `versions`).
    fn crossing(&self) -> versions::Crossing<'_> {
        let sides = self.sides.now();
        versions::Crossing::new(sides.versions(), self.plan_of(&sides), &self.upstream.name)
    }

    /// The response to client request `id`, made from a tree (a task's stored outcome, a
    /// bridged call's answer): -32603 if the tree is not a message. `answers` as for
    /// [`Session::to_client_answering`].
    pub(super) fn answer(&self, id: Id, resp: Value, answers: Option<crate::jsonrpc::Method>) {
        let msg = Message::from_value(resp).unwrap_or_else(|r| {
            let why = format!("the answer could not be sent: {}", r.error.message);
            Message::made(RpcError::new(jsonrpc::INTERNAL_ERROR, why).response(Some(&id)))
        });
        self.to_client_answering(msg, Route::Response(id), answers);
    }

    /// Everything for the client passes here (requests first through
    /// [`Session::relay_server_request`]): translated to the client's version, and shaped.
    /// The gateway changed what the client may see of the tools (a reload of the tool
    /// policy): an initialized legacy session is sent `notifications/tools/list_changed`.
    /// `false` when there is nobody to tell (not initialized yet, draining, or a 2026-07-28
    /// request, which lists afresh each time).
    pub fn tools_changed(&self) -> bool {
        if self.modern.is_some() || self.version().is_none() || self.is_draining() {
            return false;
        }
        let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        self.to_client(Message::made(note), Route::Unrelated);
        true
    }

    pub fn to_client(&self, msg: Message, route: Route) {
        self.to_client_answering(msg, route, None);
    }

    /// [`Session::to_client`] for a response to a request of method `answers` (one whose
    /// result the version table rewrites; see [`crate::mcp::translate::answered`]).
    pub(super) fn to_client_answering(&self, msg: Message, route: Route, answers: Option<crate::jsonrpc::Method>) {
        let crossing = self.crossing();
        let Some(msg) = crossing.down(msg, answers) else { return };
        let msg = match crossing.client() {
            Some(v) => match shaping::for_client(msg, v) {
                Some(m) => m,
                None => return,
            },
            None => msg,
        };
        let (msg, route) = match &self.modern {
            Some(client) => match client.to_client(self, msg, route, answers) {
                Some(m) => m,
                None => return,
            },
            None => match &self.by_token {
                Some(dialects) => (dialects.outgoing(self, msg, &route), route),
                None => (msg, route),
            },
        };
        self.sink.deliver(msg, route);
    }

    /// The client's request carried these `Mcp-Param-*` headers (name, value), at most
    /// [`MAX_PARAM_HEADERS`]. Called by an HTTP front before it hands a modern request over
    /// (see `modern_client::param_headers`).
    pub fn present_param_headers(&self, mut headers: Vec<(String, Vec<u8>)>) {
        headers.truncate(MAX_PARAM_HEADERS);
        if let Some(client) = &self.modern {
            client.present_param_headers(headers);
        }
    }

    /// The client's request carried this `Authorization` (`None`: none): requests the
    /// session sends upstream from now on carry it, where the upstream receives the
    /// client's (see the `credential` field). Called by the front before it hands the request over.
    pub fn present_authorization(&self, value: Option<&str>) {
        if let Some(c) = &self.credential {
            c.set(value);
        }
    }

    /// The modern request parked under `token` on `upstream` in `parked`, taken out, if it
    /// is `principal`'s (or, without authentication, anyone's there).
    pub fn take_parked(
        parked: &ParkedRequests,
        token: &str,
        upstream: &str,
        principal: Option<&str>,
    ) -> Option<Arc<Session>> {
        let owner = Self::modern_owner(principal, upstream);
        parked.take(token, &owner)?.downcast::<Session>().ok()
    }

    /// The client's retry of this parked modern request (`frame`, on `sink`; see
    /// `modern_client::rounds`).
    pub async fn resume(&self, sink: Arc<dyn ClientSink>, frame: Message) {
        if let Some(client) = &self.modern {
            client.resume(self, sink, frame).await;
        }
    }

    /// The end of round `id` of a modern request (its POST, or its line's answer): the
    /// session ends, unless it is parked or a later round (a retry) is its now.
    pub async fn end_round(&self, id: &Id) {
        if self.modern.as_ref().is_none_or(|client| client.ends_with_round(id)) {
            self.close().await;
        }
    }

    /// Whether `id` is the id the client knows this modern request by now (its current round).
    pub fn is_round(&self, id: &Id) -> bool {
        self.modern.as_ref().is_none_or(|client| client.is_round(id))
    }

    /// The gateway shuts down: a modern request's open `subscriptions/listen` stream ends,
    /// saying it ended on purpose. `false` if the request is no open listen.
    pub fn end_listen_for_shutdown(&self) -> bool {
        self.modern.as_ref().is_some_and(|client| client.end_listen_for_shutdown(self))
    }

    /// Ends the session. Its link closes now, or when the last hosted task running on it
    /// ends (a task outlives the session that created it); a shared link lives on for the
    /// other sessions, and only what was this session's goes.
    pub async fn close(&self) {
        if let Some(client) = &self.modern {
            client.unpark();
            // A hosted call the client was still waiting on, and whose task it never learned.
            let undecided = client.deciding.lock().unwrap().take();
            if let Some(task) = undecided {
                let _ = self.hosted().cancel(&task).await;
            }
        }
        let bridged: Vec<CancellationToken> = {
            // Under the session's lock, as `closed` is set: see `bridged_calls` for the order.
            let mut st = self.state.lock().unwrap();
            st.closed = true;
            self.bridged_calls.drain()
        };
        // After `closed`: an operation still starting is not recorded, but stopped.
        if let Some(dialects) = &self.by_token {
            Box::pin(dialects.end(self)).await;
        }
        if let Some(calls) = &self.long_calls {
            Box::pin(calls.end(self)).await;
        }
        // A bridged call's upstream task is cancelled when its session ends (a client that
        // only disconnected from a stream has not cancelled).
        for c in bridged {
            c.cancel();
        }
        Box::pin(self.ext.end(self)).await; // boxed: rare, and reached from request paths
        self.rounds.end();
        let link = self.link.swap(None);
        match link {
            Some(link) if link.is_shared() => link.detach(self.tag),
            Some(link) => link.close_when_idle().await,
            None => {}
        }
        if self.shared {
            self.refuse_unanswered();
        }
    }
}
