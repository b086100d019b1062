//! The rounds of [`InputRounds`] (see the module doc of `input_rounds`): a request kept as
//! an exchange, the upstream's input requests asked of the client, its answers, the retries,
//! the timers and the cancellations. Each method is handed its session's narrow context,
//! `s` (a [`Host`]).

use super::super::reach::declared;
use super::state::{Armed, Asking, Exchange, RoundTimer};
use super::{Host, InputRounds};
use crate::clock::Deadlines;
use crate::jsonrpc::{self, INVALID_REQUEST, Id, Message, Method, RpcError};
use crate::jsonrpc::{INTERNAL_ERROR, REQUEST_TIMEOUT};
use crate::mcp::ProtocolVersion;
use crate::mcp::modern::input::{self, InputRequired};
use crate::mcp::modern::{MISSING_REQUIRED_CLIENT_CAPABILITY, ResultType};
use crate::mcp::translate;
use crate::upstream::client::Route;
use crate::upstream::link::{Link, Shape};
use serde_json::Map;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Weak;
use std::time::Duration;
use tokio::time::Instant;

/// What a failed exchange leaves to do once the lock is released.
struct Failed {
    client_id: Id,
    error: RpcError,
    /// The client's requests to cancel.
    questions: Vec<Id>,
}

impl InputRounds {
    /// Forwards a legacy client's request `id` to modern `link`, declaring the client's
    /// capabilities for it, and keeps it as an exchange: it may be answered with input
    /// requests.
    pub(in crate::gateway::session) async fn send(
        &self,
        s: &impl Host,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> Result<(), RpcError> {
        let capabilities = s.capabilities_for_modern();
        let kept = {
            let mut rounds = self.state.lock().unwrap();
            if rounds.exchanges.contains_key(&id) {
                return Err(RpcError::new(INVALID_REQUEST, format!("request id {id} is already in use")));
            }
            let room = rounds.exchanges.len() < s.max_in_flight();
            let kept = room && input::may_ask(frame.method_name());
            if kept {
                rounds.next_serial += 1;
                let ex = Exchange {
                    serial: rounds.next_serial,
                    request: frame.clone(),
                    shape,
                    capabilities: capabilities.clone(),
                    rounds: 0,
                    started: Instant::now(),
                    asking: None,
                    last_progress: None,
                    _lifetime: None,
                };
                rounds.exchanges.insert(id.clone(), ex);
                self.kept_any.store(true, std::sync::atomic::Ordering::Release);
            }
            kept
        };
        let sent = link.forward_declaring(s.client_ref(id.clone()), frame, shape, Some(capabilities), &[]).await;
        if sent.is_err() && kept {
            self.state.lock().unwrap().remove(&id);
        }
        sent
    }

    /// The response to client request `client_id`, before it goes to the client: `None` when
    /// it asked for input and the exchange goes on; otherwise the message to deliver (the
    /// response itself, or the error the request fails with).
    pub(in crate::gateway::session) fn response(&self, s: &impl Host, client_id: &Id, msg: Message) -> Option<Message> {
        // Most responses end no exchange (every one of a legacy upstream): no look at all
        // until one was kept, then one look, under the strategy's lock alone. An exchange is
        // kept (and `kept_any` set) before its request goes up, so it is here before its
        // response is.
        if !self.kept_any.load(std::sync::atomic::Ordering::Acquire)
            || !self.state.lock().unwrap().exchanges.contains_key(client_id)
        {
            return Some(msg);
        }
        let versions = s.versions();
        let mut to_send = Vec::new();
        let outcome = {
            let init = s.client_init();
            let caps = declared(init.as_deref());
            let mut rounds = self.state.lock().unwrap();
            let rounds = &mut *rounds;
            let Some(ex) = rounds.exchanges.get_mut(client_id) else { return Some(msg) };
            if ex.asking.is_some() {
                return Some(msg);
            }
            let result = msg.value().get("result").filter(|_| !msg.is_error());
            let Some(result) = result.filter(|r| ResultType::of(r) == Ok(ResultType::InputRequired)) else {
                rounds.remove(client_id);
                return Some(msg);
            };
            ex.rounds += 1;
            let limits = (s.upstream().request_timeout, s.upstream().max_request_time);
            let checked = InputRequired::read_round(result, ex.rounds, self.limits)
                .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
                .and_then(|asked| {
                    if ex.started.elapsed() >= limits.1 {
                        return Err(lifetime_error(limits.1));
                    }
                    let mut asks = Vec::with_capacity(asked.requests.len());
                    for q in &asked.requests {
                        asks.push((q.key.clone(), q.method.clone(), question(q, caps, versions)?));
                    }
                    Ok((asked.state, asks))
                });
            match checked {
                Err(e) => Err(e),
                Ok((state, asks)) => {
                    let serial = ex.serial;
                    let round = ex.rounds;
                    if ex._lifetime.is_none() {
                        let at = ex.started + limits.1;
                        ex._lifetime = Some(timer(s, at, client_id, serial, None));
                    }
                    let wait = limits.0.min(limits.1.saturating_sub(ex.started.elapsed()));
                    let timer = timer(s, Instant::now() + wait, client_id, serial, Some(round));
                    let mut outstanding = HashMap::with_capacity(asks.len());
                    for (key, method, q) in asks {
                        let qid = s.next_client_side_id();
                        rounds.questions.insert(qid.clone(), (client_id.clone(), key.clone()));
                        outstanding.insert(key, (qid.clone(), method));
                        to_send.push(q.with_id(&qid));
                    }
                    let ex = rounds.exchanges.get_mut(client_id).expect("the exchange is there");
                    ex.asking = Some(Asking { state, outstanding, responses: Map::new(), _timer: timer });
                    Ok(serial)
                }
            }
        };
        match outcome {
            Err(e) => {
                self.state.lock().unwrap().remove(client_id);
                tracing::info!(upstream = %s.upstream().name, "a request's input round failed: {}", e.message);
                Some(Message::made(e.response(Some(client_id))))
            }
            Ok(serial) => {
                tracing::debug!(upstream = %s.upstream().name, requests = to_send.len(), "the upstream asked for input; asking the client");
                if to_send.is_empty() {
                    // Only `requestState`: retried at once.
                    spawn_retry(s, client_id.clone(), serial);
                }
                for q in to_send {
                    s.to_client(q, Route::Related(client_id.clone()));
                }
                None
            }
        }
    }

    /// The client's answer to one of the input requests (`id`: the id it knows); an unknown
    /// id is dropped.
    pub(in crate::gateway::session) fn answer(&self, s: &impl Host, id: Id, frame: Message) {
        let versions = s.versions();
        let ready = {
            let mut guard = self.state.lock().unwrap();
            let rounds = &mut *guard;
            let Some((client_id, key)) = rounds.questions.remove(&id) else {
                tracing::debug!(upstream = %s.upstream().name, "dropping client response to unknown id {id}");
                return;
            };
            let Some(ex) = rounds.exchanges.get_mut(&client_id) else { return };
            let serial = ex.serial;
            let Some(asking) = ex.asking.as_mut() else { return };
            let Some((_, method)) = asking.outstanding.remove(&key) else { return };
            match answer_result(frame, &method, versions) {
                Ok(result) => {
                    asking.responses.insert(key, result);
                    asking.outstanding.is_empty().then_some((client_id, serial))
                }
                Err(e) => {
                    let (_, questions) = rounds.remove(&client_id).expect("the exchange is there");
                    drop(guard);
                    return finish_failed(s, Failed { client_id, error: e, questions });
                }
            }
        };
        if let Some((client_id, serial)) = ready {
            spawn_retry(s, client_id, serial);
        }
    }

    /// Sends the next round of exchange `serial` of client request `client_id` upstream.
    async fn retry(&self, s: &impl Host, client_id: Id, serial: u64) {
        let retry = {
            let mut rounds = self.state.lock().unwrap();
            let Some(ex) = rounds.exchanges.get_mut(&client_id).filter(|e| e.serial == serial) else {
                return;
            };
            let Some(asking) = ex.asking.take() else { return };
            let responses = asking.responses;
            let state = asking.state;
            let msg = ex.request.clone().edit(|m| input::retry(m, responses, state.as_deref()));
            (msg, ex.shape, ex.capabilities.clone())
        };
        let (msg, shape, capabilities) = retry;
        let still =
            |r: &InputRounds| r.state.lock().unwrap().exchanges.get(&client_id).is_some_and(|e| e.serial == serial);
        let sent = match s.link().await {
            Ok(link) if still(self) => {
                let sent =
                    link.forward_declaring(s.client_ref(client_id.clone()), msg, shape, Some(capabilities), &[]).await;
                if sent.is_ok() && !still(self) {
                    // Cancelled while it was being sent.
                    link.cancel_client_request(&s.client_ref(client_id.clone()), None).await;
                }
                sent
            }
            Ok(_) => return,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            let removed = {
                let mut rounds = self.state.lock().unwrap();
                let ours = rounds.exchanges.get(&client_id).is_some_and(|e| e.serial == serial);
                if ours { rounds.remove(&client_id) } else { None }
            };
            if let Some((_, questions)) = removed {
                finish_failed(s, Failed { client_id, error: e, questions });
            }
        }
    }

    /// Ends an exchange whose time ran out; its round upstream, if one is in flight, is
    /// cancelled first (the answer that comes meanwhile is the client's instead).
    fn expire(&self, s: &impl Host, client_id: Id, serial: u64, round: Option<u32>, error: RpcError) {
        let (upstream_round, questions) = {
            let mut rounds = self.state.lock().unwrap();
            let Some(ex) = rounds.exchanges.get(&client_id).filter(|e| e.serial == serial) else { return };
            let asking = ex.asking.is_some();
            if round.is_some_and(|r| !asking || r != ex.rounds) {
                return;
            }
            // Dropping the exchange unsets its other timer.
            let (_, questions) = rounds.remove(&client_id).expect("the exchange is there");
            (!asking, questions)
        };
        tracing::warn!(upstream = %s.upstream().name, "request {client_id} timed out in its input rounds: {}", error.message);
        if !upstream_round {
            return finish_failed(s, Failed { client_id, error, questions });
        }
        let link = s.current_link();
        let Some(me) = s.weak().upgrade() else { return };
        tokio::spawn(async move {
            let Some(link) = link else { return };
            let reason = Some(Value::String(error.message.clone()));
            if link.cancel_client_request(&me.client_ref(client_id.clone()), reason).await {
                finish_failed(&*me, Failed { client_id, error, questions });
            }
        });
    }

    /// The client's `notifications/cancelled` (`msg`, any notification) for a request of an
    /// exchange ends the exchange: `true` if it was waiting on the client's answers (they
    /// are withdrawn, and nothing is upstream to cancel); `false` otherwise, also when its
    /// round is upstream, which the caller cancels as any request in flight.
    pub(in crate::gateway::session) fn cancelled(&self, s: &impl Host, msg: &Message) -> bool {
        if msg.method() != Method::Cancelled {
            return false;
        }
        let Some(client_id) = msg.request_id_param() else { return false };
        let removed = self.state.lock().unwrap().remove(&client_id);
        let Some((ex, questions)) = removed else { return false };
        cancel_questions(s, &client_id, &questions, "the request they were asked for was cancelled");
        if ex.asking.is_none() {
            return false;
        }
        s.abandon(&client_id);
        true
    }

    /// Whether progress for client request `related` may go to the client: across the rounds
    /// of an exchange its values keep rising (each round's are checked by the link), so a
    /// retry's progress that starts again from below is dropped until it passes the last
    /// value the client got.
    pub(in crate::gateway::session) fn progress(&self, s: &impl Host, related: Option<&Id>, msg: &Message) -> bool {
        let Some(id) = related else { return true };
        let Some(value) = msg.progress_values().0 else { return true };
        let mut rounds = self.state.lock().unwrap();
        let Some(ex) = rounds.exchanges.get_mut(id) else { return true };
        if ex.last_progress.is_some_and(|last| value <= last) {
            tracing::debug!(upstream = %s.upstream().name, "dropping progress of a retry that does not rise past the last round's");
            return false;
        }
        ex.last_progress = Some(value);
        true
    }
}

/// Sends the next round of exchange `serial` of client request `client_id` upstream, as a
/// task of its own.
fn spawn_retry(s: &impl Host, client_id: Id, serial: u64) {
    let Some(me) = s.weak().upgrade() else { return };
    tokio::spawn(async move { me.rounds().retry(&*me, client_id, serial).await });
}

/// Sets a timer of exchange `serial`: at `at`, the exchange fails if it is still on
/// (`round`: the round whose client answers it waits for, or `None` for the whole exchange).
fn timer(s: &impl Host, at: Instant, client_id: &Id, serial: u64, round: Option<u32>) -> Armed {
    let timers = &s.rounds().timers;
    timers.start(|clock| end_expired(s.weak(), clock));
    timers.arm(RoundTimer { serial, round, client_id: client_id.clone() }, at)
}

/// The waiter of a session's input-round timers: an exchange still on when its timer ends
/// fails. It stops when the session goes (with it, its `Schedule`).
async fn end_expired<H: Host>(me: Weak<H>, timers: Arc<Deadlines<RoundTimer>>) {
    while let Some((t, _)) = timers.expired().await {
        let Some(s) = me.upgrade() else { return };
        let (idle, max) = (s.upstream().request_timeout, s.upstream().max_request_time);
        let error = if t.round.is_some() { idle_error(idle) } else { lifetime_error(max) };
        // A task of its own, as each timer was: should ending one exchange fail, the
        // session's other timers still run.
        tokio::spawn(async move { s.rounds().expire(&*s, t.client_id, t.serial, t.round, error) });
    }
}

fn finish_failed(s: &impl Host, f: Failed) {
    cancel_questions(s, &f.client_id, &f.questions, &f.error.message);
    s.to_client(Message::made(f.error.response(Some(&f.client_id))), Route::Response(f.client_id));
}

/// Tells the client its unanswered requests `ids`, asked for its request `client_id`, are
/// no longer wanted (where they were asked: on that request's stream).
fn cancel_questions(s: &impl Host, client_id: &Id, ids: &[Id], reason: &str) {
    for id in ids {
        let note = jsonrpc::notification(
            crate::jsonrpc::Method::Cancelled,
            json!({"requestId": id.to_value(), "reason": reason}),
        );
        s.to_client(Message::made(note), Route::Related(client_id.clone()));
    }
}

/// Input request `q` as a server request for the client (its id to be set), or why the
/// request fails instead: a method that is not an input request, a capability the client
/// did not declare (`caps`: its `initialize` capabilities), or a form its version lacks.
fn question(
    q: &input::InputRequest,
    caps: Option<&Value>,
    versions: Option<(ProtocolVersion, ProtocolVersion)>,
) -> Result<Message, RpcError> {
    let Some(need) = input::capability_for(&q.method) else {
        return Err(RpcError::new(
            INTERNAL_ERROR,
            format!(
                "the upstream's input request {:?} has method {:?}, which is not an input request",
                q.key, q.method
            ),
        ));
    };
    let params = q.params.clone().unwrap_or_else(|| json!({}));
    let url_mode = need == "elicitation" && params.get("mode").and_then(Value::as_str) == Some("url");
    let declared = caps.and_then(|c| c.get(need)).filter(|c| c.is_object());
    let has = declared.is_some_and(|c| !url_mode || c.get("url").is_some());
    if !has {
        let required = if url_mode { json!({"elicitation": {"url": {}}}) } else { json!({ need: {} }) };
        let mut e = RpcError::new(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "the upstream asked for {} (input request {:?}), which the client did not declare (capabilities.{need}{})",
                q.method,
                q.key,
                if url_mode { ".url" } else { "" }
            ),
        );
        e.data = Some(Box::new(json!({"requiredCapabilities": required})));
        return Err(e);
    }
    let mut params = params;
    if url_mode {
        input::name_url_elicitation(&mut params, &crate::random::id128());
    }
    let msg = Message::made(jsonrpc::request_named(&Id::Num(0), &q.method, params));
    let Some((client, upstream)) = versions else { return Ok(msg) };
    match translate::cross(msg, None, upstream, client) {
        Ok(m) => Ok(m),
        Err(translate::Stopped::Refuse(e) | translate::Stopped::Fail(e)) => Err(e),
        Err(translate::Stopped::Drop(why)) => Err(RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)),
    }
}

