//! What comes back from upstream: responses matched to their waiters, server requests and
//! notifications passed on (those naming a task relayed to modern clients to its
//! subscriber), timeouts enforced, and everything in flight failed when the connection dies.

use super::error::{CloseReason, LinkError, Timeout};
use super::routes::Listener;
use super::types::*;
use crate::clock::{Deadlines, Expiry};
use crate::jsonrpc::{self, Id, Kind, Message, Method, RpcError};
use crate::transport::{self, InboundSink};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};

impl LinkCore {
    pub(super) fn closed_error(&self, reason: &CloseReason) -> RpcError {
        LinkError::Closed { upstream: self.upstream.clone(), reason: reason.clone() }.into()
    }

    /// Removes a pending request and everything that points at it.
    pub(super) fn take_pending(&self, up_id: i64) -> Option<Pending> {
        let p = self.take_pending_keeping_slot(up_id);
        if matches!(p, Some(Pending { waiter: Waiter::Task { .. }, .. })) {
            self.release_slot();
        }
        p
    }

    /// [`LinkCore::take_pending`], a hosted task's slot kept: its caller releases it once the
    /// task has heard the response, which may go on with another round on the link.
    fn take_pending_keeping_slot(&self, up_id: i64) -> Option<Pending> {
        self.take_pending_from(&mut self.state.lock().unwrap(), up_id)
    }

    /// [`LinkCore::take_pending_keeping_slot`], under the lock its caller holds (`st`).
    fn take_pending_from(&self, st: &mut LinkState, up_id: i64) -> Option<Pending> {
        let p = st.pending.remove(&up_id)?;
        self.deadlines.remove(&up_id);
        if let Some(t) = &p.token
            && st.tokens.get(t).is_some_and(|r| r.owner == Some(up_id))
        {
            st.remove_token(t);
        }
        if let Waiter::Client { client, .. } = &p.waiter {
            st.by_client_id.remove(client);
        }
        if let (Some(k), Some(shared)) = (&p.client_key, st.shared.as_mut())
            && let Some(n) = shared.in_flight_by_client.get_mut(k)
        {
            *n -= 1;
            if *n == 0 {
                shared.in_flight_by_client.remove(k);
            }
        }
        Some(p)
    }

