//! Where what a server sends goes: the request a message relates to, the bridged call whose
//! task it names, progress through each token's gate, and the token routes kept for tasks.

use super::types::*;
use crate::clock::Deadlines;
use crate::jsonrpc::{Id, Message, Method, ProgressToken, TaskId};
use crate::upstream::progress::Verdict;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

impl LinkState {
    /// The route of progress token `token` now belongs to upstream task `task_id` until it
    /// ends; at most `limit` such routes are kept (the oldest and the expired go first).
    pub(super) fn keep_token_for_task(
        &mut self,
        task_id: &str,
        token: ProgressToken,
        ttl: Option<Duration>,
        limit: usize,
    ) {
        let now = Instant::now();
        let expired: Vec<TaskId> =
            self.task_tokens.iter().filter(|(_, (_, until))| *until <= now).map(|(k, _)| k.clone()).collect();
        for t in expired {
            self.drop_task_route(t.as_str());
        }
        while self.task_tokens.len() >= limit.max(1) {
            let oldest = self.task_tokens.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| k.clone());
            match oldest {
                Some(t) => {
                    self.drop_task_route(t.as_str());
                }
                None => break,
            }
        }
        self.drop_task_route(task_id);
        if let Some(route) = self.tokens.get_mut(&token) {
            route.owner = None;
        }
        let ttl = ttl.unwrap_or(MAX_TASK_ROUTE).min(MAX_TASK_ROUTE);
        self.task_tokens.insert(TaskId::new(task_id), (token, now + ttl));
    }

    /// Forgets the token route of a task; returns it (for what it still holds).
    pub(super) fn drop_task_route(&mut self, task_id: &str) -> Option<TokenRoute> {
        let (token, _) = self.task_tokens.remove(task_id)?;
        match self.tokens.get(&token) {
            Some(r) if r.owner.is_none() && r.activity.is_none() => self.remove_token(&token),
            _ => None,
        }
    }

    /// Removes the route of `token` (and, on a shared link, the client's token that maps to it).
    pub(super) fn remove_token(&mut self, token: &ProgressToken) -> Option<TokenRoute> {
        let route = self.tokens.remove(token)?;
        if let (Some(shared), Some(ct), Dest::Client(c)) = (self.shared.as_mut(), &route.client_token, &route.dest) {
            let key = (c.session, ct.clone());
            if shared.client_tokens.get(&key) == Some(token) {
                shared.client_tokens.remove(&key);
            }
        }
        Some(route)
    }
}

/// Whose listen stream a tagged notification is on ([`LinkCore::listener_of`]).
pub(super) enum Listener {
    /// A client's, forwarded.
    Client(ClientRef),
    /// The gateway's own (`resource_listen`), by its upstream id: delivered as a legacy
    /// link's would be.
    Gateway(i64),
}

/// The longest a passed-through task keeps its progress route when its ttl says nothing.
const MAX_TASK_ROUTE: Duration = Duration::from_secs(24 * 3600);

impl LinkCore {
    /// A passed-through task ended: what its token still holds is delivered, then the token
    /// is finished.
    pub(super) fn end_task_route(&self, task_id: &str) {
        let held =
            self.state.lock().unwrap().drop_task_route(task_id).and_then(|mut r| r.gate.finish().map(|m| (r.dest, m)));
        if let Some((dest, m)) = held {
            self.deliver_to(&dest, m);
        }
    }

    /// The pending request a server message belongs to: the transport's hint; else, for
    /// what a server sends while serving a request (input requests: elicitation, sampling,
    /// roots; logs) that names no task, the only request in flight. Anything more ambiguous
    /// belongs to no request (a progress token inside a server request is the server's own,
    /// for the client's progress on it, and says nothing about the gateway's requests).
    pub(super) fn related_up_id(&self, st: &LinkState, msg: &Message, related: Option<Id>) -> Option<i64> {
        match related {
            Some(Id::Num(n)) => return Some(n),
            Some(Id::Str(_) | Id::Big(_)) => return None,
            None => {}
        }
        let request_scoped = msg.method().is_input_request() || msg.method() == Method::LogMessage;
        let names_a_task = crate::mcp::task_messages::related_task(msg).is_some();
        if !self.infer_related.load(std::sync::atomic::Ordering::Relaxed) || !request_scoped || names_a_task {
            return None;
        }
        // A listen serves no input request or log (what it carries is tagged with it): it
        // is no candidate, and does not stand in the way of the one that is.
        let mut pending = st.pending.iter().filter(|(_, p)| !p.listens);
        let (Some((&up_id, only)), None) = (pending.next(), pending.next()) else { return None };
        // A request given up on that the upstream may still serve, and that another owner's:
        // what comes may be its.
        let now = Instant::now();
        let doubt =
            |(until, owner): &(Instant, Option<Arc<str>>)| *until > now && (owner.is_none() || *owner != only.owner);
        if st.abandoned.values().any(doubt) { None } else { Some(up_id) }
    }

