//! Input requests of a modern (2026-07-28) upstream, for a legacy client: multi round-trip
//! requests (`mcp::modern::input`) relayed as the server requests the client's era has.
//!
//! A `tools/call`, `prompts/get` or `resources/read` forwarded to a modern link is kept (at
//! most `max_in_flight` per session; past that it goes up unkept, and an input request for it
//! fails as `legacy::for_legacy` says). When its answer is an `InputRequiredResult`:
//!
//! 1. Every input request is checked first: a method that is not one, one the client did not
//!    declare (`elicitation`, `elicitation.url` for URL mode, `sampling`, `roots`), or one the
//!    client's version cannot express fails the request at once, before the client is asked
//!    anything: the retry has no place for an error (`inputResponses` holds results), and
//!    the spec forbids a server to ask for what the client did not declare. The error is
//!    -32021 (`MissingRequiredClientCapability`, `data.requiredCapabilities`), as a server
//!    that checks answers it; a malformed result is -32603.
//! 2. Each is sent to the client as an ordinary server request under an id of the session's,
//!    translated to its version, related to the original request (HTTP: on its POST's stream).
//!    A URL-mode elicitation gets the `elicitationId` its legacy form requires (2026-07-28
//!    removed it); no `notifications/elicitation/complete` follows, as the era has none.
//! 3. Once every one is answered, the original request goes up again as a new request (the
//!    link gives it a new JSON-RPC id) with `inputResponses` and the `requestState` as the
//!    server sent it, on the session's live link (a retry is independent of the link the
//!    first round used). Its progress token is the client's, so progress reaches the client
//!    in every round, rising across rounds (a retry's that starts again below is dropped).
//!    A client's error answer fails the request with that error's code.
//! 4. Repeat while the upstream asks, at most the upstream's `max_input_rounds` times, with
//!    at most `max_input_requests` input requests a round (past either: -32603 naming the
//!    key); the client gets the last round's answer under its own id.
//!
//! Time, as for a server request of a legacy upstream (which restarts its request's idle
//! timer; the client's answer does not): each upstream round has `request_timeout` of
//! silence (progress resets it), the client has `request_timeout` from the moment the input
//! requests arrived to answer all of them, and `max_request_time` bounds the whole exchange
//! from its first send. Past either the request fails with -32001 and the client's
//! outstanding requests are cancelled (`notifications/cancelled`).
//!
//! The client's `notifications/cancelled` for its request ends the exchange in any round: the
//! upstream round in flight is cancelled under its current id, or the outstanding requests
//! to the client are cancelled and forgotten. An ended session forgets them all.

use super::state::{AbortOnDrop, Asking, Exchange};
use crate::gateway::session::*;
use crate::jsonrpc::{INTERNAL_ERROR, REQUEST_TIMEOUT};
use crate::mcp::modern::input::{self, InputRequired};
use crate::mcp::modern::{MISSING_REQUIRED_CLIENT_CAPABILITY, ResultType, legacy};
use crate::mcp::translate;
use serde_json::Map;

/// What a failed exchange leaves to do once the lock is released.
struct Failed {
    client_id: Id,
    error: RpcError,
    /// The client's requests to cancel.
    questions: Vec<Id>,
}

