//! Requests the server sends the client: passed on under ids of the session's (translated
//! for the client's version, refused upstream when the client cannot take them), and the
//! client's answers sent back to the request they answer.

use super::*;

impl Session {
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
        let Some(msg) = self.upward_answer(frame, req.answers, &req.upstream_id) else { return };
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
        let msg = match self.downward_request(msg) {
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
        let st = self.state.lock().unwrap();
        let cap = st.init_params.as_ref().and_then(|p| p.get("capabilities")).and_then(|c| c.get(need));
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
        let id = Id::Num(st.next_client_side_id);
        st.next_client_side_id += 1;
        let req = ServerRequest { link: Arc::downgrade(link), upstream_id: upstream_id.clone(), task, answers };
        st.server_requests.insert(id.clone(), req);
        Some(id)
    }
}

impl Session {
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
