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
//! (`shared`), which it joins under its tag.

use crate::config::{HostedMode, RequiredMode, UpstreamConfig};
use crate::gateway::Gateway;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, INVALID_REQUEST, Id, Kind, Message, Method, RpcError};
use crate::mcp::tasks::{self as mcp_tasks, TaskSupport};
use crate::mcp::{ProtocolVersion, shaping};
use crate::tasks::bridge::{Bridge, Ending};
use crate::tasks::hosted::{self, Hosted, hosts};
use crate::upstream::client::{ClientSession, ClientSink, Route};
use crate::upstream::link::{ClientRef, Link, LinkEvents, SessionTag, Shape};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The most `Mcp-Param-*` headers of one request that are read (the rest are ignored).
pub const MAX_PARAM_HEADERS: usize = 64;
use plan::{ByToken, ClientSide, Plan, UpstreamSide};
use state::{ServerRequest, SessionState};

mod by_token;
mod credential;
mod ext_core;
mod ext_follow;
mod ext_tasks;
mod from_upstream;
mod input_rounds;
mod modern_client;
mod modern_listen;
mod modern_owned;
mod modern_rounds;
pub mod modern_state;
mod modern_tasks;
mod owners;
mod param_headers;
mod plan;
mod planned;
mod relink;
mod revive;
mod server_requests;
mod shared;
mod state;
mod tasks;
mod timed;
mod versions;

