//! What goes upstream: opening the link, registering requests (client requests, hosted
//! tasks' calls, the gateway's own) under the link's own ids, cancelling them, the bridged
//! calls' routes, and closing.

use super::error::{CloseReason, LinkError};
use super::types::*;
use crate::client_slots::Full;
use crate::clock::Deadlines;
use crate::config::UpstreamConfig;
use crate::jsonrpc::{self, Id, Message, Method, ProgressToken, RpcError, TaskId};
use crate::locks::Mutex;
use crate::upstream::connect::Upstream;
use crate::upstream::progress::{ProgressGate, Verdict};
use serde_json::{Map, Value, json};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

impl Link {
    /// Opens a connection to the upstream. No MCP traffic is sent yet, and no session uses
    /// it until one [`attach`](Link::attach)es. A `shared` link serves every session of its
    /// upstream (see `share`).
    pub async fn connect(
        env: LinkEnv<'_>,
        cfg: &UpstreamConfig,
        generation: u64,
        shared: bool,
    ) -> Result<Arc<Link>, RpcError> {
        let permit = env.permits.take(env.client.filter(|_| !shared)).map_err(|full| match full {
            Full::All(max) => LinkError::TooManyLinks(max),
            Full::Client(max) => LinkError::TooManyLinksForClient(max),
        })?;
        let state = LinkState { next_id: 1, shared: shared.then(Default::default), ..Default::default() };
        let core = Arc::new(LinkCore {
            generation,
            upstream: cfg.name.as_str().into(),
            state: Mutex::new(state),
            is_closed: Default::default(),
            shared,
            tasks: env.tasks,
            relayed: env.relayed,
            link: OnceLock::new(),
            progress_pace: crate::upstream::progress::Pace {
                interval: env.limits.progress_min_interval,
                burst: env.limits.progress_burst,
            },
            infer_related: (!Upstream::tells_related(&cfg.transport)).into(),
            max_task_routes: env.limits.max_in_flight,
            permit: Mutex::new(Some(permit)),
            deadlines: Arc::new(Deadlines::new(cfg.request_timeout, cfg.max_request_time)),
            held: Arc::new(Deadlines::new(Duration::MAX, Duration::MAX)),
        });
        let conn = Upstream::connect(env.http, env.limits, cfg, env.credential.clone(), core.clone()).await;
        crate::metrics::global().upstream(&cfg.name).connected(conn.is_ok());
        let conn = conn.map_err(|cause| LinkError::Unavailable { upstream: core.upstream.clone(), cause })?;
        let link = Arc::new(Link {
            core: core.clone(),
            conn,
            max_in_flight: env.limits.max_in_flight,
            client_share: cfg.client_share(env.limits.max_in_flight),
            request_timeout: cfg.request_timeout,
            modern: Default::default(),
        });
        let _ = core.link.set(Arc::downgrade(&link));
        tokio::spawn(LinkCore::enforce_timeouts(Arc::downgrade(&core), core.deadlines.clone()));
        tokio::spawn(LinkCore::send_held(Arc::downgrade(&core), core.held.clone()));
        Ok(link)
    }

    pub fn generation(&self) -> u64 {
        self.core.generation
    }

    pub fn upstream_name(&self) -> &str {
        &self.core.upstream
    }

    pub fn is_closed(&self) -> bool {
        self.core.is_closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Why the connection closed, if it did.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.core.state.lock().unwrap().closed.clone()
    }

    /// When the connection died, if it did.
    pub fn closed_at(&self) -> Option<Instant> {
        self.core.state.lock().unwrap().closed_at
    }