impl Session {
    /// Forwards a client request to its link: a modern link declares this session's client's
    /// capabilities for it and keeps a request that may be answered with input requests.
    pub(in crate::gateway::session) async fn forward_up(
        &self,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> Result<(), RpcError> {
        if !link.is_modern() {
            return link.forward(self.client_ref(id), frame, shape).await;
        }
        // Boxed: a legacy link's every request future would otherwise carry this path's state.
        Box::pin(self.forward_modern(link, id, frame, shape)).await
    }

    /// [`Session::forward_up`] on a modern link.
    async fn forward_modern(&self, link: &Arc<Link>, id: Id, frame: Message, shape: Shape) -> Result<(), RpcError> {
        if let Some(m) = &self.modern {
            // A modern client answers its own input requests (the results pass to it as they
            // are): its request declares the client's own capabilities.
            let capabilities = Some(m.meta.capabilities.clone());
            let params = self.client_param_headers();
            return link.forward_declaring(self.client_ref(id), frame, shape, capabilities, &params).await;
        }
        let capabilities = self.declared_capabilities();
        let kept = {
            let mut st = self.state.lock().unwrap();
            if st.input_rounds.exchanges.contains_key(&id) {
                return Err(RpcError::new(INVALID_REQUEST, format!("request id {id} is already in use")));
            }
            let room = st.input_rounds.exchanges.len() < self.gateway.limits().max_in_flight;
            let kept = room && input::may_ask(frame.method_name());
            if kept {
                let rounds = &mut st.input_rounds;
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
            }
            kept
        };
        let sent = link.forward_declaring(self.client_ref(id.clone()), frame, shape, Some(capabilities), &[]).await;
        if sent.is_err() && kept {
            self.state.lock().unwrap().input_rounds.remove(&id);
        }
        sent
    }

    /// The upstream's bounds on one request's input rounds.
    pub(in crate::gateway::session) fn input_limits(&self) -> input::InputLimits {
        input::InputLimits { rounds: self.upstream.max_input_rounds, requests: self.upstream.max_input_requests }
    }

    /// What the session's client declared, as a modern upstream reads it per request.
    fn declared_capabilities(&self) -> Map<String, Value> {
        let st = self.state.lock().unwrap();
        let caps = st.init_params.as_ref().and_then(|p| p.get("capabilities"));
        legacy::client_capabilities(caps.unwrap_or(&Value::Null))
    }

    /// The response to client request `client_id`, before it goes to the client: `None` when
    /// it asked for input and the exchange goes on; otherwise the message to deliver (the
    /// response itself, or the error the request fails with).
    pub(in crate::gateway::session) fn input_round_response(&self, client_id: &Id, msg: Message) -> Option<Message> {
        let versions = self.versions();
        let mut to_send = Vec::new();
        let outcome = {
            let mut guard = self.state.lock().unwrap();
            let st = &mut *guard;
            let Some(ex) = st.input_rounds.exchanges.get_mut(client_id) else { return Some(msg) };
            if ex.asking.is_some() {
                return Some(msg);
            }
            let result = msg.value().get("result").filter(|_| !msg.is_error());
            let Some(result) = result.filter(|r| ResultType::of(r) == Ok(ResultType::InputRequired)) else {
                st.input_rounds.remove(client_id);
                return Some(msg);
            };
            ex.rounds += 1;
            let limits = (self.upstream.request_timeout, self.upstream.max_request_time);
            let checked = InputRequired::read_round(result, ex.rounds, self.input_limits())
                .map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
                .and_then(|asked| {
                    if ex.started.elapsed() >= limits.1 {
                        return Err(lifetime_error(limits.1));
                    }
                    let caps = st.init_params.as_ref().and_then(|p| p.get("capabilities")).cloned();
                    let mut asks = Vec::with_capacity(asked.requests.len());
                    for q in &asked.requests {
                        asks.push((q.key.clone(), q.method.clone(), question(q, caps.as_ref(), versions)?));
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
                        ex._lifetime = Some(self.timer(at, client_id, serial, None));
                    }
                    let wait = limits.0.min(limits.1.saturating_sub(ex.started.elapsed()));
                    let timer = self.timer(Instant::now() + wait, client_id, serial, Some(round));
                    let mut outstanding = HashMap::with_capacity(asks.len());
                    for (key, method, q) in asks {
                        let qid = Id::Num(st.next_client_side_id);
                        st.next_client_side_id += 1;
                        st.input_rounds.questions.insert(qid.clone(), (client_id.clone(), key.clone()));
                        outstanding.insert(key, (qid.clone(), method));
                        to_send.push(q.with_id(&qid));
                    }
                    let ex = st.input_rounds.exchanges.get_mut(client_id).expect("the exchange is there");
                    ex.asking = Some(Asking { state, outstanding, responses: Map::new(), _timer: timer });
                    Ok(serial)
                }
            }
        };
        match outcome {
            Err(e) => {
                self.state.lock().unwrap().input_rounds.remove(client_id);
                tracing::info!(upstream = %self.upstream.name, "a request's input round failed: {}", e.message);
                Some(Message::made(e.response(Some(client_id))))
            }
            Ok(serial) => {
                tracing::debug!(upstream = %self.upstream.name, requests = to_send.len(), "the upstream asked for input; asking the client");
                if to_send.is_empty() {
                    // Only `requestState`: retried at once.
                    self.spawn_retry(client_id.clone(), serial);
                }
                for q in to_send {
                    self.to_client(q, Route::Related(client_id.clone()));
                }
                None
            }
        }
    }

    /// The client's answer to one of the input requests (`id`: the id it knows); an unknown
    /// id is dropped.
    pub(in crate::gateway::session) fn input_answer(&self, id: Id, frame: Message) {
        let versions = self.versions();
        let ready = {
            let mut guard = self.state.lock().unwrap();
            let st = &mut *guard;
            let Some((client_id, key)) = st.input_rounds.questions.remove(&id) else {
                tracing::debug!(upstream = %self.upstream.name, "dropping client response to unknown id {id}");
                return;
            };
            let Some(ex) = st.input_rounds.exchanges.get_mut(&client_id) else { return };
            let serial = ex.serial;
            let Some(asking) = ex.asking.as_mut() else { return };
            let Some((_, method)) = asking.outstanding.remove(&key) else { return };
            match answer_result(frame, &method, versions) {
                Ok(result) => {
                    asking.responses.insert(key, result);
                    asking.outstanding.is_empty().then_some((client_id, serial))
                }
                Err(e) => {
                    let (_, questions) = st.input_rounds.remove(&client_id).expect("the exchange is there");
                    drop(guard);
                    return self.finish_failed(Failed { client_id, error: e, questions });
                }
            }
        };
        if let Some((client_id, serial)) = ready {
            self.spawn_retry(client_id, serial);
        }
    }

    /// Sends the next round of exchange `serial` of client request `client_id` upstream.
    fn spawn_retry(&self, client_id: Id, serial: u64) {
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move { me.retry_round(client_id, serial).await });
    }

