//! A legacy client's `resources/subscribe` and `resources/unsubscribe`. On a session's own
//! legacy link they pass up. On a shared link they are counted per uri, and the upstream hears
//! of a uri only for the first session to hold it and when the last lets go. On a 2026-07-28
//! link, whose era has no such requests, the uri joins or leaves the set the link listens to
//! for its sessions (`subscriptions/listen`, see `upstream::link::resource_listen`).

use super::{Dispatch, Step};
use crate::jsonrpc::{self, INVALID_PARAMS, Id, Message, Method, RpcError};
use crate::upstream::client::Route;
use crate::upstream::link::Shape;
use serde_json::{Value, json};

impl Dispatch<'_> {
    /// `resources/subscribe` or `resources/unsubscribe`.
    pub(in crate::gateway::session) async fn subscription(&self, id: Id, frame: Message) -> Result<Step, RpcError> {
        let s = self.s;
        if !self.plan.shared && !self.plan.upstream.is_modern() {
            return Ok(Step::Up(frame, Shape::AsIs));
        }
        let uri = frame.value().pointer("/params/uri").and_then(Value::as_str).map(str::to_string);
        let Some(uri) = uri else {
            return Err(RpcError::new(INVALID_PARAMS, format!("{}: params.uri must be a string", frame.method_name())));
        };
        let link = s.link().await?;
        // Decided once the upstream answered the last subscribe or unsubscribe of the uri: a
        // session that came meanwhile is not told it holds what the upstream then refused,
        // and a subscribe never overtakes the unsubscribe before it.
        let gate = link.subscription_gate(&uri);
        let _decided = gate.lock().await;
        let subscribe = frame.method() == Method::ResourcesSubscribe;
        let limit = s.gateway.limits().max_in_flight;
        let ask_upstream = if subscribe { link.subscribe(s.tag, &uri, limit)? } else { link.unsubscribe(s.tag, &uri) };
        if link.is_modern() {
            let opened = match ask_upstream {
                true => link.listen_for_resource(&uri, subscribe, limit),
                false => Ok(None),
            };
            // A subscribe waits for the listen naming its uri: an update sent after the
            // answer is not missed.
            let listening = match opened {
                Ok(Some(listen)) if subscribe => link.listening(listen).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = listening {
                if subscribe && link.unsubscribe(s.tag, &uri) {
                    let _ = link.listen_for_resource(&uri, false, limit);
                }
                return Err(e);
            }
        }
        if link.is_modern() || !ask_upstream {
            s.to_client(Message::made(jsonrpc::result_response(&id, json!({}))), Route::Response(id));
            return Ok(Step::Done);
        }
        let method = frame.method();
        let Some(msg) = s.crossing().up(frame)? else {
            return Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                "the upstream's protocol version has no such request",
            ));
        };
        let params = msg.value().get("params").cloned().unwrap_or(json!({}));
        let mut resp = match link.request(method, params).await {
            Ok(r) => r,
            Err(e) => {
                if subscribe {
                    link.unsubscribe(s.tag, &uri);
                }
                return Err(e);
            }
        };
        if subscribe && resp.get("error").is_some() {
            // Refused: the session holds nothing.
            link.unsubscribe(s.tag, &uri);
        }
        jsonrpc::set_id(&mut resp, &id);
        s.answer(id, resp, None);
        Ok(Step::Done)
    }
}