    /// Registers request `msg` under a new id of the link's; returns the id and the message
    /// to send (on a shared link, with the link's own progress token in place of the
    /// client's).
    pub(super) fn register(&self, waiter: Waiter, msg: Message) -> Result<(i64, Message), RpcError> {
        let token = msg.progress_token();
        // Whose it is matters only where server messages are placed by elimination; a task's
        // owner is asked of its subscriber before the link's lock is taken.
        let by_elimination = self.core.shared && self.core.infer_related.load(std::sync::atomic::Ordering::Relaxed);
        let task_owner = match &waiter {
            Waiter::Task { task_id, .. } if by_elimination => self.core.tasks.owner(task_id),
            _ => None,
        };
        let mut st = self.core.state.lock().unwrap();
        if let Some(reason) = &st.closed {
            return Err(self.core.closed_error(reason));
        }
        // The link's own listens (at most five: `resource_listen`) take no client's place.
        let own_listen = matches!(waiter, Waiter::Internal { .. }) && msg.method() == Method::SubscriptionsListen;
        if !own_listen && st.counted_in_flight() >= self.max_in_flight {
            return Err(LinkError::InFlight { upstream: self.core.upstream.clone(), limit: self.max_in_flight }.into());
        }
        if let Waiter::Client { client, .. } = &waiter
            && st.by_client_id.contains_key(client)
        {
            return Err(LinkError::IdInUse(client.id.clone()).into());
        }
        // On a shared link, one client holds at most its share of the requests in flight.
        let client_key = match (&waiter, st.shared.as_ref()) {
            (Waiter::Client { client, .. }, Some(shared)) => shared.client_keys.get(&client.session).cloned(),
            (Waiter::Task { share, .. }, Some(_)) => share.clone(),
            _ => None,
        };
        if let Some(k) = &client_key {
            let held = st.shared.as_ref().and_then(|s| s.in_flight_by_client.get(k)).copied().unwrap_or(0);
            if held >= self.client_share {
                return Err(
                    LinkError::ClientShare { upstream: self.core.upstream.clone(), limit: self.client_share }.into()
                );
            }
            if let Some(shared) = st.shared.as_mut() {
                *shared.in_flight_by_client.entry(k.clone()).or_default() += 1;
            }
        }
        let up_id = st.next_id;
        st.next_id += 1;
        let dest = match &waiter {
            Waiter::Client { client, .. } => {
                st.by_client_id.insert(client.clone(), up_id);
                Some(Dest::Client(client.clone()))
            }
            Waiter::Task { task_id, .. } => {
                st.tasks_running += 1;
                Some(Dest::Task(task_id.clone()))
            }
            Waiter::Internal { on_behalf_of, .. } => on_behalf_of.clone().map(Dest::Client),
        };
        // On a shared link the upstream sees a token of the link's, unique to this request;
        // the route is found by it and the client sees its own again.
        let (key, client_token) = match (token, self.core.shared) {
            (Some(t), true) => (Some(Shared::link_token(up_id)), Some(t)),
            (t, _) => (t, None),
        };
        // The route the client's token already has, if any (by the token itself, or on a
        // shared link by the session's own mapping).
        let held = match (&client_token, &dest) {
            (Some(ct), Some(Dest::Client(c))) => {
                st.shared.as_ref().and_then(|s| s.client_tokens.get(&(c.session, ct.clone())).cloned())
            }
            (Some(_), _) => None,
            (None, _) => key.clone(),
        };
        // A token a bridged call holds for its task keeps its route. One a passed-through
        // task held is free again once the client reuses it: the client saw that task end.
        if let Some(t) = &held
            && st.tokens.get(t).is_some_and(|r| r.owner.is_none() && r.activity.is_none())
        {
            st.task_tokens.retain(|_, (tok, _)| tok != t);
            st.remove_token(t);
        }
        // A token still in use by another request of the client's gets no second route.
        let taken = held.as_ref().is_some_and(|t| st.tokens.contains_key(t));
        if let (Some(k), Some(dest), false) = (&key, dest, taken) {
            if let (Some(ct), Dest::Client(c), Some(shared)) = (&client_token, &dest, st.shared.as_mut()) {
                shared.client_tokens.insert((c.session, ct.clone()), k.clone());
            }
            st.tokens.insert(
                k.clone(),
                TokenRoute {
                    dest,
                    gate: ProgressGate::default(),
                    owner: Some(up_id),
                    activity: None,
                    upstream_progress: false,
                    client_token: client_token.clone(),
                },
            );
        }
        let about_task = match msg.method() {
            m @ (Method::TasksGet | Method::TasksResult | Method::TasksCancel)
                if matches!(waiter, Waiter::Client { .. }) =>
            {
                msg.task_id_param().map(|t| (t, m == Method::TasksResult))
            }
            _ => None,
        };
        // The gateway's own requests have deadlines of their own (their caller's); a modern
        // server's listen stream lasts as long as its client wants, however quiet it is.
        let listens = msg.method() == Method::SubscriptionsListen && self.is_modern();
        if !matches!(waiter, Waiter::Internal { .. }) && !listens {
            self.core.deadlines.insert(up_id);
        }
        let owner = match &waiter {
            Waiter::Client { client, .. } | Waiter::Internal { on_behalf_of: Some(client), .. } if by_elimination => {
                st.sessions.get(&client.session).and_then(Weak::upgrade).map(|ev| Arc::from(ev.owner()))
            }
            _ => task_owner,
        };
        st.pending.insert(up_id, Pending { waiter, token: key.clone(), about_task, owner, client_key, listens });
        drop(st);
        let msg = match (&key, client_token.is_some()) {
            (Some(k), true) => msg.with_progress_token(k),
            _ => msg,
        };
        Ok((up_id, msg))
    }