    /// A hosted task or bridged call stopped using the link; the link of an ended session
    /// closes with the last one.
    pub(super) fn release_slot(&self) {
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

    pub(super) fn fail_all(&self, reason: CloseReason, report: bool) {
        let (pending, sessions) = {
            let mut st = self.state.lock().unwrap();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(reason.clone());
            self.is_closed.store(true, std::sync::atomic::Ordering::Release);
            st.closed_at = Some(tokio::time::Instant::now());
            st.by_client_id.clear();
            st.tokens.clear();
            st.bridges.clear();
            st.task_tokens.clear();
            st.abandoned.clear();
            st.tasks_running = 0;
            if let Some(shared) = st.shared.as_mut() {
                // A new connection knows nothing of this one's tokens, tasks or subscriptions.
                **shared = Default::default();
            }
            (std::mem::take(&mut st.pending), st.sessions.clone())
        };
        self.permit.lock().unwrap().take();
        self.deadlines.close();
        self.held.close();
        let err = self.closed_error(&reason);
        for (_, p) in pending {
            // Internal waiters see their sender dropped.
            match p.waiter {
                Waiter::Client { client, shape, .. } => {
                    if let Some(ev) = sessions.get(&client.session).and_then(Weak::upgrade) {
                        ev.response(client.id.clone(), Message::made(err.response(Some(&client.id))), shape, None);
                    }
                }
                Waiter::Task { task_id, .. } => self.tasks.outcome(&task_id, err.response(None)),
                Waiter::Internal { .. } => {}
            }
        }
        if report {
            for ev in sessions.values().filter_map(Weak::upgrade) {
                ev.closed(self.generation, &reason);
            }
        }
    }

    /// Answers requests that ran past their time: `request_timeout` since the last sign of
    /// life (progress), or `max_request_time` in all. A hosted task's call fails its task.
    /// The upstream is told to stop.
    pub(super) async fn enforce_timeouts(me: Weak<LinkCore>, deadlines: Arc<Deadlines<i64>>) {
        let (idle, max) = (deadlines.idle(), deadlines.lifetime());
        while let Some((up_id, expiry)) = deadlines.expired().await {
            let Some(core) = me.upgrade() else { return };
            let Some(p) = core.take_pending(up_id) else { continue };
            core.abandoned(up_id, p.owner.clone());
            let timeout = if expiry == Expiry::Lifetime { Timeout::Lifetime(max) } else { Timeout::Idle(idle) };
            // Also the reason the upstream is given when told to stop.
            let why = timeout.to_string();
            let err = RpcError::from(LinkError::TimedOut { upstream: core.upstream.clone(), timeout });
            match p.waiter {
                Waiter::Client { client, shape, .. } => {
                    tracing::warn!(upstream = %core.upstream, "request {} timed out: {why}", client.id);
                    if let Some(ev) = core.events_of(client.session) {
                        ev.response(client.id.clone(), Message::made(err.response(Some(&client.id))), shape, None);
                    }
                }
                Waiter::Task { task_id, .. } => {
                    tracing::warn!(upstream = %core.upstream, task = %task_id, "hosted task's call timed out: {why}");
                    core.tasks.outcome(&task_id, err.response(None));
                }
                Waiter::Internal { .. } => {}
            }
            if let Some(link) = core.link.get().and_then(Weak::upgrade) {
                let note =
                    Message::made(jsonrpc::notification(Method::Cancelled, json!({"requestId": up_id, "reason": why})));
                tokio::spawn(async move {
                    let _ = link.send(note).await;
                });
            }
        }
    }
}

impl LinkCore {
    /// A 2026-07-28 server ends a listen stream by cancelling it (the one purpose it may send
    /// `notifications/cancelled` for): the listen is over. A client's gets an answer that
    /// says so, which ends its stream (it listens again); the gateway's own ends as if
    /// answered. `false` if `note` names no listen of the link's.
    fn listen_ended(&self, note: &Message) -> bool {
        let Some(Id::Num(up_id)) = note.request_id_param() else { return false };
        if !self.state.lock().unwrap().pending.get(&up_id).is_some_and(|p| p.listens) {
            return false;
        }
        let Some(p) = self.take_pending(up_id) else { return false };
        let why = note.value().pointer("/params/reason").and_then(Value::as_str).unwrap_or("no reason given");
        let err = RpcError::new(
            jsonrpc::INTERNAL_ERROR,
            format!("upstream '{}' ended this subscriptions/listen ({why}); listen again", self.upstream),
        );
        match p.waiter {
            Waiter::Client { client, shape, .. } => {
                if let Some(ev) = self.events_of(client.session) {
                    ev.response(client.id.clone(), Message::made(err.response(Some(&client.id))), shape, None);
                }
            }
            Waiter::Internal { tx, .. } => {
                let _ = tx.send(err.response(None));
            }
            Waiter::Task { .. } => {}
        }
        true
    }

