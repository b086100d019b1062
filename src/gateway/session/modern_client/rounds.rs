//! Multi round-trip requests (2026-07-28, SEP-2322) for a modern client in front of a legacy
//! upstream: the upstream asks the client for input with server→client requests
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`), which the modern era has
//! not; the gateway answers the client's request with an `InputRequiredResult` instead.
//!
//! - The upstream's request is kept waiting (under an id of the session's, as any server
//!   request), and the client's request is answered `{resultType: "input_required",
//!   inputRequests: {<that id>: {method, params}}, requestState}`. The upstream call stays in
//!   flight; the session is **parked** under `requestState`, a random token, in its front's
//!   [`ParkedRequests`](super::state::ParkedRequests), for at most `request_timeout` (at most
//!   `max_in_flight` per front, half of them per client). Only `tools/call`, `prompts/get` and
//!   `resources/read` may answer `input_required`; a server request while serving any other
//!   is refused upstream.
//! - The client retries the request with a new id, `inputResponses` and the `requestState`.
//!   The front finds the parked session and hands it the retry (`Session::resume`); a
//!   retry of another method or with other `params` is refused (-32602) and the session
//!   stays parked. Each
//!   answer goes to the upstream request of its key, and from then on the session answers
//!   the retry's id, on the retry's stream. An answer the upstream's request did not get
//!   (missing from `inputResponses`), or a request the upstream sent meanwhile, makes the
//!   retry's answer another `InputRequiredResult`.
//! - The final result (or error) is the upstream's answer to the original call, under the
//!   id of the last retry. One that came while no retry was attached waits for the next.
//! - A parked session that is not resumed in time ends: its upstream call is cancelled.

use super::host::Host;
use super::state::ModernClient;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_PARAMS, Id, Message, Method, RpcError};
use crate::mcp::modern::{self, ResultType};
use crate::upstream::client::{ClientSink, Route};
use crate::upstream::link::Link;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::time::Instant;

/// Why a server request cannot reach a modern client: refused upstream.
fn refusal(why: String) -> RpcError {
    RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)
}

/// A request's `params` as a retry must repeat them: without what a retry adds.
fn retried_params(frame: &Message) -> Value {
    let mut p = frame.value().get("params").cloned().unwrap_or(json!({}));
    if let Some(o) = p.as_object_mut() {
        for k in ["inputResponses", "requestState", "_meta"] {
            o.remove(k);
        }
    }
    p
}

impl ModernClient {
    /// Remembers what a retry of this request must repeat (called as it is served).
    pub(super) fn remember_original(&self, frame: &Message) {
        self.asked.lock().unwrap().original = Some((frame.method_name().to_string(), retried_params(frame)));
    }

    /// Why `msg`, a request for the client made while serving request `route`, cannot be an
    /// input request of that request's answer; `None` if it can.
    pub(in super::super) fn cannot_ask(&self, s: &impl Host, msg: &Message, route: &Route) -> Option<String> {
        let (_, original) = self.rounds.ids();
        let name = msg.method_name();
        if *route != Route::Related(original) {
            return Some(format!(
                "{name} is not tied to a request of the 2026-07-28 client, which has no other way to get it"
            ));
        }
        let may_ask = self.asked.lock().unwrap().original.as_ref().is_some_and(|(m, _)| modern::input::may_ask(m));
        if !may_ask {
            return Some(format!(
                "the 2026-07-28 client's request cannot be answered with a request for input ({name})"
            ));
        }
        if !msg.method().is_input_request() {
            return Some(format!("2026-07-28 has no {name} from a server"));
        }
        if !s.client_can_answer(msg) {
            return Some(format!("the client does not support {name}"));
        }
        if self.rounds.done() || s.is_closed() {
            return Some("the client's request has ended".into());
        }
        None
    }

