//! A hosted task's call on a modern (2026-07-28) upstream that is answered with input
//! requests (an `InputRequiredResult`, multi round-trip, see `mcp::modern::input`). A modern
//! server asks nothing of its client mid-call, so there is no server request to relay;
//! instead each round's input requests become the task's input, exactly as a legacy
//! server's requests during a hosted task do:
//!
//! 1. Each input request is made a request under an id of the task's round
//!    ([`question_id`]) and goes through [`TaskCalls::input_request`]: the task is
//!    `input_required`; the question goes on a pending `tasks/result` stream, to the creating
//!    session if it can be reached now, or is held for the next `tasks/result` (a 2025-11-25
//!    client) or `tasks/get` (`inputRequests`, a 2026-07-28 client, answered by
//!    `tasks/update`). A URL-mode elicitation for a legacy client gets the `elicitationId`
//!    its version requires.
//! 2. The answers come back as responses to those ids, which a modern link hands to
//!    [`TaskCalls::input_answer`] rather than sending. Once all are in, the call goes up
//!    again as a new request with `inputResponses` and the `requestState` echoed; its answer
//!    is the task's outcome or the next round. An error answer, or a question nobody can
//!    answer, fails the task with that error (`inputResponses` has no place for one).
//! 3. Limits, as for a blocking call (`gateway::session::input_rounds`): the upstream's
//!    `max_input_rounds` and `max_input_requests` (past either the task fails with -32603);
//!    the client has `request_timeout` from a round's arrival to answer all of it, and
//!    `max_request_time` bounds the whole call from its first send (-32001). Progress keeps
//!    rising across rounds: a retry's that starts again below is dropped.
//!
//! While a round waits for the client the link is kept open (as a running call keeps it).

use super::round_state::{Asking, Retained, RoundPolicy, Rounds};
use super::{Hosted, Running};
use crate::jsonrpc::{self, INTERNAL_ERROR, Id, REQUEST_TIMEOUT, RpcError};
use crate::mcp::modern::ResultType;
use crate::mcp::modern::input::{self, InputRequired};
use crate::upstream::link::TaskCalls;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The prefix of the ids the input requests of a round are asked under.
const ID_PREFIX: &str = "tg-input/";

/// The id input request `key` of round `round` of task `task_id` is asked under.
fn question_id(task_id: &str, round: u32, key: &str) -> Id {
    Id::Str(format!("{ID_PREFIX}{task_id}/{round}/{key}"))
}

/// The task, round and key an answer's id names, if it is one of [`question_id`]'s.
fn read_question_id(id: &Value) -> Option<(&str, u32, &str)> {
    let mut parts = id.as_str()?.strip_prefix(ID_PREFIX)?.splitn(3, '/');
    let task = parts.next()?;
    let round = parts.next()?.parse().ok()?;
    Some((task, round, parts.next()?))
}

enum Answered {
    Wait,
    Retry(u32),
    Fail(RpcError),
}

impl Hosted {
    /// The task's call runs on a modern link: what it needs to go on with input rounds.
    pub fn keep_for_rounds(&self, task_id: &str, call: Value, policy: RoundPolicy) {
        if let Some(r) = self.running.lock().unwrap().get_mut(task_id) {
            r.max_held = super::MAX_HELD_INPUTS.max(policy.limits.requests);
            r.rounds = Some(Rounds::new(call, policy));
        }
    }

