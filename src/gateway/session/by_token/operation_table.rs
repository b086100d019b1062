//! SEP-1391 operations of one session: each token the client chose, the task of the
//! gateway's that runs it (`tasks::hosted`), and what reaches the operation from elsewhere
//! (the original request's id for its cancellation, its progress token, the bridge that
//! follows an upstream task for it).
//!
//! Tokens are the session's own, so no other client can name them. A token stays taken
//! while its task is kept, and after (so that a late poll hears "expired", and a reuse is
//! refused) until room is needed: bounded by the upstream's `max_tasks_per_owner`.

use crate::jsonrpc::{Id, ProgressToken};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub struct Operation {
    pub task_id: Arc<str>,
    /// The `tools/call` that started it: a `notifications/cancelled` for it cancels it.
    pub request_id: Id,
    pub progress_token: Option<ProgressToken>,
    /// Fired to stop the bridge that follows the upstream's task (`None`: a hosted call).
    pub bridge: Option<CancellationToken>,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The token started an operation before.
    Reused,
    /// As many operations as allowed are still kept.
    Full,
}

#[derive(Default)]
pub struct Operations {
    by_token: HashMap<String, Operation>,
    /// Tokens whose operation is being started (checked, not yet recorded): taken too, so
    /// that concurrent calls with one token cannot both start.
    starting: HashSet<String>,
}

impl Operations {
    pub fn len(&self) -> usize {
        self.by_token.len()
    }

    /// The tasks the kept operations run.
    pub fn task_ids(&self) -> Vec<std::sync::Arc<str>> {
        self.by_token.values().map(|op| op.task_id.clone()).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }

    /// Reserves `token` for a new operation, if one may start (`kept` says whether a task is
    /// still kept; past `cap`, operations whose task is gone are forgotten to make room).
    /// The reservation ends with [`Operations::insert`] or [`Operations::release`].
    pub fn reserve(&mut self, token: &str, cap: usize, kept: &dyn Fn(&str) -> bool) -> Result<(), Refusal> {
        if self.by_token.contains_key(token) || self.starting.contains(token) {
            return Err(Refusal::Reused);
        }
        if self.by_token.len() + self.starting.len() >= cap {
            self.by_token.retain(|_, op| kept(&op.task_id));
        }
        if self.by_token.len() + self.starting.len() >= cap {
            return Err(Refusal::Full);
        }
        self.starting.insert(token.to_string());
        Ok(())
    }

    /// The operation reserved under `token` did not start: the token is free again.
    pub fn release(&mut self, token: &str) {
        self.starting.remove(token);
    }

    pub fn insert(&mut self, token: String, op: Operation) {
        self.starting.remove(&token);
        self.by_token.insert(token, op);
    }

    pub fn get(&self, token: &str) -> Option<&Operation> {
        self.by_token.get(token)
    }

    /// The operations started by request `id` (a client may have reused the id), with
    /// their task and bridge.
    pub fn by_request(&self, id: &Id) -> Vec<(&str, &Operation)> {
        self.by_token.iter().filter(|(_, op)| op.request_id == *id).map(|(t, op)| (t.as_str(), op)).collect()
    }

    /// The token of the operation that task `task_id` runs.
    pub fn token_of_task(&self, task_id: &str) -> Option<&str> {
        self.by_token.iter().find(|(_, op)| &*op.task_id == task_id).map(|(t, _)| t.as_str())
    }

    /// The token of the operation whose call carries progress token `token`.
    pub fn token_of_progress(&self, token: &ProgressToken) -> Option<&str> {
        self.by_token.iter().find(|(_, op)| op.progress_token.as_ref() == Some(token)).map(|(t, _)| t.as_str())
    }

    /// Every operation, for the session's end.
    pub fn drain(&mut self) -> Vec<Operation> {
        self.starting.clear();
        self.by_token.drain().map(|(_, op)| op).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(task: &str, id: i64) -> Operation {
        Operation { task_id: task.into(), request_id: Id::Num(id), progress_token: None, bridge: None }
    }

    #[test]
    fn tokens_are_taken_once_and_room_is_made_from_gone_tasks() {
        let mut ops = Operations::default();
        ops.reserve("a", 2, &|_| true).unwrap();
        // Being started: taken.
        assert_eq!(ops.reserve("a", 2, &|_| true), Err(Refusal::Reused));
        ops.insert("a".into(), op("t1", 1));
        assert_eq!(ops.reserve("a", 2, &|_| true), Err(Refusal::Reused));
        ops.reserve("b", 2, &|_| true).unwrap();
        ops.insert("b".into(), op("t2", 2));
        assert_eq!(ops.reserve("c", 2, &|_| true), Err(Refusal::Full));
        // t1 is no longer kept: its token is forgotten to make room.
        assert_eq!(ops.reserve("c", 2, &|t| t != "t1"), Ok(()));
        assert!(ops.get("a").is_none());
        // A start that failed frees its token.
        ops.release("c");
        assert_eq!(ops.reserve("c", 3, &|_| true), Ok(()));
        assert_eq!(ops.by_request(&Id::Num(2)).iter().map(|(t, _)| *t).collect::<Vec<_>>(), ["b"]);
        assert_eq!(ops.token_of_task("t2"), Some("b"));
    }
}
