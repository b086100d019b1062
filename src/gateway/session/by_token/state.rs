//! What the by-token dialects keep for one session, each dialect under a lock of its own.
//! Apart from the dialects' code (the folder's other files), so that the session can hold
//! it without the two importing each other.

use super::super::plan::ByToken;
use super::operation_table::Operations;
use crate::jsonrpc::{Id, ProgressToken};
use crate::locks::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The dialects a legacy session speaks, as its upstream enables them (built once, with the
/// session; a modern client's session has none).
/// (`pub(crate)`: the session's `by_token` module is private, so only the session reaches it.)
pub(crate) struct Dialects {
    pub(super) progress_get: Option<ProgressGet>,
    pub(super) sep1391: Option<Sep1391>,
}

impl Dialects {
    /// The dialects `enabled` names; `None` when it names none.
    pub(crate) fn of(enabled: ByToken) -> Option<Dialects> {
        enabled.on().then(|| Dialects {
            progress_get: enabled.progress_get.then(|| ProgressGet { followed: Mutex::default() }),
            sep1391: enabled.sep1391.then(|| Sep1391 { kept: Mutex::default() }),
        })
    }
}

/// The progress-state proposal (`progress/get`): the session's requests it follows.
pub(super) struct ProgressGet {
    pub(super) followed: Mutex<Followed>,
}

#[derive(Default)]
pub(super) struct Followed {
    /// Requests followed, by client id, with their progress token.
    pub(super) requests: HashMap<Id, ProgressToken>,
    /// Questions the server asked for a followed request, by the client's id for them, with
    /// the client id of the request it was asked for and its token.
    pub(super) inputs: HashMap<Id, (Id, ProgressToken)>,
}

/// SEP-1391 operations: the session's, and the questions asked for them.
pub(super) struct Sep1391 {
    pub(super) kept: Mutex<Kept>,
}

#[derive(Default)]
pub(super) struct Kept {
    pub(super) ops: Operations,
    /// Questions asked for a bridged operation, by the client's id for them, with its task.
    pub(super) inputs: HashMap<Id, Arc<str>>,
}
