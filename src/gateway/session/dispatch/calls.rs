//! The plan's `tools/list` and `tools/call`: what the task policy makes of a call (see
//! [`TaskPolicy`]): translated for an extension upstream, hosted, bridged, refused, or passed
//! up with the shape its response needs.

use super::{Dispatch, Step};
use crate::config::RequiredMode;
use crate::gateway::session::plan::{CallRoute, ClientSide, TaskPolicy};
use crate::jsonrpc::{self, Id, Message, Method, RpcError};
use crate::mcp::task_messages::TaskSupport;
use crate::upstream::link::Shape;
use serde_json::{Value, json};

impl Dispatch<'_> {
    /// A task asked for by a client whose version has none is not its to ask: the call goes
    /// up plain (else a task created upstream would answer a client that cannot read it, and
    /// run on with nobody to cancel it).
    pub(in crate::gateway::session) fn plain_for_client(&self, frame: Message) -> Message {
        if self.plan.client.has_core_tasks() || frame.method() != Method::ToolsCall || frame.task_param().is_none() {
            return frame;
        }
        frame.edit(|m| {
            if let Some(p) = m.get_mut("params").and_then(Value::as_object_mut) {
                p.remove("task");
            }
        })
    }

    /// How a `tools/list` answer is shaped: a modern client's listing is not the place for
    /// 2025-11-25 task marks (it is shaped only where the tool policy or long calls change it).
    pub(in crate::gateway::session) fn listing_shape(&self) -> Shape {
        match self.plan.client {
            ClientSide::Modern if self.s.long_calls.is_some() || self.s.has_tool_rule() => Shape::ToolsList,
            ClientSide::Modern => Shape::AsIs,
            ClientSide::Legacy(_) => Shape::ToolsList,
        }
    }

    /// Whether the upstream runs tool calls as tasks (so some tools may require it): it
    /// declares tasks in any form, or its listing marks a tool optional or required.
    pub(in crate::gateway::session) fn runs_tasks(&self) -> bool {
        self.plan.upstream_tool_tasks || self.s.tools.marks_tasks()
    }

    /// Where a `tools/call` goes, decided without waiting (see [`CallRoute`]).
    pub(in crate::gateway::session) fn call_route(&self, id: &Id, frame: &Message) -> CallRoute {
        let task = frame.task_param().is_some();
        match self.plan.tasks {
            // A core task asked of an extension upstream: translated (see `ext::translated`).
            TaskPolicy::ExtTranslated if task => CallRoute::Translated,
            TaskPolicy::Core if task => CallRoute::CoreTask,
            // A blocking call to an extension upstream: bridged if it must be a task.
            TaskPolicy::ExtBridged | TaskPolicy::ExtTranslated => {
                CallRoute::Up(self.s.ext.may_need_task(self.s, id, frame))
            }
            TaskPolicy::Core | TaskPolicy::Plain if self.runs_tasks() => CallRoute::ByListing,
            TaskPolicy::Core | TaskPolicy::Plain => CallRoute::Up(Shape::AsIs),
        }
    }

    /// A core client's task-augmented call: hosted, or passed to an upstream that runs the
    /// tool as a task.
    pub(in crate::gateway::session) async fn core_task_call(&self, id: Id, frame: Message) -> Result<Step, RpcError> {
        let s = self.s;
        let name = frame.tool_name().unwrap_or_default().into_owned();
        if Box::pin(s.tools.hosts(s, &name)).await? {
            return Box::pin(s.start_hosted(id, frame.into_value())).await.map(|()| Step::Done);
        }
        let support = if self.runs_tasks() { s.tools.support(s, &name).await? } else { TaskSupport::Forbidden };
        if support == TaskSupport::Forbidden && self.plan.hosts {
            // The client was shown this tool without task support: a task call of it is what
            // the spec answers with -32601.
            return Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                format!("tool {name:?} does not support task-augmented calls (taskSupport: forbidden)"),
            ));
        }
        Ok(Step::Up(frame, Shape::AsIs))
    }

    /// A plain call to an upstream that runs tasks: as the tool's `taskSupport` says. `None`:
    /// the gateway serves it (bridged). By reference: this is every such call's path, and
    /// its future is carried by each.
    pub(in crate::gateway::session) async fn listed_call(
        &self,
        id: &Id,
        frame: &Message,
    ) -> Result<Option<Shape>, RpcError> {
        let s = self.s;
        let name = frame.tool_name().unwrap_or_default();
        let shape = match s.tools.support(s, &name).await? {
            TaskSupport::Forbidden => Shape::AsIs,
            TaskSupport::Optional => {
                // An SDK may still refuse a plain call of an optional tool; its exact refusal
                // is retried once as a task.
                if s.keep_for_retry(id, frame) { Shape::MayNeedTask } else { Shape::AsIs }
            }
            TaskSupport::Required => match s.upstream.tasks.required {
                RequiredMode::Bridge => {
                    // Boxed: every plain call's future would carry the bridge's state.
                    Box::pin(s.bridged_calls.start(s, id.clone(), frame.clone().into_value())).await?;
                    return Ok(None);
                }
                RequiredMode::Hide if self.plan.client == ClientSide::Modern => {
                    // The extension's way to say a call needs a task.
                    let required = json!({"extensions": {crate::mcp::task_dialects::EXTENSION: {}}});
                    return Err(crate::mcp::modern::ModernError::MissingCapability { required }.to_rpc());
                }
                RequiredMode::Hide if !self.plan.client.has_core_tasks() => {
                    return Err(RpcError::new(
                        jsonrpc::METHOD_NOT_FOUND,
                        format!(
                            "tool {name:?} must run as a task and needs a client with task support (protocol 2025-11-25 or later)"
                        ),
                    ));
                }
                RequiredMode::Hide => Shape::AsIs,
            },
        };
        Ok(Some(shape))
    }
}
