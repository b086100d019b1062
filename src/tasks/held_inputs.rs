//! The questions an upstream asked during a task that no client could be asked yet
//! (elicitation, sampling, roots), held for the task: one mechanism for hosted tasks
//! (`tasks::hosted`) and for upstream tasks relayed to extension clients (`tasks::relayed`).
//! Each is held under a key unique over the task's life, shown as the tasks extension's
//! `inputRequests`, and answered upstream when the client's `tasks/update` names its key.

use crate::jsonrpc::{self, Id, Message};
use crate::mcp::tasks as mcp_tasks;
use crate::upstream::link::Link;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// One question of the upstream's, waiting for the client.
pub struct HeldInput {
    /// The link it came on: the answer goes back there.
    pub link: Arc<Link>,
    /// Its id upstream.
    pub upstream_id: Id,
    /// The request as the upstream sent it.
    pub msg: Value,
    pub key: String,
}

/// The questions held for one task.
#[derive(Default)]
pub struct HeldInputs {
    held: Vec<HeldInput>,
    /// Questions held so far (the next one's key).
    count: u64,
}

impl HeldInputs {
    /// Holds a question under a new key; `None` (nothing held) past `limit` of them.
    pub fn hold(&mut self, link: &Arc<Link>, upstream_id: Id, msg: Value, limit: usize) -> Option<String> {
        if self.held.len() >= limit {
            return None;
        }
        self.count += 1;
        let key = format!("input-{}", self.count);
        self.held.push(HeldInput { link: link.clone(), upstream_id, msg, key: key.clone() });
        Some(key)
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether the questions came on a link that has closed since (held ones all come on
    /// the link of their task).
    pub fn on_closed_link(&self) -> bool {
        self.held.iter().any(|h| h.link.is_closed())
    }

    /// Takes the question held under `key`, if one is.
    pub fn take(&mut self, key: &str) -> Option<HeldInput> {
        let at = self.held.iter().position(|h| h.key == key)?;
        Some(self.held.remove(at))
    }

    /// Takes every question held.
    pub fn take_all(&mut self) -> Vec<HeldInput> {
        std::mem::take(&mut self.held)
    }

    /// The questions by key, as the tasks extension lists them (`{method, params}`, without
    /// the related-task tag).
    pub fn listed(&self) -> Map<String, Value> {
        self.held
            .iter()
            .map(|h| {
                let mut msg = h.msg.clone();
                mcp_tasks::untag_related(&mut msg, "params");
                let params = msg.get("params").cloned().unwrap_or(json!({}));
                (
                    h.key.clone(),
                    jsonrpc::object([
                        ("method", msg.get("method").cloned().unwrap_or(Value::Null)),
                        ("params", params),
                    ]),
                )
            })
            .collect()
    }
}

impl HeldInput {
    /// Sends the client's answer `result` upstream.
    pub async fn answer(self, result: Value) {
        let answer = Message::made(jsonrpc::result_response(&self.upstream_id, result));
        if let Err(e) = self.link.send(answer).await {
            tracing::debug!(key = %self.key, "input answer not delivered: {e}");
        }
    }
}

/// Whether client capabilities `declared` (`None`: not known here, the session checks)
/// cover input request `msg`.
pub fn declares(declared: Option<&Value>, msg: &Value) -> bool {
    let Some(caps) = declared else { return true };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or_default();
    let Some(need) = crate::mcp::modern::input::capability_for(method) else { return true };
    caps.get(need).is_some_and(Value::is_object)
}

/// The refusal of a question the client did not declare it can answer.
pub fn undeclared(msg: &Value) -> jsonrpc::RpcError {
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    let why = format!("the client did not declare that it supports {method}");
    jsonrpc::RpcError::new(jsonrpc::METHOD_NOT_FOUND, why)
}
