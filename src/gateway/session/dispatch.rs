//! The client's messages dispatched through the session (what comes back from the link is
//! `from_upstream`'s): `initialize`, which the gateway answers, requests, and notifications.
//!
//! Each request of an initialized session goes to its client's era first (a modern client's
//! own checks, or the by-token dialects), then [`Session::dispatch`] hands it, by its
//! method, to the strategy the plan (`plan`) chose for it (`calls`, `task_requests`), and
//! what is left goes up the link ([`Session::forward`]; on a modern link a legacy client's
//! request is kept by its input rounds, `input_rounds`).

use super::*;
use crate::mcp::modern::legacy::{self, Removed};
use crate::mcp::modern::meta::LogLevel;

mod calls;
mod shared;
mod subscriptions;
use super::plan::{CallRoute, FirstStep};
mod task_requests;

/// A session running its plan for one request.
pub(super) struct Dispatch<'a> {
    pub(super) s: &'a Session,
    pub(super) plan: Plan,
}

/// What became of a request the plan was handed: passed on to the link with the shape its
/// response needs, or answered (or being answered) by the gateway. Moved once per request,
/// never kept: boxing the message would cost every request an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Step {
    Up(Message, Shape),
    Done,
}

/// Held while the client's `initialize` runs: if it ends without the session initialized,
/// the session is as before it.
struct Unfinished<'a>(&'a Session);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        let st = self.0.state.lock().unwrap();
        if self.0.sides.now().version.is_none() {
            self.0.sides.change(&st, |sides| {
                sides.init_params = None;
                sides.asked = None;
            });
        }
    }
}

impl Session {
    pub(super) async fn handle_request(&self, frame: Message) {
        let id = frame.id().cloned().expect("requests have ids");
        self.timed.started(&id, frame.method());
        let span = tracing::debug_span!("rpc_request", upstream = %self.upstream.name, method = frame.method_name(), id = %id, session = self.tag);
        self.serve_request(id, frame).instrument(span).await
    }

