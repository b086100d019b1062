//! What reaches the session from its link: responses (plain calls the upstream wants as
//! tasks, listings to shape), server requests and notifications on their way to the client,
//! and the link's end. Also the session as hosted tasks reach it ([`ClientSession`]).
//!
//! Requests the server sends the client are passed on under ids of the session's
//! (translated for the client's version, refused upstream when the client cannot take
//! them), and the client's answers sent back to the request they answer.

use super::*;

impl Session {
    pub(super) fn shape(&self, msg: Message, shape: Shape) -> Message {
        if matches!(shape, Shape::AsIs | Shape::MayNeedTask) || msg.is_error() {
            return msg;
        }
        msg.edit(|msg| {
            if let Some(result) = msg.get_mut("result") {
                self.shape_result(result, shape);
            }
        })
    }

    fn shape_result(&self, result: &mut Value, shape: Shape) {
        match shape {
            Shape::AsIs | Shape::MayNeedTask => {}
            Shape::ToolsList if self.modern.is_some() => {
                // A 2026-07-28 client's listing, as the upstream gave it, for the tool
                // policy and long calls.
                self.tools.remember(self, result);
                self.offered_tools(result);
                if let Some(calls) = &self.long_calls {
                    calls.listing(self, result);
                }
            }
            Shape::ToolsList => {
                for (tool, why) in crate::mcp::modern::headers::drop_invalid_declarations(result) {
                    tracing::warn!(upstream = %self.upstream.name, tool = %tool, "left out of tools/list: {why}");
                }
                let upstream_has_tasks = self.sides.now().upstream_version.is_some_and(|v| v.has_tasks());
                if !upstream_has_tasks && let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
                    // Task support the upstream's version lacks is not its to declare.
                    for t in tools.iter_mut().filter_map(Value::as_object_mut) {
                        t.remove("execution");
                    }
                }
                if self.plan().tasks == plan::TaskPolicy::ExtTranslated
                    && let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut)
                {
                    // The extension server decides per call: any tool may become a task.
                    crate::mcp::task_dialects::caps::tools_for_core(tools);
                }
                self.tools.remember(self, result);
                self.offered_tools(result);
                let upstream_tasks = task_messages::server_has_tool_tasks(&self.sides.now().caps);
                let version = self.version();
                let policy = &self.upstream.tasks;
                let hosted =
                    |name: &str, support| policy.offers_tool(name) && hosts(policy.hosted, upstream_tasks, support);
                if let Some(v) = version {
                    shaping::tools_list(result, v, policy.required == RequiredMode::Bridge, &hosted);
                }
                if let Some(dialects) = &self.by_token {
                    dialects.listing(self, result);
                }
                if let Some(calls) = &self.long_calls {
                    calls.listing(self, result);
                }
            }
            Shape::Discover => {
                // The gateway serves every version it speaks in front of any upstream (a
                // legacy client gets a session synthesized from this result), and its -32022
                // lists the same.
                if let Some(r) = result.as_object_mut() {
                    r.insert("supportedVersions".into(), json!(crate::mcp::modern::advertised_versions()));
                }
                // An upstream without the tasks extension has its tools' tasks hosted.
                let hosting = self.upstream.tasks.hosted != crate::config::HostedMode::Never;
                if hosting && let Some(caps) = result.get_mut("capabilities").and_then(Value::as_object_mut) {
                    let extensions = caps.entry("extensions").or_insert_with(|| json!({}));
                    if let Some(e) = extensions.as_object_mut() {
                        e.entry(crate::mcp::task_dialects::EXTENSION).or_insert_with(|| json!({}));
                    }
                }
            }
            Shape::UpstreamTaskPage => {
                if let Some(c) = result.get("nextCursor").and_then(Value::as_str) {
                    result["nextCursor"] = format!("{CURSOR_UPSTREAM}{c}").into();
                }
            }
        }
    }

    pub(super) async fn handle_response(&self, frame: Message) {
        let Some(id) = frame.id().cloned() else { return };
        let frame = match &self.by_token {
            Some(dialects) => dialects.answered(self, &id, frame),
            None => frame,
        };
        if self.ext.input_answered(self, &id, &frame) {
            return;
        }
        let target = self.state.lock().unwrap().server_requests.remove(&id);
        // Else an answer to a modern upstream's input request, if it is one.
        let Some(req) = target else { return self.rounds.answer(self, id, frame) };
        if let Some(task) = &req.task {
            self.hosted().input_answered_soon(task);
        }
        let Some(link) = req.link.upgrade() else { return };
        // An answer the upstream's version cannot take is an error for its request.
        let Some(msg) = self.crossing().up_answer(frame, req.answers, &req.upstream_id) else { return };
        if let Err(e) = link.send(msg.with_id(&req.upstream_id)).await {
            tracing::debug!(upstream = %self.upstream.name, "response not delivered: {e}");
        }
    }

    /// Passes a request from the server to the client under an id of the session's, and
    /// remembers where the answer goes.
    pub fn relay_server_request(
        &self,
        link: &Arc<Link>,
        upstream_id: Id,
        msg: Message,
        route: Route,
        task: Option<Arc<str>>,
    ) {
        let answers = crate::mcp::translate::answered(msg.method());
        if let Some(client) = &self.modern {
            if let Some(t) = &task {
                self.hosted().input_answered_soon(t);
            }
            return client.ask(self, link, upstream_id, msg, route);
        }
        // A shared link declared what any client can serve; this one may not (a per-session
        // link declared its own client's capabilities).
        if self.shared && !self.client_can_answer(&msg) {
            tracing::info!(upstream = %self.upstream.name, method = msg.method_name(), "refused a server request the client did not declare it can answer");
            if let Some(t) = &task {
                self.hosted().input_answered_soon(t);
            }
            let why = format!("the client does not support {}", msg.method_name());
            link.refuse(upstream_id, RpcError::new(jsonrpc::METHOD_NOT_FOUND, why));
            return;
        }
        let msg = match &self.by_token {
            Some(dialects) => dialects.question(msg, task.as_deref()),
            None => msg,
        };
        // A request the client's version cannot take is refused upstream, never sent.
        let msg = match self.crossing().down_request(msg) {
            Ok(m) => m,
            Err(e) => {
                tracing::info!(upstream = %self.upstream.name, "refused a server request the client's version lacks: {}", e.message);
                if let Some(t) = &task {
                    self.hosted().input_answered_soon(t);
                }
                link.refuse(upstream_id, e);
                return;
            }
        };
        let client_side_id = self.register_server_request(link, &upstream_id, task, answers);
        let Some(id) = client_side_id else {
            link.refuse(upstream_id, RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client"));
            return;
        };
        self.to_client(msg.with_id(&id), route);
    }

    /// Whether the client declared the capability a server request needs, for the requests
    /// the gateway itself causes (bridged calls) and those of a shared link (which declared
    /// every capability). URL-mode elicitation needs `elicitation.url`.
    pub(super) fn client_can_answer(&self, msg: &Message) -> bool {
        let need = match msg.method() {
            Method::ElicitationCreate => "elicitation",
            Method::SamplingCreateMessage => "sampling",
            Method::RootsList => "roots",
            _ => return true,
        };
        let url_mode =
            need == "elicitation" && msg.value().pointer("/params/mode").and_then(Value::as_str) == Some("url");
        let sides = self.sides.now();
        let cap = sides.client_capabilities().and_then(|c| c.get(need));
        cap.is_some_and(|c| !url_mode || c.get("url").is_some())
    }

    /// Remembers a request the server sent the client (where its answer goes) under a new id
    /// of the session's; `None` past `max_in_flight` of them.
    pub(super) fn register_server_request(
        &self,
        link: &Arc<Link>,
        upstream_id: &Id,
        task: Option<Arc<str>>,
        answers: Option<crate::jsonrpc::Method>,
    ) -> Option<Id> {
        let mut st = self.state.lock().unwrap();
        if st.server_requests.len() >= self.gateway.limits().max_in_flight {
            return None;
        }
        let id = self.next_client_side_id();
        let req = ServerRequest { link: Arc::downgrade(link), upstream_id: upstream_id.clone(), task, answers };
        st.server_requests.insert(id.clone(), req);
        Some(id)
    }

    /// A shared link lives on, and so would the upstream's wait for what this ended
    /// session's client was asked: refused (but a hosted task's question, which is its
    /// task's). Called once the link routes nothing more to the session.
    pub(super) fn refuse_unanswered(&self) {
        let unanswered: Vec<ServerRequest> = {
            let mut st = self.state.lock().unwrap();
            let ids: Vec<Id> =
                st.server_requests.iter().filter(|(_, r)| r.task.is_none()).map(|(id, _)| id.clone()).collect();
            ids.iter().filter_map(|id| st.server_requests.remove(id)).collect()
        };
        for r in unanswered {
            if let Some(link) = r.link.upgrade() {
                link.refuse(r.upstream_id, RpcError::new(jsonrpc::INTERNAL_ERROR, "the client's session ended"));
            }
        }
    }
}