    /// A response to the task's call: `None` when it asked for input and the task waits for
    /// it; else what the task ends with (the response, or why its round cannot be relayed).
    pub(super) fn next_round(&self, task_id: &str, msg: Value) -> Option<Value> {
        let asked = msg.get("result").filter(|r| ResultType::of(r) == Ok(ResultType::InputRequired));
        let Some(result) = asked else { return Some(msg) };
        let (link, questions, round) = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(task_id) else { return Some(msg) };
            let legacy_client = r.declared.is_none();
            let Running { rounds: Some(rounds), link, upstream_id, .. } = r else { return Some(msg) };
            rounds.done += 1;
            let asked = match InputRequired::read_round(result, rounds.done, rounds.policy.limits) {
                Ok(a) => a,
                Err(e) => return Some(RpcError::new(INTERNAL_ERROR, e.to_string()).response(None)),
            };
            let max = rounds.policy.max_time;
            let left = max.saturating_sub(rounds.started.elapsed());
            if left.is_zero() {
                return Some(lifetime_error(max).response(None));
            }
            *upstream_id = None;
            if rounds._lifetime.is_none() {
                rounds._lifetime = Some(self.round_timer(task_id, None, left));
            }
            let round = rounds.done;
            let mut questions = Vec::with_capacity(asked.requests.len());
            for q in &asked.requests {
                let mut params = q.params.clone().unwrap_or_else(|| json!({}));
                if legacy_client && params.get("mode").and_then(Value::as_str) == Some("url") {
                    input::name_url_elicitation(&mut params, &crate::random::id128());
                }
                let id = question_id(task_id, round, &q.key);
                questions.push((id.clone(), jsonrpc::request_named(&id, &q.method, params)));
            }
            let wait = rounds.policy.answer_within.min(left);
            rounds.asking = Some(Asking {
                state: asked.state,
                pending: asked.requests.into_iter().map(|q| q.key).collect(),
                responses: Map::new(),
                _link: Retained::new(link),
                _timer: self.round_timer(task_id, Some(round), wait),
            });
            (link.clone(), questions, round)
        };
        tracing::debug!(task = task_id, round, requests = questions.len(), "the upstream asked for input");
        if questions.is_empty() {
            // Only `requestState`: retried at once.
            self.spawn_retry(task_id, round);
        }
        for (id, q) in questions {
            self.input_request(task_id, &link, id, q);
        }
        None
    }

    /// An answer to one of a round's input requests ([`TaskCalls::input_answer`]); one for
    /// no waiting round (late, repeated, or not the gateway's) is dropped.
    pub(super) fn round_answer(&self, answer: Value) {
        let Some((task_id, round, key)) = answer.get("id").and_then(read_question_id) else {
            tracing::debug!("dropping a response for a modern upstream, which asks nothing");
            return;
        };
        tracing::debug!(task = task_id, round, key, "an answer to an input request");
        let next = {
            let mut running = self.running.lock().unwrap();
            let Some(rounds) = running.get_mut(task_id).and_then(|r| r.rounds.as_mut()) else { return };
            let Some(asking) = rounds.asking.as_mut().filter(|_| rounds.done == round) else { return };
            if !asking.pending.remove(key) {
                return;
            }
            match answer.get("result").filter(|r| r.is_object()) {
                Some(result) => {
                    asking.responses.insert(key.to_string(), result.clone());
                    if asking.pending.is_empty() { Answered::Retry(round) } else { Answered::Wait }
                }
                None => {
                    rounds.asking = None;
                    let e = RpcError::from_object(answer.get("error"), "no result");
                    Answered::Fail(RpcError::new(
                        e.code,
                        format!("the upstream's input request {key:?} was answered with an error: {}", e.message),
                    ))
                }
            }
        };
        match next {
            Answered::Wait => {}
            Answered::Retry(round) => self.spawn_retry(task_id, round),
            Answered::Fail(e) => self.outcome(task_id, e.response(None)),
        }
    }

    fn spawn_retry(&self, task_id: &str, round: u32) {
        let Some(me) = self.me.upgrade() else { return };
        let task_id: Arc<str> = task_id.into();
        tokio::spawn(async move { me.retry(task_id, round).await });
    }

    /// Sends round `round`'s retry: the call again, with the answers.
    async fn retry(&self, task_id: Arc<str>, round: u32) {
        let (link, msg, share, _asked) = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(&*task_id) else { return };
            let Some(rounds) = r.rounds.as_mut().filter(|x| x.done == round) else { return };
            let Some(asking) = rounds.asking.take() else { return };
            let mut msg = rounds.call.clone();
            input::retry(&mut msg, asking.responses.clone(), asking.state.as_deref());
            // `asking` keeps the link open until the retry holds it.
            (r.link.clone(), msg, rounds.policy.share.clone(), asking)
        };
        self.input_answered(&task_id).await;
        tracing::debug!(task = %task_id, round, "retrying the call with the answers");
        match link.start_task_call(task_id.clone(), msg, share).await {
            Ok(up) if !self.started(&task_id, up) => link.cancel(up, "the task was cancelled").await,
            Ok(_) => {}
            Err(e) => self.outcome(&task_id, e.response(None)),
        }
    }

    /// A timer of the task's rounds: at `after` the task fails if round `round` still waits
    /// for the client (`None`: if its call, every round together, still runs).
    fn round_timer(&self, task_id: &str, round: Option<u32>, after: Duration) -> DropGuard {
        let cancel = CancellationToken::new();
        let (me, task_id, stop) = (self.me.clone(), task_id.to_string(), cancel.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::sleep(after) => {
                    if let Some(h) = me.upgrade() {
                        h.round_expired(&task_id, round).await;
                    }
                }
            }
        });
        cancel.drop_guard()
    }

    async fn round_expired(&self, task_id: &str, round: Option<u32>) {
        let (error, upstream) = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(task_id) else { return };
            let Some(rounds) = r.rounds.as_mut() else { return };
            match round {
                Some(n) if rounds.done != n || rounds.asking.is_none() => return,
                Some(_) => (idle_error(rounds.policy.answer_within), None),
                None => (lifetime_error(rounds.policy.max_time), r.upstream_id.map(|up| (r.link.clone(), up))),
            }
        };
        tracing::warn!(task = task_id, "a hosted task's input rounds timed out: {}", error.message);
        if let Some((link, up)) = upstream {
            link.cancel(up, &error.message).await;
        }
        self.outcome(task_id, error.response(None));
    }
}

fn idle_error(after: Duration) -> RpcError {
    RpcError::new(
        REQUEST_TIMEOUT,
        format!("the client did not answer the upstream's input requests within request_timeout ({after:?})"),
    )
}

fn lifetime_error(after: Duration) -> RpcError {
    RpcError::new(
        REQUEST_TIMEOUT,
        format!("the task's call and its input rounds ran past max_request_time ({after:?})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_ids_name_their_task_round_and_key() {
        let id = question_id("ab12", 3, "a/b key");
        assert_eq!(read_question_id(&id.to_value()), Some(("ab12", 3, "a/b key")));
        assert_eq!(read_question_id(&json!("tg-input/ab12/x/k")), None, "the round is a number");
        assert_eq!(read_question_id(&json!(7)), None);
        assert_eq!(read_question_id(&json!("other/ab12/1/k")), None);
    }
}
