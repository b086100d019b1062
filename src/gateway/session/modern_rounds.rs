//! Multi round-trip requests (2026-07-28, SEP-2322) for a modern client in front of a legacy
//! upstream: the upstream asks the client for input with server→client requests
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`), which the modern era has
//! not; the gateway answers the client's request with an `InputRequiredResult` instead.
//!
//! - The upstream's request is kept waiting (under an id of the session's, as any server
//!   request), and the client's request is answered `{resultType: "input_required",
//!   inputRequests: {<that id>: {method, params}}, requestState}`. The upstream call stays in
//!   flight; the session is **parked** under `requestState`, a random token, in its front's
//!   [`ParkedRequests`], for at most `request_timeout`.
//! - The client retries the request with a new id, `inputResponses` and the `requestState`.
//!   The front finds the parked session and hands it the retry ([`Session::resume`]): each
//!   answer goes to the upstream request of its key, and from then on the session answers
//!   the retry's id, on the retry's stream. An answer the upstream's request did not get
//!   (missing from `inputResponses`), or a request the upstream sent meanwhile, makes the
//!   retry's answer another `InputRequiredResult`.
//! - The final result (or error) is the upstream's answer to the original call, under the
//!   id of the last retry. One that came while no retry was attached waits for the next.
//! - A parked session that is not resumed in time ends: its upstream call is cancelled.

use super::*;
use crate::gateway::client::ClientSink;
use crate::mcp::modern::{self, ResultType};

/// The sessions of one front whose requests wait for their client's input, by
/// `requestState`. Bounded by `max_in_flight`; each for at most `request_timeout`.
#[derive(Default)]
pub struct ParkedRequests {
    parked: Mutex<HashMap<String, (Arc<Session>, Instant)>>,
}

impl ParkedRequests {
    pub fn new() -> Arc<ParkedRequests> {
        Arc::new(ParkedRequests::default())
    }

    /// The session parked under `token` for upstream `upstream`, taken out.
    pub fn take(&self, token: &str, upstream: &str) -> Option<Arc<Session>> {
        let mut parked = self.parked.lock().unwrap();
        let expired = Self::expire(&mut parked);
        let found = match parked.get(token) {
            Some((s, _)) if s.upstream.name == upstream => parked.remove(token).map(|(s, _)| s),
            _ => None,
        };
        drop(parked);
        Self::end(expired);
        found
    }

    /// Parks `session` under `token` until `until`: `false` if there is no room.
    fn park(&self, token: String, session: Arc<Session>, until: Instant, limit: usize) -> bool {
        let mut parked = self.parked.lock().unwrap();
        let expired = Self::expire(&mut parked);
        let room = parked.len() < limit;
        if room {
            parked.insert(token, (session, until));
        }
        drop(parked);
        Self::end(expired);
        room
    }

    fn expire(parked: &mut HashMap<String, (Arc<Session>, Instant)>) -> Vec<Arc<Session>> {
        let now = Instant::now();
        let gone: Vec<String> = parked.iter().filter(|(_, (_, u))| *u <= now).map(|(k, _)| k.clone()).collect();
        gone.iter().filter_map(|k| parked.remove(k)).map(|(s, _)| s).collect()
    }

    fn end(expired: Vec<Arc<Session>>) {
        for s in expired {
            tracing::info!(upstream = %s.upstream.name, "a request waiting for its client's input was not resumed in time; cancelled");
            tokio::spawn(async move { s.close().await });
        }
    }
}

/// The modern client's side of its request's session: which request and stream are its
/// now, and what the upstream asked of the client.
pub(super) struct ModernClient {
    pub(super) meta: crate::mcp::modern::meta::RequestMeta,
    pub(super) rounds: Arc<Rounds>,
    parked: Arc<ParkedRequests>,
    asked: Mutex<Asked>,
    /// The `subscriptions/listen` this request is, once acknowledged: its id and what it
    /// carries (see `modern_listen`).
    pub(super) listen: Mutex<Option<(Id, crate::mcp::modern::client::ListenFilter)>>,
}

#[derive(Default)]
struct Asked {
    /// The upstream's requests waiting for the client, by the id the session gave them,
    /// as the client is to see them (`{method, params}`).
    waiting: Vec<(Id, Value)>,
    /// The session is parked (its request answered with `input_required`).
    parked: bool,
}

impl ModernClient {
    pub(super) fn new(
        meta: crate::mcp::modern::meta::RequestMeta,
        sink: Arc<dyn ClientSink>,
        id: Id,
        parked: Arc<ParkedRequests>,
    ) -> ModernClient {
        let rounds = Arc::new(Rounds {
            st: Mutex::new(RoundsState { sink, original: id.clone(), current: id, attached: true, finished: None }),
        });
        ModernClient { meta, rounds, parked, asked: Mutex::default(), listen: Mutex::new(None) }
    }
}

/// Where a modern request's session delivers: the sink of the round now attached, under the
/// id the client now knows the request by.
pub(super) struct Rounds {
    st: Mutex<RoundsState>,
}

struct RoundsState {
    sink: Arc<dyn ClientSink>,
    original: Id,
    current: Id,
    /// A round (the first request or a retry) waits for this request's answer.
    attached: bool,
    /// The final answer, when it came with no round attached.
    finished: Option<Message>,
}

impl Rounds {
    /// Sends the round's answer: the round ends (an `input_required` one) or the request does.
    fn answer_round(&self, result: Value) {
        let (sink, id) = {
            let mut st = self.st.lock().unwrap();
            st.attached = false;
            (st.sink.clone(), st.current.clone())
        };
        sink.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
    }

    /// A retry with id `id` on `sink` is the round now; the final answer, if it came.
    fn attach(&self, sink: Arc<dyn ClientSink>, id: Id) -> Option<Message> {
        let mut st = self.st.lock().unwrap();
        st.sink = sink;
        st.current = id;
        st.attached = true;
        st.finished.take()
    }
}

impl ClientSink for Rounds {
    fn deliver(&self, msg: Message, route: Route) {
        let (sink, route, msg) = {
            let mut st = self.st.lock().unwrap();
            let ours = |id: &Id| *id == st.original;
            match route {
                Route::Response(id) if ours(&id) => {
                    if !st.attached {
                        st.finished = Some(msg);
                        return;
                    }
                    let msg = if st.current == st.original { msg } else { msg.with_id(&st.current) };
                    (st.sink.clone(), Route::Response(st.current.clone()), msg)
                }
                // Progress of a round no one waits on has no stream to go to.
                Route::Related(id) if ours(&id) && !st.attached => return,
                Route::Related(id) if ours(&id) => (st.sink.clone(), Route::Related(st.current.clone()), msg),
                route => (st.sink.clone(), route, msg),
            }
        };
        sink.deliver(msg, route);
    }

    fn reaches_client_now(&self) -> bool {
        false
    }

    fn abandon(&self, id: &Id) {
        let (sink, current) = {
            let st = self.st.lock().unwrap();
            (st.sink.clone(), st.current.clone())
        };
        if *id == current || *id == self.st.lock().unwrap().original {
            sink.abandon(&current);
        }
    }

    fn discard_progress(&self, token: &Value) {
        let sink = self.st.lock().unwrap().sink.clone();
        sink.discard_progress(token);
    }
}

/// Why a server request cannot reach a modern client: refused upstream.
fn refusal(why: String) -> RpcError {
    RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)
}

