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
use crate::gateway::progress::{ProgressGate, Verdict};
use crate::gateway::session::Shape;
use crate::gateway::upstream::Upstream;
use crate::jsonrpc::{self, GATEWAY_BUSY, Id, Kind, RpcError, UPSTREAM_UNAVAILABLE};
use crate::tasks::hosted::Hosted;
use crate::transport::InboundSink;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

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

enum Waiter {
    /// A client request: the id to restore, and how to shape its response.
    Client { client_id: Id, shape: Shape },
    /// The background call of a hosted task.
    Task { task_id: Arc<str> },
    /// A request the gateway made itself.
    Internal(oneshot::Sender<Value>),
}

struct Pending {
    waiter: Waiter,
    token: Option<String>,
    gate: ProgressGate,
}

#[derive(Default)]
struct LinkState {
    next_id: i64,
    pending: HashMap<i64, Pending>,
    by_client_id: HashMap<Id, i64>,
    /// Progress token (as JSON text) → the upstream id of the request that carries it.
    tokens: HashMap<String, i64>,
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
}

pub struct Link {
    core: Arc<LinkCore>,
    conn: Upstream,
    max_in_flight: usize,
}

impl Link {
    /// Opens a connection to the upstream. No MCP traffic is sent yet.
    pub async fn connect(
        gateway: &Gateway,
        cfg: &UpstreamConfig,
        generation: u64,
        events: Weak<dyn LinkEvents>,
    ) -> Result<Arc<Link>, RpcError> {
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
        });
        let conn = Upstream::connect(gateway, cfg, core.clone())
            .await
            .map_err(|e| RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' is unavailable: {e}", cfg.name)))?;
        let link = Arc::new(Link { core: core.clone(), conn, max_in_flight: gateway.limits().max_in_flight });
        let _ = core.link.set(Arc::downgrade(&link));
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
        if let Some(t) = &token {
            st.tokens.insert(t.clone(), up_id);
        }
        match &waiter {
            Waiter::Client { client_id, .. } => {
                st.by_client_id.insert(client_id.clone(), up_id);
            }
            Waiter::Task { .. } => st.tasks_running += 1,
            Waiter::Internal(_) => {}
        }
        st.pending.insert(up_id, Pending { waiter, token, gate: ProgressGate::default() });
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

    /// Sends a request of the gateway's own and waits for the whole response message.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (tx, rx) = oneshot::channel();
        let msg = jsonrpc::request(&Id::Num(0), method, params);
        let up_id = self.register(Waiter::Internal(tx), &msg)?;
        self.send_registered(up_id, msg).await?;
        rx.await.map_err(|_| {
            let reason = self.core.state.lock().unwrap().closed.clone().unwrap_or_default();
            self.core.closed_error(&reason)
        })
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

    /// The upstream id under which a client request was forwarded, if it is still in flight.
    pub fn upstream_id(&self, client_id: &Id) -> Option<i64> {
        self.core.state.lock().unwrap().by_client_id.get(client_id).copied()
    }

    /// Stops waiting for request `up_id` and tells the upstream it is cancelled.
    pub async fn cancel(&self, up_id: i64, reason: &str) {
        if self.core.take_pending(up_id).is_some() {
            let note = jsonrpc::notification("notifications/cancelled", json!({"requestId": up_id, "reason": reason}));
            let _ = self.send(note).await;
        }
    }

    /// Closes the connection now; requests still in flight are answered with an error.
    pub async fn close(&self) {
        self.conn.close().await;
        self.core.fail_all("the session ended".into(), false);
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

impl LinkCore {
    fn closed_error(&self, reason: &str) -> RpcError {
        RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' closed: {reason}", self.upstream))
    }

    /// Removes a pending request and everything that points at it.
    fn take_pending(&self, up_id: i64) -> Option<Pending> {
        let (p, close_now) = {
            let mut st = self.state.lock().unwrap();
            let p = st.pending.remove(&up_id);
            let mut close_now = false;
            if let Some(p) = &p {
                if let Some(t) = &p.token {
                    st.tokens.remove(t);
                }
                match &p.waiter {
                    Waiter::Client { client_id, .. } => {
                        st.by_client_id.remove(client_id);
                    }
                    Waiter::Task { .. } => {
                        st.tasks_running -= 1;
                        close_now = st.tasks_running == 0 && st.close_when_idle && st.closed.is_none();
                    }
                    Waiter::Internal(_) => {}
                }
            }
            (p, close_now)
        };
        if close_now && let Some(link) = self.link.get().and_then(Weak::upgrade) {
            tracing::info!(upstream = %self.upstream, "last hosted task ended; closing the link of an ended session");
            tokio::spawn(async move { link.close().await });
        }
        p
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
            st.tasks_running = 0;
            std::mem::take(&mut st.pending)
        };
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
                Waiter::Internal(_) => {}
            }
        }
        if report && let Some(ev) = events {
            ev.closed(self.generation, &reason);
        }
    }

    /// The pending request a server message belongs to: the transport's hint, or the only
    /// request in flight where the transport gives none.
    fn related_up_id(&self, st: &LinkState, related: Option<Id>) -> Option<i64> {
        match related {
            Some(Id::Num(n)) => Some(n),
            Some(Id::Str(_)) => None,
            None if self.infer_related && st.pending.len() == 1 => st.pending.keys().next().copied(),
            None => None,
        }
    }

    fn deliver_progress(&self, up_id: i64, msg: Value) {
        let dest = {
            let st = self.state.lock().unwrap();
            match st.pending.get(&up_id).map(|p| &p.waiter) {
                Some(Waiter::Client { client_id, .. }) => Some(Ok(client_id.clone())),
                Some(Waiter::Task { task_id }) => Some(Err(task_id.clone())),
                _ => None,
            }
        };
        match dest {
            Some(Ok(client_id)) => {
                if let Some(ev) = self.events.upgrade() {
                    ev.notification(msg, Some(client_id));
                }
            }
            Some(Err(task_id)) => self.hosted.progress(&task_id, msg),
            None => {}
        }
    }

    fn on_progress(&self, msg: Value) {
        let token = msg.pointer("/params/progressToken").map(Value::to_string);
        let now = Instant::now();
        let (up_id, verdict, out) = {
            let mut st = self.state.lock().unwrap();
            let Some(up_id) = token.and_then(|t| st.tokens.get(&t).copied()) else {
                tracing::debug!(upstream = %self.upstream, "dropping progress for an unknown or finished token");
                return;
            };
            let Some(p) = st.pending.get_mut(&up_id) else { return };
            let (v, out) = p.gate.offer(msg, self.progress_interval, now);
            (up_id, v, out)
        };
        match verdict {
            Verdict::Send => self.deliver_progress(up_id, out.expect("sent")),
            Verdict::Drop => tracing::debug!(upstream = %self.upstream, "dropping progress that does not rise"),
            Verdict::Hold { armed: true, .. } => {}
            Verdict::Hold { at, armed: false } => {
                let me = self.me.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(at.into()).await;
                    let Some(core) = me.upgrade() else { return };
                    let held = {
                        let mut st = core.state.lock().unwrap();
                        st.pending.get_mut(&up_id).and_then(|p| p.gate.flush(Instant::now()))
                    };
                    if let Some(m) = held {
                        core.deliver_progress(up_id, m);
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
                let Some(mut p) = self.take_pending(up_id) else {
                    tracing::debug!(upstream = %self.upstream, "dropping response to unknown id {up_id}");
                    return;
                };
                // The latest progress always gets out before the result.
                if let Some(held) = p.gate.finish() {
                    match &p.waiter {
                        Waiter::Client { client_id, .. } => {
                            if let Some(ev) = self.events.upgrade() {
                                ev.notification(held, Some(client_id.clone()));
                            }
                        }
                        Waiter::Task { task_id } => self.hosted.progress(task_id, held),
                        Waiter::Internal(_) => {}
                    }
                }
                let mut msg = frame.msg;
                match p.waiter {
                    Waiter::Client { client_id, shape } => {
                        jsonrpc::set_id(&mut msg, &client_id);
                        if let Some(ev) = self.events.upgrade() {
                            ev.response(client_id, msg, shape);
                        }
                    }
                    Waiter::Task { task_id } => self.hosted.outcome(&task_id, msg),
                    Waiter::Internal(tx) => {
                        let _ = tx.send(msg);
                    }
                }
            }
            Kind::Request => {
                let id = frame.id.clone().expect("requests have ids");
                let dest = {
                    let st = self.state.lock().unwrap();
                    self.related_up_id(&st, related).and_then(|u| match &st.pending.get(&u)?.waiter {
                        Waiter::Client { client_id, .. } => Some(Ok(client_id.clone())),
                        Waiter::Task { task_id } => Some(Err(task_id.clone())),
                        Waiter::Internal(_) => None,
                    })
                };
                let Some(link) = self.link.get().and_then(Weak::upgrade) else { return };
                match dest {
                    Some(Err(task_id)) => self.hosted.input_request(&task_id, &link, id, frame.msg),
                    Some(Ok(client_id)) => {
                        if let Some(ev) = self.events.upgrade() {
                            ev.server_request(&link, id, frame.msg, Some(client_id));
                        }
                    }
                    None => match self.events.upgrade() {
                        Some(ev) => ev.server_request(&link, id, frame.msg, None),
                        None => {
                            // The session is gone and nobody else can answer.
                            let err = RpcError::new(jsonrpc::INTERNAL_ERROR, "no client is connected to answer");
                            tokio::spawn(async move {
                                let _ = link.send(err.response(Some(&id))).await;
                            });
                        }
                    },
                }
            }
            Kind::Notification => {
                if frame.method() == "notifications/progress" {
                    return self.on_progress(frame.msg);
                }
                let related = {
                    let st = self.state.lock().unwrap();
                    self.related_up_id(&st, related).and_then(|u| match &st.pending.get(&u)?.waiter {
                        Waiter::Client { client_id, .. } => Some(client_id.clone()),
                        _ => None,
                    })
                };
                if let Some(ev) = self.events.upgrade() {
                    ev.notification(frame.msg, related);
                }
            }
        }
    }

    fn closed(&self, reason: String) {
        tracing::warn!(upstream = %self.upstream, "upstream connection closed: {reason}");
        self.fail_all(reason, true);
    }
}
