//! One upstream connection as the gateway uses it: request-id mapping, pending requests,
//! progress routes (with the progress discipline), and failing everything in flight when the
//! connection dies.
//!
//! Ids sent upstream are the link's own integers, so requests the gateway makes itself never
//! collide with the client's. What comes back is mapped to its destination: a client request
//! (via [`LinkEvents`], the session), a hosted task's background call (via [`Hosted`]), or a
//! request of the gateway's own (a oneshot).

use crate::config::UpstreamConfig;
use crate::gateway::Gateway;
use crate::gateway::deadline::{Deadlines, Expiry};
use crate::gateway::progress::{ProgressGate, Verdict};
use crate::gateway::upstream::Upstream;
use crate::jsonrpc::{self, GATEWAY_BUSY, Id, Kind, RpcError, UPSTREAM_UNAVAILABLE};
use crate::tasks::hosted::Hosted;
use crate::transport::InboundSink;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// How a forwarded request's response is shaped on its way back: the session's choice,
/// which the link carries with the request and hands back with its response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    AsIs,
    Initialize,
    ToolsList,
    /// A `tasks/list` page from the upstream, continuing the gateway's own pages.
    UpstreamTaskPage,
    /// A plain `tools/call` that may come back saying it must be a task (then it is retried
    /// as a bridged call, once).
    MayNeedTask,
}

/// What a link reports to its session. All calls are synchronous and short.
pub trait LinkEvents: Send + Sync + 'static {
    /// The response to a client request, already carrying the client's id.
    fn response(&self, client_id: Id, msg: Value, shape: Shape);
    /// A request from the server (sampling, elicitation, roots, ping). `related` is the client
    /// request it belongs to, when known.
    fn server_request(&self, link: &Arc<Link>, upstream_id: Id, msg: Value, related: Option<Id>);
    /// A notification from the server; `related` as above.
    fn notification(&self, msg: Value, related: Option<Id>);
    /// The connection died; everything in flight has already been answered with an error.
    fn closed(&self, generation: u64, reason: &str);
}

/// Where progress for a token goes.
#[derive(Clone, Debug)]
enum Dest {
    Client(Id),
    Task(Arc<str>),
}

enum Waiter {
    /// A client request: the id to restore, and how to shape its response.
    Client { client_id: Id, shape: Shape },
    /// The background call of a hosted task.
    Task { task_id: Arc<str> },
    /// A request the gateway made itself; what arrives related to it belongs to the client
    /// request `on_behalf_of`, if any (a bridged call's `tasks/result`).
    Internal { tx: oneshot::Sender<Value>, on_behalf_of: Option<Id> },
}

struct Pending {
    waiter: Waiter,
    token: Option<String>,
    /// The upstream task a client's `tasks/get|result|cancel` names, and whether it is
    /// `tasks/result`: its answer may show the task ended.
    about_task: Option<(String, bool)>,
}

/// A progress token's route. Owned by a pending request (`owner`), or held by a bridged
/// call for the whole life of its upstream task (`owner: None`).
struct TokenRoute {
    dest: Dest,
    gate: ProgressGate,
    owner: Option<i64>,
    activity: Option<mpsc::Sender<BridgeEvent>>,
    /// The upstream sent progress under this token: the gateway makes up none.
    upstream_progress: bool,
}

/// What a bridged call hears about its upstream task.
#[derive(Debug)]
pub enum BridgeEvent {
    /// A `notifications/tasks/status` for the task.
    Status(Value),
    /// Progress arrived under the call's token.
    Progress,
}

#[derive(Default)]
struct LinkState {
    next_id: i64,
    pending: HashMap<i64, Pending>,
    by_client_id: HashMap<Id, i64>,
    /// Progress token (as JSON text) → where its notifications go.
    tokens: HashMap<String, TokenRoute>,
    /// Upstream task id → the bridged client call following it.
    bridges: HashMap<String, (Id, mpsc::Sender<BridgeEvent>)>,
    /// Upstream task id → the progress token (key of `tokens`) its task-augmented call
    /// carried, kept until the task ends (or its ttl passes): the token stays in use for
    /// the task's whole life.
    task_tokens: HashMap<String, (String, Instant)>,
    /// Hosted tasks whose background call runs on this link.
    tasks_running: usize,
    /// The session ended while tasks ran: close once the last one ends.
    close_when_idle: bool,
    closed: Option<String>,
}

