//! The session in front of a 2026-07-28 upstream that declares the tasks extension
//! (`io.modelcontextprotocol/tasks`): a blocking `tools/call` of a legacy client, or of a
//! 2026-07-28 one that did not declare the extension, goes up without the extension, and one the upstream refuses with -32021 naming it (or answers with a task
//! all the same) is bridged ([`ExtBridge`]): retried declaring the extension, the task
//! followed to its end, its input requests relayed to the client as requests of the original
//! call and their answers routed back to it ([`InputWait`]).

use super::{ExtTasks, Host};
use crate::gateway::session::bridged_calls::BridgedCalls;
use crate::jsonrpc::{self, GATEWAY_BUSY, Id, Message, RpcError};
use crate::tasks::bridge::extension::{self, AskClient, ExtBridge, InputWait};
use crate::upstream::client::Route;
use crate::upstream::link::{Link, Shape};
use serde_json::Value;
use std::sync::{Arc, Weak};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

impl ExtTasks {
    /// What a request the session makes about an extension task declares: its client's
    /// capabilities as a modern upstream reads them, and the tasks extension.
    pub(super) fn capabilities(&self, s: &impl Host) -> serde_json::Map<String, Value> {
        let mut caps = s.capabilities_for_modern();
        crate::mcp::task_dialects::caps::declare(&mut caps);
        caps
    }

    /// A plain `tools/call` for an extension upstream: kept, in case it comes back needing
    /// the extension (bounded like every request in flight; past that it just goes).
    pub(in crate::gateway::session) fn may_need_task(&self, s: &impl Host, id: &Id, frame: &Message) -> Shape {
        match s.keep_for_retry(id, frame) {
            true => Shape::MayNeedTask,
            false => Shape::AsIs,
        }
    }

    /// The upstream's answer to such a call: `true` if it is bridged from here (-32021
    /// naming the extension, or a task the gateway did not ask for).
    pub(in crate::gateway::session) fn task_response(&self, s: &impl Host, client_id: &Id, msg: &Message) -> bool {
        if !s.upstream_tasks_are_extension() {
            return false;
        }
        let (retry, created) = if extension::wants_extension(msg.value()) {
            (true, None)
        } else if extension::is_task(msg.value()) {
            (false, Some(msg.value().clone()))
        } else {
            // Answered: nothing to retry (and not as a core task either: this upstream has none).
            s.take_retry(client_id);
            return false;
        };
        let Some(call) = s.take_retry(client_id) else { return false };
        if retry {
            tracing::info!(upstream = %s.upstream().name, tool = %call.tool_name().unwrap_or_default(), "the upstream serves this call only as an extension task; retrying it declaring the extension, bridged");
        }
        let Some(me) = s.weak().upgrade() else { return true };
        let client_id = client_id.clone();
        tokio::spawn(async move {
            if let Err(e) = me.ext().start_bridge(&*me, client_id.clone(), call.into_value(), created).await {
                me.to_client(Message::made(e.response(Some(&client_id))), Route::Response(client_id));
            }
        });
        true
    }

    /// Bridges client call `id` through an extension task (see [`ExtBridge`]).
    async fn start_bridge(&self, s: &impl Host, id: Id, call: Value, created: Option<Value>) -> Result<(), RpcError> {
        let link = s.link().await?;
        let cancel = s.bridged_calls().claim_open(s, &id)?;
        let bridge = self.bridge(s, &link, &id, call, created, cancel);
        s.bridged_calls().spawn(s, id, link, bridge.run());
        Ok(())
    }

    /// The bridge of client call `id` (`call`) through an extension task on `link`
    /// (`created`: the upstream's answer so far, if it already made a task of it).
    pub(in crate::gateway::session) fn bridge(
        &self,
        s: &impl Host,
        link: &Arc<Link>,
        id: &Id,
        call: Value,
        created: Option<Value>,
        cancel: CancellationToken,
    ) -> ExtBridge {
        ExtBridge {
            plain: BridgedCalls::plain(s, link, id, call, cancel),
            created,
            max_input: s.max_in_flight(),
            asker: self.asker(s),
            capabilities: self.capabilities(s),
        }
    }

    /// How a bridged extension task asks this session's client.
    fn asker<H: Host>(&self, s: &H) -> Arc<dyn AskClient> {
        Arc::new(Asker(s.weak()))
    }

    /// The client's answer to a bridged task's input request: `true` if it was one.
    pub(in crate::gateway::session) fn input_answered(&self, s: &impl Host, id: &Id, frame: &Message) -> bool {
        let wait = {
            let mut st = self.lock();
            if st.inputs.is_empty() {
                return false;
            }
            st.inputs.remove(id)
        };
        let Some(wait) = wait else { return false };
        if wait.answers.try_send((wait.key, frame.value().clone())).is_err() {
            tracing::debug!(upstream = %s.upstream().name, "an input answer came after its bridged task ended");
        }
        true
    }

    /// Sends `request` (an upstream task's input request, without an id) to the client as a
    /// request related to client request `client_id`; its answer comes back on `answers`
    /// with `key` (see [`ExtTasks::input_answered`]).
    pub(super) fn ask_client(
        &self,
        s: &impl Host,
        client_id: &Id,
        request: Value,
        key: String,
        answers: mpsc::Sender<(String, Value)>,
    ) -> Result<(), RpcError> {
        let mut request = request;
        // A request, with an id of the session's given below.
        request["id"] = 0.into();
        let msg = Message::from_value(request).map_err(|r| r.error)?;
        // Refused at once what the client did not declare, or (a 2026-07-28 client, asked in
        // its request's answer) what that answer cannot carry.
        if let Some(why) = s.cannot_ask(&msg, client_id) {
            return Err(RpcError::new(jsonrpc::METHOD_NOT_FOUND, format!("the upstream task asked for input: {why}")));
        }
        let msg = s.down_request(msg)?;
        let limit = s.max_in_flight();
        // One count with the server's own requests: both locks, the session's first.
        let id = s.with_server_requests(|waiting| {
            let mut ext = self.lock();
            if ext.inputs.len() + waiting >= limit {
                return Err(RpcError::new(GATEWAY_BUSY, "too many server requests waiting for the client"));
            }
            let id = s.next_client_side_id();
            ext.inputs.insert(id.clone(), InputWait { key, answers });
            Ok(id)
        })?;
        // A 2026-07-28 client is asked in a round, once the task's other questions are in as
        // well (`asked_all`).
        s.ask(id, msg, client_id);
        Ok(())
    }
}

/// The session as its bridged extension tasks reach it.
struct Asker<H>(Weak<H>);

impl<H: Host> AskClient for Asker<H> {
    fn ask(
        &self,
        client_id: &Id,
        request: Value,
        key: String,
        answers: mpsc::Sender<(String, Value)>,
    ) -> Result<(), RpcError> {
        let Some(s) = self.0.upgrade() else {
            return Err(RpcError::new(jsonrpc::INTERNAL_ERROR, "the client's session ended"));
        };
        s.ext().ask_client(&*s, client_id, request, key, answers)
    }

    fn asked_all(&self) {
        if let Some(s) = self.0.upgrade() {
            s.asked_all();
        }
    }
}
