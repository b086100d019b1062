//! `subscriptions/listen` for a modern client in front of a legacy upstream: the one
//! long-lived request of the 2026-07-28 era, which carries the notifications that belong to
//! no request (list changes, resource updates) to a client that asked for them.
//!
//! The request's session stays open as long as its stream (closing the stream, or
//! `notifications/cancelled` over stdio, ends it). It first acknowledges what it will carry
//! (`notifications/subscriptions/acknowledged`: what the client asked for and the upstream
//! can send), then relays each matching notification tagged with `_meta`
//! `io.modelcontextprotocol/subscriptionId` (the request's id). Resource updates are
//! subscribed to upstream through the shared link, which asks the upstream once per uri and
//! lets go when the last session holding it ends. A modern upstream serves the request itself.
//!
//! The tasks extension's `taskIds` (from a client that declared it, else -32021) are granted
//! for the tasks this client could `tasks/get`: the hosted tasks of its owner, and the
//! upstream tasks relayed to clients of this upstream on the live link. Each granted task is
//! watched until it ends or the stream does, and each change of it becomes
//! `notifications/tasks` with the whole `DetailedTask`, as `tasks/get` would answer then:
//! a hosted task's status changes (`tasks::hosted`), a relayed task's status as the upstream
//! reports it (its `notifications/tasks/status`, or an answer to `tasks/get`, which the
//! gateway asks at the task's poll interval while the stream watches it) with the client's
//! id. Other ids are silently not granted (the acknowledgement leaves them out).

use super::host::Host;
use super::state::ModernClient;
use crate::jsonrpc::{self, Id, Message, Method, RpcError};
use crate::mcp::modern::client::{self as modern, ListenFilter};
use crate::mcp::task_dialects::flow;
use crate::mcp::task_messages::TaskStatus;
use crate::upstream::client::Route;
use crate::upstream::link::Link;
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What a listen stream watches of a task it was granted.
enum Watched {
    Hosted(watch::Receiver<TaskStatus>),
    /// The upstream's id, and the task as last heard of.
    Relayed(String, watch::Receiver<Option<Value>>),
}

impl Watched {
    /// Waits for a change: `false` once none can come (the task ended, or was forgotten).
    async fn changed(&mut self) -> bool {
        match self {
            Watched::Hosted(rx) => rx.changed().await.is_ok(),
            Watched::Relayed(_, rx) => rx.changed().await.is_ok(),
        }
    }

    /// How often the upstream is asked about the task: a relayed task's as it last named
    /// (1 s if it named none); never for a hosted one, whose changes the gateway makes.
    fn poll_every(&self) -> Option<std::time::Duration> {
        match self {
            Watched::Hosted(_) => None,
            Watched::Relayed(_, rx) => {
                Some(rx.borrow().as_ref().map_or(crate::mcp::task_messages::DEFAULT_POLL, |t| {
                    crate::mcp::task_messages::TaskView::of(t).poll_interval()
                }))
            }
        }
    }
}

impl ModernClient {
    /// The client's `subscriptions/listen` (request `id`).
    pub(super) async fn listen(&self, s: &impl Host, id: Id, frame: &Message) -> Result<(), RpcError> {
        let limit = s.max_in_flight();
        let asked = ListenFilter::read(frame.value().get("params"), limit)?;
        let task_ids = frame.value().pointer("/params/notifications/taskIds").is_some();
        if task_ids && !self.declared_extension() {
            // Task notifications are the extension's: a client that did not declare it.
            let required = json!({"extensions": {crate::mcp::task_dialects::EXTENSION: {}}});
            return Err(crate::mcp::modern::ModernError::MissingCapability { required }.to_rpc());
        }
        let link = s.link().await?;
        let caps = s.sides().caps.clone();
        let mut granted = asked.granted(&caps);
        let mut held = Vec::new();
        for uri in std::mem::take(&mut granted.uris) {
            if subscribe_uri(s, &link, &uri).await {
                held.push(uri);
            }
        }
        granted.uris = held;
        let watched = grant_tasks(s, &link, &asked.task_ids).await;
        granted.task_ids = watched.iter().map(|(t, _)| t.clone()).collect();
        *self.listen.lock().unwrap() = Some((id.clone(), granted.clone()));
        let ack = modern::acknowledged(&granted, &id.to_value());
        s.deliver(Message::made(ack), Route::Related(id.clone()));
        for (task, w) in watched {
            tokio::spawn(watch_task(s.weak(), id.clone(), task, w, self.listen_ended.clone()));
        }
        Ok(())
    }

