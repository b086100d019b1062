//! What a shared link (`share = true`) adds to a link: one upstream connection serves many
//! sessions, so what one session sends or hears must never reach another.
//!
//! - Request ids are the link's own already; a client request is known by its session and
//!   id ([`ClientRef`]), so two sessions' equal ids never meet.
//! - Progress tokens go upstream as the link's own (one per request, never reused) and come
//!   back as the client's: [`Shared::client_tokens`] maps a session's token to the link's.
//! - A server message is delivered only where it is routed (the request it relates to, the
//!   bridged task it names, the link token it carries). Of the notifications tied to no
//!   request, list changes go to every session, `notifications/resources/updated` to the
//!   sessions subscribed to its uri, a task's status to the session whose request created
//!   the task, and anything else (logs) to nobody. What names a task relayed to modern
//!   clients (its questions, its status) goes to its subscriber ([`RelayedTaskEvents`],
//!   `inbound`) instead.
//! - Resource subscriptions are counted per uri: the upstream hears `resources/subscribe`
//!   once while any session holds it, and `resources/unsubscribe` when the last lets go.
//!
//! A per-session link keeps none of this: its one session gets what is unrelated, and its
//! messages keep their bytes (tokens are not rewritten).

use super::types::*;
use crate::jsonrpc::{self, GATEWAY_BUSY, Id, Message, Method, ProgressToken, RpcError, TaskId};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use tokio::time::Instant;

impl Shared {
    /// The token the link sends upstream for its request `up_id`: unique on the link for
    /// as long as it lives.
    pub(super) fn link_token(up_id: i64) -> ProgressToken {
        ProgressToken::Str(format!("tg-{up_id}"))
    }

    /// Upstream task `task` was created by a request of `session`; at most `limit` owners
    /// are kept (the oldest is forgotten first: its status notifications then reach nobody).
    pub(super) fn own_task(&mut self, task: TaskId, session: SessionTag, limit: usize) {
        while self.task_owners.len() >= limit.max(1) && !self.task_owners.contains_key(&task) {
            let oldest = self.task_owners.iter().min_by_key(|(_, (_, n))| *n).map(|(k, _)| k.clone());
            match oldest {
                Some(t) => self.task_owners.remove(&t),
                None => break,
            };
        }
        self.next_owned += 1;
        self.task_owners.insert(task, (session, self.next_owned));
    }

    pub(super) fn forget_task(&mut self, task: &str) {
        self.task_owners.remove(task);
    }
}