impl ClientSession for Session {
    fn to_client(&self, msg: Message, route: Route) {
        Session::to_client(self, msg, route)
    }

    fn relay_server_request(
        &self,
        link: &Arc<Link>,
        upstream_id: Id,
        msg: Value,
        route: Route,
        task: Option<Arc<str>>,
    ) {
        match Message::from_value(msg) {
            Ok(m) => Session::relay_server_request(self, link, upstream_id, m, route, task),
            Err(r) => {
                crate::warn_limit::warn_limited!(upstream = %self.upstream.name, "not sent to the client: {}", r.error)
            }
        }
    }

    fn reaches_client_now(&self) -> bool {
        self.sink.reaches_client_now()
    }

    fn discard_progress(&self, token: &crate::jsonrpc::ProgressToken) {
        self.sink.discard_progress(token);
    }

    fn owner(&self) -> &str {
        &self.owner
    }
}

impl LinkEvents for Session {
    fn owner(&self) -> &str {
        &self.owner
    }

    fn response(&self, client_id: Id, msg: Message, shape: Shape, answers: Option<crate::jsonrpc::Method>) {
        // A modern upstream's request for input: the exchange goes on (see `input_rounds`).
        let Some(msg) = self.rounds.response(self, &client_id, msg) else { return };
        if shape == Shape::MayNeedTask && self.ext.task_response(self, &client_id, &msg) {
            return;
        }
        if shape == Shape::MayNeedTask {
            let call = self.take_retry(&client_id);
            let name = call.as_ref().and_then(|c| c.tool_name()).unwrap_or_default().into_owned();
            let support = self.tools.listed(&name);
            if let Some(call) = call
                && task_messages::refused_as_plain_call(msg.value(), &name, support)
            {
                tracing::info!(upstream = %self.upstream.name, tool = %name, "the upstream wants this tool called as a task; retrying as one, and remembering");
                self.tools.requires_task(name);
                if let Some(me) = self.me.upgrade() {
                    tokio::spawn(async move {
                        if let Err(e) = me.bridged_calls.start(&*me, client_id.clone(), call.into_value()).await {
                            me.to_client(Message::made(e.response(Some(&client_id))), Route::Response(client_id));
                        }
                    });
                }
                return;
            }
        }
        if let Some((task_id, _)) = task_messages::created_task(&msg) {
            let max = self.gateway.config.tasks.max_task_id_bytes;
            if let Err(refused) = crate::tasks::text_bounds::task_id_within(task_id.as_str(), max) {
                // Not kept: the client is told so, and the upstream to drop the task.
                if let Some(link) = self.link.load_full() {
                    let id = task_id.as_str().to_string();
                    tokio::spawn(async move {
                        let _ = link.request(Method::TasksCancel, serde_json::json!({"taskId": id})).await;
                    });
                }
                self.to_client(Message::made(refused.response(Some(&client_id))), Route::Response(client_id));
                return;
            }
            let mut st = self.state.lock().unwrap();
            if st.known_tasks.len() >= MAX_KNOWN_TASKS {
                st.known_tasks.pop_front();
            }
            st.known_tasks.push_back(task_id.as_str().to_string());
        }
        let msg = self.shape(msg, shape);
        self.to_client_answering(msg, Route::Response(client_id), answers);
    }