/// The part of a link that the transport calls into.
pub struct LinkCore {
    pub generation: u64,
    upstream: Arc<str>,
    state: Mutex<LinkState>,
    events: Weak<dyn LinkEvents>,
    hosted: Arc<Hosted>,
    link: OnceLock<Weak<Link>>,
    me: Weak<LinkCore>,
    progress_interval: Duration,
    /// stdio says nothing about which request a server message belongs to; with exactly one
    /// request in flight, it belongs to that one.
    infer_related: bool,
    /// Passed-through tasks whose progress route is kept at once.
    max_task_routes: usize,
    /// This link's place among `max_links`, given back when it closes.
    permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// `request_timeout` and `max_request_time` of the requests in flight, by upstream id.
    deadlines: Arc<Deadlines<i64>>,
}

pub struct Link {
    core: Arc<LinkCore>,
    conn: Upstream,
    max_in_flight: usize,
    /// Bounds the requests the gateway makes on its own account (listings, task polls).
    request_timeout: Duration,
}

impl Link {
    /// Opens a connection to the upstream. No MCP traffic is sent yet.
    pub async fn connect(
        gateway: &Gateway,
        cfg: &UpstreamConfig,
        generation: u64,
        events: Weak<dyn LinkEvents>,
    ) -> Result<Arc<Link>, RpcError> {
        let permit = gateway.links.clone().try_acquire_owned().map_err(|_| {
            RpcError::new(
                GATEWAY_BUSY,
                format!(
                    "too many upstream links open (max_links {}); try again when running tasks have ended",
                    gateway.limits().max_links
                ),
            )
        })?;
        let core = Arc::new_cyclic(|me| LinkCore {
            generation,
            upstream: cfg.name.as_str().into(),
            state: Mutex::new(LinkState { next_id: 1, ..Default::default() }),
            events,
            hosted: gateway.hosted.clone(),
            link: OnceLock::new(),
            me: me.clone(),
            progress_interval: gateway.limits().progress_min_interval,
            infer_related: matches!(cfg.transport, crate::config::Transport::Stdio { .. }),
            max_task_routes: gateway.limits().max_in_flight,
            permit: Mutex::new(Some(permit)),
            deadlines: Arc::new(Deadlines::new(cfg.request_timeout, cfg.max_request_time)),
        });
        let conn = Upstream::connect(gateway, cfg, core.clone())
            .await
            .map_err(|e| RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' is unavailable: {e}", cfg.name)))?;
        let link = Arc::new(Link {
            core: core.clone(),
            conn,
            max_in_flight: gateway.limits().max_in_flight,
            request_timeout: cfg.request_timeout,
        });
        let _ = core.link.set(Arc::downgrade(&link));
        tokio::spawn(LinkCore::enforce_timeouts(Arc::downgrade(&core), core.deadlines.clone()));
        Ok(link)
    }

    pub fn generation(&self) -> u64 {
        self.core.generation
    }

    pub fn upstream_name(&self) -> &str {
        &self.core.upstream
    }

    pub fn is_closed(&self) -> bool {
        self.core.state.lock().unwrap().closed.is_some()
    }

    fn register(&self, waiter: Waiter, msg: &Value) -> Result<i64, RpcError> {
        let token = jsonrpc::progress_token(msg).map(Value::to_string);
        let mut st = self.core.state.lock().unwrap();
        if let Some(reason) = &st.closed {
            return Err(self.core.closed_error(reason));
        }
        if st.pending.len() >= self.max_in_flight {
            return Err(RpcError::new(
                GATEWAY_BUSY,
                format!(
                    "too many requests in flight to upstream '{}' (limit {})",
                    self.core.upstream, self.max_in_flight
                ),
            ));
        }
        if let Waiter::Client { client_id, .. } = &waiter
            && st.by_client_id.contains_key(client_id)
        {
            return Err(RpcError::new(jsonrpc::INVALID_REQUEST, format!("request id {client_id} is already in use")));
        }
        let up_id = st.next_id;
        st.next_id += 1;
        let dest = match &waiter {
            Waiter::Client { client_id, .. } => {
                st.by_client_id.insert(client_id.clone(), up_id);
                Some(Dest::Client(client_id.clone()))
            }
            Waiter::Task { task_id } => {
                st.tasks_running += 1;
                Some(Dest::Task(task_id.clone()))
            }
            Waiter::Internal { on_behalf_of, .. } => on_behalf_of.clone().map(Dest::Client),
        };
        // A token a bridged call holds for its task keeps its route. One a passed-through
        // task held is free again once the client reuses it: the client saw that task end.
        if let Some(t) = &token
            && st.tokens.get(t).is_some_and(|r| r.owner.is_none() && r.activity.is_none())
        {
            let task = st.task_tokens.iter().find(|(_, (tok, _))| tok == t).map(|(k, _)| k.clone());
            if let Some(task) = task {
                st.task_tokens.remove(&task);
            }
            st.tokens.remove(t);
        }
        if let (Some(t), Some(dest)) = (&token, dest)
            && !st.tokens.contains_key(t)
        {
            st.tokens.insert(
                t.clone(),
                TokenRoute {
                    dest,
                    gate: ProgressGate::default(),
                    owner: Some(up_id),
                    activity: None,
                    upstream_progress: false,
                },
            );
        }
        let about_task = match msg.get("method").and_then(Value::as_str) {
            Some(m @ ("tasks/get" | "tasks/result" | "tasks/cancel")) if matches!(waiter, Waiter::Client { .. }) => {
                msg.pointer("/params/taskId").and_then(Value::as_str).map(|t| (t.to_string(), m == "tasks/result"))
            }
            _ => None,
        };
        // The gateway's own requests have deadlines of their own (their caller's).
        if !matches!(waiter, Waiter::Internal { .. }) {
            self.core.deadlines.insert(up_id);
        }
        st.pending.insert(up_id, Pending { waiter, token, about_task });
        Ok(up_id)
    }

    async fn send_registered(&self, up_id: i64, mut msg: Value) -> Result<(), RpcError> {
        jsonrpc::set_id(&mut msg, &Id::Num(up_id));
        if let Err(e) = self.conn.send(msg).await {
            self.core.take_pending(up_id);
            return Err(RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}': {e}", self.core.upstream)));
        }
        Ok(())
    }

    /// Forwards a client request; its response comes back through [`LinkEvents::response`].
    pub async fn forward(&self, client_id: Id, msg: Value, shape: Shape) -> Result<(), RpcError> {
        let up_id = self.register(Waiter::Client { client_id, shape }, &msg)?;
        self.send_registered(up_id, msg).await
    }

    /// Starts the background call of a hosted task; its outcome goes to [`Hosted`].
    /// Returns the upstream id, for cancellation.
    pub async fn start_task_call(&self, task_id: Arc<str>, msg: Value) -> Result<i64, RpcError> {
        let up_id = self.register(Waiter::Task { task_id }, &msg)?;
        self.send_registered(up_id, msg).await?;
        Ok(up_id)
    }

    /// Sends a request of the gateway's own and waits for the whole response message, at
    /// most `request_timeout`; past it the upstream is told to stop and the answer is -32001.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let msg = jsonrpc::request(&Id::Num(0), method, params);
        match tokio::time::timeout(self.request_timeout, self.request_for(msg, None)).await {
            Ok(answer) => answer,
            // The abandoned request was freed and cancelled upstream as it was dropped.
            Err(_) => Err(RpcError::new(
                jsonrpc::REQUEST_TIMEOUT,
                format!(
                    "request timed out: upstream '{}' did not answer the gateway's {method} within request_timeout ({})",
                    self.core.upstream,
                    crate::config::fmt_duration(self.request_timeout)
                ),
            )),
        }
    }