    async fn retry_round(&self, client_id: Id, serial: u64) {
        let retry = {
            let mut st = self.state.lock().unwrap();
            let Some(ex) = st.input_rounds.exchanges.get_mut(&client_id).filter(|e| e.serial == serial) else {
                return;
            };
            let Some(asking) = ex.asking.take() else { return };
            let responses = asking.responses;
            let state = asking.state;
            let msg = ex.request.clone().edit(|m| input::retry(m, responses, state.as_deref()));
            (msg, ex.shape, ex.capabilities.clone())
        };
        let (msg, shape, capabilities) = retry;
        let still = |s: &Session| {
            s.state.lock().unwrap().input_rounds.exchanges.get(&client_id).is_some_and(|e| e.serial == serial)
        };
        let sent = match self.link().await {
            Ok(link) if still(self) => {
                let sent = link
                    .forward_declaring(self.client_ref(client_id.clone()), msg, shape, Some(capabilities), &[])
                    .await;
                if sent.is_ok() && !still(self) {
                    // Cancelled while it was being sent.
                    link.cancel_client_request(&self.client_ref(client_id.clone()), None).await;
                }
                sent
            }
            Ok(_) => return,
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            let removed = {
                let mut st = self.state.lock().unwrap();
                let ours = st.input_rounds.exchanges.get(&client_id).is_some_and(|e| e.serial == serial);
                if ours { st.input_rounds.remove(&client_id) } else { None }
            };
            if let Some((_, questions)) = removed {
                self.finish_failed(Failed { client_id, error: e, questions });
            }
        }
    }