/// Held while the client's `initialize` runs: if it ends without the session initialized,
/// the session is as before it.
struct Unfinished<'a>(&'a Session);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let mut st = self.0.state.lock().unwrap();
        if st.version.is_none() {
            st.init_params = None;
            st.asked = None;
        }
    }
}

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
    modern: Option<modern_state::ModernClient>,
    /// Whether the session rides its upstream's shared link: with `share = true`, and for a
    /// modern request unless its upstream receives the client's own `Authorization` (then
    /// it has a link of its own, which speaks for that client alone; see `credential`).
    shared: bool,
    /// The by-token dialects its upstream enables, for a legacy client.
    by_token: ByToken,
    /// What each request meets before the plan (decided here, once).
    first_step: plan::FirstStep,
    state: Mutex<SessionState>,
    /// A legacy client's input rounds with a modern upstream, under a lock of their own
    /// (taken after `state` where both are held; see `input_rounds`).
    rounds: input_rounds::InputRounds,
    link: Mutex<Option<Arc<Link>>>,
    /// Held while a link is being (re)started, so only one starts at a time.
    relink: tokio::sync::Mutex<()>,
    /// The client's `Authorization`, which its links send, where the upstream receives it
    /// (`authorization = "pass"`; see `credential`).
    credential: Option<Arc<crate::transport::credential::Credential>>,
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
        Self::build(gateway, upstream, sink, client, owner, None, SessionState::default())
    }

    fn build(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        client: Option<String>,
        owner: String,
        modern: Option<modern_state::ModernClient>,
        state: SessionState,
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
        let by_token = ByToken::of(&upstream, modern.is_some());
        let first_step = plan::FirstStep::of(modern.is_some(), by_token);
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
            first_step,
            state: Mutex::new(SessionState { next_client_side_id: 1, ..state }),
            rounds,
            link: Mutex::new(None),
            relink: tokio::sync::Mutex::new(()),
            credential,
        })
    }

    pub fn upstream_name(&self) -> &str {
        &self.upstream.name
    }

    /// The client's negotiated version, once `initialize` has been answered.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.state.lock().unwrap().version
    }

    fn hosted(&self) -> &Arc<Hosted> {
        &self.gateway.hosted
    }

    /// Request `id` of this session's client, as its link knows it.
    fn client_ref(&self, id: Id) -> ClientRef {
        ClientRef { session: self.tag, id }
    }

    /// Handles one message from the client.
    pub async fn handle(&self, frame: Message) {
        match frame.kind() {
            Kind::Request => self.handle_request(frame).await,
            Kind::Notification => self.handle_notification(frame).await,
            Kind::Response => self.handle_response(frame).await,
        }
    }

    async fn handle_request(&self, frame: Message) {
        let id = frame.id().cloned().expect("requests have ids");
        self.timed.started(&id, frame.method());
        let span = tracing::debug_span!("rpc_request", upstream = %self.upstream.name, method = frame.method_name(), id = %id, session = self.tag);
        self.serve_request(id, frame).instrument(span).await
    }

    async fn serve_request(&self, id: Id, frame: Message) {
        let result = match frame.method() {
            // Boxed: a once-per-session handshake must not size every request's future.
            Method::Initialize if self.modern.is_some() => Err(RpcError::new(
                INVALID_REQUEST,
                "an initialize selects the legacy era: send it without modern _meta",
            )),
            Method::Initialize => Box::pin(self.initialize(id.clone(), frame)).await,
            // The 2026-07-28 probe: refusing it makes SDK clients fall back to `initialize`,
            // which keeps them on a version the gateway speaks.
            Method::ServerDiscover if self.modern.is_some() => Box::pin(self.discover(id.clone())).await,
            Method::ServerDiscover => {
                tracing::info!(upstream = %self.upstream.name, "answered the client's server/discover probe with -32601 (it falls back to initialize)");
                Err(crate::mcp::version::refuse_discover())
            }
            method => {
                if self.version().is_none() {
                    if method == Method::Ping {
                        self.to_client(Message::made(jsonrpc::result_response(&id, json!({}))), Route::Response(id));
                        return;
                    }
                    Err(RpcError::new(
                        INVALID_REQUEST,
                        format!("session not initialized: send initialize before {}", frame.method_name()),
                    ))
                } else {
                    self.dispatch(id.clone(), frame).await
                }
            }
        };
        if let Err(e) = result {
            self.state.lock().unwrap().retry.remove(&id);
            self.to_client(Message::made(e.response(Some(&id))), Route::Response(id));
        }
    }

    /// The session's plan; before any link negotiated, one for an upstream of the newest
    /// legacy version that declared nothing (as the session takes it to be until then).
    fn plan(&self) -> Plan {
        let st = self.state.lock().unwrap();
        st.plan.unwrap_or_else(|| {
            let upstream = UpstreamSide::Legacy(st.upstream_version.unwrap_or(ProtocolVersion::LATEST));
            Plan::new(self.client_side(&st), upstream, &st.upstream_caps, &self.upstream, self.shared)
        })
    }

    /// The client's era, as `st` knows it (a legacy client's version from the moment its
    /// `initialize` arrives).
    fn client_side(&self, st: &SessionState) -> ClientSide {
        match &self.modern {
            Some(_) => ClientSide::Modern,
            None => ClientSide::Legacy(st.version.or(st.asked).unwrap_or(ProtocolVersion::LATEST)),
        }
    }

    /// The client's `initialize`: the link is opened and initialized on the gateway's
    /// behalf, and the client is answered at its own version with what the upstream said
    /// of itself, translated, plus the task capabilities the gateway adds.
    async fn initialize(&self, id: Id, msg: Message) -> Result<(), RpcError> {
        // A client newer than the gateway is offered the newest version the gateway speaks:
        // the gateway must understand what it relays.
        let version = msg
            .param(jsonrpc::Key::ProtocolVersion)
            .and_then(jsonrpc::as_str)
            .and_then(|v| ProtocolVersion::parse(&v))
            .unwrap_or(ProtocolVersion::LATEST);
        {
            let mut st = self.state.lock().unwrap();
            if st.init_params.is_some() {
                return Err(RpcError::new(INVALID_REQUEST, "session already initialized"));
            }
            let mut params = msg.value().get("params").cloned().unwrap_or(json!({}));
            // What the client's version cannot carry is not the client's to declare: the
            // upstream (and the bridge) must not ask it for that.
            if let Some(caps) = params.get_mut("capabilities") {
                crate::mcp::translate::client_capabilities(caps, version);
            }
            st.init_params = Some(params);
            st.asked = Some(version);
        }
        // An initialize that fails, or is dropped before it ends (its POST went away), leaves
        // the session uninitialized: the client may send it again.
        let _unfinished = Unfinished(self);
        let negotiated = {
            let _guard = self.relink.lock().await;
            if self.shared { self.join_shared().await } else { self.open_link().await }
        }?;
        let mut result = negotiated.result;
        if !result.is_object() {
            result = json!({});
        }
        // As the session reads them (`upstream_caps`): capabilities that are not an object are
        // none, and the gateway's own are added to them below.
        if !result.get("capabilities").is_some_and(Value::is_object) {
            result["capabilities"] = json!({});
        }
        result["protocolVersion"] = version.as_str().into();
        let mut resp = jsonrpc::result_response(&id, result);
        // Nothing is refused in an initialize result: it is only stripped.
        let _ = crate::mcp::translate::translate(
            &mut resp,
            Some(crate::jsonrpc::Method::Initialize),
            negotiated.version,
            version,
        );
        if let Some(result) = resp.get_mut("result") {
            // With an extension upstream's tasks translated to core ones (see `ext_core`).
            shaping::initialize_result(
                result,
                version,
                self.upstream.tasks.hosted != HostedMode::Never || negotiated.ext_tasks,
            );
        }
        self.state.lock().unwrap().version = Some(version);
        tracing::debug!(upstream = %self.upstream.name, client = %version, upstream_version = %negotiated.version, "session initialized");
        self.to_client(Message::made(resp), Route::Response(id));
        Ok(())
    }

    async fn handle_notification(&self, frame: Message) {
        if self.by_token.on() && frame.method() == Method::Cancelled {
            Box::pin(self.operation_cancelled(&frame)).await;
            if let Some(id) = frame.request_id_param() {
                self.progress_cancelled(&id);
            }
        }
        // A request waiting on its client's answers to a modern upstream's input requests
        // has nothing upstream to cancel (`input_rounds`), whatever became of the link.
        if self.rounds.cancelled(self, &frame) {
            return;
        }
        let link = self.link.lock().unwrap().clone();
        let Some(link) = link.filter(|l| !l.is_closed()) else {
            // Nothing upstream to tell; a notification never starts a link.
            return;
        };
        let msg = frame;
        if self.modern.is_some() && msg.method() != Method::Cancelled {
            // The era defines no other notification from a client.
            return;
        }
        if self.end_listen(&msg) {
            return;
        }
        match msg.method() {
            // The gateway told the upstream itself, when the link was initialized.
            Method::Initialized => return,
            Method::Cancelled => {}
            _ => {
                if link.is_modern() && self.dropped_by_modern(&msg) {
                    return;
                }
                let Some(msg) = self.upward_notification(msg) else { return };
                if let Err(e) = link.send(msg).await {
                    tracing::debug!(upstream = %self.upstream.name, "notification not delivered: {e}");
                }
                return;
            }
        }
        {
            // The client's initialize is the gateway's to answer, not in flight upstream: a
            // cancel of it finds nothing (the spec forbids cancelling it anyway).
            let Some(client_id) = msg.request_id_param() else { return };
            // A modern request's link knows it by its first id, whichever retry it is now.
            let client_id = self.modern_cancel_target(client_id);
            let reason = msg.value().pointer("/params/reason").cloned();
            // A bridged call is cancelled as the task it is upstream: tasks/cancel.
            // It stays in `bridges` (and counts against the limit) until it has wound down.
            let bridge = self.state.lock().unwrap().bridges.get(&client_id).cloned();
            if let Some(cancel) = bridge {
                cancel.cancel();
                self.sink.abandon(&client_id);
                return;
            }
            // Cancellation follows its request: the upstream hears it once, the slot is
            // freed, and the client gets nothing more for that id. A request no longer in
            // flight has nothing to cancel.
            self.state.lock().unwrap().retry.remove(&client_id);
            if link.cancel_client_request(&self.client_ref(client_id.clone()), reason).await {
                self.sink.abandon(&client_id);
            }
        }
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
    pub fn to_client(&self, msg: Message, route: Route) {
        self.to_client_answering(msg, route, None);
    }

    /// [`Session::to_client`] for a response to a request of method `answers` (one whose
    /// result the version table rewrites; see [`crate::mcp::translate::answered`]).
    pub(super) fn to_client_answering(&self, msg: Message, route: Route, answers: Option<crate::jsonrpc::Method>) {
        let (version, upstream) = {
            let st = self.state.lock().unwrap();
            (st.version.or(st.asked), st.upstream_version.unwrap_or(ProtocolVersion::LATEST))
        };
        let Some(msg) = self.downward(msg, answers, version.map(|v| (v, upstream))) else { return };
        let msg = match version {
            Some(v) => match shaping::for_client(msg, v) {
                Some(m) => m,
                None => return,
            },
            None => msg,
        };
        let (msg, route) = match &self.modern {
            Some(m) => match self.to_modern_client(msg, route, answers, m) {
                Some(m) => m,
                None => return,
            },
            None if self.by_token.on() => (self.by_token_outgoing(msg, &route), route),
            None => (msg, route),
        };
        self.sink.deliver(msg, route);
    }

    /// Ends the session. Its link closes now, or when the last hosted task running on it
    /// ends (a task outlives the session that created it); a shared link lives on for the
    /// other sessions, and only what was this session's goes.
    pub async fn close(&self) {
        self.unpark();
        let bridges: Vec<CancellationToken> = {
            let mut st = self.state.lock().unwrap();
            st.closed = true;
            st.bridges.drain().map(|(_, c)| c).collect()
        };
        // After `closed`: an operation still starting is not recorded, but stopped.
        if self.by_token.on() {
            Box::pin(self.end_by_token()).await;
        }
        // A bridged call's upstream task is cancelled when its session ends (a client that
        // only disconnected from a stream has not cancelled).
        for c in bridges {
            c.cancel();
        }
        Box::pin(self.end_ext_tasks()).await; // boxed: rare, and reached from request paths
        self.rounds.end();
        let link = self.link.lock().unwrap().take();
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