    /// Sends a request of the gateway's own made for client request `on_behalf_of`: progress
    /// and server requests that belong to it go to that client request.
    /// A caller that stops waiting (its future is dropped) frees the request's slot and the
    /// upstream is told to stop (except for `initialize`, which must not be cancelled).
    pub async fn request_for(&self, msg: Value, on_behalf_of: Option<Id>) -> Result<Value, RpcError> {
        let (tx, rx) = oneshot::channel();
        let cancellable = msg.get("method").and_then(Value::as_str) != Some("initialize");
        let up_id = self.register(Waiter::Internal { tx, on_behalf_of }, &msg)?;
        let mut guard = AbandonGuard { core: &self.core, up_id, cancel_upstream: cancellable, armed: true };
        self.send_registered(up_id, msg).await?;
        let answer = rx.await.map_err(|_| {
            let reason = self.core.state.lock().unwrap().closed.clone().unwrap_or_default();
            self.core.closed_error(&reason)
        });
        guard.armed = false;
        answer
    }

    /// Answers a request the server sent with an error (nobody on the client side can or
    /// may answer it), without waiting for the send.
    pub fn refuse(self: &Arc<Self>, upstream_id: Id, err: RpcError) {
        let link = self.clone();
        tokio::spawn(async move {
            let _ = link.send(err.response(Some(&upstream_id))).await;
        });
    }

