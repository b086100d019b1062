//! What a modern (2026-07-28) request's session keeps (see `modern_client`, and its `rounds`):
//! the request's `_meta`, where its answer goes now ([`Rounds`]: the first request's sink,
//! then each retry's), what the upstream asked of the client ([`Asked`]), the
//! `subscriptions/listen` it is, and its front's [`ParkedRequests`]. Apart from the session's
//! own file, so that the session can name these without the two importing each other.

use crate::jsonrpc::{self, Id, Message, RpcError};
use crate::mcp::modern::client::ListenFilter;
use crate::mcp::modern::meta::RequestMeta;
use crate::upstream::client::{ClientSink, Route};
use serde_json::Value;
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

/// A session that can wait for its client's input (the modern request's session).
pub trait Parked: Send + Sync + 'static {
    /// The upstream it serves.
    fn upstream(&self) -> &str;
    /// Whose request it is: a token is only good for the same owner (on the same upstream's
    /// endpoint, and with authentication of the same principal).
    fn owner(&self) -> &str;
    /// Who its client is, for the per-client share of the parked places.
    fn client(&self) -> &str;
    /// It was not resumed in time: it ends (its upstream call is cancelled).
    fn expire(self: Arc<Self>);
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

struct Place {
    session: Arc<dyn Parked>,
    until: Instant,
}

/// The sessions of one front whose requests wait for their client's input, by
/// `requestState`. At most `limit` at once, at most half of them (and at least one) of one
/// client; each for at most the time it was parked for, then it ends.
pub struct ParkedRequests {
    parked: Mutex<HashMap<String, Place>>,
    me: Weak<ParkedRequests>,
}

impl ParkedRequests {
    pub fn new() -> Arc<ParkedRequests> {
        Arc::new_cyclic(|me| ParkedRequests { parked: Mutex::new(HashMap::new()), me: me.clone() })
    }

    /// The session of owner `owner` parked under `token`, taken out.
    pub fn take(&self, token: &str, owner: &str) -> Option<Arc<dyn Any + Send + Sync>> {
        let mut parked = self.parked.lock().unwrap();
        match parked.get(token) {
            Some(p) if p.session.owner() == owner && p.until > Instant::now() => {}
            _ => return None,
        }
        parked.remove(token).map(|p| p.session.into_any())
    }

    /// Parks `session` under `token` until `until`: `false` if there is no room (for it, or
    /// for its client).
    pub(super) fn park(&self, token: String, session: Arc<dyn Parked>, until: Instant, limit: usize) -> bool {
        {
            let mut parked = self.parked.lock().unwrap();
            let client = session.client().to_string();
            let of_client = parked.values().filter(|p| p.session.client() == client).count();
            if parked.len() >= limit || of_client >= (limit / 2).max(1) {
                return false;
            }
            parked.insert(token.clone(), Place { session, until });
        }
        // Ends it when its time is up, if it is still parked then.
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(until).await;
            let Some(me) = me.upgrade() else { return };
            let expired = me.parked.lock().unwrap().remove(&token);
            if let Some(p) = expired {
                tracing::info!(
                    upstream = p.session.upstream(),
                    "a request waiting for its client's input was not resumed in time; cancelled"
                );
                p.session.expire();
            }
        });
        true
    }

    /// Forgets `token`'s session (it ended some other way).
    pub(super) fn forget(&self, token: &str) {
        self.parked.lock().unwrap().remove(token);
    }
}

/// The modern client's side of its request's session: which request and stream are its
/// now, and what the upstream asked of the client.
pub(super) struct ModernClient {
    pub(super) meta: RequestMeta,
    pub(super) rounds: Arc<Rounds>,
    pub(super) parked: Arc<ParkedRequests>,
    pub(super) asked: Mutex<Asked>,
    /// The `subscriptions/listen` this request is, once acknowledged: its id and what it
    /// carries (see `modern_client::listen`).
    pub(super) listen: Mutex<Option<(Id, ListenFilter)>>,
    /// Fired when the listen stream ends (also when the session goes): the watchers of the
    /// tasks it was granted stop.
    pub(super) listen_ended: CancellationToken,
    _listen_ends_with_session: DropGuard,
    /// The `Mcp-Param-*` headers of the request (its latest round), as (name, value); `None`
    /// over a transport without headers (stdio). See `modern_client::param_headers`.
    pub(super) param_headers: Mutex<Option<Vec<crate::mcp::modern::headers::Received>>>,
}