    /// A timer of exchange `serial`: at `at`, the exchange fails if it is still on (`round`:
    /// the round whose client answers it waits for, or `None` for the whole exchange).
    fn timer(&self, at: Instant, client_id: &Id, serial: u64, round: Option<u32>) -> AbortOnDrop {
        let me = self.me.clone();
        let client_id = client_id.clone();
        let (idle, max) = (self.upstream.request_timeout, self.upstream.max_request_time);
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let Some(s) = me.upgrade() else { return };
            s.expire(client_id, serial, round, if round.is_some() { idle_error(idle) } else { lifetime_error(max) });
        });
        AbortOnDrop(task.abort_handle())
    }

    /// Ends an exchange whose time ran out; its round upstream, if one is in flight, is
    /// cancelled first (the answer that comes meanwhile is the client's instead).
    fn expire(&self, client_id: Id, serial: u64, round: Option<u32>, error: RpcError) {
        let (upstream_round, questions) = {
            let mut st = self.state.lock().unwrap();
            let Some(ex) = st.input_rounds.exchanges.get(&client_id).filter(|e| e.serial == serial) else { return };
            let asking = ex.asking.is_some();
            if round.is_some_and(|r| !asking || r != ex.rounds) {
                return;
            }
            // Dropping the exchange aborts this timer: nothing below awaits.
            let (_, questions) = st.input_rounds.remove(&client_id).expect("the exchange is there");
            (!asking, questions)
        };
        tracing::warn!(upstream = %self.upstream.name, "request {client_id} timed out in its input rounds: {}", error.message);
        if !upstream_round {
            return self.finish_failed(Failed { client_id, error, questions });
        }
        let link = self.link.lock().unwrap().clone();
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            let Some(link) = link else { return };
            let reason = Some(Value::String(error.message.clone()));
            if link.cancel_client_request(&me.client_ref(client_id.clone()), reason).await {
                me.finish_failed(Failed { client_id, error, questions });
            }
        });
    }

    /// The client's `notifications/cancelled` (`msg`, any notification) for a request of an
    /// exchange ends the exchange: `true` if it was waiting on the client's answers (they
    /// are withdrawn, and nothing is upstream to cancel); `false` otherwise, also when its
    /// round is upstream, which the caller cancels as any request in flight.
    pub(in crate::gateway::session) fn input_round_cancelled(&self, msg: &Message) -> bool {
        if msg.method() != Method::Cancelled {
            return false;
        }
        let Some(client_id) = msg.request_id_param() else { return false };
        let removed = self.state.lock().unwrap().input_rounds.remove(&client_id);
        let Some((ex, questions)) = removed else { return false };
        self.cancel_questions(&client_id, &questions, "the request they were asked for was cancelled");
        if ex.asking.is_none() {
            return false;
        }
        self.sink.abandon(&client_id);
        true
    }

    /// Whether progress for client request `related` may go to the client: across the rounds
    /// of an exchange its values keep rising (each round's are checked by the link), so a
    /// retry's progress that starts again from below is dropped until it passes the last
    /// value the client got.
    pub(in crate::gateway::session) fn input_round_progress(&self, related: Option<&Id>, msg: &Message) -> bool {
        let Some(id) = related else { return true };
        let Some(value) = msg.value().pointer("/params/progress").and_then(Value::as_f64) else { return true };
        let mut st = self.state.lock().unwrap();
        let Some(ex) = st.input_rounds.exchanges.get_mut(id) else { return true };
        if ex.last_progress.is_some_and(|last| value <= last) {
            tracing::debug!(upstream = %self.upstream.name, "dropping progress of a retry that does not rise past the last round's");
            return false;
        }
        ex.last_progress = Some(value);
        true
    }

    /// Everything the session's exchanges hold, forgotten (the session ended).
    pub(in crate::gateway::session) fn end_input_rounds(&self) {
        let _ = std::mem::take(&mut self.state.lock().unwrap().input_rounds);
    }

    fn finish_failed(&self, f: Failed) {
        self.cancel_questions(&f.client_id, &f.questions, &f.error.message);
        self.to_client(Message::made(f.error.response(Some(&f.client_id))), Route::Response(f.client_id));
    }

    /// Tells the client its unanswered requests `ids`, asked for its request `client_id`, are
    /// no longer wanted (where they were asked: on that request's stream).
    fn cancel_questions(&self, client_id: &Id, ids: &[Id], reason: &str) {
        for id in ids {
            let note = jsonrpc::notification(
                crate::jsonrpc::Method::Cancelled,
                json!({"requestId": id.to_value(), "reason": reason}),
            );
            self.to_client(Message::made(note), Route::Related(client_id.clone()));
        }
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
    let v = crossed.into_value();
    if let Some(result) = v.get("result") {
        return Ok(result.clone());
    }
    let e = RpcError::from_object(v.get("error"), "no message");
    Err(RpcError::new(e.code, format!("the client answered the upstream's {method} with an error: {}", e.message)))
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
