//! The questions an upstream asked during a task that no client could be asked yet
//! (elicitation, sampling, roots), held for the task: one mechanism for hosted tasks
//! (`tasks::hosted`) and for upstream tasks relayed to extension clients (`tasks::relayed`).
//! Each is held under a key unique over the task's life, shown as the tasks extension's
//! `inputRequests`, and answered upstream when the client's `tasks/update` names its key.

use crate::jsonrpc::{self, Id, Message};
use crate::mcp::task_messages;
use crate::upstream::link::Link;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes of every question held, all tasks together (`[tasks] max_held_input_bytes`):
/// a question counts by its JSON text from when it is held until it is answered or dropped.
pub struct HeldBytes {
    used: AtomicUsize,
    max: usize,
}

impl HeldBytes {
    pub fn new(max: usize) -> Arc<HeldBytes> {
        Arc::new(HeldBytes { used: AtomicUsize::new(0), max })
    }

    /// Bytes held now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// `n` more bytes, if they fit.
    fn reserve(self: &Arc<Self>, n: usize) -> Option<Reserved> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| u.checked_add(n).filter(|t| *t <= self.max))
            .ok()?;
        Some(Reserved { budget: self.clone(), n })
    }
}

/// One question's bytes, given back when it is dropped.
struct Reserved {
    budget: Arc<HeldBytes>,
    n: usize,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.n, Ordering::Relaxed);
    }
}

/// Why a question was not held.
#[derive(Debug, PartialEq, Eq)]
pub enum NotHeld {
    /// The task holds its most questions already.
    Count,
    /// Held questions fill `max_held_input_bytes`.
    Bytes,
}

impl NotHeld {
    /// The refusal the upstream gets.
    pub fn refusal(&self) -> jsonrpc::RpcError {
        match self {
            NotHeld::Count => {
                jsonrpc::RpcError::new(jsonrpc::INTERNAL_ERROR, "too many questions waiting for the client")
            }
            NotHeld::Bytes => jsonrpc::RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                "the questions waiting for clients fill the gateway's room for them (tasks.max_held_input_bytes)",
            ),
        }
    }
}

/// One question of the upstream's, waiting for the client.
pub struct HeldInput {
    /// The link it came on: the answer goes back there.
    pub link: Arc<Link>,
    /// Its id upstream.
    pub upstream_id: Id,
    /// The request as the upstream sent it.
    pub msg: Value,
    pub key: String,
    _bytes: Reserved,
}

/// The questions held for one task.
#[derive(Default)]
pub struct HeldInputs {
    held: Vec<HeldInput>,
    /// Questions held so far (the next one's key).
    count: u64,
}

impl HeldInputs {
    /// Holds a question under a new key; nothing is held past `limit` of them, or past the
    /// bytes `budget` has room for.
    pub fn hold(
        &mut self,
        link: &Arc<Link>,
        upstream_id: Id,
        msg: Value,
        limit: usize,
        budget: &Arc<HeldBytes>,
    ) -> Result<String, NotHeld> {
        if self.held.len() >= limit {
            return Err(NotHeld::Count);
        }
        let size = serde_json::to_vec(&msg).map_or(usize::MAX, |t| t.len());
        let bytes = budget.reserve(size).ok_or(NotHeld::Bytes)?;
        self.count += 1;
        let key = format!("input-{}", self.count);
        self.held.push(HeldInput { link: link.clone(), upstream_id, msg, key: key.clone(), _bytes: bytes });
        Ok(key)
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
                task_messages::untag_related(&mut msg, "params");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_counts_until_dropped_and_refuses_past_it() {
        let budget = HeldBytes::new(100);
        let a = budget.reserve(60).unwrap();
        assert!(budget.reserve(41).is_none(), "past the budget");
        let b = budget.reserve(40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 40);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert!(budget.reserve(usize::MAX).is_none());
    }
}