/// The client's answer to an input request of `method`, as the result the retry carries
/// (translated for the upstream), or the error the request fails with.
fn answer_result(
    frame: Message,
    method: &str,
    versions: Option<(ProtocolVersion, ProtocolVersion)>,
) -> Result<Value, RpcError> {
    let crossed = match versions {
        Some((client, upstream)) => {
            match translate::cross(frame, translate::answered(crate::jsonrpc::Method::parse(method)), client, upstream)
            {
                Ok(m) => m,
                Err(translate::Stopped::Refuse(e) | translate::Stopped::Fail(e)) => return Err(e),
                Err(translate::Stopped::Drop(why)) => return Err(RpcError::new(INTERNAL_ERROR, why)),
            }
        }
        None => frame,
    };
    jsonrpc::into_outcome(crossed.into_value(), "no message").map_err(|e| {
        RpcError::new(e.code, format!("the client answered the upstream's {method} with an error: {}", e.message))
    })
}

fn idle_error(after: Duration) -> RpcError {
    RpcError::new(
        REQUEST_TIMEOUT,
        format!("the client did not answer the upstream's input requests within request_timeout ({after:?})"),
    )
}

fn lifetime_error(after: Duration) -> RpcError {
    RpcError::new(REQUEST_TIMEOUT, format!("the request and its input rounds ran past max_request_time ({after:?})"))
}