    pub(super) async fn send_registered(&self, up_id: i64, msg: Message) -> Result<(), RpcError> {
        if let Err(cause) = self.transmit(msg.with_id(&Id::Num(up_id))).await {
            self.core.take_pending(up_id);
            return Err(LinkError::Transport { upstream: self.core.upstream.clone(), cause }.into());
        }
        Ok(())
    }

    /// [`Link::send_registered`], declaring `capabilities` for this request (a modern link;
    /// `None`: the link's own), with the client's `Mcp-Param-*` headers (`client_params`).
    async fn send_registered_declaring(
        &self,
        up_id: i64,
        msg: Message,
        capabilities: Option<Map<String, Value>>,
        client_params: &[(String, Vec<u8>)],
    ) -> Result<(), RpcError> {
        let msg = msg.with_id(&Id::Num(up_id));
        let sent = match (capabilities, client_params) {
            (None, []) => self.transmit(msg).await,
            // Boxed: every request's future would otherwise carry the modern send's state.
            (c, params) => Box::pin(self.transmit_declaring(msg, c, params)).await,
        };
        if let Err(cause) = sent {
            self.core.take_pending(up_id);
            return Err(LinkError::Transport { upstream: self.core.upstream.clone(), cause }.into());
        }
        Ok(())
    }

    /// Forwards a client request; its response comes back through [`LinkEvents::response`]
    /// of the client's session.
    pub async fn forward(&self, client: ClientRef, msg: Message, shape: Shape) -> Result<(), RpcError> {
        let answers = crate::mcp::translate::answered(msg.method());
        let (up_id, msg) = self.register(Waiter::Client { client, shape, answers }, msg)?;
        self.send_registered(up_id, msg).await
    }

    /// [`Link::forward`], declaring `capabilities` as this request's client capabilities to a
    /// modern upstream (in its `_meta`), in place of the link's own (`None`: the link's). A
    /// shared link serves clients of different capabilities; a legacy link ignores them (its
    /// `initialize` declared them once). `client_params`: the `Mcp-Param-*` headers of the
    /// client's request, which a modern link passes on where it does not recognise them.
    pub async fn forward_declaring(
        &self,
        client: ClientRef,
        msg: Message,
        shape: Shape,
        capabilities: Option<Map<String, Value>>,
        client_params: &[(String, Vec<u8>)],
    ) -> Result<(), RpcError> {
        let answers = crate::mcp::translate::answered(msg.method());
        let (up_id, msg) = self.register(Waiter::Client { client, shape, answers }, msg)?;
        self.send_registered_declaring(up_id, msg, capabilities, client_params).await
    }

    /// Whether a request counted against `share` would be admitted now: a hosted task asks
    /// before it is made, so that a client past its share is refused at once instead of
    /// being given a task that fails at once. (Not a reservation: the call itself is
    /// checked again.)
    pub fn admits(&self, share: &str) -> Result<(), RpcError> {
        let st = self.core.state.lock().unwrap();
        if st.counted_in_flight() >= self.max_in_flight {
            return Err(LinkError::InFlight { upstream: self.core.upstream.clone(), limit: self.max_in_flight }.into());
        }
        if let Some(shared) = &st.shared
            && shared.in_flight_by_client.get(share).copied().unwrap_or(0) >= self.client_share
        {
            return Err(
                LinkError::ClientShare { upstream: self.core.upstream.clone(), limit: self.client_share }.into()
            );
        }
        Ok(())
    }

    /// Starts the background call of a hosted task; what comes of it goes to [`TaskCalls`].
    /// Returns the upstream id, for cancellation. On a shared link it counts against the
    /// share of `share` (the creator's principal or session), as the creator's own requests
    /// do: a client cannot hold more of the link through tasks than directly.
    pub async fn start_task_call(
        &self,
        task_id: Arc<str>,
        msg: Value,
        share: Option<Arc<str>>,
    ) -> Result<i64, RpcError> {
        let msg = Self::outgoing(msg)?;
        let (up_id, msg) = self.register(Waiter::Task { task_id, share }, msg)?;
        self.send_registered(up_id, msg).await?;
        Ok(up_id)
    }

