//! The by-token dialects of a legacy session, for upstreams that enable them
//! (`[upstream.dialects]`): the progress-state proposal (`progress/get`, `_meta.progress`)
//! and SEP-1391 operations (`tools/call` with `operation`, `tools/async/*`).
//!
//! - Progress state: every request the client sends with a `progressToken` (but a task's
//!   or an operation's, which have their own state) is followed in the gateway's
//!   [`ProgressStates`](crate::tasks::progress_state): its progress, the questions the
//!   upstream asks for it, and its response, which carries `_meta.progress`. The hooks are
//!   where the session's messages pass anyway: [`Session::by_token_request`] as a request
//!   is dispatched, [`Session::by_token_outgoing`] as a message leaves for the client.
//! - Operations: an opted-in client's call with `operation` runs as a task of the
//!   gateway's, hosted (a plain call upstream) or, for a tool the upstream runs as a task, a
//!   bridge that follows the upstream's task; the client knows it by its token alone
//!   ([`Operations`](crate::tasks::operations)). What is sent for it carries
//!   `_operation.token`; a cancel of the original request cancels it; the session's end
//!   cancels what still runs (its tokens were the session's).
//!
//! Modern (2026-07-28) clients have no session to scope either by, so they get neither.

use super::*;
use crate::jsonrpc::ProgressToken;
use crate::mcp::sep1391::{self, OperationParam};
use crate::tasks::operations::{Operation, Refusal};

impl Session {
    fn speaks_progress_get(&self) -> bool {
        self.by_token.progress_get
    }

    fn speaks_sep1391(&self) -> bool {
        self.by_token.sep1391
    }

    /// Whether the client opted in to SEP-1391 (and the upstream enables it).
    pub(super) fn sep1391_client(&self) -> bool {
        self.speaks_sep1391() && sep1391::declared(self.state.lock().unwrap().init_params.as_ref())
    }

    /// A request of an initialized legacy session, before it is dispatched: answered here
    /// (`Some`) when it is one of the dialects', else followed if it carries a progress token.
    pub(super) async fn by_token_request(&self, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        if self.speaks_sep1391() {
            match frame.method() {
                // A client that did not opt in is outdated, however it wrote the parameter.
                Method::ToolsCall if frame.value().pointer("/params/operation").is_some() && !self.sep1391_client() => {
                    return Some(Err(sep1391::outdated("tools/call with operation")));
                }
                Method::ToolsCall => match sep1391::operation_param(frame.value()) {
                    Err(e) => return Some(Err(e)),
                    Ok(Some(op)) => return Some(self.start_operation(id.clone(), frame.clone(), op).await),
                    Ok(None) => {}
                },
                m @ (Method::ToolsAsyncStatus | Method::ToolsAsyncResult) => {
                    return Some(Box::pin(self.serve_operation(id.clone(), m, frame.value())).await);
                }
                _ => {}
            }
        }
        if !self.speaks_progress_get() {
            return None;
        }
        if frame.method() == Method::ProgressGet {
            return Some(self.serve_progress_get(id.clone(), frame.value()));
        }
        // A task's progress is its task's (`tasks/get`), not the request's.
        if frame.task_param().is_some() || frame.method().is_task_request() {
            return None;
        }
        let token = frame.progress_token()?;
        let mut st = self.state.lock().unwrap();
        // An id already in flight is the link's to refuse: its state stays the first's.
        if !st.progress_requests.contains_key(id)
            && st.progress_requests.len() < self.gateway.limits().max_in_flight
            && self.gateway.progress_states.begin(&self.owner_key, &token, self.upstream.tasks.max_tasks_per_owner)
        {
            st.progress_requests.insert(id.clone(), token);
        }
        None
    }

