//! A session for one request of a modern (2026-07-28) client. The era has no sessions: a
//! front that reads a request carrying modern `_meta` (or a `server/discover`) makes a
//! session for it alone (`Session::for_modern_request`), already "initialized" at the
//! newest legacy version with the capabilities the request declared, and ends it once the
//! request is answered or its client went away (which, for a modern client, cancels it).
//!
//! A strategy of the session's: the session of a modern request holds a [`ModernClient`]
//! (`state`: the request's `_meta`, its rounds, what the upstream asked, its listen
//! stream), and this folder is what it does, handed a [`Host`] (what it needs of its
//! session, lent in `session/contexts.rs`; it never names `Session`): the request's
//! first step (`request`, in two halves by the upstream's era: `onto_modern` and
//! `onto_legacy`), what comes down (`to_client`),
//! `server/discover`, `subscriptions/listen` (`listen`), multi round-trip input
//! (`rounds`) and the tasks extension (`tasks`). A legacy client's session has none.
//!
//! Every such session joins its upstream's shared link, whatever `share` says: a modern
//! client's requests have nothing to keep apart but their ids, which the shared link keys by
//! session, and their progress tokens, which it rewrites. Hosted state the requests share
//! (task ids, later) belongs to one owner per upstream: ids are the bearer tokens the tasks
//! extension makes them.
//!
//! In front of a legacy upstream the request loses its modern `_meta` and `params.task`,
//! what comes back is translated to 2025-11-25 and then made modern (`mcp::modern::client`),
//! and the server's requests become multi round-trip input (`rounds`). In front of a
//! modern upstream the request travels with the client's own `_meta`, and the
//! answer comes back as the server sent it; with authentication, the upstream's tasks are
//! bound to the principal that made them (`principal_tasks`).

use super::plan::UpstreamSide;
use crate::config::HostedMode;
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Kind, Message, Method, RpcError};
use crate::mcp::ProtocolVersion;
use crate::mcp::modern::client as modern;
use crate::mcp::task_dialects::EXTENSION;
use crate::mcp::task_messages::TaskSupport;
use crate::tasks::hosted;
use crate::upstream::client::Route;
use crate::upstream::link::Shape;
pub(super) use host::Host;
use serde_json::{Value, json};
use state::ModernClient;

mod host;
mod listen;
mod param_headers;
mod rounds;
pub(super) mod state;
mod tasks;

