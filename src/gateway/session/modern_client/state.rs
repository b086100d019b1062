//! What a modern (2026-07-28) request's session keeps (see the folder's doc, and `rounds`):
//! the request's `_meta`, where its answer goes now ([`Rounds`]: the first request's sink,
//! then each retry's), what the upstream asked of the client ([`Asked`]), the
//! `subscriptions/listen` it is, and its front's [`ParkedRequests`]. Apart from the folder's
//! code (its other files), so that the session can name these without the two importing
//! each other. (`pub(crate)`: the session's `modern_client` module is private, so only the
//! session reaches these; the fronts reach [`ParkedRequests`] through the session's
//! re-export, and of it only what a front may do: parking and forgetting a request is the
//! folder's own.)

use crate::clock::{Deadlines, Schedule};
use crate::jsonrpc::{self, Id, Message, RpcError};
use crate::locks::Mutex;
use crate::mcp::modern::client::ListenFilter;
use crate::mcp::modern::meta::RequestMeta;
use crate::upstream::client::{ClientSink, Route};
use serde_json::Value;
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
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
/// client; each for at most the time it was parked for, then it ends: its time is kept by the
/// front's one timer of parked requests (`clock::Deadlines`), whose waiter ends with it.
pub struct ParkedRequests {
    parked: Mutex<HashMap<String, Place>>,
    /// When each place ends; its waiter (`end_expired`) starts with the first park.
    timers: Schedule<String>,
    me: Weak<ParkedRequests>,
}

impl ParkedRequests {
    pub fn new() -> Arc<ParkedRequests> {
        Arc::new_cyclic(|me| ParkedRequests {
            parked: Mutex::new(HashMap::new()),
            timers: Schedule::default(),
            me: me.clone(),
        })
    }

    /// The session of owner `owner` parked under `token`, taken out.
    pub fn take(&self, token: &str, owner: &str) -> Option<Arc<dyn Any + Send + Sync>> {
        let mut parked = self.parked.lock().unwrap();
        match parked.get(token) {
            Some(p) if p.session.owner() == owner && p.until > Instant::now() => {}
            _ => return None,
        }
        // The timer goes under the same lock: a place parked again under this token keeps its own.
        self.timers.unset(&token.to_string());
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
            self.timers.start(|clock| end_expired(self.me.clone(), clock));
            // Set under the lock, as the place is (the clock's lock is taken after it, never
            // before).
            self.timers.set(token.clone(), until);
            parked.insert(token, Place { session, until });
        }
        true
    }

    /// Forgets `token`'s session (it ended some other way).
    pub(super) fn forget(&self, token: &str) {
        let mut parked = self.parked.lock().unwrap();
        parked.remove(token);
        self.timers.unset(&token.to_string());
    }
}

/// The waiter of a front's parked requests: each not resumed by its time ends (its upstream
/// call cancelled). It stops when the front's [`ParkedRequests`] goes.
async fn end_expired(parked: Weak<ParkedRequests>, timers: Arc<Deadlines<String>>) {
    while let Some((token, _)) = timers.expired().await {
        let Some(parked) = parked.upgrade() else { return };
        let expired = {
            let mut places = parked.parked.lock().unwrap();
            // A place parked again under the token since has a time of its own.
            match places.get(&token) {
                Some(p) if p.until <= Instant::now() => places.remove(&token),
                _ => None,
            }
        };
        if let Some(p) = expired {
            tracing::info!(
                upstream = p.session.upstream(),
                "a request waiting for its client's input was not resumed in time; cancelled"
            );
            p.session.expire();
        }
    }
}