    /// Sends a request of the gateway's own and waits for the whole response message, at
    /// most `request_timeout`; past it the upstream is told to stop and the answer is -32001.
    pub async fn request(&self, method: Method, params: Value) -> Result<Value, RpcError> {
        let msg = jsonrpc::request(&Id::Num(0), method, params);
        match tokio::time::timeout(self.request_timeout, self.request_for(msg, None)).await {
            Ok(answer) => answer,
            // The abandoned request was freed and cancelled upstream as it was dropped.
            Err(_) => Err(LinkError::NoAnswer {
                upstream: self.core.upstream.clone(),
                method: method.as_str().into(),
                after: self.request_timeout,
            }
            .into()),
        }
    }

    /// Sends a request of the gateway's own made for client request `on_behalf_of`: progress
    /// and server requests that belong to it go to that client request.
    /// A caller that stops waiting (its future is dropped) frees the request's slot and the
    /// upstream is told to stop (except for `initialize`, which must not be cancelled).
    pub async fn request_for(&self, msg: Value, on_behalf_of: Option<ClientRef>) -> Result<Value, RpcError> {
        self.request_for_declaring(msg, on_behalf_of, None).await
    }

    /// [`Link::request_for`], declaring `capabilities` as this request's client capabilities
    /// to a modern upstream (`None`: the link's own), as [`Link::forward_declaring`] does.
    pub async fn request_for_declaring(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
        capabilities: Option<Map<String, Value>>,
    ) -> Result<Value, RpcError> {
        self.internal_request(msg, on_behalf_of, capabilities, |_| {}).await
    }

    /// [`Link::request_for_declaring`], telling `registered` the id the request goes up with
    /// before it is sent.
    pub(super) async fn internal_request(
        &self,
        msg: Value,
        on_behalf_of: Option<ClientRef>,
        capabilities: Option<Map<String, Value>>,
        registered: impl FnOnce(i64),
    ) -> Result<Value, RpcError> {
        let msg = Self::outgoing(msg)?;
        let (tx, rx) = oneshot::channel();
        let cancellable = msg.method() != Method::Initialize;
        let (up_id, msg) = self.register(Waiter::Internal { tx, on_behalf_of }, msg)?;
        registered(up_id);
        let mut guard = AbandonGuard { core: &self.core, up_id, cancel_upstream: cancellable, armed: true };
        self.send_registered_declaring(up_id, msg, capabilities, &[]).await?;
        let answer = rx.await.map_err(|_| {
            // Only a link that closes drops its waiters.
            let reason = self.core.state.lock().unwrap().closed.clone().unwrap_or(CloseReason::SessionEnded);
            self.core.closed_error(&reason)
        });
        guard.armed = false;
        answer
    }

    /// A request the gateway made (or a client's, edited), read as a message.
    fn outgoing(msg: Value) -> Result<Message, RpcError> {
        Message::from_value(msg).map_err(|r| r.error)
    }

    /// Answers a request the server sent with an error (nobody on the client side can or
    /// may answer it), without waiting for the send.
    pub fn refuse(self: &Arc<Self>, upstream_id: Id, err: RpcError) {
        let link = self.clone();
        tokio::spawn(async move {
            let _ = link.send(Message::made(err.response(Some(&upstream_id)))).await;
        });
    }

    /// Sends a notification or a response to a server request.
    pub async fn send(&self, msg: Message) -> Result<(), RpcError> {
        if let Some(reason) = &self.core.state.lock().unwrap().closed {
            return Err(self.core.closed_error(reason));
        }
        self.transmit(msg)
            .await
            .map_err(|cause| LinkError::Transport { upstream: self.core.upstream.clone(), cause }.into())
    }

    /// Stops waiting for request `up_id` and tells the upstream it is cancelled.
    pub async fn cancel(&self, up_id: i64, reason: &str) {
        if let Some(p) = self.core.take_pending(up_id) {
            self.core.abandoned(up_id, p.owner);
            let note = jsonrpc::notification(Method::Cancelled, json!({"requestId": up_id, "reason": reason}));
            let _ = self.send(Message::made(note)).await;
        }
    }

    /// Whether client request `client` is in flight on this link.
    pub fn has_client_request(&self, client: &ClientRef) -> bool {
        self.core.state.lock().unwrap().by_client_id.contains_key(client)
    }

