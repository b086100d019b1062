//! Modern (2026-07-28) requests on the stdio front. A client that never sent `initialize`
//! and whose request carries modern `_meta` (or is a `server/discover`) is served
//! statelessly: each request on a session of its own (`Session::for_modern_request`), which
//! ends once its answer is written or the client cancelled it with `notifications/cancelled`
//! (on stdio, the era's way to cancel). An `initialize` selects the legacy era for the rest
//! of the process, as the era's versioning says.

use crate::config::UpstreamConfig;
use crate::downstream::stdout::StdoutSink;
use crate::gateway::Gateway;
use crate::gateway::session::ParkedRequests;
use crate::gateway::session::Session;
use crate::jsonrpc::{self, GATEWAY_BUSY, INVALID_REQUEST, Id, Kind, Message, RpcError};
use crate::locks::Mutex;
use crate::mcp::modern::meta::{self, RequestMeta};
use crate::upstream::client::Requester;
use crate::upstream::client::{ClientSink, Route};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The modern requests of one stdio client in flight, by id.
pub struct ModernCalls {
    gateway: Arc<Gateway>,
    upstream: Arc<UpstreamConfig>,
    out: Arc<StdoutSink>,
    live: Mutex<HashMap<Id, Arc<Session>>>,
    parked: Arc<ParkedRequests>,
}

impl ModernCalls {
    pub fn new(gateway: Arc<Gateway>, upstream: Arc<UpstreamConfig>, out: Arc<StdoutSink>) -> Arc<ModernCalls> {
        let parked = ParkedRequests::new();
        Arc::new(ModernCalls { gateway, upstream, out, live: Mutex::new(HashMap::new()), parked })
    }

    /// Whether `msg` is served here: a modern request from a client that has not chosen the
    /// legacy era (`legacy`), or the cancellation of one in flight.
    pub fn takes(&self, msg: &Message, legacy: bool) -> bool {
        match msg.kind() {
            Kind::Request => {
                !legacy
                    && msg.method() != jsonrpc::Method::Initialize
                    && (msg.method() == jsonrpc::Method::ServerDiscover || meta::is_modern(msg.value().get("params")))
            }
            Kind::Notification if msg.method() == jsonrpc::Method::Cancelled => {
                msg.request_id_param().is_some_and(|id| self.live.lock().unwrap().contains_key(&id))
            }
            _ => false,
        }
    }

    /// The front stops (SIGTERM, or the end of stdin): every `subscriptions/listen` in flight
    /// ends now with its answer, rather than holding the drain until `drain_timeout`.
    pub fn end_listens(&self) {
        let live: Vec<Arc<Session>> = self.live.lock().unwrap().values().cloned().collect();
        for s in live {
            s.end_listen_for_shutdown();
        }
    }

    /// Serves one message [`ModernCalls::takes`] took.
    pub async fn serve(self: &Arc<Self>, msg: Message) {
        if msg.kind() == Kind::Notification {
            let session = msg.request_id_param().and_then(|id| self.live.lock().unwrap().get(&id).cloned());
            if let Some(s) = session {
                s.handle(msg).await;
            }
            return;
        }
        let id = msg.id().cloned().expect("requests have ids");
        let refuse = |e: RpcError| self.out.deliver(e.response_message(Some(&id)), Route::Response(id.clone()));
        let request_meta = match RequestMeta::read(msg.value().get("params")) {
            Ok(m) => m,
            Err(e) => return refuse(e.to_rpc()),
        };
        {
            let live = self.live.lock().unwrap();
            if live.contains_key(&id) {
                drop(live);
                // Not as the answer of that id: the request in flight under it still owes one.
                let e = RpcError::new(
                    INVALID_REQUEST,
                    format!("invalid request: id {id} is already in use by a request in flight"),
                );
                self.out.deliver(e.response_message(Some(&id)), Route::Unrelated);
                return;
            }
            if live.len() >= self.gateway.limits().max_in_flight {
                drop(live);
                return refuse(RpcError::new(GATEWAY_BUSY, "too many requests in flight"));
            }
        }
        let one = Arc::new(OneRequest {
            out: self.out.clone(),
            id: id.clone(),
            done: CancellationToken::new(),
            calls: Arc::downgrade(self),
        });
        // A retry of a request waiting for the client's input goes on in that request's session.
        let state = msg.value().pointer("/params/requestState").and_then(|s| s.as_str());
        let resumed = state.and_then(|token| Session::take_parked(&self.parked, token, &self.upstream.name, None));
        let session = match &resumed {
            Some(s) => s.clone(),
            None => Session::for_modern_request(
                self.gateway.clone(),
                self.upstream.clone(),
                one.clone(),
                Requester::Anonymous(None),
                request_meta,
                id.clone(),
                self.parked.clone(),
            ),
        };
        self.live.lock().unwrap().insert(id.clone(), session.clone());
        tokio::spawn(async move {
            match resumed {
                Some(s) => s.resume(one.clone(), msg).await,
                None => session.handle(msg).await,
            }
            one.done.cancelled().await;
            session.end_round(&one.id).await;
        });
    }
}

/// The client side of one modern request: stdout, and the end of the request once its answer
/// is written or it was cancelled.
struct OneRequest {
    out: Arc<StdoutSink>,
    id: Id,
    done: CancellationToken,
    calls: std::sync::Weak<ModernCalls>,
}

impl OneRequest {
    /// The request is over: its id is free at once (the client may send the next request
    /// under it, or one more past the limit), and its session ends.
    fn end(&self) {
        if let Some(calls) = self.calls.upgrade() {
            let mut live = calls.live.lock().unwrap();
            if live.get(&self.id).is_some_and(|s| s.is_round(&self.id)) {
                live.remove(&self.id);
            }
        }
        self.done.cancel();
    }
}

impl ClientSink for OneRequest {
    fn deliver(&self, msg: Message, route: Route) {
        let answered = route == Route::Response(self.id.clone());
        self.out.deliver(msg, route);
        if answered {
            self.end();
        }
    }

    fn abandon(&self, id: &Id) {
        self.out.in_flight.answered(id);
        self.end();
    }
}