    /// The relayed upstream task a question of the server's names (related-task), with the
    /// link: only on a shared link, where relayed tasks are made.
    fn relayed_task_of(&self, frame: &Message) -> Option<(Arc<super::Link>, crate::jsonrpc::TaskId)> {
        let question =
            matches!(frame.method(), Method::ElicitationCreate | Method::SamplingCreateMessage | Method::RootsList);
        if !self.shared || !question {
            return None;
        }
        let task = crate::mcp::task_messages::related_task(frame)?;
        let link = self.link.get().and_then(Weak::upgrade)?;
        self.relayed.relays(&link, task.as_str()).then_some((link, task))
    }
}

impl InboundSink for LinkCore {
    fn message(&self, frame: Message, related: Option<Id>) {
        match frame.kind() {
            Kind::Response => {
                let Some(&Id::Num(up_id)) = frame.id() else {
                    crate::warn_limit::warn_limited!(upstream = %self.upstream, "dropping response with an id the gateway never sent");
                    return;
                };
                // The latest progress always gets out before the result; a task-augmented
                // call's token lives on with its task (and on a shared link, the task is its
                // session's).
                // Its request is taken from the pending ones, and its session's events found,
                // under the same lock.
                let (held, lists_tools, pending, events) = {
                    let mut st = self.state.lock().unwrap();
                    let lists_tools = st
                        .pending
                        .get(&up_id)
                        .is_some_and(|p| matches!(p.waiter, Waiter::Client { answers: Some(Method::ToolsList), .. }));
                    let (token, session) = match st.pending.get(&up_id) {
                        Some(p) => (
                            p.token.clone(),
                            match &p.waiter {
                                Waiter::Client { client, .. } if self.shared => Some(client.session),
                                _ => None,
                            },
                        ),
                        None => (None, None),
                    };
                    let created = if token.is_some() || session.is_some() {
                        crate::mcp::task_messages::created_task(&frame)
                    } else {
                        None
                    };
                    if let (Some((task_id, _)), Some(session), Some(shared)) = (&created, session, st.shared.as_mut()) {
                        shared.own_task(task_id.clone(), session, self.max_task_routes);
                    }
                    let held = match created {
                        Some((task_id, ttl)) => {
                            if let Some(t) = token.filter(|t| st.tokens.get(t).is_some_and(|r| r.owner == Some(up_id)))
                            {
                                st.keep_token_for_task(task_id.as_str(), t, ttl, self.max_task_routes);
                            }
                            None
                        }
                        None => token
                            .and_then(|t| st.tokens.get_mut(&t))
                            .filter(|r| r.owner == Some(up_id))
                            .and_then(|r| r.gate.finish().map(|m| (r.dest.clone(), m))),
                    };
                    let pending = self.take_pending_from(&mut st, up_id);
                    if pending.is_none() {
                        // A request given up on that the upstream answered after all: it is done.
                        st.abandoned.remove(&up_id);
                    }
                    let events = match &pending {
                        Some(Pending { waiter: Waiter::Client { client, .. }, .. }) => {
                            st.sessions.get(&client.session).and_then(Weak::upgrade)
                        }
                        _ => None,
                    };
                    (held, lists_tools, pending, events)
                };
                // A listing tells which arguments a modern upstream wants as headers, and
                // which a modern client's call must carry where the gateway is the server. The
                // link is asked first: another legacy response's tree is not built for this
                // (it is most of a forwarded call's cost).
                if let Some(link) = self.link.get().and_then(Weak::upgrade).filter(|l| lists_tools || l.is_modern())
                    && let Some(result) =
                        frame.value().get("result").filter(|r| r.get("tools").is_some_and(serde_json::Value::is_array))
                {
                    link.learn_param_headers(result);
                }
                let Some(p) = pending else {
                    tracing::debug!(upstream = %self.upstream, "dropping response to unknown id {up_id}");
                    return;
                };
                if let Some((dest, m)) = held {
                    self.deliver_to(&dest, m);
                }
                match p.waiter {
                    Waiter::Client { client, shape, answers } => {
                        // Only a tasks/* answer can show a task ended: a plain result is not
                        // read for it.
                        let ended = p.about_task.as_ref().and_then(|_| crate::mcp::task_messages::ended_task(&frame));
                        let ended = match (ended, &p.about_task) {
                            (Some(task_id), _) => Some(task_id),
                            // tasks/result's answer (a result or the task's error), or an
                            // upstream that no longer knows the task: it is over.
                            (None, Some((task_id, is_result))) if *is_result || frame.is_error() => {
                                Some(task_id.clone())
                            }
                            _ => None,
                        };
                        if let Some(task_id) = ended {
                            self.end_task_route(task_id.as_str());
                            if let Some(shared) = self.state.lock().unwrap().shared.as_mut() {
                                shared.forget_task(task_id.as_str());
                            }
                        }
                        let msg = frame.with_id(&client.id);
                        if let Some(ev) = events {
                            ev.response(client.id, msg, shape, answers);
                        }
                    }
                    Waiter::Task { task_id, .. } => {
                        // A round of input requests keeps the link (`TaskCalls::outcome`)
                        // before this call's slot goes.
                        self.tasks.outcome(&task_id, frame.into_value());
                        self.release_slot();
                    }
                    Waiter::Internal { tx, .. } => {
                        let _ = tx.send(frame.into_value());
                    }
                }
            }
            Kind::Request => {
                let id = frame.id().cloned().expect("requests have ids");
                if let Some((link, task)) = self.relayed_task_of(&frame) {
                    // A question during a relayed task is its task's, whichever stream it came on.
                    if let Some(Id::Num(up)) = &related {
                        self.deadlines.touch(up);
                    }
                    return self.relayed.input_request(&link, task.as_str(), id, frame.into_value());
                }
                let (frame, by_token) = self.token_back(frame);
                let dest = self.route(&frame, related.clone(), by_token);
                // A question from the server is a sign of life of the request it serves.
                if let Some(Id::Num(up)) = &related {
                    self.deadlines.touch(up);
                }
                let Some(link) = self.link.get().and_then(Weak::upgrade) else { return };
                let (events, client_id) = match dest {
                    Some(Dest::Task(task_id)) => {
                        return self.tasks.input_request(&task_id, &link, id, frame.into_value());
                    }
                    Some(Dest::Client(c)) => (self.events_of(c.session), Some(c.id)),
                    // A shared link's sessions are many: none is the one to ask.
                    None if self.shared => return link.no_session_for(id, &frame),
                    None => (self.state.lock().unwrap().sessions.values().next().and_then(Weak::upgrade), None),
                };
                match events {
                    Some(ev) => ev.server_request(&link, id, frame, client_id),
                    // The session is gone and nobody else can answer.
                    None => link.refuse(id, RpcError::new(jsonrpc::INTERNAL_ERROR, "no client is connected to answer")),
                }
            }
            Kind::Notification => {
                if frame.method() == Method::Progress {
                    return self.on_progress(frame);
                }
                if frame.method() == Method::Cancelled && self.listen_ended(&frame) {
                    return;
                }
                // A listen stream's notification is its client's, tagged with the client's id;
                // the gateway's own listen's goes on untagged, as a legacy link's would.
                let frame = match self.listener_of(&frame) {
                    Some(Listener::Client(client)) => {
                        // On a shared link a list change is also every session's news (their
                        // listings are read again), as it was before streams were told apart,
                        // unless the link's own listen brings it to them.
                        let news = self.shared
                            && matches!(
                                frame.method(),
                                Method::ToolsListChanged | Method::ResourcesListChanged | Method::PromptsListChanged
                            )
                            && !self.hears_list_change(frame.method());
                        let copy = news.then(|| frame.clone());
                        let subscription = client.id.to_value();
                        let frame = frame.edit(|m| crate::mcp::modern::client::tag_subscription(m, &subscription));
                        if let Some(ev) = self.events_of(client.session) {
                            ev.notification(frame, Some(client.id));
                        }
                        if let Some(copy) = copy {
                            self.unrelated(copy.edit(crate::mcp::modern::client::untag_subscription));
                        }
                        return;
                    }
                    Some(Listener::Gateway(up_id)) => {
                        if frame.method() == Method::SubscriptionsAcknowledged {
                            return self.resource_listen_settled(up_id, None);
                        }
                        frame.edit(crate::mcp::modern::client::untag_subscription)
                    }
                    None => frame,
                };
                let mut ended_status = None;
                match frame.method() {
                    // On a shared link these are about the server's state, not the request
                    // whose stream carried them: they go to every session or to the
                    // subscribers, whichever stream they came on.
                    Method::ToolsListChanged
                    | Method::ResourcesListChanged
                    | Method::PromptsListChanged
                    | Method::ResourcesUpdated
                        if self.shared =>
                    {
                        return self.unrelated(frame);
                    }
                    Method::TaskStatus => {
                        if let Some(task) = frame.task_id_param()
                            && let Some(link) = self.link.get().and_then(Weak::upgrade)
                            && self.shared
                            && self.relayed.relays(&link, task.as_str())
                        {
                            let mut note = frame.into_value();
                            let params = note.get_mut("params").map(Value::take).unwrap_or_default();
                            return self.relayed.status(&link, task.as_str(), params);
                        }
                        // A bridged call's task: its status is for the bridge, not the client.
                        let task = frame.task_id_param();
                        if let Some(follower) =
                            task.and_then(|t| self.state.lock().unwrap().bridges.get(&t).map(|b| b.follower.clone()))
                        {
                            follower.status(frame.into_value());
                            return;
                        }
                        // Progress of a task stops at its terminal status.
                        if let Some(task_id) = crate::mcp::task_messages::ended_task_status(&frame) {
                            self.end_task_route(task_id.as_str());
                            ended_status = Some(task_id);
                        }
                    }
                    _ => {}
                }
                let (frame, by_token) = self.token_back(frame);
                match self.route(&frame, related, by_token) {
                    Some(Dest::Client(c)) => {
                        if let Some(ev) = self.events_of(c.session) {
                            ev.notification(frame, Some(c.id));
                        }
                    }
                    // A hosted task's call is the gateway's: what else it hears is unrelated.
                    Some(Dest::Task(_)) | None => self.unrelated(frame),
                }
                if let (Some(task_id), Some(shared)) = (ended_status, self.state.lock().unwrap().shared.as_mut()) {
                    shared.forget_task(task_id.as_str());
                }
            }
        }
    }

    fn request_failed(&self, id: Id, why: transport::Error) {
        // Answered as the upstream would have: the response goes where the answer would.
        self.message(Message::made(LinkError::failed(&self.upstream, why).response(Some(&id))), None);
    }

    fn closed(&self, reason: transport::Error) {
        if self.state.lock().unwrap().closed.is_some() {
            tracing::debug!(upstream = %self.upstream, "upstream connection ended: {reason}");
        } else {
            tracing::warn!(upstream = %self.upstream, "upstream connection lost: {reason}");
        }
        self.fail_all(CloseReason::Lost(Arc::new(reason)), true);
    }
}