    /// Where a server message related to pending request `up_id` goes.
    pub(super) fn dest_of(st: &LinkState, up_id: i64) -> Option<Dest> {
        match &st.pending.get(&up_id)?.waiter {
            Waiter::Client { client, .. } => Some(Dest::Client(client.clone())),
            Waiter::Task { task_id, .. } => Some(Dest::Task(task_id.clone())),
            Waiter::Internal { on_behalf_of, .. } => on_behalf_of.clone().map(Dest::Client),
        }
    }

    /// The destination of a server message: the bridged call whose task it names, else the
    /// request it relates to, else `by_token` (where the link's progress token it carries
    /// goes, on a shared link). With no transport's hint, the token goes before elimination:
    /// the one request in flight may be another session's than the token's.
    pub(super) fn route(&self, msg: &Message, related: Option<Id>, by_token: Option<Dest>) -> Option<Dest> {
        let st = self.state.lock().unwrap();
        if let Some(task) = crate::mcp::task_messages::related_task(msg)
            && let Some(b) = st.bridges.get(&task)
        {
            return Some(Dest::Client(b.client.clone()));
        }
        if related.is_none() && by_token.is_some() {
            return by_token;
        }
        let dest = self.related_up_id(&st, msg, related).and_then(|u| Self::dest_of(&st, u));
        // Only input requests make a hosted task wait for input; anything else the server
        // asks while a task runs (roots, ping) is the session's business.
        let is_input = matches!(msg.method(), Method::ElicitationCreate | Method::SamplingCreateMessage);
        match dest {
            Some(Dest::Task(_)) if !is_input && msg.id().is_some() => None,
            d => d,
        }
        .or(by_token)
    }

    /// Whose `subscriptions/listen` stream a 2026-07-28 server's notification is on, by its
    /// `_meta` subscriptionId: the id the link gave that request. Over stdio this tag is the
    /// only thing that ties the notification to its stream (over HTTP the stream does too).
    /// `None` for an untagged notification, or a tag naming no listen of the link's.
    pub(super) fn listener_of(&self, msg: &Message) -> Option<Listener> {
        // Most notifications carry no tag: their bytes are looked at, not their tree.
        memchr::memmem::find(msg.bytes(), b"subscriptionId")?;
        let meta = msg.value().pointer("/params/_meta")?;
        let up_id = meta.get(crate::mcp::modern::key::SUBSCRIPTION_ID)?.as_i64()?;
        let st = self.state.lock().unwrap();
        let pending = st.pending.get(&up_id).filter(|p| p.listens)?;
        match &pending.waiter {
            Waiter::Client { client, .. } => Some(Listener::Client(client.clone())),
            Waiter::Internal { on_behalf_of: None, .. } => Some(Listener::Gateway(up_id)),
            Waiter::Internal { on_behalf_of: Some(_), .. } | Waiter::Task { .. } => None,
        }
    }

    pub(super) fn deliver_to(&self, dest: &Dest, msg: Message) {
        match dest {
            Dest::Client(c) => {
                if let Some(ev) = self.events_of(c.session) {
                    ev.notification(msg, Some(c.id.clone()));
                }
            }
            Dest::Task(task_id) => self.tasks.progress(task_id, msg.into_value()),
        }
    }

    pub(super) fn on_progress(&self, msg: Message) {
        let Some(key) = msg.progress_token() else { return };
        // On a shared link the client gets its own token back (read apart, so that the
        // bytes are rewritten outside the lock).
        let msg = match self.shared {
            true => match self.state.lock().unwrap().tokens.get(&key).and_then(|r| r.client_token.clone()) {
                Some(ct) => msg.with_progress_token(&ct),
                None => msg,
            },
            false => msg,
        };
        let now = Instant::now();
        let (dest, verdict, out) = {
            let mut st = self.state.lock().unwrap();
            let Some(route) = st.tokens.get_mut(&key) else {
                tracing::debug!(upstream = %self.upstream, "dropping progress for an unknown or finished token");
                return;
            };
            route.upstream_progress = true;
            let (v, out) = route.gate.offer(msg, self.progress_pace, now);
            let dest = route.dest.clone();
            if let Some(a) = &route.activity {
                a.progress();
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
            Verdict::Hold { at, armed: false } => self.held.insert_until(key, at),
        }
    }

    /// Sends each token's held progress when its interval has passed, until the link closes.
    pub(super) async fn send_held(me: Weak<LinkCore>, held: Arc<Deadlines<ProgressToken>>) {
        while let Some((key, _)) = held.expired().await {
            let Some(core) = me.upgrade() else { return };
            let held = {
                let mut st = core.state.lock().unwrap();
                st.tokens
                    .get_mut(&key)
                    .and_then(|r| r.gate.flush(core.progress_pace, Instant::now()).map(|m| (r.dest.clone(), m)))
            };
            if let Some((dest, m)) = held {
                core.deliver_to(&dest, m);
            }
        }
    }
}