/// The modern client's side of its request's session: which request and stream are its
/// now, and what the upstream asked of the client.
pub(crate) struct ModernClient {
    pub(crate) meta: RequestMeta,
    pub(crate) rounds: Arc<Rounds>,
    pub(crate) parked: Arc<ParkedRequests>,
    pub(crate) asked: Mutex<Asked>,
    /// The `subscriptions/listen` this request is, once acknowledged: its id and what it
    /// carries (see `modern_client::listen`).
    pub(crate) listen: Mutex<Option<(Id, ListenFilter)>>,
    /// Fired when the listen stream ends (also when the session goes): the watchers of the
    /// tasks it was granted stop.
    pub(crate) listen_ended: CancellationToken,
    _listen_ends_with_session: DropGuard,
    /// The `Mcp-Param-*` headers of the request (its latest round), as (name, value); `None`
    /// over a transport without headers (stdio). See `modern_client::param_headers`.
    pub(crate) param_headers: Mutex<Option<Vec<crate::mcp::modern::headers::Received>>>,
    /// The hosted task whose call this request waits on before answering (see
    /// `modern_client::tasks`): the client does not know it yet, so if the request ends
    /// first (the client hung up), the task is cancelled.
    pub(crate) deciding: Mutex<Option<std::sync::Arc<str>>>,
}

#[derive(Default)]
pub(crate) struct Asked {
    /// The upstream's requests waiting for the client, by the id the session gave them,
    /// as the client is to see them (`{method, params}`).
    pub(crate) waiting: Vec<(Id, Value)>,
    /// The token the session is parked under (its request answered with `input_required`).
    pub(crate) parked: Option<String>,
    /// What a retry must be to resume it: the method and `params` of the original request,
    /// without what a retry adds.
    pub(crate) original: Option<(String, Value)>,
}

impl ModernClient {
    pub(crate) fn new(
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
            deciding: Mutex::new(None),
        }
    }
}

/// Where a modern request's session delivers: the sink of the round now attached, under the
/// id the client now knows the request by.
pub(crate) struct Rounds {
    pub(crate) st: Mutex<RoundsState>,
}

pub(crate) struct RoundsState {
    pub(crate) sink: Arc<dyn ClientSink>,
    pub(crate) original: Id,
    pub(crate) current: Id,
    /// A round (the first request or a retry) waits for this request's answer.
    pub(crate) attached: bool,
    /// The final answer, when it came with no round attached.
    pub(crate) finished: Option<Message>,
    /// The final answer has been delivered: nothing more is asked or answered.
    pub(crate) done: bool,
}

impl Rounds {
    /// Sends the round's answer (an `input_required` one): the round ends.
    pub(crate) fn answer_round(&self, result: Value) {
        let (sink, id) = {
            let mut st = self.st.lock().unwrap();
            st.attached = false;
            (st.sink.clone(), st.current.clone())
        };
        sink.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
    }

    /// A retry with id `id` on `sink` is the round now; the final answer, if it came.
    pub(crate) fn attach(&self, sink: Arc<dyn ClientSink>, id: Id) -> Option<Message> {
        let mut st = self.st.lock().unwrap();
        st.sink = sink;
        st.current = id;
        st.attached = true;
        st.finished.take()
    }

    /// The request's id as the client knows it now, and its first.
    pub(crate) fn ids(&self) -> (Id, Id) {
        let st = self.st.lock().unwrap();
        (st.current.clone(), st.original.clone())
    }

    /// Whether the final answer has been delivered.
    pub(crate) fn done(&self) -> bool {
        self.st.lock().unwrap().done
    }

    pub(crate) fn deliver_error(&self, e: RpcError) {
        let (sink, id) = {
            let mut st = self.st.lock().unwrap();
            st.done = true;
            (st.sink.clone(), st.current.clone())
        };
        sink.deliver(era_codes(Message::made(e.response(Some(&id)))), Route::Response(id));
    }
}

/// An error as a modern client may get it: in the codes 2026-07-28 allows, whoever made it
/// (the upstream, or the gateway: a closed link, a timeout, a limit, a hosted task's end);
/// see `mcp::modern::client::error_for_modern`.
fn era_codes(msg: Message) -> Message {
    if !msg.is_error() {
        return msg;
    }
    let code = msg.value().pointer("/error/code").and_then(Value::as_i64);
    if !code.is_some_and(crate::mcp::modern::client::needs_modern_code) {
        return msg;
    }
    msg.edit(|m| {
        crate::mcp::modern::client::error_for_modern(m);
    })
}