    async fn serve_request(&self, id: Id, frame: Message) {
        let result = match frame.method() {
            // Boxed: a once-per-session handshake must not size every request's future.
            // 2026-07-28 has no `initialize`: as a modern request it is an unknown method
            // (HTTP 404 over Streamable HTTP), as the era's servers answer it.
            Method::Initialize if self.modern.is_some() => Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                "method not found: initialize is not a 2026-07-28 method (send it without modern _meta and MCP-Protocol-Version to start a legacy session)",
            )),
            Method::Initialize => Box::pin(self.initialize(id.clone(), frame)).await,
            // The 2026-07-28 probe: refusing it makes SDK clients fall back to `initialize`,
            // which keeps them on a version the gateway speaks.
            Method::ServerDiscover if let Some(client) = &self.modern => {
                Box::pin(client.discover(self, id.clone())).await
            }
            Method::ServerDiscover => {
                tracing::info!(upstream = %self.upstream.name, "answered the client's server/discover probe with -32601 (it falls back to initialize)");
                Err(crate::mcp::version::refuse_discover())
            }
            method => {
                if self.version().is_none() {
                    if method == Method::Ping {
                        self.to_client(Message::made(jsonrpc::result_response(&id, json!({}))), Route::Response(id));
                        return;
                    }
                    Err(RpcError::new(
                        INVALID_REQUEST,
                        format!("session not initialized: send initialize before {}", frame.method_name()),
                    ))
                } else {
                    self.dispatch(id.clone(), frame).await
                }
            }
        };
        if let Err(e) = result {
            self.take_retry(&id);
            self.to_client(Message::made(e.response(Some(&id))), Route::Response(id));
        }
    }

    /// The client's `initialize`: the link is opened and initialized on the gateway's
    /// behalf, and the client is answered at its own version with what the upstream said
    /// of itself, translated, plus the task capabilities the gateway adds.
    async fn initialize(&self, id: Id, msg: Message) -> Result<(), RpcError> {
        // A client newer than the gateway is offered the newest version the gateway speaks:
        // the gateway must understand what it relays.
        let version = msg
            .param(jsonrpc::Key::ProtocolVersion)
            .and_then(jsonrpc::as_str)
            .and_then(|v| ProtocolVersion::parse(&v))
            .unwrap_or(ProtocolVersion::LATEST);
        // What the session keeps for its life, and the store with it: bounded on its own.
        let max = self.gateway.limits().max_initialize_bytes;
        if msg.bytes().len() > max {
            return Err(RpcError::new(
                jsonrpc::INVALID_PARAMS,
                format!(
                    "initialize is {} bytes; this gateway keeps at most {max} ([server] max_initialize_bytes)",
                    msg.bytes().len()
                ),
            ));
        }
        {
            // Under the session's lock, as every change of the sides: two `initialize`s at once
            // find one another.
            let st = self.state.lock().unwrap();
            if self.sides.now().init_params.is_some() {
                return Err(RpcError::new(INVALID_REQUEST, "session already initialized"));
            }
            let mut params = msg.value().get("params").cloned().unwrap_or(json!({}));
            // What the client's version cannot carry is not the client's to declare: the
            // upstream (and the bridge) must not ask it for that.
            if let Some(caps) = params.get_mut("capabilities") {
                crate::mcp::translate::client_capabilities(caps, version);
            }
            self.sides.change(&st, |sides| {
                sides.init_params = Some(Arc::new(params));
                sides.asked = Some(version);
            });
        }
        // An initialize that fails, or is dropped before it ends (its POST went away), leaves
        // the session uninitialized: the client may send it again.
        let _unfinished = Unfinished(self);
        let negotiated = {
            let _guard = self.relink.lock().await;
            if self.shared { self.join_shared().await } else { self.open_link().await }
        }?;
        let mut result = negotiated.result;
        if !result.is_object() {
            result = json!({});
        }
        // As the session reads them (`upstream_caps`): capabilities that are not an object are
        // none, and the gateway's own are added to them below.
        if !result.get("capabilities").is_some_and(Value::is_object) {
            result["capabilities"] = json!({});
        }
        result["protocolVersion"] = version.as_str().into();
        let mut resp = jsonrpc::result_response(&id, result);
        // Nothing is refused in an initialize result: it is only stripped.
        let _ = crate::mcp::translate::translate(
            &mut resp,
            Some(crate::jsonrpc::Method::Initialize),
            negotiated.version,
            version,
        );
        if let Some(result) = resp.get_mut("result") {
            // With an extension upstream's tasks translated to core ones (`ext::translated`).
            shaping::initialize_result(
                result,
                version,
                self.upstream.tasks.hosted != HostedMode::Never || negotiated.ext_tasks,
            );
        }
        self.sides.change(&self.state.lock().unwrap(), |sides| sides.version = Some(version));
        tracing::debug!(upstream = %self.upstream.name, client = %version, upstream_version = %negotiated.version, "session initialized");
        self.to_client(Message::made(resp), Route::Response(id));
        Ok(())
    }

    pub(super) async fn handle_notification(&self, frame: Message) {
        if let Some(dialects) = &self.by_token {
            dialects.cancelled(self, &frame).await;
        }
        if let Some(calls) = &self.long_calls {
            calls.cancelled(self, &frame).await;
        }
        // A request waiting on its client's answers to a modern upstream's input requests
        // has nothing upstream to cancel (`input_rounds`), whatever became of the link.
        if self.rounds.cancelled(self, &frame) {
            return;
        }
        let link = self.link.load_full();
        let Some(link) = link.filter(|l| !l.is_closed()) else {
            // Nothing upstream to tell; a notification never starts a link.
            return;
        };
        let msg = frame;
        if self.modern.is_some() && msg.method() != Method::Cancelled {
            // The era defines no other notification from a client.
            return;
        }
        if self.modern.as_ref().is_some_and(|client| client.end_listen(self, &msg)) {
            return;
        }
        match msg.method() {
            // The gateway told the upstream itself, when the link was initialized.
            Method::Initialized => return,
            Method::Cancelled => {}
            _ => {
                if self.plan().upstream.is_modern() && self.dropped_by_modern(&msg) {
                    return;
                }
                let Some(msg) = self.crossing().up_notification(msg) else { return };
                if let Err(e) = link.send(msg).await {
                    tracing::debug!(upstream = %self.upstream.name, "notification not delivered: {e}");
                }
                return;
            }
        }
        {
            // The client's initialize is the gateway's to answer, not in flight upstream: a
            // cancel of it finds nothing (the spec forbids cancelling it anyway).
            let Some(client_id) = msg.request_id_param() else { return };
            // A modern request's link knows it by its first id, whichever retry it is now.
            let client_id = match &self.modern {
                Some(client) => client.cancel_target(client_id),
                None => client_id,
            };
            let reason = msg.value().pointer("/params/reason").cloned();
            // A bridged call is cancelled as the task it is upstream: tasks/cancel.
            // It stays in `bridged_calls` (and counts against the limit) until it has wound down.
            let bridge = self.bridged_calls.get(&client_id);
            if let Some(cancel) = bridge {
                cancel.cancel();
                self.sink.abandon(&client_id);
                return;
            }
            // Cancellation follows its request: the upstream hears it once, the slot is
            // freed, and the client gets nothing more for that id. A request no longer in
            // flight has nothing to cancel.
            self.take_retry(&client_id);
            if link.cancel_client_request(&self.client_ref(client_id.clone()), reason).await {
                self.sink.abandon(&client_id);
            }
        }
    }

    /// A request of an initialized session: the client's era has its say first, then the
    /// plan (decided when the link negotiated) serves it, or it is forwarded.
    pub(super) async fn dispatch(&self, id: Id, frame: Message) -> Result<(), RpcError> {
        if let Some(refused) = self.refused_by_policy(&frame).or_else(|| self.refused_by_rate(&frame)) {
            return Err(refused);
        }
        let frame = match self.first_step {
            FirstStep::None => frame,
            // Boxed: a plain legacy request's future must not carry the modern paths' state.
            FirstStep::Modern | FirstStep::Legacy => {
                let Some(frame) = Box::pin(self.client_step(&id, frame)).await? else { return Ok(()) };
                frame
            }
        };
        let run = Dispatch { s: self, plan: self.plan() };
        let frame = run.plain_for_client(frame);
        let step = match frame.method() {
            Method::ToolsList => Step::Up(frame, run.listing_shape()),
            Method::ToolsCall => match run.call_route(&id, &frame) {
                CallRoute::Up(shape) => Step::Up(frame, shape),
                CallRoute::ByListing => match run.listed_call(&id, &frame).await? {
                    Some(shape) => Step::Up(frame, shape),
                    None => Step::Done,
                },
                // Boxed, as every rare path here: each request's future would carry its state.
                CallRoute::CoreTask => Box::pin(run.core_task_call(id.clone(), frame)).await?,
                CallRoute::Translated => {
                    Box::pin(self.ext.call(self, id.clone(), frame)).await?;
                    Step::Done
                }
            },
            Method::TasksGet | Method::TasksResult | Method::TasksCancel => {
                Box::pin(run.task_request(id.clone(), frame)).await?
            }
            Method::TasksList => Box::pin(run.tasks_list(id.clone(), frame)).await?,
            Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
                Box::pin(run.subscription(id.clone(), frame)).await?
            }
            _ => Step::Up(frame, Shape::AsIs),
        };
        match step {
            Step::Up(frame, shape) => self.forward(id, frame, shape).await,
            Step::Done => Ok(()),
        }
    }

    /// What the client's era makes of a request first (see [`FirstStep`]). `None`: answered.
    async fn client_step(&self, id: &Id, frame: Message) -> Result<Option<Message>, RpcError> {
        match self.first_step {
            FirstStep::Modern => match &self.modern {
                Some(client) => client.request(self, id, frame).await,
                None => Ok(Some(frame)),
            },
            FirstStep::Legacy => {
                let mut answered = match &self.by_token {
                    Some(dialects) => dialects.request(self, id, &frame).await,
                    None => None,
                };
                if answered.is_none()
                    && let Some(calls) = &self.long_calls
                {
                    answered = calls.request(self, id, &frame).await;
                }
                match answered {
                    Some(answered) => answered.map(|()| None),
                    None => Ok(Some(frame)),
                }
            }
            FirstStep::None => Ok(Some(frame)),
        }
    }

    /// A request for the link, translated for the link's version (which a restart may have
    /// changed): on a legacy link as it is (a modern client's `_meta` gone), on a modern one
    /// by [`Session::forward_modern`].
    async fn forward(&self, id: Id, frame: Message, shape: Shape) -> Result<(), RpcError> {
        let (link, upstream) = self.linked().await?;
        if upstream.is_modern() {
            // Boxed: a legacy request's future must not carry the modern path's state.
            return Box::pin(self.forward_modern(&link, id, frame, shape)).await;
        }
        let frame = match &self.modern {
            Some(_) => frame.edit(crate::mcp::modern::meta::strip),
            None => frame,
        };
        let frame = self.cross_up(frame)?;
        link.forward(self.client_ref(id), frame, shape).await
    }

    /// `frame` translated for the link's version, refused if that version has no such request.
    fn cross_up(&self, frame: Message) -> Result<Message, RpcError> {
        self.crossing().up(frame)?.ok_or_else(|| {
            RpcError::new(jsonrpc::METHOD_NOT_FOUND, "the upstream's protocol version has no such request")
        })
    }

    /// [`Session::forward`] on a modern link: what the era removed is answered here, and
    /// with authentication a legacy client's request names only its principal's tasks.
    async fn forward_modern(&self, link: &Arc<Link>, id: Id, frame: Message, shape: Shape) -> Result<(), RpcError> {
        if let Some(answered) = self.removed_by_modern(link, &id, &frame) {
            return answered;
        }
        let frame = match (&self.modern, self.principal_tasks()) {
            (None, Some(principal)) => principal.legacy_upward(frame)?,
            _ => frame,
        };
        let frame = self.cross_up(frame)?;
        self.up_modern(link, id, frame, shape).await
    }

    /// Sends a client request, ready for it, to a modern link: a modern client's declares
    /// that client's capabilities, and a legacy client's is kept by its input rounds
    /// (`input_rounds`), as it may be answered with input requests.
    pub(super) async fn up_modern(
        &self,
        link: &Arc<Link>,
        id: Id,
        frame: Message,
        shape: Shape,
    ) -> Result<(), RpcError> {
        if let Some(m) = &self.modern {
            // A modern client answers its own input requests (the results pass to it as they
            // are): its request declares the client's own capabilities.
            let capabilities = Some(m.meta.capabilities.clone());
            let params = m.received_param_headers();
            return link.forward_declaring(self.client_ref(id), frame, shape, capabilities, &params).await;
        }
        // A legacy client's: kept by its input rounds, which ask it what the upstream asks.
        self.rounds.send(self, link, id, frame, shape).await
    }

    /// A client request the 2026-07-28 era removed, answered here when the link is modern
    /// (`None`: forward it). `ping` is answered at once; `logging/setLevel` is kept and sent
    /// as `_meta` `logLevel` with every request from now on (on a shared link, the last level
    /// set applies to all its sessions).
    pub(super) fn removed_by_modern(&self, link: &Arc<Link>, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        let answer = match legacy::removed(frame.method()) {
            Removed::Forward | Removed::Drop => return None,
            Removed::Answer(result) => result,
            Removed::KeepLogLevel => {
                let level = frame.value().pointer("/params/level").and_then(Value::as_str).and_then(LogLevel::parse);
                let Some(level) = level else {
                    return Some(Err(RpcError::new(
                        INVALID_PARAMS,
                        "logging/setLevel: params.level must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    )));
                };
                self.state.lock().unwrap().log_level = Some(level);
                link.set_log_level(Some(level));
                json!({})
            }
        };
        self.to_client(Message::made(jsonrpc::result_response(id, answer)), Route::Response(id.clone()));
        Some(Ok(()))
    }

    /// Whether a client notification is one the 2026-07-28 era removed (dropped for a modern
    /// upstream).
    pub(super) fn dropped_by_modern(&self, msg: &Message) -> bool {
        let drop = legacy::removed(msg.method()) == Removed::Drop;
        if drop {
            tracing::debug!(upstream = %self.upstream.name, method = msg.method_name(), "not sent to the 2026-07-28 upstream, whose era has no such notification");
        }
        drop
    }

    /// A task-augmented call of a hosted tool: answered at once with `CreateTaskResult`,
    /// the plain call runs upstream in the background.
    pub(super) async fn start_hosted(&self, id: Id, msg: Value) -> Result<(), RpcError> {
        let (task_id, created, link, msg) = self.create_hosted(msg).await?;
        self.to_client(Message::made(jsonrpc::result_response(&id, created)), Route::Response(id));
        self.run_hosted(task_id, link, msg).await;
        Ok(())
    }

    /// A hosted task for call `msg` (translated for the upstream, without `params.task`):
    /// its id, its `CreateTaskResult`, the link and the call to run on it.
    pub(super) async fn create_hosted(&self, mut msg: Value) -> Result<(Arc<str>, Value, Arc<Link>, Value), RpcError> {
        let requested_ttl = task_messages::requested_ttl(msg.pointer("/params/task"))?;
        let link = self.link().await?;
        link.admits(&self.share_key())?;
        if let Some((client, upstream)) = self.versions()
            && let crate::mcp::translate::Verdict::Refuse(e) =
                crate::mcp::translate::translate(&mut msg, None, client, upstream)
        {
            return Err(e);
        }
        let rec = self
            .hosted()
            .create((&self.owner, &self.client), &self.upstream.name, &self.upstream.tasks, requested_ttl, &msg)
            .await?;
        if let Some(p) = msg.get_mut("params").and_then(Value::as_object_mut) {
            p.remove("task");
        }
        let task_id: Arc<str> = rec.id.as_str().into();
        let token = crate::jsonrpc::ProgressToken::of_request(&msg);
        // The upstream hears a token of the gateway's, whether the client sent one or not:
        // the task's status shows the upstream's progress either way, and the client's
        // token, which it may use again once its call is answered (a deferred long call),
        // never names two calls upstream. Its progress reaches the client under its own.
        let meta = msg
            .pointer_mut("/params")
            .and_then(Value::as_object_mut)
            .map(|p| p.entry("_meta").or_insert_with(|| serde_json::json!({})));
        if let Some(Value::Object(meta)) = meta {
            meta.insert("progressToken".into(), Value::String(format!("taskgate-{task_id}")));
        }
        self.hosted().track(&task_id, link.clone(), self.me.clone(), token);
        Ok((task_id, Hosted::create_result(&rec), link, msg))
    }

    /// Keeps plain call `frame` (client request `id`) in case its answer asks for it as a
    /// task: `false`, and nothing kept, when `max_in_flight` calls are kept already.
    pub(super) fn keep_for_retry(&self, id: &Id, frame: &Message) -> bool {
        let mut st = self.state.lock().unwrap();
        if st.retry.len() >= self.gateway.limits().max_in_flight {
            return false;
        }
        st.retry.insert(id.clone(), frame.clone());
        true
    }

    /// The call kept for client request `id`, no longer kept.
    pub(super) fn take_retry(&self, id: &Id) -> Option<Message> {
        self.state.lock().unwrap().retry.remove(id)
    }

    /// How a hosted task's call on a modern link may go on with input rounds.
    pub(super) fn round_policy(&self) -> hosted::RoundPolicy {
        hosted::RoundPolicy {
            limits: self.rounds.limits(),
            answer_within: self.upstream.request_timeout,
            max_time: self.upstream.max_request_time,
            share: Some(self.share_key()),
        }
    }

    /// Starts a hosted task's call upstream (after its `CreateTaskResult` was sent).
    pub(super) async fn run_hosted(&self, task_id: Arc<str>, link: Arc<Link>, msg: Value) {
        tracing::debug!(upstream = %self.upstream.name, task = %task_id, "hosting a task");
        if self.plan().upstream.is_modern() {
            self.hosted().keep_for_rounds(&task_id, msg.clone(), self.round_policy());
        }
        match link.start_task_call(task_id.clone(), msg, Some(self.share_key())).await {
            // The task ended (cancelled, or its time ran out) while its call was being sent:
            // nothing else would stop the call upstream.
            Ok(up) if !self.hosted().started(&task_id, up) => link.cancel(up, "the task has ended").await,
            Ok(_) => {}
            Err(e) => self.hosted().start_failed(&task_id, &e).await,
        }
    }
}
