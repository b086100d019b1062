//! One downstream session: the client's negotiated version and capabilities, its current
//! upstream link, and the routing of every message between the two.
//!
//! The session answers what the gateway answers itself (`server/discover`, a second
//! `initialize`, hosted tasks), shapes responses to the client's version, forwards the rest
//! through its link, maps the ids of requests the server sends the client, and replaces a
//! dead link with a fresh one on the client's next request, replaying the client's own
//! `initialize`.

use crate::config::{HostedMode, RequiredMode, UpstreamConfig};
use crate::gateway::Gateway;
use crate::gateway::link::{Link, LinkEvents, Shape};
use crate::jsonrpc::{self, Frame, GATEWAY_BUSY, INVALID_PARAMS, INVALID_REQUEST, Id, Kind, RpcError};
use crate::mcp::tasks::{self as mcp_tasks, TaskSupport};
use crate::mcp::{ProtocolVersion, shaping};
use crate::tasks::bridge::{Bridge, Ending};
use crate::tasks::hosted::{self, Hosted};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

mod tasks;
use tasks::hosts;

/// Where a message for the client belongs.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The response to this client request.
    Response(Id),
    /// Sent while serving this client request (progress, a server request it caused).
    Related(Id),
    /// Not tied to a request (list changes, logs, requests the gateway cannot place).
    Unrelated,
}

/// The downstream side of a session: a stdio client or an HTTP session's streams.
pub trait ClientSink: Send + Sync + 'static {
    fn deliver(&self, msg: Value, route: Route);
    /// Whether a message not tied to a request would reach the client now (stdio: always;
    /// HTTP: while a GET stream is open).
    fn reaches_client_now(&self) -> bool {
        true
    }
    /// The client cancelled request `id`: nothing more is due for it (its stream may end).
    fn abandon(&self, _id: &Id) {}
    /// Progress under `token` that still waits for the client is stale: the operation ended.
    fn discard_progress(&self, _token: &Value) {}
}

/// A request the server sent the client, waiting for the client's answer.
struct ServerRequest {
    link: Weak<Link>,
    upstream_id: Id,
    /// The hosted task it was asked for, if any.
    task: Option<Arc<str>>,
}

/// Tool listings are cached per session for task decisions; this bounds the cache.
const MAX_CACHED_TOOLS: usize = 10_000;
/// `tools/list` pages read for one task decision.
const MAX_LISTING_PAGES: usize = 10;
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Upstream task ids remembered per session for status notifications.
const MAX_KNOWN_TASKS: usize = 1024;
const CURSOR_UPSTREAM: &str = "up:";

#[derive(Default)]
struct SessionState {
    version: Option<ProtocolVersion>,
    /// The client's `initialize` params, replayed when a link is replaced.
    init_params: Option<Value>,
    /// The client id of the `initialize` still waiting for its response.
    init_pending: Option<Id>,
    /// The upstream's capabilities, from its `initialize` result.
    upstream_caps: Value,
    /// `execution.taskSupport` of each tool, from the upstream's `tools/list`.
    tool_support: HashMap<String, TaskSupport>,
    /// The upstream's listing marked a tool optional or required.
    listed_task_tools: bool,
    /// `tool_support` holds the upstream's whole listing.
    listing_loaded: bool,
    next_client_side_id: i64,
    server_requests: HashMap<Id, ServerRequest>,
    /// Bridged calls in flight, by client id, and how to cancel them.
    bridges: HashMap<Id, CancellationToken>,
    /// Plain calls that may need a retry as a task, by client id (see [`Shape::MayNeedTask`]).
    retry: HashMap<Id, Value>,
    /// Ids of upstream tasks this client created (its task-augmented calls passed through):
    /// the only upstream task status notifications it gets.
    known_tasks: std::collections::VecDeque<String>,
    generation: u64,
    /// When the last link died, and the delay before the next may start.
    restart_backoff: Option<(Instant, Duration)>,
    closed: bool,
}