#[derive(Default)]
pub(super) struct Asked {
    /// The upstream's requests waiting for the client, by the id the session gave them,
    /// as the client is to see them (`{method, params}`).
    pub(super) waiting: Vec<(Id, Value)>,
    /// The token the session is parked under (its request answered with `input_required`).
    pub(super) parked: Option<String>,
    /// What a retry must be to resume it: the method and `params` of the original request,
    /// without what a retry adds.
    pub(super) original: Option<(String, Value)>,
}

impl ModernClient {
    pub(super) fn new(
        meta: RequestMeta,
        sink: Arc<dyn ClientSink>,
        id: Id,
        parked: Arc<ParkedRequests>,
    ) -> ModernClient {
        let rounds = Arc::new(Rounds {
            st: Mutex::new(RoundsState {
                sink,
                original: id.clone(),
                current: id,
                attached: true,
                finished: None,
                done: false,
            }),
        });
        let listen_ended = CancellationToken::new();
        ModernClient {
            meta,
            rounds,
            parked,
            asked: Mutex::default(),
            listen: Mutex::new(None),
            _listen_ends_with_session: listen_ended.clone().drop_guard(),
            listen_ended,
            param_headers: Mutex::new(None),
        }
    }
}

/// Where a modern request's session delivers: the sink of the round now attached, under the
/// id the client now knows the request by.
pub(super) struct Rounds {
    pub(super) st: Mutex<RoundsState>,
}

pub(super) struct RoundsState {
    pub(super) sink: Arc<dyn ClientSink>,
    pub(super) original: Id,
    pub(super) current: Id,
    /// A round (the first request or a retry) waits for this request's answer.
    pub(super) attached: bool,
    /// The final answer, when it came with no round attached.
    pub(super) finished: Option<Message>,
    /// The final answer has been delivered: nothing more is asked or answered.
    pub(super) done: bool,
}

impl Rounds {
    /// Sends the round's answer (an `input_required` one): the round ends.
    pub(super) fn answer_round(&self, result: Value) {
        let (sink, id) = {
            let mut st = self.st.lock().unwrap();
            st.attached = false;
            (st.sink.clone(), st.current.clone())
        };
        sink.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
    }

    /// A retry with id `id` on `sink` is the round now; the final answer, if it came.
    pub(super) fn attach(&self, sink: Arc<dyn ClientSink>, id: Id) -> Option<Message> {
        let mut st = self.st.lock().unwrap();
        st.sink = sink;
        st.current = id;
        st.attached = true;
        st.finished.take()
    }

    /// The request's id as the client knows it now, and its first.
    pub(super) fn ids(&self) -> (Id, Id) {
        let st = self.st.lock().unwrap();
        (st.current.clone(), st.original.clone())
    }

    /// Whether the final answer has been delivered.
    pub(super) fn done(&self) -> bool {
        self.st.lock().unwrap().done
    }

    pub(super) fn deliver_error(&self, e: RpcError) {
        let (sink, id) = {
            let mut st = self.st.lock().unwrap();
            st.done = true;
            (st.sink.clone(), st.current.clone())
        };
        sink.deliver(Message::made(e.response(Some(&id))), Route::Response(id));
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
                    st.done = true;
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
        let (sink, current, original) = {
            let st = self.st.lock().unwrap();
            (st.sink.clone(), st.current.clone(), st.original.clone())
        };
        if *id == current || *id == original {
            sink.abandon(&current);
        }
    }

    fn discard_progress(&self, token: &crate::jsonrpc::ProgressToken) {
        let sink = self.st.lock().unwrap().sink.clone();
        sink.discard_progress(token);
    }
}
