//! What the link hears for a hosted task's background call ([`TaskCalls`]): its outcome,
//! its progress and the upstream's questions, and the task's end that follows an outcome.

use super::Hosted;
use super::kept_ends::{End, EndState};
use crate::jsonrpc::{self, Id, RpcError};
use crate::mcp::task_messages::{self, TaskStatus};
use crate::tasks::held_inputs::{declares, undeclared};
use crate::tasks::store::{Edit, TaskRecord};
use crate::tasks::text_bounds::bounded;
use crate::upstream::client::{ClientSession, Route};
use crate::upstream::link::{Link, TaskCalls};
use serde_json::Value;
use std::sync::Arc;

impl Hosted {
    /// The background call ended with `msg` (the upstream's answer, or the link's error):
    /// the task ends with it, then its watchers and sessions hear so.
    pub async fn finish(&self, task_id: &str, msg: Value) {
        self.ending(task_id);
        let mut text = serde_json::to_string(&msg).expect("values serialize");
        let mut msg = msg;
        let too_large = if text.len() > self.max_result_bytes {
            Some(format!("the result ({} bytes) exceeds max_result_bytes ({})", text.len(), self.max_result_bytes))
        } else if self.store.stored_bytes().await + text.len() > self.max_store_bytes {
            Some(format!(
                "task store is full: the result ({} bytes) does not fit in max_store_bytes ({})",
                text.len(),
                self.max_store_bytes
            ))
        } else {
            None
        };
        if let Some(why) = too_large {
            tracing::warn!(task = %task_id, "{why}");
            msg = RpcError::new(jsonrpc::INTERNAL_ERROR, why).response(None);
            text = serde_json::to_string(&msg).expect("values serialize");
        }
        let (status, message) = match msg.get("error") {
            Some(e) => (
                TaskStatus::Failed,
                e.get("message").and_then(Value::as_str).map(|m| bounded(m, self.max_message_bytes).into_owned()),
            ),
            None if msg.pointer("/result/isError") == Some(&Value::Bool(true)) => {
                (TaskStatus::Failed, Some("the tool reported an error".to_string()))
            }
            None => (TaskStatus::Completed, None),
        };
        let end = End { status, message, outcome: text.into(), at: crate::clock::wall_now() };
        let (rec, unstored) = match self.store.update(task_id, &mut |r| end.apply(r)).await {
            Ok(rec) => (rec, None),
            Err(e) => {
                let err = self.store_failed(e);
                let rec = self.end_after_store_error(task_id, &mut |r| end.apply(r)).await;
                let why = format!("task {task_id} ended, but its end could not be stored yet: {}", err.message);
                (rec.clone(), rec.is_none().then_some(why))
            }
        };
        let running = self.running.lock().unwrap().remove(task_id);
        if let Some(r) = &running {
            Self::stop_progress(r);
        }
        if let Some(why) = unstored {
            // Kept, and written when the store takes it; its waiters hear of it then.
            self.keep_unstored(task_id, end, why, running);
            return;
        }
        if let Some(rec) = &rec {
            self.expire_when_due(rec);
        }
        if let Some(r) = &running {
            r.end.send_replace(EndState::Stored);
        }
        if let (Some(rec), Some(r)) = (rec, running) {
            if rec.status != TaskStatus::Cancelled {
                crate::metrics::global().task_entered(rec.status.as_str());
            }
            self.announce(&rec, &r);
        }
    }
}

impl Hosted {
    /// The store failed to write the task's end: what it holds is the task as it stands,
    /// retained (and announced) as any finished task if it holds the end (a file store keeps
    /// its hot copy when a commit fails); else the end is written once more (a backend's
    /// passing failure). `None` if the store still has no end for it: the failure is logged.
    async fn end_after_store_error(&self, task_id: &str, end: Edit<'_>) -> Option<TaskRecord> {
        if let Some(rec) = self.store.get(task_id).await.ok().flatten().filter(|r| r.status.is_terminal()) {
            return Some(rec);
        }
        match self.store.update(task_id, end).await {
            Ok(rec) => rec,
            Err(e) => {
                self.store_failed(e);
                tracing::error!(task = %task_id, "the task's end could not be stored");
                None
            }
        }
    }
}

/// What the link hears for a hosted task's background call.
impl TaskCalls for Hosted {
    /// The upstream answered the background call (or the link died, or it timed out):
    /// written by a task of its own (see the module doc).
    fn outcome(&self, task_id: &str, msg: Value) {
        let Some(msg) = self.next_round(task_id, msg) else { return };
        // Before the write is spawned: a round's retry that starts meanwhile is refused.
        self.ending(task_id);
        let Some(me) = self.me.upgrade() else { return };
        let task_id = task_id.to_string();
        self.writes.spawn(async move { me.finish(&task_id, msg).await });
    }

