//! One upstream connection as the gateway uses it: request-id mapping, pending requests,
//! progress-token routes, and failing everything in flight when the connection dies.
//!
//! Ids sent upstream are the link's own integers, so requests the gateway makes itself never
//! collide with the client's. Responses come back here, are mapped to the client's id and
//! handed to the link's [`LinkEvents`] (the session).

use crate::config::UpstreamConfig;
use crate::gateway::Gateway;
use crate::gateway::upstream::Upstream;
use crate::jsonrpc::{self, GATEWAY_BUSY, Id, Kind, RpcError, UPSTREAM_UNAVAILABLE};
use crate::transport::InboundSink;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::oneshot;

/// What a link reports to its session. All calls are synchronous and short.
pub trait LinkEvents: Send + Sync + 'static {
    /// The response to a client request, already carrying the client's id.
    fn response(&self, client_id: Id, msg: Value);
    /// A request from the server (sampling, elicitation, roots, ping). `related` is the client
    /// request it belongs to, when known.
    fn server_request(&self, generation: u64, upstream_id: Id, msg: Value, related: Option<Id>);
    /// A notification from the server; `related` as above.
    fn notification(&self, msg: Value, related: Option<Id>);
    /// The connection died; everything in flight has already been answered with an error.
    fn closed(&self, generation: u64, reason: &str);
}

enum Pending {
    /// A client request: the id to restore and its progress token, if any.
    Client { client_id: Id, token: Option<String> },
    /// A request the gateway made itself.
    Internal(oneshot::Sender<Value>),
}

#[derive(Default)]
struct LinkState {
    next_id: i64,
    pending: HashMap<i64, Pending>,
    by_client_id: HashMap<Id, i64>,
    /// Progress token (as JSON text) → the client request it belongs to.
    tokens: HashMap<String, Id>,
    closed: Option<String>,
}

/// The part of a link that the transport calls into.
pub struct LinkCore {
    pub generation: u64,
    upstream: Arc<str>,
    state: Mutex<LinkState>,
    events: Weak<dyn LinkEvents>,
}

pub struct Link {
    core: Arc<LinkCore>,
    conn: Upstream,
    max_in_flight: usize,
}

impl Link {
    /// Opens a connection to the upstream. No MCP traffic is sent yet.
    pub async fn connect(
        gateway: &Gateway,
        cfg: &UpstreamConfig,
        generation: u64,
        events: Weak<dyn LinkEvents>,
    ) -> Result<Arc<Link>, RpcError> {
        let core = Arc::new(LinkCore {
            generation,
            upstream: cfg.name.as_str().into(),
            state: Mutex::new(LinkState { next_id: 1, ..Default::default() }),
            events,
        });
        let conn = Upstream::connect(gateway, cfg, core.clone())
            .await
            .map_err(|e| RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' is unavailable: {e}", cfg.name)))?;
        Ok(Arc::new(Link { core, conn, max_in_flight: gateway.limits().max_in_flight }))
    }

    pub fn generation(&self) -> u64 {
        self.core.generation
    }

    pub fn is_closed(&self) -> bool {
        self.core.state.lock().unwrap().closed.is_some()
    }

    /// Forwards a client request; its response comes back through [`LinkEvents::response`].
    pub async fn forward(&self, client_id: Id, mut msg: Value) -> Result<(), RpcError> {
        let token = jsonrpc::progress_token(&msg).map(Value::to_string);
        let up_id = {
            let mut st = self.core.state.lock().unwrap();
            if let Some(reason) = &st.closed {
                return Err(self.core.closed_error(reason));
            }
            if st.pending.len() >= self.max_in_flight {
                return Err(RpcError::new(
                    GATEWAY_BUSY,
                    format!(
                        "too many requests in flight to upstream '{}' (limit {})",
                        self.core.upstream, self.max_in_flight
                    ),
                ));
            }
            if st.by_client_id.contains_key(&client_id) {
                return Err(RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    format!("request id {client_id} is already in use"),
                ));
            }
            let up_id = st.next_id;
            st.next_id += 1;
            if let Some(t) = &token {
                st.tokens.insert(t.clone(), client_id.clone());
            }
            st.by_client_id.insert(client_id.clone(), up_id);
            st.pending.insert(up_id, Pending::Client { client_id, token });
            up_id
        };
        jsonrpc::set_id(&mut msg, &Id::Num(up_id));
        if let Err(e) = self.conn.send(msg).await {
            self.core.forget(up_id);
            return Err(RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}': {e}", self.core.upstream)));
        }
        Ok(())
    }