    /// Sends a notification or a response to a server request.
    pub async fn send(&self, msg: Value) -> Result<(), RpcError> {
        if let Some(reason) = &self.core.state.lock().unwrap().closed {
            return Err(self.core.closed_error(reason));
        }
        self.conn
            .send(msg)
            .await
            .map_err(|e| RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}': {e}", self.core.upstream)))
    }

    /// Stops waiting for request `up_id` and tells the upstream it is cancelled.
    pub async fn cancel(&self, up_id: i64, reason: &str) {
        if self.core.take_pending(up_id).is_some() {
            let note = jsonrpc::notification("notifications/cancelled", json!({"requestId": up_id, "reason": reason}));
            let _ = self.send(note).await;
        }
    }

    /// The client cancelled its request `client_id`: the slot is freed, the upstream is told
    /// once (with the client's `reason`), and nothing more is delivered for it. Returns
    /// whether the request was in flight.
    pub async fn cancel_client_request(&self, client_id: &Id, reason: Option<Value>) -> bool {
        let up_id = self.core.state.lock().unwrap().by_client_id.get(client_id).copied();
        let Some(up_id) = up_id else { return false };
        if self.core.take_pending(up_id).is_none() {
            return false;
        }
        let mut params = json!({"requestId": up_id});
        if let Some(r) = reason {
            params["reason"] = r;
        }
        let _ = self.send(jsonrpc::notification("notifications/cancelled", params)).await;
        true
    }

    /// A bridged call follows upstream task `task_id` for client request `client_id`: the
    /// task's status notifications, progress under `token` and the server's requests tagged
    /// with the task come to it (and to that client request) until [`Link::end_bridge`].
    pub fn start_bridge(&self, task_id: &str, client_id: &Id, token: Option<&Value>) -> mpsc::Receiver<BridgeEvent> {
        let (tx, rx) = mpsc::channel(64);
        let mut st = self.core.state.lock().unwrap();
        st.bridges.insert(task_id.to_string(), (client_id.clone(), tx.clone()));
        if let Some(t) = token {
            let route = st.tokens.entry(t.to_string()).or_insert_with(|| TokenRoute {
                dest: Dest::Client(client_id.clone()),
                gate: ProgressGate::default(),
                owner: None,
                activity: None,
                upstream_progress: false,
            });
            route.owner = None;
            route.activity = Some(tx);
        }
        rx
    }

    /// The bridged call is over: its routes go, and progress still held is delivered first.
    pub fn end_bridge(&self, task_id: &str, token: Option<&Value>) {
        let held = {
            let mut st = self.core.state.lock().unwrap();
            st.bridges.remove(task_id);
            token.and_then(|t| st.tokens.remove(&t.to_string())).and_then(|mut r| r.gate.finish().map(|m| (r.dest, m)))
        };
        if let Some((dest, m)) = held {
            self.core.deliver_to(&dest, m);
        }
    }

    /// A progress notification made by the gateway (from a task's status message) under
    /// `token`, with a value above every value sent so far and never past the total; none
    /// once the upstream has sent progress of its own.
    pub fn synthesize_progress(&self, token: &Value, message: &str) {
        let now = Instant::now();
        let out = {
            let mut st = self.core.state.lock().unwrap();
            let Some(route) = st.tokens.get_mut(&token.to_string()) else { return };
            if route.upstream_progress {
                return;
            }
            let Some(next) = route.gate.next_value() else { return };
            let msg = jsonrpc::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": next, "message": message}),
            );
            match route.gate.offer(msg, Duration::ZERO, now) {
                (Verdict::Send, Some(m)) => Some((route.dest.clone(), m)),
                _ => None,
            }
        };
        if let Some((dest, m)) = out {
            self.core.deliver_to(&dest, m);
        }
    }

    /// Keeps the link open (past the end of its session) until [`Link::release`].
    pub fn retain(&self) {
        self.core.state.lock().unwrap().tasks_running += 1;
    }

    pub fn release(&self) {
        self.core.release_slot();
    }

    /// Closes the connection now; requests still in flight are answered with an error.
    pub async fn close(&self) {
        self.close_because("the session ended").await;
    }

    /// Closes the connection now, whatever still runs on it; what is in flight (hosted
    /// tasks included) fails with `reason`.
    pub async fn close_because(&self, reason: &str) {
        self.core.fail_all(reason.into(), false);
        self.conn.close().await;
    }

    /// Closes the connection once no hosted task runs on it (now, if none does).
    pub async fn close_when_idle(&self) {
        {
            let mut st = self.core.state.lock().unwrap();
            if st.tasks_running > 0 {
                st.close_when_idle = true;
                return;
            }
        }
        self.close().await;
    }
}

