//! The progress-state proposal for one session: each request the client sends with a
//! `progressToken` (but a task's or an operation's, which have their own state) is followed
//! in the gateway's [`ProgressStates`](crate::tasks::progress_state) (its progress, the
//! questions the upstream asks for it, and its end), `progress/get` reads it, and the
//! request's result carries it as `_meta.progress`.

use super::super::Session;
use super::state::ProgressGet;
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Kind, Message, Method, ProgressToken, RpcError};
use crate::upstream::client::Route;
use serde_json::{Value, json};

impl ProgressGet {
    /// `progress/get` is answered; another request with a progress token is followed.
    pub(super) fn request(&self, s: &Session, id: &Id, frame: &Message) -> Option<Result<(), RpcError>> {
        if frame.method() == Method::ProgressGet {
            return Some(serve(s, id.clone(), frame.value()));
        }
        // A task's progress is its task's (`tasks/get`), not the request's.
        if frame.task_param().is_some() || frame.method().is_task_request() {
            return None;
        }
        let token = frame.progress_token()?;
        let mut followed = self.followed.lock().unwrap();
        // An id already in flight is the link's to refuse: its state stays the first's.
        if !followed.requests.contains_key(id)
            && followed.requests.len() < s.gateway.limits().max_in_flight
            && s.gateway.progress_states.begin(&s.owner_key, &token, s.upstream.tasks.max_tasks_per_owner)
        {
            followed.requests.insert(id.clone(), token);
        }
        None
    }

    /// What a message to the client changes: a followed request's response ends its state
    /// (and carries it), a progress notification advances it, a question asked for it waits.
    pub(super) fn note(&self, s: &Session, msg: Message, route: &Route) -> Message {
        let states = &s.gateway.progress_states;
        match (msg.kind(), route) {
            (Kind::Response, Route::Response(id)) => {
                let Some(token) = self.followed.lock().unwrap().requests.remove(id) else { return msg };
                self.forget_inputs(s, id);
                let Some(meta) = states.ended(&s.owner_key, &token, msg.value(), s.upstream.dialects.retention) else {
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
                    states.progress(&s.owner_key, &token, msg.value().get("params").unwrap_or(&Value::Null));
                }
                msg
            }
            (Kind::Request, Route::Related(id)) => {
                let mut followed = self.followed.lock().unwrap();
                let Some(token) = followed.requests.get(id).cloned() else { return msg };
                if let Some(asked) = msg.id().cloned()
                    && followed.inputs.len() < s.gateway.limits().max_in_flight
                {
                    followed.inputs.insert(asked, (id.clone(), token.clone()));
                    states.input_asked(&s.owner_key, &token);
                }
                msg
            }
            _ => msg,
        }
    }

    /// The client cancelled request `id`: its state fails (no response will say so).
    pub(super) fn cancelled(&self, s: &Session, id: &Id) {
        let Some(token) = self.followed.lock().unwrap().requests.remove(id) else { return };
        self.forget_inputs(s, id);
        let cancelled = RpcError::new(jsonrpc::INTERNAL_ERROR, "cancelled by the client").response(Some(id));
        s.gateway.progress_states.ended(&s.owner_key, &token, &cancelled, s.upstream.dialects.retention);
    }

    /// Question `id` (the client's id for it) was answered, or withdrawn by the server.
    pub(super) fn input_answered(&self, s: &Session, id: &Id) {
        let asked = self.followed.lock().unwrap().inputs.remove(id);
        if let Some((_, token)) = asked {
            s.gateway.progress_states.input_answered(&s.owner_key, &token);
        }
    }

    /// The questions asked for request `request`, which has ended, are answered by nobody
    /// now (those of other requests under the same token still wait).
    fn forget_inputs(&self, s: &Session, request: &Id) {
        let moot: Vec<ProgressToken> = {
            let mut followed = self.followed.lock().unwrap();
            let ids: Vec<Id> =
                followed.inputs.iter().filter(|(_, (r, _))| r == request).map(|(q, _)| q.clone()).collect();
            ids.iter().filter_map(|q| followed.inputs.remove(q)).map(|(_, t)| t).collect()
        };
        for token in moot {
            s.gateway.progress_states.input_answered(&s.owner_key, &token);
        }
    }
}

/// `progress/get`: the state of the owner's request under the token asked for.
fn serve(s: &Session, id: Id, msg: &Value) -> Result<(), RpcError> {
    let token = msg.pointer("/params/progressToken").and_then(ProgressToken::from_value).ok_or_else(|| {
        RpcError::new(INVALID_PARAMS, "progress/get: params.progressToken must be a string or a number")
    })?;
    let result = s.gateway.progress_states.get(&s.owner_key, &token)?;
    s.to_client(Message::made(jsonrpc::result_response(&id, result)), Route::Response(id));
    Ok(())
}