    /// Sends a request of the gateway's own and waits for the whole response message.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let (tx, rx) = oneshot::channel();
        let up_id = {
            let mut st = self.core.state.lock().unwrap();
            if let Some(reason) = &st.closed {
                return Err(self.core.closed_error(reason));
            }
            let up_id = st.next_id;
            st.next_id += 1;
            st.pending.insert(up_id, Pending::Internal(tx));
            up_id
        };
        if let Err(e) = self.conn.send(jsonrpc::request(&Id::Num(up_id), method, params)).await {
            self.core.forget(up_id);
            return Err(RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}': {e}", self.core.upstream)));
        }
        rx.await.map_err(|_| {
            let reason = self.core.state.lock().unwrap().closed.clone().unwrap_or_default();
            self.core.closed_error(&reason)
        })
    }

    /// Sends a notification or a response to a server request.
    pub async fn send(&self, msg: Value) -> Result<(), RpcError> {
        if let Some(reason) = &self.core.state.lock().unwrap().closed {
            return Err(self.core.closed_error(reason));
        }
        self.conn
            .send(msg)
            .await
            .map_err(|e| RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}': {e}", self.core.upstream)))
    }

    /// The upstream id under which a client request was forwarded, if it is still in flight.
    pub fn upstream_id(&self, client_id: &Id) -> Option<i64> {
        self.core.state.lock().unwrap().by_client_id.get(client_id).copied()
    }

    /// Closes the connection; requests still in flight are answered with an error.
    pub async fn close(&self) {
        self.conn.close().await;
        self.core.fail_all("the session ended".into(), false);
    }
}

impl LinkCore {
    fn closed_error(&self, reason: &str) -> RpcError {
        RpcError::new(UPSTREAM_UNAVAILABLE, format!("upstream '{}' closed: {reason}", self.upstream))
    }

    fn forget(&self, up_id: i64) {
        let mut st = self.state.lock().unwrap();
        if let Some(Pending::Client { client_id, token }) = st.pending.remove(&up_id) {
            st.by_client_id.remove(&client_id);
            if let Some(t) = token {
                st.tokens.remove(&t);
            }
        }
    }

    fn fail_all(&self, reason: String, report: bool) {
        let pending = {
            let mut st = self.state.lock().unwrap();
            if st.closed.is_some() {
                return;
            }
            st.closed = Some(reason.clone());
            st.by_client_id.clear();
            st.tokens.clear();
            std::mem::take(&mut st.pending)
        };
        let Some(events) = self.events.upgrade() else { return };
        let err = self.closed_error(&reason);
        for (_, p) in pending {
            // Internal waiters see their sender dropped.
            if let Pending::Client { client_id, .. } = p {
                events.response(client_id.clone(), err.response(Some(&client_id)));
            }
        }
        if report {
            events.closed(self.generation, &reason);
        }
    }

    /// Maps an upstream request id (from a transport's `related` hint) to the client's.
    fn client_id_of(&self, st: &LinkState, related: Option<Id>) -> Option<Id> {
        match related? {
            Id::Num(n) => match st.pending.get(&n)? {
                Pending::Client { client_id, .. } => Some(client_id.clone()),
                Pending::Internal(_) => None,
            },
            Id::Str(_) => None,
        }
    }
}

impl InboundSink for LinkCore {
    fn message(&self, msg: Value, related: Option<Id>) {
        let frame = match jsonrpc::classify(msg) {
            Ok(f) => f,
            Err((_, e)) => {
                tracing::warn!(upstream = %self.upstream, "dropping malformed message from upstream: {e}");
                return;
            }
        };
        let Some(events) = self.events.upgrade() else { return };
        match frame.kind {
            Kind::Response => {
                let Some(Id::Num(up_id)) = frame.id else {
                    tracing::warn!(upstream = %self.upstream, "dropping response with an id the gateway never sent");
                    return;
                };
                let waiter = {
                    let mut st = self.state.lock().unwrap();
                    let w = st.pending.remove(&up_id);
                    if let Some(Pending::Client { client_id, token }) = &w {
                        st.by_client_id.remove(client_id);
                        if let Some(t) = token {
                            st.tokens.remove(t);
                        }
                    }
                    w
                };
                let mut msg = frame.msg;
                match waiter {
                    Some(Pending::Client { client_id, .. }) => {
                        jsonrpc::set_id(&mut msg, &client_id);
                        events.response(client_id, msg);
                    }
                    Some(Pending::Internal(tx)) => {
                        let _ = tx.send(msg);
                    }
                    None => tracing::debug!(upstream = %self.upstream, "dropping response to unknown id {up_id}"),
                }
            }
            Kind::Request => {
                let related = {
                    let st = self.state.lock().unwrap();
                    self.client_id_of(&st, related)
                };
                let id = frame.id.expect("requests have ids");
                events.server_request(self.generation, id, frame.msg, related);
            }
            Kind::Notification => {
                let related = {
                    let st = self.state.lock().unwrap();
                    if frame.method() == "notifications/progress" {
                        let token = frame.params().and_then(|p| p.get("progressToken")).map(Value::to_string);
                        match token.and_then(|t| st.tokens.get(&t).cloned()) {
                            Some(id) => Some(id),
                            None => {
                                tracing::debug!(upstream = %self.upstream, "dropping progress for an unknown or finished token");
                                return;
                            }
                        }
                    } else {
                        self.client_id_of(&st, related)
                    }
                };
                events.notification(frame.msg, related);
            }
        }
    }

    fn closed(&self, reason: String) {
        tracing::warn!(upstream = %self.upstream, "upstream connection closed: {reason}");
        self.fail_all(reason, true);
    }
}
