//! A session for one request of a modern (2026-07-28) client. The era has no sessions: a
//! front that reads a request carrying modern `_meta` (or a `server/discover`) makes a
//! session for it alone ([`Session::for_modern_request`]), already "initialized" at the
//! newest legacy version with the capabilities the request declared, and ends it once the
//! request is answered or its client went away (which, for a modern client, cancels it).
//!
//! Every such session joins its upstream's shared link, whatever `share` says: a modern
//! client's requests have nothing to keep apart but their ids, which the shared link keys by
//! session, and their progress tokens, which it rewrites. Hosted state the requests share
//! (task ids, later) belongs to one owner per upstream: ids are the bearer tokens the tasks
//! extension makes them.
//!
//! In front of a legacy upstream the request loses its modern `_meta` and `params.task`,
//! what comes back is translated to 2025-11-25 and then made modern (`mcp::modern::client`),
//! and the server's requests become multi round-trip input (`modern_rounds`). In front of a
//! modern upstream the request travels with the client's own `_meta`, and the
//! answer comes back as the server sent it; with authentication, the upstream's tasks are
//! bound to the principal that made them (`modern_owned`).

use super::modern_state::{ModernClient, ParkedRequests};
use super::*;
use crate::mcp::modern::client as modern;
use crate::mcp::modern::meta::{self, RequestMeta};
use crate::mcp::task_dialects::EXTENSION;
use crate::upstream::client::Requester;

impl Session {
    /// A session serving modern request `id`, whose `_meta` is `meta`, answered on `sink`
    /// (and, after multi round-trips, on the sinks of its retries); `parked` is its front's.
    pub fn for_modern_request(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        who: Requester<'_>,
        meta: RequestMeta,
        id: Id,
        parked: Arc<ParkedRequests>,
    ) -> Arc<Session> {
        let (owner, client) = match who {
            Requester::Principal(p) => (Self::owner_of(p, &upstream.name), Some(format!("{PRINCIPAL_PREFIX}{p}"))),
            Requester::Anonymous(client) => (Self::modern_owner(None, &upstream.name), client),
        };
        let state = SessionState {
            version: Some(ProtocolVersion::LATEST),
            init_params: Some(modern::init_params(&meta.capabilities)),
            ..Default::default()
        };
        let client_side = ModernClient::new(meta, sink, id, parked);
        let sink: Arc<dyn ClientSink> = client_side.rounds.clone();
        Self::build(gateway, upstream, sink, client, owner, Some(client_side), state)
    }

    /// Who owns a modern client's tasks on `upstream`: its principal, or without
    /// authentication every modern client there (their ids are bearer tokens).
    pub(super) fn modern_owner(principal: Option<&str>, upstream: &str) -> String {
        match principal {
            Some(p) => Self::owner_of(p, upstream),
            None => format!("modern:{upstream}"),
        }
    }