    fn serve_progress_get(&self, id: Id, msg: &Value) -> Result<(), RpcError> {
        let token = msg.pointer("/params/progressToken").and_then(ProgressToken::from_value).ok_or_else(|| {
            RpcError::new(INVALID_PARAMS, "progress/get: params.progressToken must be a string or a number")
        })?;
        let result = self.gateway.progress_states.get(&self.owner_key, &token)?;
        self.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// A message on its way to the client (after translation and shaping): the states it
    /// changes are noted, a followed request's result gets `_meta.progress`, and what is
    /// sent for an operation gets its token.
    pub(super) fn by_token_outgoing(&self, msg: Message, route: &Route) -> Message {
        let msg = if self.speaks_progress_get() { self.note_progress(msg, route) } else { msg };
        if self.speaks_sep1391() && msg.kind() != Kind::Response { self.tag_operation(msg, route) } else { msg }
    }

    fn note_progress(&self, msg: Message, route: &Route) -> Message {
        let states = &self.gateway.progress_states;
        match (msg.kind(), route) {
            (Kind::Response, Route::Response(id)) => {
                let Some(token) = self.state.lock().unwrap().progress_requests.remove(id) else { return msg };
                self.forget_progress_inputs(id);
                let Some(meta) = states.ended(&self.owner_key, &token, msg.value(), self.upstream.dialects.retention)
                else {
                    return msg;
                };
                if msg.is_error() {
                    return msg;
                }
                msg.edit(|m| {
                    if let Some(r) = m.get_mut("result").and_then(Value::as_object_mut) {
                        let meta_obj = r.entry("_meta").or_insert_with(|| json!({}));
                        if let Some(o) = meta_obj.as_object_mut() {
                            o.insert("progress".into(), meta);
                        }
                    }
                })
            }
            (Kind::Notification, _) if msg.method() == Method::Progress => {
                if let Some(token) = msg.progress_token() {
                    states.progress(&self.owner_key, &token, msg.value().get("params").unwrap_or(&Value::Null));
                }
                msg
            }
            (Kind::Request, Route::Related(id)) => {
                let mut st = self.state.lock().unwrap();
                let Some(token) = st.progress_requests.get(id).cloned() else { return msg };
                if let Some(asked) = msg.id().cloned()
                    && st.progress_inputs.len() < self.gateway.limits().max_in_flight
                {
                    st.progress_inputs.insert(asked, (id.clone(), token.clone()));
                    states.input_asked(&self.owner_key, &token);
                }
                msg
            }
            _ => msg,
        }
    }

    /// The client cancelled request `id`: its state fails (no response will say so).
    pub(super) fn progress_cancelled(&self, id: &Id) {
        if !self.speaks_progress_get() {
            return;
        }
        let Some(token) = self.state.lock().unwrap().progress_requests.remove(id) else { return };
        self.forget_progress_inputs(id);
        let cancelled = RpcError::new(jsonrpc::INTERNAL_ERROR, "cancelled by the client").response(Some(id));
        self.gateway.progress_states.ended(&self.owner_key, &token, &cancelled, self.upstream.dialects.retention);
    }

    /// The questions asked for request `request`, which has ended, are answered by nobody
    /// now (those of other requests under the same token still wait).
    fn forget_progress_inputs(&self, request: &Id) {
        let moot: Vec<ProgressToken> = {
            let mut st = self.state.lock().unwrap();
            let ids: Vec<Id> =
                st.progress_inputs.iter().filter(|(_, (r, _))| r == request).map(|(q, _)| q.clone()).collect();
            ids.iter().filter_map(|q| st.progress_inputs.remove(q)).map(|(_, t)| t).collect()
        };
        for token in moot {
            self.gateway.progress_states.input_answered(&self.owner_key, &token);
        }
    }

    /// The server withdrew its question `id` (the client's id for it): as if answered.
    pub(super) fn by_token_withdrawn(&self, id: &Id) {
        if self.speaks_progress_get() {
            let asked = self.state.lock().unwrap().progress_inputs.remove(id);
            if let Some((_, token)) = asked {
                self.gateway.progress_states.input_answered(&self.owner_key, &token);
            }
        }
        if self.speaks_sep1391() {
            let task = self.state.lock().unwrap().operation_inputs.remove(id);
            if let Some(task) = task {
                self.hosted().input_answered_soon(&task);
            }
        }
    }

    /// The client answered server request `id`: the state it was asked for goes on. The
    /// answer to an operation's question loses the operation's tag (the upstream never saw
    /// it).
    pub(super) fn by_token_answered(&self, id: &Id, frame: Message) -> Message {
        if self.speaks_progress_get() {
            let asked = self.state.lock().unwrap().progress_inputs.remove(id);
            if let Some((_, token)) = asked {
                self.gateway.progress_states.input_answered(&self.owner_key, &token);
            }
        }
        if !self.speaks_sep1391() {
            return frame;
        }
        let task = self.state.lock().unwrap().operation_inputs.remove(id);
        if let Some(task) = task {
            self.hosted().input_answered_soon(&task);
        }
        if frame.value().pointer("/result/_operation").is_some() {
            return frame.edit(sep1391::untag_answer);
        }
        frame
    }

    /// A request or notification for an operation carries its token; a question the
    /// upstream asks for a bridged operation makes it `input_required` until answered.
    fn tag_operation(&self, msg: Message, route: &Route) -> Message {
        let mut st = self.state.lock().unwrap();
        if st.ops.is_empty() {
            return msg;
        }
        // Its questions name its task in `_meta`, a status notification in `params`.
        let task = crate::mcp::tasks::related_task(&msg)
            .or_else(|| (msg.method() == Method::TaskStatus).then(|| msg.task_id_param()).flatten());
        let by_task = task.and_then(|t| st.ops.token_of_task(t.as_str()));
        let by_progress = || msg.progress_token().and_then(|t| st.ops.token_of_progress(&t));
        let by_request = || match route {
            // A bridged operation's request: the only one under its id while its bridge runs.
            Route::Related(id) => st.ops.by_request(id).into_iter().find(|(_, op)| op.bridge.is_some()).map(|(t, _)| t),
            _ => None,
        };
        let Some(token) = by_task.or_else(by_progress).or_else(by_request).map(str::to_string) else { return msg };
        let bridged = st.ops.get(&token).filter(|op| op.bridge.is_some()).map(|op| op.task_id.clone());
        let mut asked_for = None;
        let cap = self.gateway.limits().max_in_flight;
        if st.operation_inputs.len() >= cap {
            // Questions of operations that have ended wait for nothing.
            let hosted = self.hosted();
            st.operation_inputs.retain(|_, t| hosted.runs(t));
        }
        if let (Kind::Request, Some(task), Some(asked)) = (msg.kind(), bridged, msg.id().cloned())
            && st.operation_inputs.len() < cap
        {
            st.operation_inputs.insert(asked, task.clone());
            asked_for = Some(task);
        }
        // Not under the session's lock: the status change is announced to this session.
        drop(st);
        if let Some(task) = asked_for {
            self.hosted().input_asked_soon(&task);
        }
        msg.edit(|m| sep1391::tag(m, &token))
    }

    /// A question the upstream asks for hosted task `task`, before it is translated for the
    /// client (whose version may not carry the related-task tag): an operation's carries
    /// its token.
    pub(super) fn tag_operation_question(&self, msg: Message, task: Option<&str>) -> Message {
        let Some(task) = task.filter(|_| self.speaks_sep1391()) else { return msg };
        let token = self.state.lock().unwrap().ops.token_of_task(task).map(str::to_string);
        match token {
            Some(token) => msg.edit(|m| sep1391::tag(m, &token)),
            None => msg,
        }
    }

    /// A `notifications/cancelled` for the call that started an operation cancels it (the
    /// one still running), unless the client reused the id for a request now in flight: the
    /// cancel is that request's. It goes on its way in any case.
    pub(super) async fn operation_cancelled(&self, frame: &Message) {
        if !self.speaks_sep1391() || frame.method() != Method::Cancelled {
            return;
        }
        let Some(request) = frame.request_id_param() else { return };
        let link = self.link.lock().unwrap().clone();
        if link.is_some_and(|l| l.has_client_request(&self.client_ref(request.clone()))) {
            return;
        }
        let found = {
            let st = self.state.lock().unwrap();
            let hosted = self.hosted();
            st.ops
                .by_request(&request)
                .into_iter()
                .find(|(_, op)| hosted.runs(&op.task_id))
                .map(|(_, op)| (op.task_id.clone(), op.bridge.clone()))
        };
        if let Some((task, bridge)) = found {
            Self::stop_operation(self.hosted(), &task, bridge.as_ref()).await;
        }
    }

    async fn stop_operation(hosted: &Hosted, task: &str, bridge: Option<&CancellationToken>) {
        // Cancelled first, so that the bridge's end finds it ended and records nothing.
        let _ = hosted.cancel(task).await;
        if let Some(b) = bridge {
            b.cancel();
        }
    }

    /// The session ends: its states go, and its operations that still run are cancelled.
    pub(super) async fn end_by_token(&self) {
        if self.speaks_progress_get() {
            self.gateway.progress_states.drop_owner(&self.owner_key);
        }
        if !self.speaks_sep1391() {
            return;
        }
        let ops = self.state.lock().unwrap().ops.drain();
        for op in ops {
            Self::stop_operation(self.hosted(), &op.task_id, op.bridge.as_ref()).await;
        }
    }

    /// A call with `operation`: checked, answered at once, and run as a task.
    async fn start_operation(&self, id: Id, frame: Message, op: OperationParam) -> Result<(), RpcError> {
        if !self.sep1391_client() {
            return Err(sep1391::outdated("tools/call with operation"));
        }
        let policy = &self.upstream.tasks;
        {
            // Which of the kept operations' tasks still exist, asked of the store before the
            // session's lock is taken (only when the table is full and may be pruned).
            let snapshot = {
                let st = self.state.lock().unwrap();
                if st.ops.len() >= policy.max_tasks_per_owner { st.ops.task_ids() } else { Vec::new() }
            };
            let mut kept = std::collections::HashSet::new();
            for t in &snapshot {
                if self.hosted().visible(t, &self.owner).await {
                    kept.insert(t.clone());
                }
            }
            let mut st = self.state.lock().unwrap();
            let kept = |t: &str| kept.contains(t) || !snapshot.iter().any(|s| &**s == t);
            st.ops.reserve(&op.token, policy.max_tasks_per_owner, &kept).map_err(|r| match r {
                Refusal::Reused => sep1391::reused(&op.token),
                Refusal::Full => RpcError::new(
                    GATEWAY_BUSY,
                    format!(
                        "too many operations kept for this session (max_tasks_per_owner = {})",
                        policy.max_tasks_per_owner
                    ),
                ),
            })?;
        }
        let token = op.token.clone();
        let started = self.launch_operation(id, frame, op).await;
        if started.is_err() {
            self.state.lock().unwrap().ops.release(&token);
        }
        started
    }

    /// Runs a call with `operation` whose token is reserved.
    async fn launch_operation(&self, id: Id, frame: Message, op: OperationParam) -> Result<(), RpcError> {
        let policy = &self.upstream.tasks;
        let keep_alive = match op.keep_alive {
            None => policy.ttl,
            Some(None) => policy.max_ttl,
            Some(Some(d)) => d,
        }
        .clamp(policy.min_ttl, policy.max_ttl);
        let name = frame.tool_name().unwrap_or_default().into_owned();
        let mut call = frame.into_value();
        if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
            p.remove("operation");
            p.insert("task".into(), json!({"ttl": keep_alive.as_millis() as u64}));
        }
        let token = ProgressToken::of_request(&call);
        if self.plan().tasks.extension() {
            // The extension server decides per call whether it makes a task.
            if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
                p.remove("task");
            }
            return self.start_bridged_operation(id, op.token, call, token, keep_alive, true).await;
        }
        if self.hosts_tool(&name).await? {
            let (task_id, _, link, call) = self.create_hosted(call).await?;
            self.hosted().retain_after_end(&task_id).await;
            self.hosted().ask_creator_later(&task_id);
            if self.record_operation(&id, op.token, task_id.clone(), token, None, keep_alive) {
                self.run_hosted(task_id, link, call).await;
            } else {
                let _ = self.hosted().cancel(&task_id).await;
            }
            return Ok(());
        }
        let support = if (super::planned::Planned { s: self, plan: self.plan() }).runs_tasks() {
            self.support_of(&name).await?
        } else {
            TaskSupport::Forbidden
        };
        if support == TaskSupport::Forbidden {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "tool {name:?} cannot run as a long-running operation here: the gateway does not host it and the upstream does not run it as a task"
                ),
            ));
        }
        if let Some(p) = call.get_mut("params").and_then(Value::as_object_mut) {
            p.remove("task");
        }
        self.start_bridged_operation(id, op.token, call, token, keep_alive, false).await
    }

    /// Notes the operation and answers its call: `false` if the session has ended
    /// meanwhile (nothing is noted; the caller stops what it started).
    fn record_operation(
        &self,
        id: &Id,
        token: String,
        task_id: Arc<str>,
        progress_token: Option<ProgressToken>,
        bridge: Option<CancellationToken>,
        keep_alive: Duration,
    ) -> bool {
        let op = Operation { task_id, request_id: id.clone(), progress_token, bridge };
        {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                st.ops.release(&token);
                return false;
            }
            st.ops.insert(token, op);
        }
        let accepted = sep1391::accepted(keep_alive, self.upstream.tasks.poll_interval, mcp_tasks::TaskStatus::Working);
        self.to_client(Message::made(jsonrpc::result_response(id, accepted)), Route::Response(id.clone()));
        true
    }

    /// An operation of a tool the upstream runs as a task (a 2025-11-25 task, or with
    /// `extension` one of the tasks extension): a task of the gateway's stands for it, and a
    /// bridge follows the upstream's task into it.
    async fn start_bridged_operation(
        &self,
        id: Id,
        token: String,
        call: Value,
        progress_token: Option<ProgressToken>,
        keep_alive: Duration,
        extension: bool,
    ) -> Result<(), RpcError> {
        let link = self.link().await?;
        // Counted with the session's bridged calls (their limit, their questions' handling,
        // their cancellation at the session's end).
        let cancel = self.claim_bridge_slot(&id)?;
        let free_slot = |s: &Session| {
            s.state.lock().unwrap().bridges.remove(&id);
        };
        let rec = match self
            .hosted()
            .create((&self.owner, &self.client), &self.upstream.name, &self.upstream.tasks, Some(keep_alive), &call)
            .await
        {
            Ok(rec) => rec,
            Err(e) => {
                free_slot(self);
                return Err(e);
            }
        };
        let task_id: Arc<str> = rec.id.as_str().into();
        self.hosted().retain_after_end(&task_id).await;
        self.hosted().track(&task_id, link.clone(), self.me.clone(), progress_token.clone());
        if !self.record_operation(&id, token, task_id.clone(), progress_token, Some(cancel.clone()), keep_alive) {
            free_slot(self);
            let _ = self.hosted().cancel(&task_id).await;
            return Ok(());
        }
        let bridge: std::pin::Pin<Box<dyn std::future::Future<Output = Ending> + Send>> = if extension {
            Box::pin(self.ext.bridge(self, &link, &id, call, None, cancel).run())
        } else {
            Box::pin(self.core_bridge(&link, &id, call, cancel).run())
        };
        link.retain();
        let hosted = self.hosted().clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            let ending = bridge.await;
            link.release();
            match ending {
                Ending::Answer(resp) => crate::upstream::link::TaskCalls::outcome(&*hosted, &task_id, resp),
                // Cancelled by whoever fired the bridge (the session's end too): so is the task.
                Ending::Cancelled => {
                    let _ = hosted.cancel(&task_id).await;
                }
            }
            if let Some(s) = me.upgrade() {
                s.bridge_ended(&id);
            }
        });
        Ok(())
    }

    /// `tools/async/status` and `tools/async/result`.
    async fn serve_operation(&self, id: Id, method: Method, msg: &Value) -> Result<(), RpcError> {
        if !self.sep1391_client() {
            return Err(sep1391::outdated(method.as_str()));
        }
        let token = sep1391::token_param(msg, method.as_str())?;
        let task = self.state.lock().unwrap().ops.get(&token).map(|op| op.task_id.clone());
        let task = task.ok_or_else(|| sep1391::not_found(&token))?;
        let hosted = self.hosted();
        let (status, message) = hosted.status(&task).await.ok_or_else(|| sep1391::expired(&token))?;
        let result = match method {
            Method::ToolsAsyncStatus => sep1391::status_result(status, message.as_deref()),
            _ => {
                // A tool's own error (`isError`) is a result too; a call that never produced
                // one has none to fetch.
                let outcome = hosted.stored_outcome(&task).await;
                match outcome.and_then(|mut o| o.get_mut("result").map(Value::take)) {
                    Some(r) if status.is_terminal() => {
                        // The upstream's result, as `tools/call` results reach this client.
                        let resp = Message::made(jsonrpc::result_response(&id, r));
                        let Some(resp) = self.downward(resp, Some(crate::jsonrpc::Method::ToolsCall), self.versions())
                        else {
                            return Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "the result cannot be sent"));
                        };
                        let mut resp = resp.into_value();
                        match resp.get_mut("result").map(Value::take) {
                            Some(r) => json!({"result": r}),
                            // The client's version cannot take it: the error says why.
                            None => {
                                self.to_client(Message::made(resp), Route::Response(id));
                                return Ok(());
                            }
                        }
                    }
                    _ => {
                        return Err(RpcError::new(
                            INVALID_PARAMS,
                            format!(
                                "operation {token:?} is {}: it has no result{}",
                                sep1391::status_of(status),
                                message.map(|m| format!(" ({m})")).unwrap_or_default()
                            ),
                        ));
                    }
                }
            }
        };
        self.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// Each tool of a listing for an opted-in client marked with how it can be called.
    pub(super) fn mark_invocation_modes(&self, result: &mut Value) {
        let (support, declares, runs_tasks) = {
            let st = self.state.lock().unwrap();
            let declares = mcp_tasks::server_has_tool_tasks(&st.upstream_caps);
            (st.tool_support.clone(), declares, declares || st.listed_task_tools)
        };
        let policy = &self.upstream.tasks;
        let ext = self.plan().tasks.extension();
        let is_async = |t: &Value| {
            let Some(name) = t.get("name").and_then(Value::as_str) else { return false };
            let s = support.get(name).copied().unwrap_or(TaskSupport::Forbidden);
            // As `start_operation` decides: hosted, else bridged to the upstream's task.
            let hosted = policy.offers_tool(name) && hosts(policy.hosted, declares, s);
            hosted || (!ext && runs_tasks && s != TaskSupport::Forbidden)
        };
        sep1391::mark_tools(result, &is_async);
    }
}
