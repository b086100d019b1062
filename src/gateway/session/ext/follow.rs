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
//! not used: polling is what every extension server answers.
//!
//! Ending: the session's end sends `tasks/cancel` for each task that has not ended for the
//! client, as a bridged call's task is cancelled with its session: once the session is
//! gone, nobody can ask for the task's outcome.

use super::ExtTasks;
use super::translated::poll_interval;
use crate::gateway::session::*;

/// How long the session's end waits for the upstream's acks of its tasks' cancels.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

impl ExtTasks {
    /// Follows extension task `task_id` in the background, if it runs and a permit is free.
    pub(in crate::gateway::session) fn follow(&self, s: &Session, task_id: String) {
        if !self.lock().table.is_open(&task_id) {
            return;
        }
        let Ok(permit) = s.gateway.followers.clone().try_acquire_owned() else {
            tracing::debug!(upstream = %s.upstream.name, task = %task_id, "not following the task: max_followed tasks are followed already");
            return;
        };
        let (ended, first) = {
            let st = self.lock();
            (st.ended.clone(), st.table.snapshot(&task_id).map(poll_interval))
        };
        let me = s.me.clone();
        let mut every = first.unwrap_or(Duration::from_secs(1));
        tokio::spawn(async move {
            let _permit = permit;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = ended.cancelled() => return,
                }
                // Not held across the wait: the follower does not keep its session alive.
                let Some(s) = me.upgrade() else { return };
                if s.ext.lock().table.waited_on(&task_id) {
                    continue;
                }
                let looked = tokio::select! {
                    r = s.ext.look(&s, &task_id) => r,
                    _ = ended.cancelled() => return,
                };
                match looked {
                    None => return,
                    Some(Err(e)) => {
                        tracing::debug!(upstream = %s.upstream.name, task = %task_id, "no longer following the task: {}", e.message);
                        return;
                    }
                    Some(Ok((task, _))) => every = poll_interval(&task),
                }
                s.ext.announce_status(&s, &task_id, Route::Unrelated);
                if !s.ext.lock().table.is_open(&task_id) {
                    return;
                }
            }
        });
    }

    /// The session ends: its followers stop, and its extension tasks that have not ended for
    /// the client are cancelled upstream (the acks awaited a few seconds at most, so that a
    /// gateway that exits after the session, as over stdio, has sent them).
    pub(in crate::gateway::session) async fn end(&self, s: &Session) {
        let open = {
            let st = self.lock();
            st.ended.cancel();
            st.table.open_tasks()
        };
        let link = s.link.lock().unwrap().clone();
        let Some(link) = link.filter(|l| !l.is_closed()) else { return };
        if open.is_empty() {
            return;
        }
        tracing::debug!(upstream = %s.upstream.name, tasks = open.len(), "the session ended: cancelling its extension tasks");
        let caps = self.capabilities(s);
        let cancels = open.into_iter().map(|task_id| {
            let req = jsonrpc::request(&Id::Num(0), crate::jsonrpc::Method::TasksCancel, json!({"taskId": task_id}));
            link.request_for_declaring(req, None, Some(caps.clone()))
        });
        let _ = tokio::time::timeout(CANCEL_WAIT, futures_util::future::join_all(cancels)).await;
    }
}
