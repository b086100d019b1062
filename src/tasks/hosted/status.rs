//! A running hosted task's status between its questions (`working`, `input_required`):
//! shown at once from the hot state, written to the store by a task of its own, and
//! announced to the sessions that follow the task.

use super::{Hosted, Running};
use crate::jsonrpc;
use crate::mcp::task_messages::TaskStatus;
use crate::tasks::store::TaskRecord;
use crate::upstream::client::{ClientSession, Route};
use serde_json::Value;
use std::sync::{Arc, Weak};

impl Hosted {
    /// The upstream asked the client something for the task, outside the hosted call (a
    /// bridge that follows an upstream task for it).
    pub async fn input_asked(&self, task_id: &str) {
        self.set_status(task_id, TaskStatus::InputRequired, TaskStatus::Working).await;
    }

    /// The client answered an input request of the task.
    pub async fn input_answered(&self, task_id: &str) {
        self.set_status(task_id, TaskStatus::Working, TaskStatus::InputRequired).await;
    }

    /// [`Hosted::input_answered`] from code that cannot wait (a task of its own).
    pub fn input_answered_soon(&self, task_id: &str) {
        self.set_status_soon(task_id, TaskStatus::Working, TaskStatus::InputRequired);
    }

    /// [`Hosted::input_asked`] from code that cannot wait (a task of its own).
    pub fn input_asked_soon(&self, task_id: &str) {
        self.set_status_soon(task_id, TaskStatus::InputRequired, TaskStatus::Working);
    }

    fn set_status_soon(&self, task_id: &str, to: TaskStatus, from: TaskStatus) {
        self.show(task_id, to);
        let Some(me) = self.me.upgrade() else { return };
        let task_id = task_id.to_string();
        self.writes.spawn(async move { me.set_status(&task_id, to, from).await });
    }

    /// Records the status a question (or its answer) leaves a running task in.
    fn show(&self, task_id: &str, status: TaskStatus) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.shown = Some(status);
        }
    }

    pub(super) async fn set_status(&self, task_id: &str, to: TaskStatus, from: TaskStatus) {
        self.show(task_id, to);
        self.change_status(task_id, from, to).await;
        // Another change that overtook this one (each is a task of its own) left the store
        // behind the questions: put right.
        let shown = self.running.lock().unwrap().get(task_id).and_then(|r| r.shown);
        if let Some(shown) = shown.filter(|s| *s != to) {
            let other = match shown {
                TaskStatus::InputRequired => TaskStatus::Working,
                _ => TaskStatus::InputRequired,
            };
            self.change_status(task_id, other, shown).await;
        }
    }

    /// `from` → `to` in the store, announced if it changed.
    async fn change_status(&self, task_id: &str, from: TaskStatus, to: TaskStatus) {
        let mut changed = false;
        let rec = self
            .store
            .update(task_id, &mut |r| {
                if r.status == from {
                    r.status = to;
                    r.last_updated_at = crate::clock::wall_now();
                    changed = true;
                }
            })
            .await;
        let rec = match rec {
            Ok(rec) => rec,
            Err(e) => {
                self.store_failed(e);
                return;
            }
        };
        if changed {
            crate::metrics::global().task_entered(to.as_str());
        }
        if changed && let Some(rec) = rec {
            let rec = self.live(rec);
            let running = self.running.lock().unwrap();
            if let Some(r) = running.get(task_id) {
                self.announce(&rec, r);
            }
        }
    }

    /// `notifications/tasks/status` to the creating session and to sessions waiting on it.
    pub(super) fn announce(&self, rec: &TaskRecord, r: &Running) {
        self.announce_to(rec, std::iter::once(&r.creator).chain(r.result_waiters.iter().map(|(s, _)| s)));
    }

    /// `notifications/tasks/status` to each of `sessions` (once each).
    pub(super) fn announce_to<'a>(
        &self,
        rec: &TaskRecord,
        sessions: impl Iterator<Item = &'a Weak<dyn ClientSession>>,
    ) {
        let note = crate::jsonrpc::Message::made(jsonrpc::notification(
            crate::jsonrpc::Method::TaskStatus,
            Value::Object(rec.to_json()),
        ));
        let mut told: Vec<*const ()> = Vec::new();
        for s in sessions.filter_map(Weak::upgrade) {
            let at = Arc::as_ptr(&s) as *const ();
            if !told.contains(&at) {
                told.push(at);
                s.to_client(note.clone(), Route::Unrelated);
            }
        }
    }
}