pub struct Session {
    gateway: Arc<Gateway>,
    upstream: Arc<UpstreamConfig>,
    sink: Arc<dyn ClientSink>,
    /// Whose tasks these are: the session itself until authentication exists.
    owner: String,
    /// Who the client is, for per-client limits: its remote address (HTTP) until
    /// authentication exists.
    client: String,
    me: Weak<Session>,
    state: Mutex<SessionState>,
    link: Mutex<Option<Arc<Link>>>,
    /// Held while a link is being (re)started, so only one starts at a time.
    relink: tokio::sync::Mutex<()>,
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
        Arc::new_cyclic(|me| Session {
            gateway,
            upstream,
            sink,
            client: client.unwrap_or_else(|| owner.clone()),
            owner,
            me: me.clone(),
            state: Mutex::new(SessionState { next_client_side_id: 1, ..Default::default() }),
            link: Mutex::new(None),
            relink: tokio::sync::Mutex::new(()),
        })
    }

    pub fn upstream_name(&self) -> &str {
        &self.upstream.name
    }

    /// The negotiated version, once `initialize` has been answered.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.state.lock().unwrap().version
    }

    fn hosted(&self) -> &Arc<Hosted> {
        &self.gateway.hosted
    }

    /// Progress under `token` still waiting for the client is stale (its task ended).
    pub fn discard_progress(&self, token: &Value) {
        self.sink.discard_progress(token);
    }

    /// Whether an unrelated message would reach the client now.
    pub fn reaches_client_now(&self) -> bool {
        self.sink.reaches_client_now()
    }

    /// Handles one message from the client.
    pub async fn handle(&self, frame: Frame) {
        match frame.kind {
            Kind::Request => self.handle_request(frame).await,
            Kind::Notification => self.handle_notification(frame).await,
            Kind::Response => self.handle_response(frame).await,
        }
    }

    async fn handle_request(&self, frame: Frame) {
        let id = frame.id.clone().expect("requests have ids");
        let result = match frame.method() {
            "initialize" => self.initialize(id.clone(), frame.msg).await,
            // The 2026-07-28 probe: refusing it makes SDK clients fall back to `initialize`,
            // which keeps them on a version the gateway speaks.
            "server/discover" => {
                tracing::info!(upstream = %self.upstream.name, "answered the client's server/discover probe with -32601 (it falls back to initialize)");
                Err(crate::mcp::version::refuse_discover())
            }
            method => {
                if self.state.lock().unwrap().init_params.is_none() {
                    if method == "ping" {
                        self.to_client(jsonrpc::result_response(&id, json!({})), Route::Response(id));
                        return;
                    }
                    Err(RpcError::new(
                        INVALID_REQUEST,
                        format!("session not initialized: send initialize before {method}"),
                    ))
                } else {
                    self.dispatch(id.clone(), frame).await
                }
            }
        };
        if let Err(e) = result {
            self.state.lock().unwrap().retry.remove(&id);
            self.to_client(e.response(Some(&id)), Route::Response(id));
        }
    }

    /// A request of an initialized session: served by the gateway, or forwarded.
    async fn dispatch(&self, id: Id, frame: Frame) -> Result<(), RpcError> {
        let client_has_tasks = self.version().is_some_and(|v| v.has_tasks());
        let shape = match frame.method() {
            "tools/list" => Shape::ToolsList,
            "tools/call" if client_has_tasks && frame.msg.pointer("/params/task").is_some() => {
                let name = frame.msg.pointer("/params/name").and_then(Value::as_str).unwrap_or("").to_string();
                if self.hosts_tool(&name).await? {
                    return self.start_hosted(id, frame.msg).await;
                }
                let support =
                    if self.upstream_runs_tasks() { self.tool_support(&name).await? } else { TaskSupport::Forbidden };
                if support == TaskSupport::Forbidden && self.upstream.tasks.hosted != HostedMode::Never {
                    // The client was shown this tool without task support: a task call of
                    // it is what the spec answers with -32601.
                    return Err(RpcError::new(
                        jsonrpc::METHOD_NOT_FOUND,
                        format!("tool {name:?} does not support task-augmented calls (taskSupport: forbidden)"),
                    ));
                }
                Shape::AsIs
            }
            "tools/call" if self.upstream_runs_tasks() => {
                let name = frame.msg.pointer("/params/name").and_then(Value::as_str).unwrap_or("").to_string();
                match self.tool_support(&name).await? {
                    TaskSupport::Forbidden => Shape::AsIs,
                    TaskSupport::Optional => {
                        // An SDK may still refuse a plain call of an optional tool; its exact
                        // refusal is retried once as a task.
                        let kept = {
                            let mut st = self.state.lock().unwrap();
                            let room = st.retry.len() < self.gateway.limits().max_in_flight;
                            if room {
                                st.retry.insert(id.clone(), frame.msg.clone());
                            }
                            room
                        };
                        if kept { Shape::MayNeedTask } else { Shape::AsIs }
                    }
                    TaskSupport::Required => match self.upstream.tasks.required {
                        RequiredMode::Bridge => return self.start_bridge(id, frame.msg).await,
                        RequiredMode::Hide if !client_has_tasks => {
                            return Err(RpcError::new(
                                jsonrpc::METHOD_NOT_FOUND,
                                format!(
                                    "tool {name:?} must run as a task and needs a client with task support (protocol 2025-11-25 or later)"
                                ),
                            ));
                        }
                        RequiredMode::Hide => Shape::AsIs,
                    },
                }
            }
            method @ ("tasks/get" | "tasks/result" | "tasks/cancel") if client_has_tasks => {
                let task_id = frame.msg.pointer("/params/taskId").and_then(Value::as_str).map(str::to_string);
                let Some(task_id) = task_id else {
                    return Err(RpcError::new(INVALID_PARAMS, format!("{method}: params.taskId must be a string")));
                };
                if self.hosted().visible(&task_id, &self.owner) {
                    return self.serve_task_request(id, method, &task_id).await;
                }
                if !self.upstream_has_tasks() {
                    return Err(hosted::not_found(&task_id));
                }
                Shape::AsIs
            }
            "tasks/list" if client_has_tasks && self.upstream.tasks.hosted != HostedMode::Never => {
                return self.list_tasks(id, frame.msg).await;
            }
            _ => Shape::AsIs,
        };
        self.link().await?.forward(id, frame.msg, shape).await
    }

    async fn initialize(&self, id: Id, mut msg: Value) -> Result<(), RpcError> {
        {
            let mut st = self.state.lock().unwrap();
            if st.init_params.is_some() {
                return Err(RpcError::new(INVALID_REQUEST, "session already initialized"));
            }
            // A client newer than the gateway is offered the newest version the gateway speaks:
            // the gateway must understand what it relays.
            if let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) {
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                if requested.and_then(ProtocolVersion::parse).is_none() {
                    params.insert("protocolVersion".into(), ProtocolVersion::LATEST.as_str().into());
                }
            }
            st.init_params = Some(msg.get("params").cloned().unwrap_or(json!({})));
            st.init_pending = Some(id.clone());
        }
        let _guard = self.relink.lock().await;
        let link = match self.start_link().await {
            Ok(l) => l,
            Err(e) => {
                let mut st = self.state.lock().unwrap();
                st.init_params = None;
                st.init_pending = None;
                return Err(e);
            }
        };
        *self.link.lock().unwrap() = Some(link.clone());
        link.forward(id, msg, Shape::Initialize).await
    }

    async fn handle_notification(&self, frame: Frame) {
        let link = self.link.lock().unwrap().clone();
        let Some(link) = link.filter(|l| !l.is_closed()) else {
            // Nothing upstream to tell; a notification never starts a link.
            return;
        };
        let msg = frame.msg;
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let Some(client_id) = msg.pointer("/params/requestId").and_then(Id::from_value) else { return };
            if self.state.lock().unwrap().init_pending.as_ref() == Some(&client_id) {
                // initialize is not cancelled (the spec forbids it): the handshake goes on.
                return;
            }
            let reason = msg.pointer("/params/reason").cloned();
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
            if link.cancel_client_request(&client_id, reason).await {
                self.sink.abandon(&client_id);
            }
            return;
        }
        if let Err(e) = link.send(msg).await {
            tracing::debug!(upstream = %self.upstream.name, "notification not delivered: {e}");
        }
    }

    async fn handle_response(&self, frame: Frame) {
        let Some(id) = frame.id else { return };
        let target = self.state.lock().unwrap().server_requests.remove(&id);
        let Some(req) = target else {
            tracing::debug!(upstream = %self.upstream.name, "dropping client response to unknown id {id}");
            return;
        };
        if let Some(task) = &req.task {
            self.hosted().input_answered(task);
        }
        if let Some(link) = req.link.upgrade() {
            let mut msg = frame.msg;
            jsonrpc::set_id(&mut msg, &req.upstream_id);
            if let Err(e) = link.send(msg).await {
                tracing::debug!(upstream = %self.upstream.name, "response not delivered: {e}");
            }
        }
    }

    /// Passes a request from the server to the client under an id of the session's, and
    /// remembers where the answer goes.
    pub fn relay_server_request(
        &self,
        link: &Arc<Link>,
        upstream_id: Id,
        mut msg: Value,
        route: Route,
        task: Option<Arc<str>>,
    ) {
        let client_side_id = {
            let mut st = self.state.lock().unwrap();
            if st.server_requests.len() >= self.gateway.limits().max_in_flight {
                None
            } else {
                let id = Id::Num(st.next_client_side_id);
                st.next_client_side_id += 1;
                st.server_requests.insert(
                    id.clone(),
                    ServerRequest { link: Arc::downgrade(link), upstream_id: upstream_id.clone(), task },
                );
                Some(id)
            }
        };
        let Some(id) = client_side_id else {
            link.refuse(upstream_id, RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client"));
            return;
        };
        jsonrpc::set_id(&mut msg, &id);
        self.to_client(msg, route);
    }

    /// Everything for the client passes here: shaped to what its version defines.
    pub fn to_client(&self, mut msg: Value, route: Route) {
        let version = self.state.lock().unwrap().version;
        if let Some(v) = version
            && !shaping::for_client(&mut msg, v)
        {
            return;
        }
        self.sink.deliver(msg, route);
    }

    /// Whether the client declared the capability a server request needs, for the requests
    /// the gateway itself causes (bridged calls).
    fn client_can_answer(&self, method: &str) -> bool {
        let st = self.state.lock().unwrap();
        let caps = st.init_params.as_ref().and_then(|p| p.get("capabilities"));
        let need = match method {
            "elicitation/create" => "elicitation",
            "sampling/createMessage" => "sampling",
            "roots/list" => "roots",
            _ => return true,
        };
        caps.and_then(|c| c.get(need)).is_some()
    }

    /// The live link, restarting one (with the client's `initialize` replayed) if it died.
    async fn link(&self) -> Result<Arc<Link>, RpcError> {
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let _guard = self.relink.lock().await;
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let (params, version, backoff) = {
            let st = self.state.lock().unwrap();
            (st.init_params.clone(), st.version, st.restart_backoff)
        };
        let (Some(mut params), Some(version)) = (params, version) else {
            return Err(RpcError::new(INVALID_REQUEST, "session not initialized"));
        };
        if let Some((since, delay)) = backoff {
            tokio::time::sleep_until((since + delay).into()).await;
        }
        let link = self.start_link().await?;
        params["protocolVersion"] = version.as_str().into();
        let handshake = async {
            let resp = link.request("initialize", params).await?;
            if let Some(err) = resp.get("error") {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' refused to re-initialize: {err}", self.upstream.name),
                ));
            }
            let got = resp.pointer("/result/protocolVersion").and_then(Value::as_str);
            if got != Some(version.as_str()) {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' restarted with protocol version {got:?}, not {version}", self.upstream.name),
                ));
            }
            link.send(jsonrpc::notification("notifications/initialized", json!({}))).await
        };
        match tokio::time::timeout(self.upstream.connect_timeout, handshake).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                link.close().await;
                return Err(e);
            }
            Err(_) => {
                link.close().await;
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!(
                        "upstream '{}' did not initialize within {:?}",
                        self.upstream.name, self.upstream.connect_timeout
                    ),
                ));
            }
        }
        tracing::info!(upstream = %self.upstream.name, generation = link.generation(), "upstream link restarted");
        *self.link.lock().unwrap() = Some(link.clone());
        Ok(link)
    }

    async fn start_link(&self) -> Result<Arc<Link>, RpcError> {
        let generation = {
            let mut st = self.state.lock().unwrap();
            st.generation += 1;
            st.generation
        };
        let events: Weak<dyn LinkEvents> = self.me.clone();
        Link::connect(&self.gateway, &self.upstream, generation, events).await
    }

    /// Ends the session. Its link closes now, or when the last hosted task running on it
    /// ends (a task outlives the session that created it).
    pub async fn close(&self) {
        let bridges: Vec<CancellationToken> = {
            let mut st = self.state.lock().unwrap();
            st.closed = true;
            st.bridges.drain().map(|(_, c)| c).collect()
        };
        // A bridged call's upstream task is cancelled when its session ends (a client that
        // only disconnected from a stream has not cancelled).
        for c in bridges {
            c.cancel();
        }
        let link = self.link.lock().unwrap().take();
        if let Some(link) = link {
            link.close_when_idle().await;
        }
    }

    fn shape(&self, msg: &mut Value, shape: Shape) {
        let Some(result) = msg.get_mut("result") else { return };
        match shape {
            Shape::AsIs => {}
            Shape::Initialize => {
                let version = self.state.lock().unwrap().version;
                if let Some(v) = version {
                    let hosting = self.upstream.tasks.hosted != HostedMode::Never;
                    shaping::initialize_result(result, v, hosting);
                }
            }
            Shape::ToolsList => {
                self.remember_tools(result);
                let (version, upstream_tasks) = {
                    let st = self.state.lock().unwrap();
                    (st.version, mcp_tasks::server_has_tool_tasks(&st.upstream_caps))
                };
                let policy = &self.upstream.tasks;
                let hosted =
                    |name: &str, support| policy.offers_tool(name) && hosts(policy.hosted, upstream_tasks, support);
                if let Some(v) = version {
                    shaping::tools_list(result, v, policy.required == RequiredMode::Bridge, &hosted);
                }
            }
            Shape::MayNeedTask => {}
            Shape::UpstreamTaskPage => {
                if let Some(c) = result.get("nextCursor").and_then(Value::as_str) {
                    result["nextCursor"] = format!("{CURSOR_UPSTREAM}{c}").into();
                }
            }
        }
    }
}