    /// Progress of the background call: forwarded under the client's token while the task
    /// runs; its message becomes the task's status message.
    fn progress(&self, task_id: &str, mut msg: Value) {
        // Delivered while the task is known to run (the lock held), so that its end, which
        // removes it under the same lock, cannot come in between.
        let mut running = self.running.lock().unwrap();
        let Some(r) = running.get_mut(task_id) else { return };
        let value = msg.pointer("/params/progress").and_then(Value::as_f64);
        if let (Some(rounds), Some(v)) = (r.rounds.as_mut(), value)
            && !rounds.rises(v)
        {
            tracing::debug!(task = task_id, "dropping progress of a retry that does not rise past the last round's");
            return;
        }
        if let Some(v) = value {
            r.progress_numbers = Some((v, msg.pointer("/params/total").and_then(Value::as_f64)));
        }
        r.heard = tokio::time::Instant::now();
        if let Some(text) = msg.pointer_mut("/params/message") {
            // Cut where it is kept and where it is sent: a message an upstream sends over
            // and over is what the client's buffers would hold.
            if let Some(long) = text.as_str().filter(|t| t.len() > self.max_message_bytes) {
                *text = Value::String(bounded(long, self.max_message_bytes).into_owned());
            }
            if let Some(text) = text.as_str() {
                r.progress = Some((text.to_string(), crate::clock::wall_now()));
            }
        }
        // The upstream heard the gateway's token: the client hears its own, if it sent one
        // (and its call is not answered yet), above what a keep-alive already said.
        let Some(token) = &r.token else { return };
        msg["params"]["progressToken"] = token.to_value();
        if let (Some(v), Some(sent)) = (value, r.sent)
            && v <= sent
        {
            msg["params"]["progress"] = serde_json::json!(super::deferred::above(sent));
        }
        r.sent = msg.pointer("/params/progress").and_then(Value::as_f64);
        let route = Self::progress_route(r);
        let Some(s) = r.creator.upgrade() else { return };
        match crate::jsonrpc::Message::from_value(msg) {
            Ok(msg) => s.to_client(msg, route),
            Err(e) => crate::warn_limit::warn_limited!(task = task_id, "progress not sent to the client: {}", e.error),
        }
    }

    /// The upstream asks the client something while serving the task's call. It goes on the
    /// stream of a pending `tasks/result`, else to the creating session if that can be
    /// reached now, else it waits for the next `tasks/result`.
    fn input_request(&self, task_id: &str, link: &Arc<Link>, upstream_id: Id, mut msg: Value) {
        task_messages::tag_related(&mut msg, "params", task_id);
        enum Target {
            To(Arc<dyn ClientSession>, Route),
            Hold,
            Nobody,
            Undeclared,
            NotHeld(crate::tasks::held_inputs::NotHeld),
        }
        let target = {
            let mut running = self.running.lock().unwrap();
            match running.get_mut(task_id) {
                None => Target::Nobody,
                Some(r) if !declares(r.declared.as_ref(), &msg) => Target::Undeclared,
                Some(r) => {
                    let waiter = r.result_waiters.iter().find_map(|(s, id)| s.upgrade().map(|s| (s, id.clone())));
                    match (waiter, r.creator.upgrade()) {
                        (Some((s, id)), _) => Target::To(s, Route::Related(id)),
                        (None, Some(c)) if r.to_creator_later || c.reaches_client_now() => {
                            Target::To(c, Route::Unrelated)
                        }
                        // Held, also when the creator is gone: a client may come back with
                        // the task id in a new session and call tasks/result.
                        _ => match r.held_inputs.hold(
                            link,
                            upstream_id.clone(),
                            msg.clone(),
                            r.max_held,
                            &self.held_bytes,
                        ) {
                            Ok(_) => Target::Hold,
                            Err(not) => Target::NotHeld(not),
                        },
                    }
                }
            }
        };
        // The status changes before the question goes out, so that its answer cannot overtake
        // it (both in one task, as the store is asynchronous).
        let asked = |then: Option<(Arc<dyn ClientSession>, Route, Id, Value)>| {
            let Some(me) = self.me.upgrade() else { return };
            let (task_id, link) = (task_id.to_string(), link.clone());
            self.writes.spawn(async move {
                me.set_status(&task_id, TaskStatus::InputRequired, TaskStatus::Working).await;
                if let Some((session, route, upstream_id, msg)) = then {
                    session.relay_server_request(&link, upstream_id, msg, route, Some(task_id.as_str().into()));
                }
            });
        };
        match target {
            Target::To(session, route) => asked(Some((session, route, upstream_id, msg))),
            Target::Hold => asked(None),
            Target::Nobody => {
                link.refuse(upstream_id, RpcError::new(jsonrpc::INTERNAL_ERROR, "no client can answer for this task"));
            }
            Target::Undeclared => link.refuse(upstream_id, undeclared(&msg)),
            Target::NotHeld(not) => link.refuse(upstream_id, not.refusal()),
        }
    }

    /// The answer to an input request of a modern upstream's round (see `rounds`).
    fn input_answer(&self, answer: Value) {
        self.round_answer(answer);
    }

    fn owner(&self, task_id: &str) -> Option<Arc<str>> {
        self.running.lock().unwrap().get(task_id).and_then(|r| r.owner.clone())
    }
}