/// Frees an internal request whose caller stopped waiting for it.
struct AbandonGuard<'a> {
    core: &'a Arc<LinkCore>,
    up_id: i64,
    cancel_upstream: bool,
    armed: bool,
}

impl Drop for AbandonGuard<'_> {
    fn drop(&mut self) {
        if !self.armed || self.core.take_pending(self.up_id).is_none() || !self.cancel_upstream {
            return;
        }
        if let Some(link) = self.core.link.get().and_then(Weak::upgrade) {
            let note = jsonrpc::notification(
                "notifications/cancelled",
                json!({"requestId": self.up_id, "reason": "the gateway no longer needs the answer"}),
            );
            tokio::spawn(async move {
                let _ = link.send(note).await;
            });
        }
    }
}

impl LinkState {
    /// The route of progress token `token` now belongs to upstream task `task_id` until it
    /// ends; at most `limit` such routes are kept (the oldest and the expired go first).
    fn keep_token_for_task(&mut self, task_id: &str, token: String, ttl: Option<Duration>, limit: usize) {
        let now = Instant::now();
        let expired: Vec<String> =
            self.task_tokens.iter().filter(|(_, (_, until))| *until <= now).map(|(k, _)| k.clone()).collect();
        for t in expired {
            self.drop_task_route(&t);
        }
        while self.task_tokens.len() >= limit.max(1) {
            let oldest = self.task_tokens.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| k.clone());
            match oldest {
                Some(t) => {
                    self.drop_task_route(&t);
                }
                None => break,
            }
        }
        self.drop_task_route(task_id);
        if let Some(route) = self.tokens.get_mut(&token) {
            route.owner = None;
        }
        let ttl = ttl.unwrap_or(MAX_TASK_ROUTE).min(MAX_TASK_ROUTE);
        self.task_tokens.insert(task_id.to_string(), (token, now + ttl));
    }

    /// Forgets the token route of a task; returns it (for what it still holds).
    fn drop_task_route(&mut self, task_id: &str) -> Option<TokenRoute> {
        let (token, _) = self.task_tokens.remove(task_id)?;
        match self.tokens.get(&token) {
            Some(r) if r.owner.is_none() && r.activity.is_none() => self.tokens.remove(&token),
            _ => None,
        }
    }
}

/// The longest a passed-through task keeps its progress route when its ttl says nothing.
const MAX_TASK_ROUTE: Duration = Duration::from_secs(24 * 3600);

impl Drop for LinkCore {
    fn drop(&mut self) {
        // Its timeout task ends with it.
        self.deadlines.close();
    }
}

impl LinkCore {
    /// A passed-through task ended: what its token still holds is delivered, then the token
    /// is finished.
    fn end_task_route(&self, task_id: &str) {
        let held =
            self.state.lock().unwrap().drop_task_route(task_id).and_then(|mut r| r.gate.finish().map(|m| (r.dest, m)));
        if let Some((dest, m)) = held {
            self.deliver_to(&dest, m);
        }
    }

    fn closed_error(&self, reason: &str) -> RpcError {
        RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' closed: {reason}", self.upstream))
    }

    /// Removes a pending request and everything that points at it.
    fn take_pending(&self, up_id: i64) -> Option<Pending> {
        let p = {
            let mut st = self.state.lock().unwrap();
            let p = st.pending.remove(&up_id);
            if let Some(p) = &p {
                self.deadlines.remove(&up_id);
                if let Some(t) = &p.token
                    && st.tokens.get(t).is_some_and(|r| r.owner == Some(up_id))
                {
                    st.tokens.remove(t);
                }
                if let Waiter::Client { client_id, .. } = &p.waiter {
                    st.by_client_id.remove(client_id);
                }
            }
            p
        };
        if matches!(p, Some(Pending { waiter: Waiter::Task { .. }, .. })) {
            self.release_slot();
        }
        p
    }