impl ModernClient {
    /// `server/discover`: a modern upstream answers it itself (its answer passes as it is);
    /// for a legacy one the gateway answers from what the upstream said in `initialize`.
    pub(super) async fn discover(&self, s: &impl Host, id: Id) -> Result<(), RpcError> {
        let (link, upstream) = s.linked().await?;
        if upstream.is_modern() {
            let frame = Message::made(jsonrpc::request(&id, Method::ServerDiscover, json!({})));
            return s.up_modern(&link, id, frame, Shape::Discover).await;
        }
        let (init, from) = {
            let sides = s.sides();
            (Value::clone(&sides.init), sides.upstream_version())
        };
        let mut resp = jsonrpc::result_response(&id, init);
        // Nothing is refused in an initialize result: it is only stripped.
        let _ = crate::mcp::translate::translate(&mut resp, Some(Method::Initialize), from, ProtocolVersion::LATEST);
        let mut result = modern::discover_result(resp.get("result").unwrap_or(&Value::Null), false);
        if s.upstream().tasks.hosted != HostedMode::Never || s.plan().upstream_tasks {
            // Tasks in the extension's dialect, hosted or relayed (`tasks`).
            result["capabilities"]["extensions"] = json!({EXTENSION: {}});
        }
        s.deliver(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
        Ok(())
    }

    /// The request before it is dispatched: refused if the era has no such method, and
    /// `params.task` (which 2026-07-28 servers ignore) gone. The extension's `tasks/*` need
    /// the extension declared. Then the upstream's era (the plan's) decides the rest once:
    /// [`ModernClient::onto_modern`] or [`ModernClient::onto_legacy`]. `None`: answered here.
    pub(super) async fn request(&self, s: &impl Host, id: &Id, frame: Message) -> Result<Option<Message>, RpcError> {
        if let Some(e) = modern::refused(frame.method(), frame.method_name()) {
            return Err(e);
        }
        self.remember_original(&frame);
        // Joined first: what the session decides below reads what the upstream said.
        let (link, upstream) = s.linked().await?;
        if frame.method() == Method::ToolsCall {
            Box::pin(self.check_param_headers(s, &link, upstream, &frame)).await?;
            // The retry of an input round the gateway made for a hosted call, in either era.
            // A token naming no task the requester may see is another server's (a gateway
            // behind this one): passed on to a modern upstream, unknown to a legacy one.
            if let Some(task_id) = tasks::hosted_round(&frame) {
                if Box::pin(s.hosted().visible_or_failed(task_id, s.owner())).await? {
                    self.continue_hosted(s, id.clone(), &frame, task_id).await?;
                    return Ok(None);
                }
                if !upstream.is_modern() {
                    return Err(tasks::unknown_request_state());
                }
            }
        }
        if matches!(frame.method(), Method::TasksGet | Method::TasksUpdate | Method::TasksCancel) {
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
            if Box::pin(s.hosted().visible_or_failed(task_id.as_str(), s.owner())).await? {
                self.serve_ext_task(s, id.clone(), &frame, task_id.as_str()).await?;
                return Ok(None);
            }
            if let Some(upstream_id) = self.relayed_upstream_task(s, task_id.as_str()).await? {
                self.serve_relayed_task(s, id.clone(), &frame, task_id.as_str(), &upstream_id).await?;
                return Ok(None);
            }
        }
        // A call that may outlast the client's patience, of a request without the extension.
        if frame.method() == Method::ToolsCall
            && frame.value().pointer("/params/requestState").is_none()
            && let Some(calls) = s.long_calls()
            && let Some(answered) = calls.request(s, id, &frame).await
        {
            return answered.map(|()| None);
        }
        match upstream {
            UpstreamSide::Modern { ext_tasks } => self.onto_modern(s, id, frame, ext_tasks).await,
            UpstreamSide::Legacy(_) => self.onto_legacy(s, id, frame).await,
        }
    }

    /// [`ModernClient::request`] in front of a modern upstream: the request travels with
    /// the client's own `_meta`; with authentication it names only its principal's tasks.
    /// An upstream without the tasks extension has its tools' tasks hosted by the gateway,
    /// as a legacy upstream's (`ext_tasks`: it has the extension).
    async fn onto_modern(
        &self,
        s: &impl Host,
        id: &Id,
        frame: Message,
        ext_tasks: bool,
    ) -> Result<Option<Message>, RpcError> {
        match frame.method() {
            // Hosted ones were served before: any other id is no task of an upstream
            // without the extension.
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel if !ext_tasks => {
                Err(hosted::not_found(frame.task_id_param().as_ref().map_or("", |t| t.as_str())))
            }
            Method::ToolsCall if !ext_tasks && self.declared_extension() => {
                let name = frame.tool_name().unwrap_or_default().into_owned();
                if s.hosts_tool(&name).await? {
                    self.start_hosted_ext(s, id.clone(), frame).await?;
                    return Ok(None);
                }
                Ok(Some(frame.edit(modern::strip_task_param)))
            }
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => {
                // A modern upstream's tasks are asked about only by their owner.
                let owns = match (s.principal_tasks(), frame.task_id_param()) {
                    (Some(p), Some(task_id)) => p.may_ask(task_id.as_str()),
                    _ => true,
                };
                if !owns {
                    return Err(hosted::not_found(frame.task_id_param().as_ref().map_or("", |t| t.as_str())));
                }
                Ok(Some(frame))
            }
            Method::SubscriptionsListen => Ok(Some(match s.principal_tasks() {
                Some(p) => p.own_listen(frame),
                None => frame,
            })),
            Method::ToolsCall if frame.task_param().is_some() => Ok(Some(frame.edit(modern::strip_task_param))),
            _ => Ok(Some(frame)),
        }
    }

    /// [`ModernClient::request`] in front of a legacy upstream: the gateway is the modern
    /// server. It hosts extension tasks (or relays the upstream's core ones), serves
    /// `subscriptions/listen`, and keeps the rounds a `requestState` names.
    async fn onto_legacy(&self, s: &impl Host, id: &Id, frame: Message) -> Result<Option<Message>, RpcError> {
        match frame.method() {
            // A legacy upstream has no extension tasks, and the gateway hosts no such one.
            Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => {
                Err(hosted::not_found(frame.task_id_param().as_ref().map_or("", |t| t.as_str())))
            }
            Method::SubscriptionsListen => {
                self.listen(s, id.clone(), &frame).await?;
                Ok(None)
            }
            // A retry whose round the gateway no longer holds (expired, or another gateway's).
            _ if frame.value().pointer("/params/requestState").is_some() => Err(tasks::unknown_request_state()),
            Method::ToolsCall => {
                if self.declared_extension() {
                    let name = frame.tool_name().unwrap_or_default().into_owned();
                    if s.hosts_tool(&name).await? {
                        self.start_hosted_ext(s, id.clone(), frame).await?;
                        return Ok(None);
                    }
                    if s.plan().upstream_tasks && s.tool_support(&name).await? != TaskSupport::Forbidden {
                        self.call_upstream_task_ext(s, id.clone(), frame).await?;
                        return Ok(None);
                    }
                }
                match frame.task_param() {
                    Some(_) => Ok(Some(frame.edit(modern::strip_task_param))),
                    None => Ok(Some(frame)),
                }
            }
            _ => Ok(Some(frame)),
        }
    }

    /// A message on its way to the client, after the version table: what the era lacks is
    /// dropped, and results name their type (`None`: not for this client). A list change or
    /// resource update goes on the client's `subscriptions/listen` stream, if it asked.
    pub(super) fn to_client(
        &self,
        s: &impl Host,
        msg: Message,
        route: Route,
        answers: Option<Method>,
    ) -> Option<(Message, Route)> {
        if msg.kind() == Kind::Request {
            // Server requests are refused or asked as input before they get here.
            return None;
        }
        // What the upstream sent is of the era already, or made modern here.
        let upstream_modern = s.plan().upstream.is_modern();
        match msg.kind() {
            Kind::Request => None,
            Kind::Notification => {
                if let Route::Related(_) = route {
                    let reaches = match upstream_modern {
                        true => s.principal_tasks().is_none_or(|p| p.shows_note(&msg)),
                        false => {
                            modern::reaches_modern(msg.method(), msg.value().get("params"), true, self.meta.log_level)
                        }
                    };
                    return reaches.then_some((msg, route));
                }
                let listen = self.listen.lock().unwrap().clone();
                let (id, filter) = listen?;
                if !filter.carries(msg.method(), msg.value().get("params")) {
                    return None;
                }
                let subscription = id.to_value();
                Some((msg.edit(|m| modern::tag_subscription(m, &subscription)), Route::Related(id)))
            }
            // Made the era's in the request's sink, whoever made it (`state::Rounds`).
            Kind::Response if msg.is_error() => Some((msg, route)),
            Kind::Response => {
                if upstream_modern {
                    // The server's own result, of the era already (a task it made, its owner's).
                    if let Some(p) = s.principal_tasks()
                        && let Err(e) = p.note_task(&msg, s.max_task_id_bytes())
                    {
                        // Nobody could reach the task: the upstream is told to drop it.
                        self.cancel_unkept(s, &msg);
                        let answer = Message::made(e.response(msg.id()));
                        return Some((answer, route));
                    }
                    return Some((msg, route));
                }
                Some((msg.edit(|m| modern::for_modern(m, answers)), route))
            }
        }
    }
}

impl ModernClient {
    /// Cancels upstream the task `created` (a result of `resultType: "task"`) made, which the
    /// gateway could not keep: sent on the session's link, declaring the client's
    /// capabilities, not awaited beyond `request_timeout`.
    fn cancel_unkept(&self, s: &impl Host, created: &Message) {
        let Some(task_id) =
            created.result_field(jsonrpc::Key::TaskId).and_then(jsonrpc::as_str).map(|t| t.into_owned())
        else {
            return;
        };
        let Some(link) = s.current_link() else { return };
        let (timeout, caps) = (s.upstream().request_timeout, self.meta.capabilities.clone());
        tokio::spawn(async move {
            let req = jsonrpc::request(&Id::Num(0), Method::TasksCancel, json!({"taskId": task_id}));
            let _ = tokio::time::timeout(timeout, link.request_for_declaring(req, None, Some(caps))).await;
        });
    }
}
