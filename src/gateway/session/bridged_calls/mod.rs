//! A session's bridged calls: the client requests it serves by following an upstream task
//! (a plain call of a tool the upstream runs only as a task, and a translated `tasks/result`
//! wait), each holding a slot by the client's id until it ends. The bridges themselves are
//! `tasks::bridge`'s; here are the session's slots, and its bridges started (`run`). A slot's
//! token is what the client's `notifications/cancelled` and the session's end fire. At most
//! `max_in_flight` at once; an id in use is refused.
//!
//! Its lock is its own, taken for a moment: never across an `.await`, and after the
//! session's `state` where both are held.
//!
//! The strategy names no session type: it is handed a [`Host`], what it needs of its
//! session (`session/contexts.rs`).

use super::reach::Reach;
use crate::jsonrpc::{GATEWAY_BUSY, INVALID_REQUEST, Id, RpcError};
use crate::locks::Mutex;
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;

mod run;

/// What bridged calls need of their session beyond what every strategy may reach: its
/// narrow context.
pub(super) trait Host: Reach {
    /// The session's own bridged calls.
    fn bridged_calls(&self) -> &BridgedCalls;
    /// A bridged call ended: questions of an extension task's call that the client has not
    /// answered are moot now (see `ext::bridged`).
    fn drop_moot_inputs(&self);
}

/// The session's slots for calls that follow an upstream task (see the module doc).
#[derive(Default)]
pub(super) struct BridgedCalls {
    slots: Mutex<HashMap<Id, CancellationToken>>,
}

impl BridgedCalls {
    /// A slot for client request `id`: its cancellation token. Refused past `limit`, and for
    /// an id already in use. Called with the session's lock held (`claim_open`).
    fn claim(&self, id: &Id, limit: usize) -> Result<CancellationToken, RpcError> {
        let cancel = CancellationToken::new();
        let mut slots = self.slots.lock().unwrap();
        if slots.len() >= limit {
            return Err(RpcError::new(GATEWAY_BUSY, "too many bridged calls in flight"));
        }
        if slots.contains_key(id) {
            return Err(RpcError::new(INVALID_REQUEST, format!("request id {id} is already in use")));
        }
        slots.insert(id.clone(), cancel.clone());
        Ok(cancel)
    }

    /// Frees request `id`'s slot.
    pub(super) fn release(&self, id: &Id) {
        self.slots.lock().unwrap().remove(id);
    }

    /// The token of request `id`'s slot, if it holds one.
    pub(super) fn get(&self, id: &Id) -> Option<CancellationToken> {
        self.slots.lock().unwrap().get(id).cloned()
    }

    /// Whether request `id` holds a slot.
    pub(super) fn holds(&self, id: &Id) -> bool {
        self.slots.lock().unwrap().contains_key(id)
    }

    /// Every slot's token, the slots freed: the session ends.
    pub(super) fn drain(&self) -> Vec<CancellationToken> {
        self.slots.lock().unwrap().drain().map(|(_, c)| c).collect()
    }
}
