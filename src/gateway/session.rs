//! One downstream session: the client's negotiated version and capabilities, its current
//! upstream link, and the routing of every message between the two.
//!
//! The session answers what the gateway answers itself (`server/discover`, a second
//! `initialize`), forwards the rest through its link, maps the ids of requests the server
//! sends the client, and replaces a dead link with a fresh one on the client's next request,
//! replaying the client's own `initialize`.

use crate::config::UpstreamConfig;
use crate::gateway::Gateway;
use crate::gateway::link::{Link, LinkEvents};
use crate::jsonrpc::{self, Frame, GATEWAY_BUSY, INVALID_REQUEST, Id, Kind, METHOD_NOT_FOUND, RpcError};
use crate::mcp::ProtocolVersion;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Where a message for the client belongs.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// The response to this client request.
    Response(Id),
    /// Sent while serving this client request (progress, a server request it caused).
    Related(Id),
    /// Not tied to a request (list changes, logs, requests the gateway cannot place).
    Unrelated,
}

/// The downstream side of a session: a stdio client or an HTTP session's streams.
pub trait ClientSink: Send + Sync + 'static {
    fn deliver(&self, msg: Value, route: Route);
}

#[derive(Default)]
struct SessionState {
    version: Option<ProtocolVersion>,
    /// The client's `initialize` params, replayed when a link is replaced.
    init_params: Option<Value>,
    /// The client id of the `initialize` still waiting for its response.
    init_pending: Option<Id>,
    initialized: bool,
    next_client_side_id: i64,
    /// Requests the server sent the client: our id → (link generation, server's id).
    server_requests: HashMap<Id, (u64, Id)>,
    generation: u64,
    /// When the last link died, and the delay before the next may start.
    restart_backoff: Option<(Instant, Duration)>,
    closed: bool,
}

pub struct Session {
    gateway: Arc<Gateway>,
    upstream: Arc<UpstreamConfig>,
    sink: Arc<dyn ClientSink>,
    me: Weak<Session>,
    state: Mutex<SessionState>,
    link: Mutex<Option<Arc<Link>>>,
    /// Held while a link is being (re)started, so only one starts at a time.
    relink: tokio::sync::Mutex<()>,
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Session {
    pub fn new(gateway: Arc<Gateway>, upstream: Arc<UpstreamConfig>, sink: Arc<dyn ClientSink>) -> Arc<Session> {
        Arc::new_cyclic(|me| Session {
            gateway,
            upstream,
            sink,
            me: me.clone(),
            state: Mutex::new(SessionState { next_client_side_id: 1, ..Default::default() }),
            link: Mutex::new(None),
            relink: tokio::sync::Mutex::new(()),
        })
    }

    pub fn upstream_name(&self) -> &str {
        &self.upstream.name
    }

    /// The negotiated version, once `initialize` has been answered.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.state.lock().unwrap().version
    }

    /// Handles one message from the client.
    pub async fn handle(&self, frame: Frame) {
        match frame.kind {
            Kind::Request => self.handle_request(frame).await,
            Kind::Notification => self.handle_notification(frame).await,
            Kind::Response => self.handle_response(frame).await,
        }
    }

    async fn handle_request(&self, frame: Frame) {
        let id = frame.id.clone().expect("requests have ids");
        let result = match frame.method() {
            "initialize" => self.initialize(id.clone(), frame.msg).await,
            // The 2026-07-28 probe: refusing it makes SDK clients fall back to `initialize`,
            // which keeps them on a version the gateway speaks.
            "server/discover" => {
                tracing::info!(upstream = %self.upstream.name, "answered the client's server/discover probe with -32601 (it falls back to initialize)");
                Err(RpcError::new(
                    METHOD_NOT_FOUND,
                    "method not found: server/discover (this gateway speaks protocol versions up to 2025-11-25; use initialize)",
                ))
            }
            method => {
                if self.state.lock().unwrap().init_params.is_none() {
                    if method == "ping" {
                        self.sink.deliver(jsonrpc::result_response(&id, json!({})), Route::Response(id));
                        return;
                    }
                    Err(RpcError::new(
                        INVALID_REQUEST,
                        format!("session not initialized: send initialize before {method}"),
                    ))
                } else {
                    match self.link().await {
                        Ok(link) => link.forward(id.clone(), frame.msg).await,
                        Err(e) => Err(e),
                    }
                }
            }
        };
        if let Err(e) = result {
            self.sink.deliver(e.response(Some(&id)), Route::Response(id));
        }
    }