    fn server_request(&self, link: &Arc<Link>, upstream_id: Id, mut msg: Message, related: Option<Id>) {
        // For a bridged call the gateway is the one that made the task: a request the client
        // cannot answer is refused upstream, and the task fails there cleanly.
        let bridged = related.as_ref().is_some_and(|id| self.bridged_calls.holds(id));
        if bridged && !self.client_can_answer(&msg) {
            let why = format!("the client does not support {}", msg.method_name());
            link.refuse(upstream_id, RpcError::new(jsonrpc::METHOD_NOT_FOUND, why));
            return;
        }
        if bridged {
            // The task is the gateway's, not the client's: a client that keeps tasks would
            // look its id up and refuse.
            msg = msg.edit(|m| task_messages::untag_related(m, "params"));
        }
        self.relay_server_request(
            link,
            upstream_id,
            msg,
            related.map(Route::Related).unwrap_or(Route::Unrelated),
            None,
        );
    }

    fn notification(&self, mut msg: Message, related: Option<Id>) {
        let method = msg.method();
        match method {
            Method::Progress if !self.rounds.progress(self, related.as_ref(), &msg) => return,
            Method::ToolsListChanged => self.tools.list_changed(),
            Method::TaskStatus => {
                // Only about tasks the client made (a bridged call's task is the gateway's).
                let task = msg.task_id_param();
                let task = task.as_ref().map_or("", |t| t.as_str());
                if !self.state.lock().unwrap().known_tasks.iter().any(|t| t == task) {
                    return;
                }
            }
            _ => {}
        }
        if method == Method::Cancelled {
            // The server cancels a request it sent the client: use the id the client knows.
            let up = msg.request_id_param();
            let mut st = self.state.lock().unwrap();
            let ours = up.and_then(|up| {
                st.server_requests.iter().find(|(_, r)| r.upstream_id == up).map(|(ours, _)| ours.clone())
            });
            let Some(ours) = ours else { return };
            let withdrawn = st.server_requests.remove(&ours);
            drop(st);
            // A withdrawn question is answered for what waited on it.
            if let Some(task) = withdrawn.and_then(|r| r.task) {
                self.hosted().input_answered_soon(&task);
            }
            if let Some(dialects) = &self.by_token {
                dialects.withdrawn(self, &ours);
            }
            msg = msg.edit(|m| m["params"]["requestId"] = ours.to_value());
        }
        self.to_client(msg, related.map(Route::Related).unwrap_or(Route::Unrelated));
    }

    fn closed(&self, generation: u64, reason: &crate::upstream::link::CloseReason) {
        let mut st = self.state.lock().unwrap();
        st.server_requests.retain(|_, r| r.link.strong_count() > 0);
        if st.closed {
            return;
        }
        if let Some(client) = self.modern.as_ref().filter(|_| !self.shared) {
            drop(st);
            // A modern request's own link (its upstream receives the client's token): its
            // listen stream is told to listen again, and nothing more will use the link.
            client.listen_lost(self);
            return;
        }
        if self.shared {
            drop(st);
            // What a listen stream was subscribed to is gone with the link: the client is
            // told to listen again.
            if let Some(client) = &self.modern {
                client.listen_lost(self);
            }
            // The gateway keeps a shared link's backoff, and the link said it was lost.
            tracing::debug!(upstream = %self.upstream.name, generation, "shared link lost ({reason})");
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