    /// `server/discover` from a modern client: a modern upstream answers it itself (its
    /// answer passes as it is); for a legacy one the gateway answers from what the upstream
    /// said in `initialize`.
    pub(super) async fn discover(&self, id: Id) -> Result<(), RpcError> {
        let link = self.link().await?;
        if link.is_modern() {
            let frame = Message::made(jsonrpc::request(&id, crate::jsonrpc::Method::ServerDiscover, json!({})));
            return self.forward_up(&link, id, frame, Shape::AsIs).await;
        }
        let (init, from) = {
            let st = self.state.lock().unwrap();
            (st.upstream_init.clone(), st.upstream_version.unwrap_or(ProtocolVersion::LATEST))
        };
        let mut resp = jsonrpc::result_response(&id, init);
        // Nothing is refused in an initialize result: it is only stripped.
        let _ = crate::mcp::translate::translate(
            &mut resp,
            Some(crate::jsonrpc::Method::Initialize),
            from,
            ProtocolVersion::LATEST,
        );
        let mut result = modern::discover_result(resp.get("result").unwrap_or(&Value::Null), false);
        if self.upstream.tasks.hosted != HostedMode::Never || self.plan().upstream_tasks {
            // Tasks in the extension's dialect, hosted or relayed (`modern_tasks`).
            result["capabilities"]["extensions"] = json!({EXTENSION: {}});
        }
        self.sink.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// A modern client's request before it is dispatched: refused if the era has no such
    /// method, and `params.task` (which 2026-07-28 servers ignore) gone. The extension's
    /// `tasks/*` need the extension declared, and exist only on a modern upstream.
    pub(super) async fn modern_request(&self, id: &Id, frame: Message) -> Result<Option<Message>, RpcError> {
        if let Some(e) = modern::refused(frame.method(), frame.method_name()) {
            return Err(e);
        }
        self.remember_original(&frame);
        // Joined first: what the session decides below reads what the upstream said.
        let link = self.link().await?;
        if frame.method() == Method::ToolsCall {
            Box::pin(self.check_param_headers(&link, &frame)).await?;
        }
        if matches!(
            frame.method(),
            crate::jsonrpc::Method::TasksGet
                | crate::jsonrpc::Method::TasksUpdate
                | crate::jsonrpc::Method::TasksCancel
        ) {
            if !self.declared_extension() {
                let required = json!({"extensions": {EXTENSION: {}}});
                return Err(crate::mcp::modern::ModernError::MissingCapability { required }.to_rpc());
            }
            let Some(task_id) = frame.task_id_param() else {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("{}: params.taskId must be a string", frame.method_name()),
                ));
            };
            if Box::pin(self.hosted().visible_or_failed(task_id.as_str(), &self.owner)).await? {
                self.serve_ext_task(id.clone(), &frame, task_id.as_str()).await?;
                return Ok(None);
            }
            if let Some(upstream_id) = self.relayed_upstream_task(task_id.as_str()).await? {
                self.serve_relayed_task(id.clone(), &frame, task_id.as_str(), &upstream_id).await?;
                return Ok(None);
            }
            // A legacy upstream has no extension tasks, and the gateway hosts no such one; a
            // modern upstream's are asked about only by their owner (`modern_owned`).
            if !self.link().await?.is_modern() || !self.may_ask_modern(task_id.as_str()) {
                return Err(hosted::not_found(task_id.as_str()));
            }
            return Ok(Some(frame));
        }
        if frame.method() == crate::jsonrpc::Method::SubscriptionsListen {
            if self.link().await?.is_modern() {
                return Ok(Some(self.own_listen(frame)));
            }
            self.listen(id.clone(), &frame).await?;
            return Ok(None);
        }
        if frame.value().pointer("/params/requestState").is_some() && !self.link().await?.is_modern() {
            // A retry whose round the gateway no longer holds (expired, or another gateway's).
            return Err(RpcError::new(
                INVALID_PARAMS,
                "params.requestState is unknown or expired: send the request again without it",
            ));
        }
        if frame.method() == Method::ToolsCall && self.declared_extension() && !self.link().await?.is_modern() {
            let name = frame.tool_name().unwrap_or_default().into_owned();
            if self.hosts_tool(&name).await? {
                self.start_hosted_ext(id.clone(), frame).await?;
                return Ok(None);
            }
            if self.plan().upstream_tasks && self.tool_support(&name).await? != TaskSupport::Forbidden {
                self.call_upstream_task_ext(id.clone(), frame).await?;
                return Ok(None);
            }
        }
        if frame.method() == Method::ToolsCall && frame.task_param().is_some() {
            return Ok(Some(frame.edit(modern::strip_task_param)));
        }
        Ok(Some(frame))
    }

    /// A modern client's request for its link: without the modern `_meta` for a legacy
    /// upstream; for a modern one the link writes the `_meta` anew (the gateway's version and
    /// `clientInfo`, the client's own capabilities, see [`Session::forward_up`]).
    pub(super) fn modern_upward(&self, link: &Link, frame: Message) -> Message {
        if link.is_modern() { frame } else { frame.edit(meta::strip) }
    }

    /// A message on its way to a modern client, after the version table: what the era lacks
    /// is dropped, and results name their type (`None`: not for this client). A list change
    /// or resource update goes on the client's `subscriptions/listen` stream, if it asked.
    pub(super) fn to_modern_client(
        &self,
        msg: Message,
        route: Route,
        answers: Option<crate::jsonrpc::Method>,
        modern: &ModernClient,
    ) -> Option<(Message, Route)> {
        match msg.kind() {
            // Server requests are refused or asked as input before they get here.
            Kind::Request => None,
            Kind::Notification => {
                let upstream_modern = self.plan().upstream.is_modern();
                if let Route::Related(_) = route {
                    let reaches = match upstream_modern {
                        true => self.shows_modern_note(&msg),
                        false => {
                            modern::reaches_modern(msg.method(), msg.value().get("params"), true, modern.meta.log_level)
                        }
                    };
                    return reaches.then_some((msg, route));
                }
                let listen = modern.listen.lock().unwrap().clone();
                let (id, filter) = listen?;
                if !filter.carries(msg.method(), msg.value().get("params")) {
                    return None;
                }
                let subscription = id.to_value();
                Some((msg.edit(|m| modern::tag_subscription(m, &subscription)), Route::Related(id)))
            }
            Kind::Response if msg.is_error() => {
                if self.plan().upstream.is_modern() || !msg.bytes().windows(6).any(|w| w == b"-32002") {
                    return Some((msg, route));
                }
                Some((
                    msg.edit(|m| {
                        modern::error_for_modern(m);
                    }),
                    route,
                ))
            }
            Kind::Response => {
                if self.plan().upstream.is_modern() {
                    // The server's own result, of the era already (a task it made, its owner's).
                    self.note_modern_task(&msg);
                    return Some((msg, route));
                }
                Some((msg.edit(|m| modern::for_modern(m, answers)), route))
            }
        }
    }
}
