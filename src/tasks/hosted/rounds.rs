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
//!
//! Both limits are timers on the host's one schedule of round timers (`Hosted::round_timers`,
//! a `clock::Schedule`), whose one waiter ([`end_expired`]) fails a task whose round or
//! call is still on when its timer falls due; a timer is unset when the round is answered or
//! the task ends first (`round_state::Armed`).

use super::round_state::{Armed, Asking, Retained, RoundPolicy, RoundTimer, Rounds};
use super::{Hosted, Running};
use crate::clock::Deadlines;
use crate::jsonrpc::{self, INTERNAL_ERROR, Id, REQUEST_TIMEOUT, RpcError};
use crate::mcp::modern::ResultType;
use crate::mcp::modern::input::{self, InputRequired};
use crate::upstream::link::TaskCalls;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Weak};
use std::time::Duration;

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
            rounds.asking = Some(Asking {
                state: asked.state,
                pending: asked.requests.into_iter().map(|q| q.key).collect(),
                responses: Map::new(),
                _link: Retained::new(link),
                _timer: (rounds.policy.answer_within < left)
                    .then(|| self.round_timer(task_id, Some(round), rounds.policy.answer_within)),
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
            let Some(r) = running.get_mut(&*task_id).filter(|r| !r.ending) else { return };
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
            Ok(up) if !self.started(&task_id, up) => link.cancel(up, "the task has ended").await,
            Ok(_) => {}
            Err(e) => self.outcome(&task_id, e.response(None)),
        }
    }

    /// Sets a timer of the task's rounds: `after` from now the task fails if round `round`
    /// still waits for the client (`None`: if its call, every round together, still runs).
    /// Unset when what it returns is dropped.
    fn round_timer(&self, task_id: &str, round: Option<u32>, after: Duration) -> Armed {
        let timers = &self.round_timers;
        timers.start(|clock| end_expired(self.me.clone(), clock));
        timers.arm((task_id.into(), round), crate::clock::from_now(after))
    }

    async fn round_expired(&self, task_id: &str, round: Option<u32>) {
        let (error, upstream) = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(task_id) else { return };
            let Some(rounds) = r.rounds.as_mut() else { return };
            let ends = match round {
                Some(n) if rounds.done != n || rounds.asking.is_none() => return,
                Some(_) => {
                    // An answer that comes now starts no retry.
                    rounds.asking = None;
                    (idle_error(rounds.policy.answer_within), None)
                }
                None => (lifetime_error(rounds.policy.max_time), r.upstream_id.map(|up| (r.link.clone(), up))),
            };
            // Decided under the lock that `started` takes: a retry on its way either started
            // before (its id is cancelled below) or is refused.
            r.ending = true;
            ends
        };
        tracing::warn!(task = task_id, "a hosted task's input rounds timed out: {}", error.message);
        if let Some((link, up)) = upstream {
            link.cancel(up, &error.message).await;
        }
        self.outcome(task_id, error.response(None));
    }
}