    /// A hosted task or bridged call stopped using the link; the link of an ended session
    /// closes with the last one.
    fn release_slot(&self) {
        let close_now = {
            let mut st = self.state.lock().unwrap();
            st.tasks_running = st.tasks_running.saturating_sub(1);
            st.tasks_running == 0 && st.close_when_idle && st.closed.is_none()
        };
        if close_now && let Some(link) = self.link.get().and_then(Weak::upgrade) {
            tracing::info!(upstream = %self.upstream, "the last task on the link of an ended session ended; closing it");
            tokio::spawn(async move { link.close().await });
        }
    }

    fn fail_all(&self, reason: String, report: bool) {
        let pending = {
            let mut st = self.state.lock().unwrap();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(reason.clone());
            st.by_client_id.clear();
            st.tokens.clear();
            st.bridges.clear();
            st.task_tokens.clear();
            st.tasks_running = 0;
            std::mem::take(&mut st.pending)
        };
        self.permit.lock().unwrap().take();
        self.deadlines.close();
        let err = self.closed_error(&reason);
        let events = self.events.upgrade();
        for (_, p) in pending {
            // Internal waiters see their sender dropped.
            match p.waiter {
                Waiter::Client { client_id, shape } => {
                    if let Some(ev) = &events {
                        ev.response(client_id.clone(), err.response(Some(&client_id)), shape);
                    }
                }
                Waiter::Task { task_id } => self.hosted.outcome(&task_id, err.response(None)),
                Waiter::Internal { .. } => {}
            }
        }
        if report && let Some(ev) = events {
            ev.closed(self.generation, &reason);
        }
    }

    /// Answers requests that ran past their time: `request_timeout` since the last sign of
    /// life (progress), or `max_request_time` in all. A hosted task's call fails its task.
    /// The upstream is told to stop.
    async fn enforce_timeouts(me: Weak<LinkCore>, deadlines: Arc<Deadlines<i64>>) {
        let (idle, max) = (deadlines.idle(), deadlines.lifetime());
        while let Some((up_id, expiry)) = deadlines.expired().await {
            let Some(core) = me.upgrade() else { return };
            let Some(p) = core.take_pending(up_id) else { continue };
            let total = expiry == Expiry::Lifetime;
            let why = if total {
                format!("no result within max_request_time ({})", crate::config::fmt_duration(max))
            } else {
                format!("no result or progress within request_timeout ({})", crate::config::fmt_duration(idle))
            };
            let err = RpcError::new(
                jsonrpc::REQUEST_TIMEOUT,
                format!("request timed out: upstream '{}' sent {why}", core.upstream),
            );
            match p.waiter {
                Waiter::Client { client_id, shape } => {
                    tracing::warn!(upstream = %core.upstream, "request {client_id} timed out: {why}");
                    if let Some(ev) = core.events.upgrade() {
                        ev.response(client_id.clone(), err.response(Some(&client_id)), shape);
                    }
                }
                Waiter::Task { task_id } => {
                    tracing::warn!(upstream = %core.upstream, task = %task_id, "hosted task's call timed out: {why}");
                    core.hosted.outcome(&task_id, err.response(None));
                }
                Waiter::Internal { .. } => {}
            }
            if let Some(link) = core.link.get().and_then(Weak::upgrade) {
                let note = jsonrpc::notification("notifications/cancelled", json!({"requestId": up_id, "reason": why}));
                tokio::spawn(async move {
                    let _ = link.send(note).await;
                });
            }
        }
    }

    /// The pending request a server message belongs to: the transport's hint; else, for
    /// messages that only ever come from serving a request (input requests, logs) and that
    /// name no task, the only request in flight. Anything more ambiguous belongs to no
    /// request (a progress token inside a server request is the server's own, for the
    /// client's progress on it, and says nothing about the gateway's requests).
    fn related_up_id(&self, st: &LinkState, msg: &Value, related: Option<Id>) -> Option<i64> {
        match related {
            Some(Id::Num(n)) => return Some(n),
            Some(Id::Str(_)) => return None,
            None => {}
        }
        let request_scoped = matches!(
            msg.get("method").and_then(Value::as_str),
            Some("elicitation/create" | "sampling/createMessage" | "notifications/message")
        );
        let names_a_task = crate::mcp::tasks::related_task_id(msg, "params").is_some();
        if self.infer_related && request_scoped && !names_a_task && st.pending.len() == 1 {
            return st.pending.keys().next().copied();
        }
        None
    }