impl LinkEvents for Session {
    fn response(&self, client_id: Id, mut msg: Value, shape: Shape) {
        if shape == Shape::Initialize {
            let mut st = self.state.lock().unwrap();
            if st.init_pending.as_ref() == Some(&client_id) {
                st.init_pending = None;
                if msg.get("error").is_some() {
                    // A refused initialize leaves the session uninitialized; the client may retry.
                    st.init_params = None;
                } else {
                    let got = msg.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or("");
                    match ProtocolVersion::parse(got) {
                        Some(v) => {
                            st.version = Some(v);
                            st.upstream_caps = msg.pointer("/result/capabilities").cloned().unwrap_or(json!({}));
                        }
                        None => {
                            st.init_params = None;
                            msg = RpcError::new(
                                jsonrpc::INTERNAL_ERROR,
                                format!("upstream '{}' negotiated protocol version {got:?}, which the gateway does not speak", self.upstream.name),
                            )
                            .response(Some(&client_id));
                        }
                    }
                }
            }
        }
        if shape == Shape::MayNeedTask {
            let call = self.state.lock().unwrap().retry.remove(&client_id);
            let name =
                call.as_ref().and_then(|c| c.pointer("/params/name")).and_then(Value::as_str).unwrap_or("").to_string();
            let support = self.state.lock().unwrap().tool_support.get(&name).copied().unwrap_or(TaskSupport::Forbidden);
            if let Some(call) = call
                && mcp_tasks::refused_as_plain_call(&msg, &name, support)
            {
                tracing::info!(upstream = %self.upstream.name, tool = %name, "the upstream wants this tool called as a task; retrying as one, and remembering");
                self.state.lock().unwrap().tool_support.insert(name, TaskSupport::Required);
                if let Some(me) = self.me.upgrade() {
                    tokio::spawn(async move {
                        if let Err(e) = me.start_bridge(client_id.clone(), call).await {
                            me.to_client(e.response(Some(&client_id)), Route::Response(client_id));
                        }
                    });
                }
                return;
            }
        }
        if let Some(task_id) = msg.pointer("/result/task/taskId").and_then(Value::as_str) {
            let mut st = self.state.lock().unwrap();
            if st.known_tasks.len() >= MAX_KNOWN_TASKS {
                st.known_tasks.pop_front();
            }
            st.known_tasks.push_back(task_id.to_string());
        }
        self.shape(&mut msg, shape);
        self.to_client(msg, Route::Response(client_id));
    }