impl Session {
    /// A request the upstream sends a modern client, while serving request `route`: asked
    /// as an input request of that request's answer (see the module doc), or refused.
    pub(super) fn ask_modern_client(&self, link: &Arc<Link>, upstream_id: Id, msg: Message, route: Route) {
        let Some(modern) = &self.modern else { return };
        let original = modern.rounds.st.lock().unwrap().original.clone();
        let name = msg.method_name().to_string();
        let refuse = |why: String| {
            tracing::info!(upstream = %self.upstream.name, method = %name, "refused a server request for a 2026-07-28 client: {why}");
            link.refuse(upstream_id.clone(), refusal(why));
        };
        if route != Route::Related(original) {
            return refuse(format!(
                "{name} is not tied to a request of the 2026-07-28 client, which has no other way to get it"
            ));
        }
        if !msg.method().is_input_request() {
            return refuse(format!("2026-07-28 has no {name} from a server"));
        }
        if !self.client_can_answer(&msg) {
            return refuse(format!("the client does not support {name}"));
        }
        let msg = match self.downward_request(msg) {
            Ok(m) => m,
            Err(e) => {
                tracing::info!(upstream = %self.upstream.name, "refused a server request the client's version lacks: {}", e.message);
                return link.refuse(upstream_id, e);
            }
        };
        let id = {
            let mut st = self.state.lock().unwrap();
            if st.server_requests.len() >= self.gateway.limits().max_in_flight {
                None
            } else {
                let id = Id::Num(st.next_client_side_id);
                st.next_client_side_id += 1;
                let answers = crate::mcp::translate::answered_method(&name);
                st.server_requests.insert(
                    id.clone(),
                    ServerRequest { link: Arc::downgrade(link), upstream_id: upstream_id.clone(), task: None, answers },
                );
                Some(id)
            }
        };
        let Some(id) = id else {
            return link
                .refuse(upstream_id, RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client"));
        };
        let mut asked = json!({"method": name});
        if let Some(p) = msg.value().get("params") {
            asked["params"] = p.clone();
        }
        let park = {
            let mut a = modern.asked.lock().unwrap();
            a.waiting.push((id, asked));
            !a.parked
        };
        if park {
            self.ask_round();
        }
    }

    /// Answers the attached round with what the upstream waits for, and parks the session.
    fn ask_round(&self) {
        let Some(modern) = &self.modern else { return };
        let Some(me) = self.me.upgrade() else { return };
        let token = crate::random::id128();
        let until = Instant::now() + self.upstream.request_timeout;
        let requests: serde_json::Map<String, Value> = {
            let mut a = modern.asked.lock().unwrap();
            a.parked = true;
            a.waiting.iter().map(|(id, r)| (id.to_string(), r.clone())).collect()
        };
        if !modern.parked.park(token.clone(), me, until, self.gateway.limits().max_in_flight) {
            // No room to wait: the request fails (its upstream call ends with the session).
            modern.asked.lock().unwrap().parked = false;
            let e = RpcError::new(GATEWAY_BUSY, "too many requests waiting for their clients' input");
            let id = modern.rounds.st.lock().unwrap().current.clone();
            modern.rounds.deliver_error(&id, e);
            return;
        }
        let mut result = json!({"inputRequests": requests, "requestState": token});
        modern::set_result_type(&mut result, ResultType::InputRequired);
        modern.rounds.answer_round(result);
    }

    /// The client's retry of a parked request (`frame`, on `sink`): its answers go to the
    /// upstream, and the session answers the retry from now on.
    pub async fn resume(&self, sink: Arc<dyn ClientSink>, frame: Message) {
        let Some(modern) = &self.modern else { return };
        let Some(id) = frame.id().cloned() else { return };
        if let Some(done) = modern.rounds.attach(sink, id) {
            modern.asked.lock().unwrap().parked = false;
            modern.rounds.deliver(done, Route::Response(modern.rounds.st.lock().unwrap().original.clone()));
            return;
        }
        let answers = frame.value().pointer("/params/inputResponses").and_then(Value::as_object).cloned();
        let waiting: Vec<Id> = modern.asked.lock().unwrap().waiting.iter().map(|(id, _)| id.clone()).collect();
        let mut answered = Vec::new();
        for key in waiting {
            let Some(answer) = answers.as_ref().and_then(|a| a.get(&key.to_string())) else { continue };
            answered.push(key.clone());
            self.handle_response(Message::made(jsonrpc::result_response(&key, answer.clone()))).await;
        }
        let more = {
            let mut a = modern.asked.lock().unwrap();
            a.waiting.retain(|(id, _)| !answered.contains(id));
            a.parked = false;
            !a.waiting.is_empty()
        };
        if more {
            self.ask_round();
        }
    }

    /// The end of round `id` (its POST, or its line's answer): the session ends, unless it
    /// is parked or a later round (a retry) is its now.
    pub async fn end_round(&self, id: &Id) {
        let Some(modern) = &self.modern else { return self.close().await };
        let current = modern.rounds.st.lock().unwrap().current == *id;
        let parked = modern.asked.lock().unwrap().parked;
        if current && !parked {
            self.close().await;
        }
    }
}

impl Rounds {
    fn deliver_error(&self, id: &Id, e: RpcError) {
        let sink = self.st.lock().unwrap().sink.clone();
        sink.deliver(Message::made(e.response(Some(id))), Route::Response(id.clone()));
    }
}
