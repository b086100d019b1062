//! The progress-state proposal for one session: each request the client sends with a
//! `progressToken` (but a task's or an operation's, which have their own state) is followed
//! in the gateway's [`ProgressStates`](crate::tasks::progress_state) (its progress, the
//! questions the upstream asks for it, and its end), `progress/get` reads it, and the
//! request's result carries it as `_meta.progress`.
//!
//! The dialect names no session type: it is handed its narrow context, a [`Cx`].

use super::state::ProgressGet;
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Kind, Message, Method, ProgressToken, RpcError};
use crate::tasks::progress_state::ProgressStates;
use crate::upstream::client::Route;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// What the dialect needs of its session.
pub(super) struct Cx<'a> {
    /// The gateway's progress states.
    pub(super) states: &'a ProgressStates,
    /// The key the session's states are kept under.
    pub(super) owner: &'a Arc<str>,
    /// The most requests, and questions, followed at once.
    pub(super) max_in_flight: usize,
    /// The most states one owner keeps.
    pub(super) max_per_owner: usize,
    /// How long an ended state stays readable.
    pub(super) retention: Duration,
}

impl ProgressGet {
    /// `progress/get` is answered (`Some`: the result, or why not); another request with a
    /// progress token is followed.
    pub(super) fn request(&self, cx: &Cx<'_>, id: &Id, frame: &Message) -> Option<Result<Value, RpcError>> {
        if frame.method() == Method::ProgressGet {
            return Some(serve(cx, frame.value()));
        }
        // A task's progress is its task's (`tasks/get`), not the request's.
        if frame.task_param().is_some() || frame.method().is_task_request() {
            return None;
        }
        let token = frame.progress_token()?;
        let mut followed = self.followed.lock().unwrap();
        // An id already in flight is the link's to refuse: its state stays the first's.
        if !followed.requests.contains_key(id)
            && followed.requests.len() < cx.max_in_flight
            && cx.states.begin(cx.owner, &token, cx.max_per_owner)
        {
            followed.requests.insert(id.clone(), token);
        }
        None
    }

    /// What a message to the client changes: a followed request's response ends its state
    /// (and carries it), a progress notification advances it, a question asked for it waits.
    pub(super) fn note(&self, cx: &Cx<'_>, msg: Message, route: &Route) -> Message {
        let states = cx.states;
        match (msg.kind(), route) {
            (Kind::Response, Route::Response(id)) => {
                let Some(token) = self.followed.lock().unwrap().requests.remove(id) else { return msg };
                self.forget_inputs(cx, id);
                let Some(meta) = states.ended(cx.owner, &token, msg.value(), cx.retention) else {
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
                    states.progress(cx.owner, &token, msg.value().get("params").unwrap_or(&Value::Null));
                }
                msg
            }
            (Kind::Request, Route::Related(id)) => {
                let mut followed = self.followed.lock().unwrap();
                let Some(token) = followed.requests.get(id).cloned() else { return msg };
                if let Some(asked) = msg.id().cloned()
                    && followed.inputs.len() < cx.max_in_flight
                {
                    followed.inputs.insert(asked, (id.clone(), token.clone()));
                    states.input_asked(cx.owner, &token);
                }
                msg
            }
            _ => msg,
        }
    }

    /// The client cancelled request `id`: its state fails (no response will say so).
    pub(super) fn cancelled(&self, cx: &Cx<'_>, id: &Id) {
        let Some(token) = self.followed.lock().unwrap().requests.remove(id) else { return };
        self.forget_inputs(cx, id);
        let cancelled = RpcError::new(jsonrpc::INTERNAL_ERROR, "cancelled by the client").response(Some(id));
        cx.states.ended(cx.owner, &token, &cancelled, cx.retention);
    }

    /// Question `id` (the client's id for it) was answered, or withdrawn by the server.
    pub(super) fn input_answered(&self, cx: &Cx<'_>, id: &Id) {
        let asked = self.followed.lock().unwrap().inputs.remove(id);
        if let Some((_, token)) = asked {
            cx.states.input_answered(cx.owner, &token);
        }
    }

    /// The questions asked for request `request`, which has ended, are answered by nobody
    /// now (those of other requests under the same token still wait).
    fn forget_inputs(&self, cx: &Cx<'_>, request: &Id) {
        let moot: Vec<ProgressToken> = {
            let mut followed = self.followed.lock().unwrap();
            let ids: Vec<Id> =
                followed.inputs.iter().filter(|(_, (r, _))| r == request).map(|(q, _)| q.clone()).collect();
            ids.iter().filter_map(|q| followed.inputs.remove(q)).map(|(_, t)| t).collect()
        };
        for token in moot {
            cx.states.input_answered(cx.owner, &token);
        }
    }

    /// The session ends: its states go.
    pub(super) fn end(&self, cx: &Cx<'_>) {
        cx.states.drop_owner(cx.owner);
    }
}

/// `progress/get`: the state of the owner's request under the token asked for.
fn serve(cx: &Cx<'_>, msg: &Value) -> Result<Value, RpcError> {
    let token = msg.pointer("/params/progressToken").and_then(ProgressToken::from_value).ok_or_else(|| {
        RpcError::new(INVALID_PARAMS, "progress/get: params.progressToken must be a string or a number")
    })?;
    cx.states.get(cx.owner, &token)
}