    /// Where a server message related to pending request `up_id` goes.
    fn dest_of(st: &LinkState, up_id: i64) -> Option<Dest> {
        match &st.pending.get(&up_id)?.waiter {
            Waiter::Client { client_id, .. } => Some(Dest::Client(client_id.clone())),
            Waiter::Task { task_id } => Some(Dest::Task(task_id.clone())),
            Waiter::Internal { on_behalf_of, .. } => on_behalf_of.clone().map(Dest::Client),
        }
    }

    /// The destination of a server message: the bridged call whose task it names, else the
    /// request it relates to.
    fn route(&self, msg: &Value, related: Option<Id>) -> Option<Dest> {
        let st = self.state.lock().unwrap();
        if let Some(task) = crate::mcp::tasks::related_task_id(msg, "params")
            && let Some((client_id, _)) = st.bridges.get(task)
        {
            return Some(Dest::Client(client_id.clone()));
        }
        let dest = self.related_up_id(&st, msg, related).and_then(|u| Self::dest_of(&st, u));
        // Only input requests make a hosted task wait for input; anything else the server
        // asks while a task runs (roots, ping) is the session's business.
        let is_input =
            matches!(msg.get("method").and_then(Value::as_str), Some("elicitation/create" | "sampling/createMessage"));
        match dest {
            Some(Dest::Task(_)) if !is_input && msg.get("id").is_some() => None,
            d => d,
        }
    }

    fn deliver_to(&self, dest: &Dest, msg: Value) {
        match dest {
            Dest::Client(client_id) => {
                if let Some(ev) = self.events.upgrade() {
                    ev.notification(msg, Some(client_id.clone()));
                }
            }
            Dest::Task(task_id) => self.hosted.progress(task_id, msg),
        }
    }

    fn on_progress(&self, msg: Value) {
        let Some(key) = msg.pointer("/params/progressToken").map(Value::to_string) else { return };
        let now = Instant::now();
        let (dest, verdict, out) = {
            let mut st = self.state.lock().unwrap();
            let Some(route) = st.tokens.get_mut(&key) else {
                tracing::debug!(upstream = %self.upstream, "dropping progress for an unknown or finished token");
                return;
            };
            route.upstream_progress = true;
            let (v, out) = route.gate.offer(msg, self.progress_interval, now);
            let dest = route.dest.clone();
            if let Some(a) = &route.activity {
                let _ = a.try_send(BridgeEvent::Progress);
            }
            if let Some(owner) = route.owner {
                // Progress is a sign of life: it resets the request's timeout.
                self.deadlines.touch(&owner);
            }
            (dest, v, out)
        };
        match verdict {
            Verdict::Send => self.deliver_to(&dest, out.expect("a sent message")),
            Verdict::Drop => tracing::debug!(upstream = %self.upstream, "dropping progress that does not rise"),
            Verdict::Hold { armed: true, .. } => {}
            Verdict::Hold { at, armed: false } => {
                let me = self.me.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    let Some(core) = me.upgrade() else { return };
                    let held = {
                        let mut st = core.state.lock().unwrap();
                        st.tokens.get_mut(&key).and_then(|r| r.gate.flush(Instant::now()).map(|m| (r.dest.clone(), m)))
                    };
                    if let Some((dest, m)) = held {
                        core.deliver_to(&dest, m);
                    }
                });
            }
        }
    }
}