    async fn initialize(&self, id: Id, mut msg: Value) -> Result<(), RpcError> {
        {
            let mut st = self.state.lock().unwrap();
            if st.init_params.is_some() {
                return Err(RpcError::new(INVALID_REQUEST, "session already initialized"));
            }
            // A client newer than the gateway is offered the newest version the gateway speaks:
            // the gateway must understand what it relays.
            if let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) {
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                if requested.and_then(ProtocolVersion::parse).is_none() {
                    params.insert("protocolVersion".into(), ProtocolVersion::LATEST.as_str().into());
                }
            }
            st.init_params = Some(msg.get("params").cloned().unwrap_or(json!({})));
            st.init_pending = Some(id.clone());
        }
        let _guard = self.relink.lock().await;
        let link = match self.start_link().await {
            Ok(l) => l,
            Err(e) => {
                let mut st = self.state.lock().unwrap();
                st.init_params = None;
                st.init_pending = None;
                return Err(e);
            }
        };
        *self.link.lock().unwrap() = Some(link.clone());
        link.forward(id, msg).await
    }

    async fn handle_notification(&self, frame: Frame) {
        let link = self.link.lock().unwrap().clone();
        let Some(link) = link.filter(|l| !l.is_closed()) else {
            // Nothing upstream to tell; a notification never starts a link.
            return;
        };
        let method = frame.method().to_string();
        let mut msg = frame.msg;
        match method.as_str() {
            "notifications/initialized" => {
                self.state.lock().unwrap().initialized = true;
            }
            "notifications/cancelled" => {
                let client_id = msg.get("params").and_then(|p| p.get("requestId")).and_then(Id::from_value);
                // Cancellation follows its request: rewrite to the upstream id, or drop it
                // when the request is no longer in flight.
                let Some(up_id) = client_id.and_then(|id| link.upstream_id(&id)) else { return };
                msg["params"]["requestId"] = up_id.into();
            }
            _ => {}
        }
        if let Err(e) = link.send(msg).await {
            tracing::debug!(upstream = %self.upstream.name, "notification not delivered: {e}");
        }
    }

    async fn handle_response(&self, frame: Frame) {
        let Some(id) = frame.id else { return };
        let target = self.state.lock().unwrap().server_requests.remove(&id);
        let Some((generation, upstream_id)) = target else {
            tracing::debug!(upstream = %self.upstream.name, "dropping client response to unknown id {id}");
            return;
        };
        let link = self.link.lock().unwrap().clone();
        if let Some(link) = link.filter(|l| l.generation() == generation) {
            let mut msg = frame.msg;
            jsonrpc::set_id(&mut msg, &upstream_id);
            if let Err(e) = link.send(msg).await {
                tracing::debug!(upstream = %self.upstream.name, "response not delivered: {e}");
            }
        }
    }

    /// The live link, restarting one (with the client's `initialize` replayed) if it died.
    async fn link(&self) -> Result<Arc<Link>, RpcError> {
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let _guard = self.relink.lock().await;
        if let Some(l) = self.link.lock().unwrap().clone()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let (params, version, backoff) = {
            let st = self.state.lock().unwrap();
            (st.init_params.clone(), st.version, st.restart_backoff)
        };
        let (Some(mut params), Some(version)) = (params, version) else {
            return Err(RpcError::new(INVALID_REQUEST, "session not initialized"));
        };
        if let Some((since, delay)) = backoff {
            tokio::time::sleep_until((since + delay).into()).await;
        }
        let link = self.start_link().await?;
        params["protocolVersion"] = version.as_str().into();
        let handshake = async {
            let resp = link.request("initialize", params).await?;
            if let Some(err) = resp.get("error") {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' refused to re-initialize: {err}", self.upstream.name),
                ));
            }
            let got = resp.pointer("/result/protocolVersion").and_then(Value::as_str);
            if got != Some(version.as_str()) {
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!("upstream '{}' restarted with protocol version {got:?}, not {version}", self.upstream.name),
                ));
            }
            link.send(jsonrpc::notification("notifications/initialized", json!({}))).await
        };
        match tokio::time::timeout(self.upstream.connect_timeout, handshake).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                link.close().await;
                return Err(e);
            }
            Err(_) => {
                link.close().await;
                return Err(RpcError::new(
                    jsonrpc::UPSTREAM_UNAVAILABLE,
                    format!(
                        "upstream '{}' did not initialize within {:?}",
                        self.upstream.name, self.upstream.connect_timeout
                    ),
                ));
            }
        }
        tracing::info!(upstream = %self.upstream.name, generation = link.generation(), "upstream link restarted");
        *self.link.lock().unwrap() = Some(link.clone());
        Ok(link)
    }

    async fn start_link(&self) -> Result<Arc<Link>, RpcError> {
        let generation = {
            let mut st = self.state.lock().unwrap();
            st.generation += 1;
            st.generation
        };
        let events: Weak<dyn LinkEvents> = self.me.clone();
        Link::connect(&self.gateway, &self.upstream, generation, events).await
    }

    /// Ends the session: the link is closed (child stopped, HTTP session deleted).
    pub async fn close(&self) {
        self.state.lock().unwrap().closed = true;
        let link = self.link.lock().unwrap().take();
        if let Some(link) = link {
            link.close().await;
        }
    }
}