impl LinkState {
    /// The sessions a notification tied to no request goes to (see the module's doc); `uri`
    /// is a `notifications/resources/updated`'s.
    fn unrelated_targets(&self, msg: &Message, uri: Option<&str>) -> Vec<Weak<dyn LinkEvents>> {
        let Some(shared) = &self.shared else { return self.sessions.values().cloned().collect() };
        let of = |tags: &mut dyn Iterator<Item = &SessionTag>| -> Vec<Weak<dyn LinkEvents>> {
            tags.filter_map(|t| self.sessions.get(t).cloned()).collect()
        };
        match msg.method() {
            Method::ToolsListChanged | Method::ResourcesListChanged | Method::PromptsListChanged => {
                self.sessions.values().cloned().collect()
            }
            // Each session looks for the request the server cancels among its own.
            Method::Cancelled => self.sessions.values().cloned().collect(),
            Method::ResourcesUpdated => {
                uri.and_then(|u| shared.subscribers.get(u)).map(|s| of(&mut s.iter())).unwrap_or_default()
            }
            Method::TaskStatus => {
                let task = msg.task_id_param();
                let owner = task.and_then(|t| shared.task_owners.get(&t).map(|(s, _)| *s));
                owner.map(|s| of(&mut std::iter::once(&s))).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }
}

impl LinkCore {
    /// Request `up_id` was given up on (cancelled, timed out, its session ended), and the
    /// upstream may still be serving it: on a shared link that places server messages by
    /// elimination, none is for `request_timeout` (the silence after which the gateway gives
    /// up on a request anyway), or until its answer comes, unless the one left in flight is
    /// its `owner`'s too (see `LinkState::abandoned`). At most `max_in_flight` are kept:
    /// the soonest to expire goes first, and the newest keeps elimination off the longest.
    pub(super) fn abandoned(&self, up_id: i64, owner: Option<Arc<str>>) {
        if !self.shared || !self.infer_related.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        let mut st = self.state.lock().unwrap();
        st.abandoned.retain(|_, (until, _)| *until > now);
        if st.abandoned.len() >= self.max_task_routes.max(1)
            && let Some(soonest) = st.abandoned.iter().min_by_key(|(_, (until, _))| *until).map(|(k, _)| *k)
        {
            st.abandoned.remove(&soonest);
        }
        st.abandoned.insert(up_id, (now + self.deadlines.idle(), owner));
    }

    /// A notification from the server tied to no request: to the one session of a
    /// per-session link; on a shared link, to the sessions the module's doc says.
    pub(super) fn unrelated(&self, msg: Message) {
        // Read before the lock: it builds the message's tree.
        let uri = match msg.method() {
            Method::ResourcesUpdated if self.shared => msg.value().pointer("/params/uri").and_then(Value::as_str),
            _ => None,
        };
        let targets = self.state.lock().unwrap().unrelated_targets(&msg, uri);
        if targets.is_empty() {
            tracing::debug!(upstream = %self.upstream, method = msg.method_name(), "dropped a notification tied to no request: no session of the link is the one to get it");
            return;
        }
        let mut targets = targets.into_iter().filter_map(|w| w.upgrade()).peekable();
        while let Some(ev) = targets.next() {
            // The bytes are shared between the copies.
            let m = if targets.peek().is_some() { msg.clone() } else { return ev.notification(msg, None) };
            ev.notification(m, None);
        }
    }

    /// On a shared link, a server message that carries one of the link's progress tokens in
    /// `params._meta`: it belongs to that token's request, and the client sees its own token.
    pub(super) fn token_back(&self, msg: Message) -> (Message, Option<Dest>) {
        if !self.shared {
            return (msg, None);
        }
        let Some(token) = msg.progress_token() else { return (msg, None) };
        let found = {
            let st = self.state.lock().unwrap();
            st.tokens.get(&token).and_then(|r| r.client_token.clone().map(|c| (c, r.dest.clone())))
        };
        match found {
            Some((client_token, dest)) => (msg.with_progress_token(&client_token), Some(dest)),
            None => (msg, None),
        }
    }

    /// The events of session `session`, if it is still served by this link.
    pub(super) fn events_of(&self, session: SessionTag) -> Option<Arc<dyn LinkEvents>> {
        self.state.lock().unwrap().sessions.get(&session).and_then(Weak::upgrade)
    }
}

impl Link {
    /// Whether this link serves every session of its upstream (`share = true`).
    pub fn is_shared(&self) -> bool {
        self.core.shared
    }

    /// Session `session` uses this link from now on; what is for it goes to `events`. On a
    /// shared link its requests count against the share of `client` (a principal, else the
    /// session), `max_in_flight_per_client`.
    pub fn attach(&self, session: SessionTag, events: Weak<dyn LinkEvents>, client: Arc<str>) {
        let mut guard = self.core.state.lock().unwrap();
        let st = &mut *guard;
        // A session that went without detaching is forgotten here.
        st.sessions.retain(|_, s| s.strong_count() > 0);
        st.sessions.insert(session, events);
        if let Some(shared) = st.shared.as_mut() {
            shared.client_keys.retain(|s, _| st.sessions.contains_key(s));
            shared.client_keys.insert(session, client);
        }
    }

    /// Session `session` ended (a shared link lives on): its requests in flight are
    /// cancelled upstream, its token routes and task ownerships go, and the uris only it was
    /// subscribed to are unsubscribed upstream.
    pub fn detach(self: &Arc<Self>, session: SessionTag) {
        let (in_flight, last_uris) = {
            let mut st = self.core.state.lock().unwrap();
            st.sessions.remove(&session);
            let in_flight: Vec<i64> =
                st.by_client_id.iter().filter(|(c, _)| c.session == session).map(|(_, up)| *up).collect();
            // Tokens kept for its passed-through tasks (its bridged calls end their own).
            let kept: Vec<ProgressToken> = st
                .tokens
                .iter()
                .filter(|(_, r)| r.owner.is_none() && r.activity.is_none())
                .filter(|(_, r)| matches!(&r.dest, Dest::Client(c) if c.session == session))
                .map(|(t, _)| t.clone())
                .collect();
            for t in kept {
                st.task_tokens.retain(|_, (tok, _)| *tok != t);
                st.remove_token(&t);
            }
            let mut last_uris = Vec::new();
            if let Some(shared) = st.shared.as_mut() {
                shared.task_owners.retain(|_, (s, _)| *s != session);
                shared.client_tokens.retain(|(s, _), _| *s != session);
                shared.subscriptions.remove(&session);
                shared.client_keys.remove(&session);
                shared.subscribers.retain(|uri, tags| {
                    tags.retain(|t| *t != session);
                    if tags.is_empty() {
                        last_uris.push(uri.clone());
                    }
                    !tags.is_empty()
                });
            }
            (in_flight, last_uris)
        };
        if in_flight.is_empty() && last_uris.is_empty() {
            return;
        }
        let link = self.clone();
        tokio::spawn(async move {
            for up_id in in_flight {
                link.cancel(up_id, "the client's session ended").await;
            }
            for uri in last_uris {
                let gate = link.subscription_gate(&uri);
                let _decided = gate.lock().await;
                // A session that subscribed since holds the upstream's subscription now.
                if link.is_subscribed(&uri) {
                    continue;
                }
                if link.is_modern() {
                    let _ = link.listen_for_resource(&uri, false, usize::MAX);
                    continue;
                }
                if let Err(e) = link.request(Method::ResourcesUnsubscribe, json!({"uri": uri})).await {
                    tracing::debug!(upstream = %link.core.upstream, "resources/unsubscribe after the last subscriber left: {e}");
                }
            }
        });
    }

    /// The lock of `uri`'s subscription on a shared link, held by a subscribe or unsubscribe
    /// from its decision until the upstream answered it: the next decides on its outcome.
    pub fn subscription_gate(&self, uri: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut st = self.core.state.lock().unwrap();
        let Some(shared) = st.shared.as_mut() else { return Arc::default() };
        shared.subscription_gates.retain(|_, g| g.strong_count() > 0);
        if let Some(gate) = shared.subscription_gates.get(uri).and_then(Weak::upgrade) {
            return gate;
        }
        let gate = Arc::new(tokio::sync::Mutex::new(()));
        shared.subscription_gates.insert(uri.to_string(), Arc::downgrade(&gate));
        gate
    }

    /// Whether a session of this shared link holds `uri`.
    fn is_subscribed(&self, uri: &str) -> bool {
        self.core.state.lock().unwrap().shared.as_ref().is_some_and(|s| s.subscribers.contains_key(uri))
    }

    /// Session `session` subscribes to `uri`: `Ok(true)` if it is the first session to and
    /// the upstream must be asked, `Ok(false)` if another already holds the subscription.
    /// A session holds at most `limit` subscriptions (-32004 past it).
    pub fn subscribe(&self, session: SessionTag, uri: &str, limit: usize) -> Result<bool, RpcError> {
        let mut st = self.core.state.lock().unwrap();
        // A per-session link's one session asks the upstream itself.
        let Some(shared) = st.shared.as_mut() else { return Ok(true) };
        if shared.subscribers.get(uri).is_some_and(|tags| tags.contains(&session)) {
            return Ok(false);
        }
        let held = shared.subscriptions.entry(session).or_default();
        if *held >= limit {
            return Err(RpcError::new(
                GATEWAY_BUSY,
                format!("this session holds {limit} resource subscriptions already (server.max_in_flight)"),
            ));
        }
        *held += 1;
        let tags = shared.subscribers.entry(uri.to_string()).or_default();
        tags.push(session);
        Ok(tags.len() == 1)
    }

    /// Session `session` no longer holds `uri` (it unsubscribed, or the upstream refused
    /// its subscription): `true` if it was the last, and the upstream is to be told.
    pub fn unsubscribe(&self, session: SessionTag, uri: &str) -> bool {
        let mut st = self.core.state.lock().unwrap();
        let Some(shared) = st.shared.as_mut() else { return true };
        let Some(tags) = shared.subscribers.get_mut(uri) else { return false };
        let before = tags.len();
        tags.retain(|t| *t != session);
        if tags.len() == before {
            return false;
        }
        if let Some(n) = shared.subscriptions.get_mut(&session) {
            *n = n.saturating_sub(1);
        }
        if tags.is_empty() {
            shared.subscribers.remove(uri);
            return true;
        }
        false
    }

    /// Answers a server request no session can be asked: a ping the gateway answers itself
    /// (it is the upstream's client); anything else is refused.
    pub(super) fn no_session_for(self: &Arc<Self>, id: Id, msg: &Message) {
        if msg.method() == Method::Ping {
            let link = self.clone();
            tokio::spawn(async move {
                let _ = link.send(Message::made(jsonrpc::result_response(&id, json!({})))).await;
            });
            return;
        }
        tracing::info!(upstream = %self.core.upstream, method = msg.method_name(), "refused a server request that relates to no session of the shared link");
        self.refuse(
            id,
            RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                format!(
                    "{} relates to no request of a client: upstream '{}' is shared by many clients, and none can be asked",
                    msg.method_name(),
                    self.core.upstream
                ),
            ),
        );
    }
}