    /// The client's `notifications/cancelled` of its listen stream: the stream ends (`true`),
    /// with the session, and what it held upstream goes.
    pub(in super::super) fn end_listen(&self, s: &impl Host, msg: &Message) -> bool {
        let Some(id) = msg.request_id_param() else { return false };
        let listening = self.listen.lock().unwrap().as_ref().is_some_and(|(l, _)| *l == id);
        if listening {
            *self.listen.lock().unwrap() = None;
            self.listen_ended.cancel();
            s.abandon(&id);
        }
        listening
    }

    /// The gateway shuts down while this request is a `subscriptions/listen` stream, in front
    /// of either kind of upstream: the stream ends now with the answer that says it ended on
    /// purpose (`modern::listen_ended`), and what it held upstream goes with the session.
    /// `false` if the request is no open listen.
    pub(in super::super) fn end_listen_for_shutdown(&self, s: &impl Host) -> bool {
        let asked = self
            .asked
            .lock()
            .unwrap()
            .original
            .as_ref()
            .is_some_and(|(m, _)| Method::parse(m) == Method::SubscriptionsListen);
        if !asked || self.rounds.done() {
            return false;
        }
        let (_, id) = self.rounds.ids();
        *self.listen.lock().unwrap() = None;
        self.listen_ended.cancel();
        let end = jsonrpc::result_response(&id, modern::listen_ended(&id.to_value()));
        s.deliver(Message::made(end), Route::Response(id));
        true
    }

    /// The shared link is lost: a listen stream ends, saying so (the one purpose for which
    /// a 2026-07-28 server sends `notifications/cancelled`), so that the client listens again.
    pub(in super::super) fn listen_lost(&self, s: &impl Host) {
        let Some((id, _)) = self.listen.lock().unwrap().take() else { return };
        self.listen_ended.cancel();
        let note = jsonrpc::notification(
            Method::Cancelled,
            json!({"requestId": id.to_value(), "reason": "the gateway lost its upstream; listen again"}),
        );
        s.deliver(Message::made(note), Route::Related(id.clone()));
        s.abandon(&id);
    }
}

/// Of the task ids a listen asks for, those this client could `tasks/get`, each with what to
/// watch of it.
async fn grant_tasks(s: &impl Host, link: &Link, asked: &[String]) -> Vec<(String, Watched)> {
    let mut granted: Vec<(String, Watched)> = Vec::new();
    for task in asked {
        if granted.iter().any(|(t, _)| t == task) {
            continue;
        }
        let watched = if s.hosted().visible(task, s.owner()).await {
            s.hosted().watch(task).await.map(Watched::Hosted)
        } else {
            let relayed = s.relayed();
            relayed
                .resolve(task, &s.upstream().name, link.generation(), s.owner())
                .and_then(|up| relayed.watch(task).map(|rx| Watched::Relayed(up, rx)))
        };
        if let Some(w) = watched {
            granted.push((task.clone(), w));
        }
    }
    granted
}

