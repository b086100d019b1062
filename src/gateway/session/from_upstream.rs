//! What reaches the session from its link: responses (plain calls the upstream wants as
//! tasks, listings to shape), server requests and notifications on their way to the client,
//! and the link's end. Also the session as hosted
//! tasks reach it ([`ClientSession`]).

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
            Shape::ToolsList => {
                let upstream_has_tasks = self.state.lock().unwrap().upstream_version.is_some_and(|v| v.has_tasks());
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
                self.remember_tools(result);
                let (version, upstream_tasks) = {
                    let st = self.state.lock().unwrap();
                    (st.version, mcp_tasks::server_has_tool_tasks(&st.upstream_caps))
                };
                let policy = &self.upstream.tasks;
                let hosted =
                    |name: &str, support| policy.offers_tool(name) && hosts(policy.hosted, upstream_tasks, support);
                if let Some(v) = version {
                    shaping::tools_list(result, v, policy.required == RequiredMode::Bridge, &hosted);
                }
                if let Some(dialects) = &self.by_token {
                    dialects.listing(self, result);
                }
            }
            Shape::UpstreamTaskPage => {
                if let Some(c) = result.get("nextCursor").and_then(Value::as_str) {
                    result["nextCursor"] = format!("{CURSOR_UPSTREAM}{c}").into();
                }
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
            let call = self.state.lock().unwrap().retry.remove(&client_id);
            let name = call.as_ref().and_then(|c| c.tool_name()).unwrap_or_default().into_owned();
            let support = self.state.lock().unwrap().tool_support.get(&name).copied().unwrap_or(TaskSupport::Forbidden);
            if let Some(call) = call
                && mcp_tasks::refused_as_plain_call(msg.value(), &name, support)
            {
                tracing::info!(upstream = %self.upstream.name, tool = %name, "the upstream wants this tool called as a task; retrying as one, and remembering");
                self.state.lock().unwrap().tool_support.insert(name, TaskSupport::Required);
                if let Some(me) = self.me.upgrade() {
                    tokio::spawn(async move {
                        if let Err(e) = me.start_bridge(client_id.clone(), call.into_value()).await {
                            me.to_client(Message::made(e.response(Some(&client_id))), Route::Response(client_id));
                        }
                    });
                }
                return;
            }
        }
        if let Some((task_id, _)) = mcp_tasks::created_task(&msg) {
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
        let bridged = related.as_ref().is_some_and(|id| self.state.lock().unwrap().bridges.contains_key(id));
        if bridged && !self.client_can_answer(&msg) {
            let why = format!("the client does not support {}", msg.method_name());
            link.refuse(upstream_id, RpcError::new(jsonrpc::METHOD_NOT_FOUND, why));
            return;
        }
        if bridged {
            // The task is the gateway's, not the client's: a client that keeps tasks would
            // look its id up and refuse.
            msg = msg.edit(|m| mcp_tasks::untag_related(m, "params"));
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
            Method::ToolsListChanged => {
                let mut st = self.state.lock().unwrap();
                st.tool_support.clear();
                st.listing_loaded = false;
            }
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
