//! The extension tasks a 2025-11-25 client made (`translated`), followed while they run, and
//! cancelled when its session ends.
//!
//! Following: each task, from its creation until it ends for the client, is looked at
//! (`tasks/get`) every `pollInterval`, and a status change the client has not seen becomes a
//! `notifications/tasks/status` (unrelated to any request: over HTTP the GET stream's), so
//! that a client that never calls `tasks/result` learns of it, as it does of hosted tasks.
//! While a `tasks/result` waits on the task the follower rests: the waiter polls and tells
//! the client on its own stream. At most `[tasks] max_followed` tasks are followed at once,
//! all sessions together (one permit each; a task over the limit is not followed, and its
//! status is news only to its `tasks/get` and `tasks/result`); a poll that fails ends the
//! following (a `tasks/result` still polls, and answers the error); the session's end stops
//! every follower. The upstream's own `notifications/tasks` (on `subscriptions/listen`) is
//! not used: polling is what every extension server answers. When each task is looked at
//! next is kept on one schedule per session (`Following`, a `clock::Schedule`), whose one
//! waiter starts each look as it falls due.
//!
//! Ending: the session's end sends `tasks/cancel` for each task that has not ended for the
//! client, as a bridged call's task is cancelled with its session: once the session is
//! gone, nobody can ask for the task's outcome.

use super::{ExtTasks, Host};
use crate::clock::Deadlines;
use crate::jsonrpc::{self, Id};
use crate::mcp::task_messages::TaskView;
use crate::upstream::client::Route;
use serde_json::json;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// How long the session's end waits for the upstream's acks of its tasks' cancels.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

impl ExtTasks {
    /// Follows extension task `task_id` in the background, if it runs, is not followed
    /// already, and a permit is free.
    pub(in crate::gateway::session) fn follow<H: Host>(&self, s: &H, task_id: String) {
        let first = {
            let st = self.lock();
            if st.ended.is_cancelled() || !st.table.is_open(&task_id) {
                return;
            }
            st.table.snapshot(&task_id).map_or(Duration::from_secs(1), |t| TaskView::of_map(t).poll_interval())
        };
        let f = &self.following;
        let mut tasks = f.tasks.lock().unwrap();
        // Asked again under this lock: a session that ended meanwhile has cleared it, and
        // would keep a permit taken here.
        if tasks.contains_key(&task_id) || self.lock().ended.is_cancelled() {
            return;
        }
        let Some(permit) = s.follow_permit() else {
            tracing::debug!(upstream = %s.upstream().name, task = %task_id, "not following the task: max_followed tasks are followed already");
            return;
        };
        f.clock.start(|clock| look_when_due(s.weak(), clock));
        f.clock.set(task_id.clone(), Instant::now() + first);
        tasks.insert(task_id, (permit, first));
    }

    /// One look at followed task `task_id`, now due: its status news goes to the client, and
    /// the next look is set, unless the task ended for the client or cannot be looked at.
    async fn look_followed(&self, s: &impl Host, task_id: String) {
        let ended = self.lock().ended.clone();
        let looked = if self.lock().table.waited_on(&task_id) {
            // A `tasks/result` polls it meanwhile, and tells the client itself.
            None
        } else {
            let looked = tokio::select! {
                r = self.look(s, &task_id) => r,
                _ = ended.cancelled() => return,
            };
            match looked {
                None => return self.unfollow(&task_id),
                Some(Err(e)) => {
                    tracing::debug!(upstream = %s.upstream().name, task = %task_id, "no longer following the task: {}", e.message);
                    return self.unfollow(&task_id);
                }
                Some(Ok((task, _))) => Some(TaskView::of_map(&task).poll_interval()),
            }
        };
        if looked.is_some() {
            self.announce_status(s, &task_id, Route::Unrelated);
            if !self.lock().table.is_open(&task_id) {
                return self.unfollow(&task_id);
            }
        }
        let f = &self.following;
        let mut tasks = f.tasks.lock().unwrap();
        let Some((_, every)) = tasks.get_mut(&task_id) else { return };
        if let Some(new) = looked {
            *every = new;
        }
        f.clock.set(task_id, Instant::now() + *every);
    }

    /// Stops following `task_id`: its permit is free again.
    fn unfollow(&self, task_id: &str) {
        let f = &self.following;
        let mut tasks = f.tasks.lock().unwrap();
        tasks.remove(task_id);
        f.clock.unset(&task_id.to_string());
    }

    /// The session ends: its followers stop, and its extension tasks that have not ended for
    /// the client are cancelled upstream (the acks awaited a few seconds at most, so that a
    /// gateway that exits after the session, as over stdio, has sent them).
    pub(in crate::gateway::session) async fn end(&self, s: &impl Host) {
        let open = {
            let st = self.lock();
            st.ended.cancel();
            st.table.open_tasks()
        };
        {
            let f = &self.following;
            let mut tasks = f.tasks.lock().unwrap();
            f.clock.close();
            tasks.clear();
        }
        let link = s.current_link();
        let Some(link) = link.filter(|l| !l.is_closed()) else { return };
        if open.is_empty() {
            return;
        }
        tracing::debug!(upstream = %s.upstream().name, tasks = open.len(), "the session ended: cancelling its extension tasks");
        let caps = self.capabilities(s);
        let cancels = open.into_iter().map(|task_id| {
            let req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id}));
            link.request_for_declaring(req, None, Some(caps.clone()))
        });
        let _ = tokio::time::timeout(CANCEL_WAIT, futures_util::future::join_all(cancels)).await;
    }
}

/// The waiter of a session's followed tasks: each look, when due, runs as a task of its own
/// (a slow upstream delays no other look), holding the session only while it looks. It
/// stops when the session ends or goes.
async fn look_when_due<H: Host>(me: Weak<H>, clock: Arc<Deadlines<String>>) {
    while let Some((task_id, _)) = clock.expired().await {
        let Some(s) = me.upgrade() else { return };
        tokio::spawn(async move { s.ext().look_followed(&*s, task_id).await });
    }
}