impl LinkEvents for Session {
    fn response(&self, client_id: Id, mut msg: Value) {
        {
            let mut st = self.state.lock().unwrap();
            if st.init_pending.as_ref() == Some(&client_id) {
                st.init_pending = None;
                if msg.get("error").is_some() {
                    // A refused initialize leaves the session uninitialized; the client may retry.
                    st.init_params = None;
                } else {
                    let got = msg.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or("");
                    match ProtocolVersion::parse(got) {
                        Some(v) => st.version = Some(v),
                        None => {
                            st.init_params = None;
                            msg = RpcError::new(
                                jsonrpc::INTERNAL_ERROR,
                                format!("upstream '{}' negotiated protocol version {got:?}, which the gateway does not speak", self.upstream.name),
                            )
                            .response(Some(&client_id));
                        }
                    }
                }
            }
        }
        self.sink.deliver(msg, Route::Response(client_id));
    }

    fn server_request(&self, generation: u64, upstream_id: Id, mut msg: Value, related: Option<Id>) {
        let client_side_id = {
            let mut st = self.state.lock().unwrap();
            if st.server_requests.len() >= self.gateway.limits().max_in_flight {
                None
            } else {
                let id = Id::Num(st.next_client_side_id);
                st.next_client_side_id += 1;
                st.server_requests.insert(id.clone(), (generation, upstream_id.clone()));
                Some(id)
            }
        };
        let Some(id) = client_side_id else {
            let err = RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client");
            let link = self.link.lock().unwrap().clone();
            if let Some(link) = link {
                tokio::spawn(async move {
                    let _ = link.send(err.response(Some(&upstream_id))).await;
                });
            }
            return;
        };
        jsonrpc::set_id(&mut msg, &id);
        self.sink.deliver(msg, related.map(Route::Related).unwrap_or(Route::Unrelated));
    }

    fn notification(&self, mut msg: Value, related: Option<Id>) {
        if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            // The server cancels a request it sent the client: use the id the client knows.
            let up = msg.get("params").and_then(|p| p.get("requestId")).and_then(Id::from_value);
            let mut st = self.state.lock().unwrap();
            let ours =
                up.and_then(|up| st.server_requests.iter().find(|(_, (_, u))| *u == up).map(|(ours, _)| ours.clone()));
            let Some(ours) = ours else { return };
            st.server_requests.remove(&ours);
            msg["params"]["requestId"] = ours.to_value();
        }
        self.sink.deliver(msg, related.map(Route::Related).unwrap_or(Route::Unrelated));
    }

    fn closed(&self, generation: u64, reason: &str) {
        let mut st = self.state.lock().unwrap();
        st.server_requests.retain(|_, (g, _)| *g != generation);
        if st.closed {
            return;
        }
        let delay = match st.restart_backoff {
            Some((since, d)) if since.elapsed() < MAX_BACKOFF => (d * 2).min(MAX_BACKOFF),
            _ => Duration::from_millis(100),
        };
        st.restart_backoff = Some((Instant::now(), delay));
        tracing::warn!(upstream = %self.upstream.name, generation, "link lost ({reason}); the next request starts a new one");
    }
}