    fn server_request(&self, link: &Arc<Link>, upstream_id: Id, mut msg: Value, related: Option<Id>) {
        // For a bridged call the gateway is the one that made the task: a request the client
        // cannot answer is refused upstream, and the task fails there cleanly.
        let bridged = related.as_ref().is_some_and(|id| self.state.lock().unwrap().bridges.contains_key(id));
        let method = msg.get("method").and_then(Value::as_str).unwrap_or("").to_string();
        if bridged && !self.client_can_answer(&method) {
            link.refuse(
                upstream_id,
                RpcError::new(jsonrpc::METHOD_NOT_FOUND, format!("the client does not support {method}")),
            );
            return;
        }
        if bridged {
            // The task is the gateway's, not the client's: a client that keeps tasks would
            // look its id up and refuse.
            mcp_tasks::untag_related(&mut msg, "params");
        }
        self.relay_server_request(
            link,
            upstream_id,
            msg,
            related.map(Route::Related).unwrap_or(Route::Unrelated),
            None,
        );
    }

    fn notification(&self, mut msg: Value, related: Option<Id>) {
        match msg.get("method").and_then(Value::as_str) {
            Some("notifications/tools/list_changed") => {
                let mut st = self.state.lock().unwrap();
                st.tool_support.clear();
                st.listing_loaded = false;
            }
            Some("notifications/tasks/status") => {
                // Only about tasks the client made (a bridged call's task is the gateway's).
                let task = msg.pointer("/params/taskId").and_then(Value::as_str).unwrap_or("");
                if !self.state.lock().unwrap().known_tasks.iter().any(|t| t == task) {
                    return;
                }
            }
            _ => {}
        }
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            // The server cancels a request it sent the client: use the id the client knows.
            let up = msg.pointer("/params/requestId").and_then(Id::from_value);
            let mut st = self.state.lock().unwrap();
            let ours = up.and_then(|up| {
                st.server_requests.iter().find(|(_, r)| r.upstream_id == up).map(|(ours, _)| ours.clone())
            });
            let Some(ours) = ours else { return };
            st.server_requests.remove(&ours);
            msg["params"]["requestId"] = ours.to_value();
        }
        self.to_client(msg, related.map(Route::Related).unwrap_or(Route::Unrelated));
    }

    fn closed(&self, generation: u64, reason: &str) {
        let mut st = self.state.lock().unwrap();
        st.server_requests.retain(|_, r| r.link.strong_count() > 0);
        if st.closed {
            return;
        }
        let delay = match st.restart_backoff {
            Some((since, d)) if since.elapsed() < MAX_BACKOFF => (d * 2).min(MAX_BACKOFF),
            _ => Duration::from_millis(100),
        };
        st.restart_backoff = Some((Instant::now(), delay));
        tracing::warn!(upstream = %self.upstream.name, generation, "link lost ({reason}); the next request starts a new one");
    }
}