impl InboundSink for LinkCore {
    fn message(&self, msg: Value, related: Option<Id>) {
        let frame = match jsonrpc::classify(msg) {
            Ok(f) => f,
            Err((_, e)) => {
                tracing::warn!(upstream = %self.upstream, "dropping malformed message from upstream: {e}");
                return;
            }
        };
        match frame.kind {
            Kind::Response => {
                let Some(Id::Num(up_id)) = frame.id else {
                    tracing::warn!(upstream = %self.upstream, "dropping response with an id the gateway never sent");
                    return;
                };
                // The latest progress always gets out before the result; a task-augmented
                // call's token lives on with its task.
                let held = {
                    let mut st = self.state.lock().unwrap();
                    let token = st.pending.get(&up_id).and_then(|p| p.token.clone());
                    match crate::mcp::tasks::created_task(&frame.msg) {
                        Some((task_id, ttl)) => {
                            if let Some(t) = token.filter(|t| st.tokens.get(t).is_some_and(|r| r.owner == Some(up_id)))
                            {
                                st.keep_token_for_task(task_id, t, ttl, self.max_task_routes);
                            }
                            None
                        }
                        None => token
                            .and_then(|t| st.tokens.get_mut(&t))
                            .filter(|r| r.owner == Some(up_id))
                            .and_then(|r| r.gate.finish().map(|m| (r.dest.clone(), m))),
                    }
                };
                let Some(p) = self.take_pending(up_id) else {
                    tracing::debug!(upstream = %self.upstream, "dropping response to unknown id {up_id}");
                    return;
                };
                if let Some((dest, m)) = held {
                    self.deliver_to(&dest, m);
                }
                let mut msg = frame.msg;
                match p.waiter {
                    Waiter::Client { client_id, shape } => {
                        if let Some(task_id) = crate::mcp::tasks::ended_task(&msg) {
                            self.end_task_route(task_id);
                        } else if let Some((task_id, is_result)) = &p.about_task
                            && (*is_result || msg.get("error").is_some())
                        {
                            // tasks/result's answer (a result or the task's error), or an
                            // upstream that no longer knows the task: it is over.
                            self.end_task_route(task_id);
                        }
                        jsonrpc::set_id(&mut msg, &client_id);
                        if let Some(ev) = self.events.upgrade() {
                            ev.response(client_id, msg, shape);
                        }
                    }
                    Waiter::Task { task_id } => self.hosted.outcome(&task_id, msg),
                    Waiter::Internal { tx, .. } => {
                        let _ = tx.send(msg);
                    }
                }
            }
            Kind::Request => {
                let id = frame.id.clone().expect("requests have ids");
                let dest = self.route(&frame.msg, related.clone());
                // A question from the server is a sign of life of the request it serves.
                if let Some(Id::Num(up)) = &related {
                    self.deadlines.touch(up);
                }
                let Some(link) = self.link.get().and_then(Weak::upgrade) else { return };
                match (dest, self.events.upgrade()) {
                    (Some(Dest::Task(task_id)), _) => self.hosted.input_request(&task_id, &link, id, frame.msg),
                    (dest, Some(ev)) => {
                        let client_id = match dest {
                            Some(Dest::Client(c)) => Some(c),
                            _ => None,
                        };
                        ev.server_request(&link, id, frame.msg, client_id);
                    }
                    (_, None) => {
                        // The session is gone and nobody else can answer.
                        link.refuse(id, RpcError::new(jsonrpc::INTERNAL_ERROR, "no client is connected to answer"));
                    }
                }
            }
            Kind::Notification => {
                match frame.method() {
                    "notifications/progress" => return self.on_progress(frame.msg),
                    "notifications/tasks/status" => {
                        // A bridged call's task: its status is for the bridge, not the client.
                        let task = frame.msg.pointer("/params/taskId").and_then(Value::as_str);
                        if let Some(tx) =
                            task.and_then(|t| self.state.lock().unwrap().bridges.get(t).map(|b| b.1.clone()))
                        {
                            let _ = tx.try_send(BridgeEvent::Status(frame.msg));
                            return;
                        }
                        // Progress of a task stops at its terminal status.
                        if let Some(task_id) = crate::mcp::tasks::ended_task_status(&frame.msg) {
                            self.end_task_route(task_id);
                        }
                    }
                    _ => {}
                }
                let related = match self.route(&frame.msg, related) {
                    Some(Dest::Client(c)) => Some(c),
                    _ => None,
                };
                if let Some(ev) = self.events.upgrade() {
                    ev.notification(frame.msg, related);
                }
            }
        }
    }

    fn closed(&self, reason: String) {
        if self.state.lock().unwrap().closed.is_some() {
            tracing::debug!(upstream = %self.upstream, "upstream connection ended: {reason}");
        } else {
            tracing::warn!(upstream = %self.upstream, "upstream connection lost: {reason}");
        }
        self.fail_all(reason, true);
    }
}