    /// A request the upstream sends the client, while serving request `route`: asked as an
    /// input request of that request's answer (see the module doc), or refused.
    pub(in super::super) fn ask(&self, s: &impl Host, link: &Arc<Link>, upstream_id: Id, msg: Message, route: Route) {
        let name = msg.method_name().to_string();
        if let Some(why) = self.cannot_ask(s, &msg, &route) {
            tracing::info!(upstream = %s.upstream().name, method = %name, "refused a server request for a 2026-07-28 client: {why}");
            return link.refuse(upstream_id, refusal(why));
        }
        let msg = match s.down_request(msg) {
            Ok(m) => m,
            Err(e) => {
                tracing::info!(upstream = %s.upstream().name, "refused a server request the client's version lacks: {}", e.message);
                return link.refuse(upstream_id, e);
            }
        };
        let answers = crate::mcp::translate::answered(Method::parse(&name));
        let id = s.register_server_request(link, &upstream_id, answers);
        let Some(id) = id else {
            return link
                .refuse(upstream_id, RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client"));
        };
        self.put(id, &msg);
        self.ask_waiting(s);
    }

    /// Puts `msg` (a request for the client, checked by [`ModernClient::cannot_ask`]) among
    /// the input requests of the next round, as `id`; the answer comes back as a response to
    /// `id` (`Session::handle_response`). [`ModernClient::ask_waiting`] asks them.
    pub(in super::super) fn put(&self, id: Id, msg: &Message) {
        let mut asked = json!({"method": msg.method_name()});
        if let Some(p) = msg.value().get("params") {
            asked["params"] = p.clone();
        }
        self.asked.lock().unwrap().waiting.push((id, asked));
    }

    /// Answers the attached round with what the upstream waits for, and parks the session;
    /// nothing if nothing waits, or a round is asked already (parked): the retry's answers
    /// come first, and a round after them asks the rest.
    pub(in super::super) fn ask_waiting(&self, s: &impl Host) {
        let Some(me) = s.parkable() else { return };
        if self.rounds.done() || s.is_closed() {
            return;
        }
        let token = crate::random::id128();
        let until = Instant::now() + s.upstream().request_timeout;
        let requests: serde_json::Map<String, Value> = {
            let mut a = self.asked.lock().unwrap();
            if a.parked.is_some() || a.waiting.is_empty() {
                return;
            }
            a.parked = Some(token.clone());
            a.waiting.iter().map(|(id, r)| (id.to_string(), r.clone())).collect()
        };
        if !self.parked.park(token.clone(), me, until, s.max_in_flight()) {
            // No room to wait: the request fails (its upstream call ends with the session).
            self.asked.lock().unwrap().parked = None;
            self.rounds
                .deliver_error(RpcError::new(GATEWAY_BUSY, "too many requests waiting for their clients' input"));
            return;
        }
        let mut result = jsonrpc::object([("inputRequests", Value::Object(requests)), ("requestState", token.into())]);
        modern::set_result_type(&mut result, ResultType::InputRequired);
        self.rounds.answer_round(result);
    }

    /// The client's retry of a parked request (`frame`, on `sink`): its answers go to the
    /// upstream, and the session answers the retry from now on. A retry that is not one of
    /// the original request is refused, and the session stays parked for the right one.
    pub(in super::super) async fn resume(&self, s: &impl Host, sink: Arc<dyn ClientSink>, frame: Message) {
        let Some(id) = frame.id().cloned() else { return };
        let same = {
            let a = self.asked.lock().unwrap();
            a.original.as_ref().is_some_and(|(m, p)| m == frame.method_name() && *p == retried_params(&frame))
        };
        let token = self.asked.lock().unwrap().parked.clone();
        if !same {
            let e = RpcError::new(
                INVALID_PARAMS,
                "params.requestState belongs to another request: a retry repeats its method and params",
            );
            sink.deliver(Message::made(e.response(Some(&id))), Route::Response(id));
            // Parked again under the same token, for the rest of its time.
            if let (Some(token), Some(me)) = (token, s.parkable()) {
                let until = Instant::now() + s.upstream().request_timeout;
                if !self.parked.park(token, me, until, s.max_in_flight()) {
                    s.close().await;
                }
            }
            return;
        }
        if let Some(done) = self.rounds.attach(sink, id) {
            self.asked.lock().unwrap().parked = None;
            let (_, original) = self.rounds.ids();
            self.rounds.deliver(done, Route::Response(original));
            return;
        }
        let answers = frame.value().pointer("/params/inputResponses").and_then(Value::as_object).cloned();
        let waiting: Vec<Id> = self.asked.lock().unwrap().waiting.iter().map(|(id, _)| id.clone()).collect();
        let mut answered = Vec::new();
        for key in waiting {
            let Some(answer) = answers.as_ref().and_then(|a| a.get(&key.to_string())) else { continue };
            answered.push(key.clone());
            s.handle_response(Message::made(jsonrpc::result_response(&key, answer.clone()))).await;
        }
        let more = {
            let mut a = self.asked.lock().unwrap();
            a.waiting.retain(|(id, _)| !answered.contains(id));
            a.parked = None;
            !a.waiting.is_empty()
        };
        if more {
            self.ask_waiting(s);
        }
    }

    /// Whether round `id` ending (its POST, or its line's answer) ends the session: it is the
    /// current round, and the session is not parked.
    pub(in super::super) fn ends_with_round(&self, id: &Id) -> bool {
        self.rounds.ids().0 == *id && self.asked.lock().unwrap().parked.is_none()
    }

    /// Whether `id` is the id the client knows this request by now (its current round).
    pub(in super::super) fn is_round(&self, id: &Id) -> bool {
        self.rounds.ids().0 == *id
    }

    /// The client cancelled request `id` (stdio): the id it knows the request by now is the
    /// one the link knows it by first.
    pub(in super::super) fn cancel_target(&self, id: Id) -> Id {
        let (current, original) = self.rounds.ids();
        if id == current { original } else { id }
    }

    /// A parked session that ends lets go of its place.
    pub(in super::super) fn unpark(&self) {
        if let Some(token) = self.asked.lock().unwrap().parked.take() {
            self.parked.forget(&token);
        }
    }
}