/// Sends `notifications/tasks` on listen stream `listen` for each change of `task`, until it
/// ends, or the stream does.
async fn watch_task<H: Host>(me: Weak<H>, listen: Id, task: String, mut watched: Watched, ended: CancellationToken) {
    // A relayed task that had already ended is told so at once: no poll would show a change.
    if let Watched::Relayed(_, rx) = &mut watched
        && rx.borrow().as_ref().is_some_and(|t| crate::mcp::task_messages::TaskView::of(t).is_terminal())
    {
        rx.mark_changed();
    }
    loop {
        let poll = watched.poll_every();
        let more = tokio::select! {
            _ = ended.cancelled() => return,
            more = watched.changed() => more,
            // A 2025-11-25 server need not say when its task changes (status notifications
            // are a MAY): while someone listens, the gateway asks, as a client would poll.
            // The loop's pace, not a deadline (see `clock`): a change heard starts it again,
            // and it goes with the stream.
            () = async { tokio::time::sleep(poll.unwrap_or_default()).await }, if poll.is_some() => {
                let Some(session) = me.upgrade() else { return };
                if !poll_relayed(&*session, &task).await {
                    return;
                }
                continue;
            }
        };
        if !more {
            return;
        }
        let Some(session) = me.upgrade() else { return };
        match task_note(&*session, &listen, &task, &mut watched).await {
            Ok((note, ended)) => {
                session.deliver(Message::made(note), Route::Related(listen.clone()));
                if ended {
                    return;
                }
            }
            Err(e) => {
                tracing::debug!(upstream = %session.upstream().name, task = %task, "no task notification: {}", e.message)
            }
        }
    }
}

/// Asks the upstream what relayed task `task` is now, on the live link: its watchers see the
/// answer. `false` once there is nothing more to ask (the task is not the live link's, or
/// the upstream no longer knows it: -32602); another failure is tried again at the next poll.
async fn poll_relayed(s: &impl Host, task: &str) -> bool {
    let Ok(link) = s.link().await else { return true };
    let Some(upstream_id) = s.relayed().resolve(task, &s.upstream().name, link.generation(), s.owner()) else {
        return false;
    };
    match link.request(Method::TasksGet, json!({"taskId": upstream_id})).await {
        Ok(got) => match got.get("result") {
            Some(core) => {
                s.relayed().observe(task, core);
                true
            }
            None => got.pointer("/error/code").and_then(Value::as_i64) != Some(jsonrpc::INVALID_PARAMS),
        },
        Err(_) => true,
    }
}

/// The `notifications/tasks` for `task` as it is now, and whether it has ended.
async fn task_note(s: &impl Host, listen: &Id, task: &str, watched: &mut Watched) -> Result<(Value, bool), RpcError> {
    let (core, inline) = match watched {
        Watched::Hosted(_) => super::tasks::ext_inline(s, task).await?,
        Watched::Relayed(upstream_id, rx) => {
            let Some(core) = rx.borrow_and_update().clone() else {
                return Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "nothing heard of the task yet"));
            };
            let link = s.link().await?;
            let inline = super::tasks::relayed_inline(s, &link, task, upstream_id, &core).await?;
            (core, inline)
        }
    };
    let status = crate::mcp::task_messages::TaskView::of(&core).status();
    let mut note = flow::notification_to_ext(core, inline, listen).map_err(|e| e.to_rpc())?;
    // The client knows a relayed task by the gateway's id.
    note["params"]["taskId"] = task.into();
    Ok((note, status.is_some_and(|s| s.is_terminal())))
}

/// Holds `uri`'s updates for this session on the shared link: the upstream is asked only
/// when no other session holds them. `false` if it refused, or past the limit.
async fn subscribe_uri(s: &impl Host, link: &Arc<Link>, uri: &str) -> bool {
    let gate = link.subscription_gate(uri);
    let _decided = gate.lock().await;
    match link.subscribe(s.tag(), uri, s.max_in_flight()) {
        Err(_) => false,
        Ok(false) => true,
        Ok(true) => match link.request(Method::ResourcesSubscribe, json!({"uri": uri})).await {
            Ok(r) if r.get("error").is_none() => true,
            _ => {
                link.unsubscribe(s.tag(), uri);
                false
            }
        },
    }
}