/// The waiter of a host's round timers: each that falls due ends its task's round (or call)
/// if that is still on, in a task of its own, as each timer was (ending one cancels its call
/// upstream, which the other timers do not wait for). It stops when the host goes (with it,
/// its `Schedule`).
async fn end_expired(me: Weak<Hosted>, timers: Arc<Deadlines<RoundTimer>>) {
    while let Some(((task_id, round), _)) = timers.expired().await {
        let Some(h) = me.upgrade() else { return };
        tokio::spawn(async move { h.round_expired(&task_id, round).await });
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
    use super::super::store_failures::{Nobody, demo_link};
    use super::*;
    use crate::config::{TasksConfig, UpstreamTasks};
    use crate::mcp::modern::input::InputLimits;
    use crate::mcp::task_messages::TaskStatus;
    use crate::tasks::memory_store::MemoryStore;
    use crate::upstream::client::ClientSession;

    #[test]
    fn question_ids_name_their_task_round_and_key() {
        let id = question_id("ab12", 3, "a/b key");
        assert_eq!(read_question_id(&id.to_value()), Some(("ab12", 3, "a/b key")));
        assert_eq!(read_question_id(&json!("tg-input/ab12/x/k")), None, "the round is a number");
        assert_eq!(read_question_id(&json!(7)), None);
        assert_eq!(read_question_id(&json!("other/ab12/1/k")), None);
    }

    const ANSWER_WITHIN: Duration = Duration::from_secs(10);
    const MAX_TIME: Duration = Duration::from_secs(25);

    /// A hosted task whose call (the demo's `slow` tool, 10 minutes) goes on in input rounds
    /// on the demo link, within [`ANSWER_WITHIN`] per round and [`MAX_TIME`] in all.
    async fn task_with_rounds(h: &Arc<Hosted>) -> String {
        task_with_rounds_within(h, ANSWER_WITHIN, MAX_TIME).await
    }

    /// [`task_with_rounds`], within `answer_within` per round and `max_time` in all.
    async fn task_with_rounds_within(h: &Arc<Hosted>, answer_within: Duration, max_time: Duration) -> String {
        let call = jsonrpc::request_named(
            &Id::Num(1),
            "tools/call",
            json!({"name": "slow", "arguments": {"duration_ms": 600_000}}),
        );
        let rec = h.create(("owner", "client"), "demo", &UpstreamTasks::default(), None, &call).await.unwrap();
        let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
        h.track(&rec.id, demo_link(h).await, nobody, None);
        let limits = InputLimits { rounds: 4, requests: 4 };
        h.keep_for_rounds(&rec.id, call, RoundPolicy { limits, answer_within, max_time, share: None });
        rec.id
    }

    /// The upstream's answer asking for one input (key `k`).
    fn asks() -> Value {
        let question = json!({"message": "sure?", "requestedSchema": {"type": "object"}});
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "elicitation/create", "params": question}},
            "requestState": "st",
        }})
    }

    /// The task's status and message once what is due now has run (time stands still).
    async fn status_now(h: &Hosted, task_id: &str) -> (TaskStatus, String) {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let (status, message) = h.status(task_id).await.expect("the task is kept");
        (status, message.unwrap_or_default())
    }

    /// The host's one round clock times a round's answer and the whole call, to the
    /// millisecond, for one task after another: a round its client leaves unanswered fails
    /// the task at `request_timeout`; a round answered in time is not failed by its timer,
    /// and the call, its retry running upstream, fails at `max_request_time` from its first
    /// round.
    #[tokio::test(start_paused = true)]
    async fn rounds_time_out_on_the_hosts_clock_not_a_moment_early() {
        let h = Hosted::new(&TasksConfig::default(), Arc::new(MemoryStore::new(10, 1 << 20)));
        let ms = Duration::from_millis;

        let unanswered = task_with_rounds(&h).await;
        assert!(h.next_round(&unanswered, asks()).is_none(), "the task waits for its client");
        tokio::time::sleep(ANSWER_WITHIN - ms(1)).await;
        assert_eq!(status_now(&h, &unanswered).await.0, TaskStatus::InputRequired);
        tokio::time::sleep(ms(1)).await;
        let (status, message) = status_now(&h, &unanswered).await;
        assert_eq!(status, TaskStatus::Failed, "{message}");
        assert!(message.contains("within request_timeout"), "{message}");

        let answered = task_with_rounds(&h).await;
        let started = tokio::time::Instant::now();
        assert!(h.next_round(&answered, asks()).is_none());
        tokio::time::sleep(ms(4000)).await;
        let answer =
            json!({"jsonrpc": "2.0", "id": question_id(&answered, 1, "k").to_value(), "result": {"action": "accept"}});
        h.round_answer(answer);
        tokio::time::sleep_until(started + ANSWER_WITHIN + ms(1)).await;
        assert_eq!(status_now(&h, &answered).await.0, TaskStatus::Working, "its round was answered");
        let retried = h.running.lock().unwrap()[&*answered].upstream_id.is_some();
        assert!(retried, "its retry runs upstream");
        tokio::time::sleep_until(started + MAX_TIME - ms(1)).await;
        assert_eq!(status_now(&h, &answered).await.0, TaskStatus::Working);
        tokio::time::sleep(ms(1)).await;
        let (status, message) = status_now(&h, &answered).await;
        assert_eq!(status, TaskStatus::Failed, "{message}");
        assert!(message.contains("ran past max_request_time"), "{message}");
        assert_eq!(h.round_timers.clock().len(), 0, "no timer is left behind");
    }

    /// A round's retry that starts once its task's end is decided (its lifetime ran out while
    /// the retry was on its way, and the end is being stored) is refused, so that its caller
    /// cancels it upstream: the task's end does not wait for that call, and nothing else
    /// would stop it.
    #[tokio::test(start_paused = true)]
    async fn a_retry_that_starts_as_its_task_ends_is_refused() {
        let h = Hosted::new(&TasksConfig::default(), Arc::new(MemoryStore::new(10, 1 << 20)));
        let id = task_with_rounds(&h).await;
        assert!(h.next_round(&id, asks()).is_none());
        // The call's lifetime ran out: its end is written by a task of its own, not run yet.
        h.outcome(&id, lifetime_error(MAX_TIME).response(None));
        assert!(!h.started(&id, 7), "a call that starts after the task's end was decided is refused");
        let (status, message) = status_now(&h, &id).await;
        assert_eq!(status, TaskStatus::Failed, "{message}");
        assert!(!h.started(&id, 8), "nor once the task has ended");
    }

    /// A round whose answer window the call's lifetime cuts short has no timer of its own:
    /// the task fails for max_request_time, not for a request_timeout that had not passed.
    /// (With a round timer at the call's instant, the two timers' tasks raced on the
    /// multi-thread runtime, and about 4 runs in 10 named request_timeout.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_round_cut_short_by_max_request_time_says_so() {
        let h = Hosted::new(&TasksConfig::default(), Arc::new(MemoryStore::new(10, 1 << 20)));
        let id = task_with_rounds_within(&h, Duration::from_secs(2), Duration::from_millis(200)).await;
        assert!(h.next_round(&id, asks()).is_none());
        let started = std::time::Instant::now();
        loop {
            let (status, message) = h.status(&id).await.unwrap();
            if status == TaskStatus::Failed {
                let message = message.unwrap_or_default();
                assert!(message.contains("max_request_time"), "failed at max_request_time, but says: {message}");
                return;
            }
            assert!(started.elapsed() < Duration::from_secs(5), "never failed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