    /// The client cancelled its request `client_id`: the slot is freed, the upstream is told
    /// once (with the client's `reason`), and nothing more is delivered for it. Returns
    /// whether the request was in flight.
    pub async fn cancel_client_request(&self, client: &ClientRef, reason: Option<Value>) -> bool {
        let up_id = self.core.state.lock().unwrap().by_client_id.get(client).copied();
        let Some(up_id) = up_id else { return false };
        let Some(p) = self.core.take_pending(up_id) else { return false };
        self.core.abandoned(up_id, p.owner);
        let mut params = json!({"requestId": up_id});
        if let Some(r) = reason {
            params["reason"] = r;
        }
        let _ = self.send(Message::made(jsonrpc::notification(Method::Cancelled, params))).await;
        true
    }

    /// A bridged call follows upstream task `task_id` for client request `client`: the
    /// task's status notifications, progress under `token` (the client's, which its call
    /// carried) and the server's requests tagged with the task come to `follower` (and to
    /// that client request) until [`Link::end_bridge`].
    pub fn start_bridge(
        &self,
        task_id: &str,
        client: &ClientRef,
        token: Option<&ProgressToken>,
        follower: Arc<dyn TaskFollower>,
    ) {
        let mut st = self.core.state.lock().unwrap();
        // On a shared link the route is under the link's token the call went up with.
        let key = match (&st.shared, token) {
            (Some(shared), Some(t)) => shared.client_tokens.get(&(client.session, t.clone())).cloned(),
            (None, t) => t.cloned(),
            (Some(_), None) => None,
        };
        st.bridges.insert(
            TaskId::new(task_id),
            Bridged { client: client.clone(), follower: follower.clone(), token: key.clone() },
        );
        if let Some(t) = key {
            let route = st.tokens.entry(t).or_insert_with(|| TokenRoute {
                dest: Dest::Client(client.clone()),
                gate: ProgressGate::default(),
                owner: None,
                activity: None,
                upstream_progress: false,
                client_token: None,
            });
            route.owner = None;
            route.activity = Some(follower);
        }
    }

    /// The bridged call of upstream task `task_id` is over: its routes go, and progress
    /// still held is delivered first.
    pub fn end_bridge(&self, task_id: &str) {
        let held = {
            let mut st = self.core.state.lock().unwrap();
            let token = st.bridges.remove(task_id).and_then(|b| b.token);
            token.and_then(|t| st.remove_token(&t)).and_then(|mut r| r.gate.finish().map(|m| (r.dest, m)))
        };
        if let Some((dest, m)) = held {
            self.core.deliver_to(&dest, m);
        }
    }

    /// A progress notification made by the gateway (from a task's status message) for the
    /// bridged call of upstream task `task_id`, under its client's token, with a value above
    /// every value sent so far and never past the total; none once the upstream has sent
    /// progress of its own.
    pub fn synthesize_progress(&self, task_id: &str, message: &str) {
        let now = Instant::now();
        let out = {
            let mut st = self.core.state.lock().unwrap();
            let Some(token) = st.bridges.get(task_id).and_then(|b| b.token.clone()) else { return };
            let Some(route) = st.tokens.get_mut(&token) else { return };
            if route.upstream_progress {
                return;
            }
            let Some(next) = route.gate.next_value() else { return };
            let shown = route.client_token.as_ref().unwrap_or(&token);
            let msg = Message::made(jsonrpc::notification(
                Method::Progress,
                json!({"progressToken": shown.to_value(), "progress": next, "message": message}),
            ));
            match route.gate.offer(msg, crate::upstream::progress::Pace::UNPACED, now) {
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
        self.close_because(CloseReason::SessionEnded).await;
    }

    /// Closes the connection now, whatever still runs on it; what is in flight (hosted
    /// tasks included) fails with `reason`.
    pub async fn close_because(&self, reason: CloseReason) {
        self.core.fail_all(reason, false);
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
        if !self.armed {
            return;
        }
        let Some(p) = self.core.take_pending(self.up_id) else { return };
        if !self.cancel_upstream {
            return;
        }
        self.core.abandoned(self.up_id, p.owner);
        if let Some(link) = self.core.link.get().and_then(Weak::upgrade) {
            let note = Message::made(jsonrpc::notification(
                Method::Cancelled,
                json!({"requestId": self.up_id, "reason": "the gateway no longer needs the answer"}),
            ));
            tokio::spawn(async move {
                let _ = link.send(note).await;
            });
        }
    }
}