impl ClientSink for Rounds {
    fn deliver(&self, msg: Message, route: Route) {
        let msg = era_codes(msg);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    struct Waiting {
        client: &'static str,
        expired: Arc<AtomicUsize>,
    }

    impl Parked for Waiting {
        fn upstream(&self) -> &str {
            "demo"
        }
        fn owner(&self) -> &str {
            "alice"
        }
        fn client(&self) -> &str {
            self.client
        }
        fn expire(self: Arc<Self>) {
            self.expired.fetch_add(1, Ordering::SeqCst);
        }
        fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
            self
        }
    }

    fn waiting(client: &'static str) -> (Arc<Waiting>, Arc<AtomicUsize>) {
        let expired = Arc::new(AtomicUsize::new(0));
        (Arc::new(Waiting { client, expired: expired.clone() }), expired)
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_parked_request_ends_at_its_time_and_not_before() {
        let parked = ParkedRequests::new();
        let (a, a_expired) = waiting("c1");
        let (b, b_expired) = waiting("c2");
        let start = Instant::now();
        assert!(parked.park("a".into(), a, start + Duration::from_secs(10), 8));
        assert!(parked.park("b".into(), b, start + Duration::from_secs(5), 8));
        tokio::time::sleep(Duration::from_millis(4_999)).await;
        settle().await;
        assert_eq!(b_expired.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        settle().await;
        assert_eq!(b_expired.load(Ordering::SeqCst), 1, "b ends at 5 s");
        assert!(parked.take("b", "alice").is_none(), "an ended request cannot be resumed");
        assert_eq!(a_expired.load(Ordering::SeqCst), 0);
        tokio::time::sleep_until(start + Duration::from_secs(10)).await;
        settle().await;
        assert_eq!(a_expired.load(Ordering::SeqCst), 1, "a ends at 10 s");
        assert_eq!(b_expired.load(Ordering::SeqCst), 1, "b ends once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_resumed_or_forgotten_request_never_expires() {
        let parked = ParkedRequests::new();
        let (a, a_expired) = waiting("c1");
        let (b, b_expired) = waiting("c2");
        let until = Instant::now() + Duration::from_secs(1);
        assert!(parked.park("a".into(), a, until, 8));
        assert!(parked.park("b".into(), b, until, 8));
        assert!(parked.take("a", "mallory").is_none(), "another owner's token is not theirs");
        assert!(parked.take("a", "alice").is_some());
        parked.forget("b");
        tokio::time::sleep(Duration::from_secs(2)).await;
        settle().await;
        assert_eq!(a_expired.load(Ordering::SeqCst) + b_expired.load(Ordering::SeqCst), 0);
        assert!(parked.timers.clock().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_places_are_bounded_in_all_and_per_client() {
        let parked = ParkedRequests::new();
        let until = Instant::now() + Duration::from_secs(60);
        assert!(parked.park("1".into(), waiting("c1").0, until, 4));
        assert!(parked.park("2".into(), waiting("c1").0, until, 4));
        assert!(!parked.park("3".into(), waiting("c1").0, until, 4), "half the places for one client");
        assert!(parked.park("3".into(), waiting("c2").0, until, 4));
        assert!(parked.park("4".into(), waiting("c3").0, until, 4));
        assert!(!parked.park("5".into(), waiting("c4").0, until, 4), "no more than the limit");
    }

    #[tokio::test(start_paused = true)]
    async fn the_waiter_ends_with_the_front() {
        let parked = ParkedRequests::new();
        let (a, a_expired) = waiting("c1");
        assert!(parked.park("a".into(), a, Instant::now() + Duration::from_secs(1), 8));
        let timers = parked.timers.clock().clone();
        drop(parked);
        // The waiter held the timers and no more: with the front gone, it stopped.
        settle().await;
        assert_eq!(Arc::strong_count(&timers), 1);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(a_expired.load(Ordering::SeqCst), 0);
    }
}
