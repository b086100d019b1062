//! The task side of a session: what the gateway decides about task-augmented and
//! task-required calls (hosted, bridged, passed through), the task requests it serves from
//! its own store, and the `taskSupport` it learns from the upstream's listing.

use super::*;

impl Session {
    /// A plain call of a tool the upstream runs only as a task: bridged (see [`Bridge`]).
    pub(super) async fn start_bridge(&self, id: Id, msg: Value) -> Result<(), RpcError> {
        let link = self.link().await?;
        let cancel = self.claim_bridge_slot(&id)?;
        let bridge = self.core_bridge(&link, &id, msg, cancel);
        self.spawn_bridged(id, link, bridge.run());
        Ok(())
    }

    /// The bridge of client call `id` (`call`) through a 2025-11-25 task on `link`.
    pub(super) fn core_bridge(&self, link: &Arc<Link>, id: &Id, call: Value, cancel: CancellationToken) -> Bridge {
        Bridge {
            link: link.clone(),
            client: self.client_ref(id.clone()),
            call,
            // The upstream must keep the task at least as long as the call may run.
            ttl: self.upstream.tasks.ttl.max(self.upstream.max_request_time),
            request_timeout: self.upstream.request_timeout,
            max_request_time: self.upstream.max_request_time,
            cancel,
        }
    }

    /// A slot among the client requests the session serves by following an upstream task
    /// (bridged calls, translated `tasks/result` waits), by the client's id: the token its
    /// `notifications/cancelled` and the session's end fire. Refused past `max_in_flight`,
    /// and for an id already in use.
    pub(super) fn claim_bridge_slot(&self, id: &Id) -> Result<CancellationToken, RpcError> {
        let cancel = CancellationToken::new();
        let mut st = self.state.lock().unwrap();
        if st.bridges.len() >= self.gateway.limits().max_in_flight {
            return Err(RpcError::new(GATEWAY_BUSY, "too many bridged calls in flight"));
        }
        if st.bridges.contains_key(id) {
            return Err(RpcError::new(INVALID_REQUEST, format!("request id {id} is already in use")));
        }
        st.bridges.insert(id.clone(), cancel.clone());
        Ok(cancel)
    }

    /// Runs a bridged call (its slot claimed) to its end: the link stays open until then
    /// (and the task is cancelled), the slot is freed, and the answer, if one is due, goes
    /// to the client.
    pub(super) fn spawn_bridged(
        &self,
        id: Id,
        link: Arc<Link>,
        run: impl std::future::Future<Output = Ending> + Send + 'static,
    ) {
        link.retain();
        let me = self.me.clone();
        tokio::spawn(async move {
            let ending = run.await;
            link.release();
            let Some(s) = me.upgrade() else { return };
            s.bridge_ended(&id);
            if let Ending::Answer(resp) = ending {
                s.answer(id, resp, Some(crate::jsonrpc::Method::ToolsCall));
            }
        });
    }

    /// The bridged call `id` has ended: its slot is free, and questions of an extension
    /// task's call the client has not answered are moot now (see `ext::bridged`).
    pub(super) fn bridge_ended(&self, id: &Id) {
        self.state.lock().unwrap().bridges.remove(id);
        self.ext.drop_moot_inputs();
    }

    /// Whether the gateway hosts tasks for `tool` (per `[upstream.tasks]`).
    pub(super) async fn hosts_tool(&self, tool: &str) -> Result<bool, RpcError> {
        let policy = &self.upstream.tasks;
        if policy.hosted == HostedMode::Never || !policy.offers_tool(tool) {
            return Ok(false);
        }
        // The listing decides, whatever order the client asks in: a server may mark tools
        // without declaring tasks.
        let support = self.tool_support(tool).await?;
        let declares = mcp_tasks::server_has_tool_tasks(&self.state.lock().unwrap().upstream_caps);
        Ok(hosts(policy.hosted, declares, support))
    }

    /// [`Session::tool_support`], without building the listing's future when the cache
    /// answers (the fetch is boxed: it is rare, and large).
    pub(super) async fn support_of(&self, tool: &str) -> Result<TaskSupport, RpcError> {
        match self.tools.known(tool) {
            Some(support) => Ok(support),
            None => Box::pin(self.tool_support(tool)).await,
        }
    }

    /// A tool's `taskSupport`, from the cached listing or, failing that, a fresh one (each
    /// page within `request_timeout`). A listing that cannot be had fails the call.
    pub(super) async fn tool_support(&self, tool: &str) -> Result<TaskSupport, RpcError> {
        // Not in the whole listing: an unknown tool, which has no task support.
        if let Some(support) = self.tools.known(tool) {
            return Ok(support);
        }
        let link = self.link().await?;
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_LISTING_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let resp = link.request(crate::jsonrpc::Method::ToolsList, params).await?;
            match resp.get("result") {
                Some(result) => self.remember_tools(result),
                None => {
                    return Err(RpcError::new(
                        jsonrpc::INTERNAL_ERROR,
                        format!(
                            "cannot tell whether tool {tool:?} runs as a task: upstream '{}' answered tools/list with {}",
                            self.upstream.name,
                            resp.get("error").map(Value::to_string).unwrap_or_default()
                        ),
                    ));
                }
            }
            cursor = resp.pointer("/result/nextCursor").cloned().filter(|c| !c.is_null());
            if cursor.is_none() {
                self.tools.learned_whole();
                break;
            }
        }
        Ok(self.tools.listed(tool))
    }

    /// Learns each tool's `taskSupport` from a listing, the client's or the gateway's own. An
    /// upstream whose version has no tasks has none to declare: its tools count as forbidden,
    /// whatever they are marked.
    pub(super) fn remember_tools(&self, result: &Value) {
        let upstream_has_tasks = self.state.lock().unwrap().upstream_version.is_some_and(|v| v.has_tasks());
        self.tools.learn(result, upstream_has_tasks, MAX_CACHED_TOOLS);
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
        let requested_ttl = mcp_tasks::requested_ttl(msg.pointer("/params/task"))?;
        let link = self.link().await?;
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
        self.hosted().track(&task_id, link.clone(), self.me.clone(), token);
        Ok((task_id, Hosted::create_result(&rec), link, msg))
    }

    /// How a hosted task's call on a modern link may go on with input rounds.
    pub(super) fn round_policy(&self) -> hosted::RoundPolicy {
        hosted::RoundPolicy {
            limits: self.rounds.limits(),
            answer_within: self.upstream.request_timeout,
            max_time: self.upstream.max_request_time,
        }
    }

    /// Starts a hosted task's call upstream (after its `CreateTaskResult` was sent).
    pub(super) async fn run_hosted(&self, task_id: Arc<str>, link: Arc<Link>, msg: Value) {
        tracing::debug!(upstream = %self.upstream.name, task = %task_id, "hosting a task");
        if link.is_modern() {
            self.hosted().keep_for_rounds(&task_id, msg.clone(), self.round_policy());
        }
        match link.start_task_call(task_id.clone(), msg).await {
            Ok(up) => {
                self.hosted().started(&task_id, up);
            }
            Err(e) => self.hosted().start_failed(&task_id, &e).await,
        }
    }
}
