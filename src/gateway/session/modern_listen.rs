//! `subscriptions/listen` for a modern client in front of a legacy upstream: the one
//! long-lived request of the 2026-07-28 era, which carries the notifications that belong to
//! no request (list changes, resource updates) to a client that asked for them.
//!
//! The request's session stays open as long as its stream (closing the stream, or
//! `notifications/cancelled` over stdio, ends it). It first acknowledges what it will carry
//! (`notifications/subscriptions/acknowledged`: what the client asked for and the upstream
//! can send), then relays each matching notification tagged with `_meta`
//! `io.modelcontextprotocol/subscriptionId` (the request's id). Resource updates are
//! subscribed to upstream through the shared link, which asks the upstream once per uri and
//! lets go when the last session holding it ends. A modern upstream serves the request itself.

use super::*;
use crate::mcp::modern::client::{self as modern, ListenFilter};

impl Session {
    /// The client's `subscriptions/listen` (request `id`).
    pub(super) async fn listen(&self, id: Id, frame: &Message) -> Result<(), RpcError> {
        let Some(client) = &self.modern else { return Ok(()) };
        let limit = self.gateway.limits().max_in_flight;
        let asked = ListenFilter::read(frame.value().get("params"), limit)?;
        let task_ids = frame.value().pointer("/params/notifications/taskIds").is_some();
        if task_ids && !self.declared_extension() {
            // Task notifications are the extension's: a client that did not declare it.
            let required = json!({"extensions": {crate::mcp::task_dialects::EXTENSION: {}}});
            return Err(crate::mcp::modern::ModernError::MissingCapability { required }.to_rpc());
        }
        let link = self.link().await?;
        let caps = self.state.lock().unwrap().upstream_caps.clone();
        let mut granted = asked.granted(&caps);
        let mut held = Vec::new();
        for uri in std::mem::take(&mut granted.uris) {
            if self.subscribe_uri(&link, &uri).await {
                held.push(uri);
            }
        }
        granted.uris = held;
        *client.listen.lock().unwrap() = Some((id.clone(), granted.clone()));
        let ack = modern::acknowledged(&granted, &id.to_value());
        self.sink.deliver(Message::made(ack), Route::Related(id));
        Ok(())
    }

    /// Holds `uri`'s updates for this session on the shared link: the upstream is asked
    /// only when no other session holds them. `false` if it refused, or past the limit.
    async fn subscribe_uri(&self, link: &Arc<Link>, uri: &str) -> bool {
        let gate = link.subscription_gate(uri);
        let _decided = gate.lock().await;
        match link.subscribe(self.tag, uri, self.gateway.limits().max_in_flight) {
            Err(_) => false,
            Ok(false) => true,
            Ok(true) => match link.request("resources/subscribe", json!({"uri": uri})).await {
                Ok(r) if r.get("error").is_none() => true,
                _ => {
                    link.unsubscribe(self.tag, uri);
                    false
                }
            },
        }
    }

    /// The client's `notifications/cancelled` of its listen stream: the stream ends (`true`),
    /// with the session, and what it held upstream goes.
    pub(super) fn end_listen(&self, msg: &Message) -> bool {
        let Some(client) = &self.modern else { return false };
        let Some(id) = msg.request_id_param() else { return false };
        let listening = client.listen.lock().unwrap().as_ref().is_some_and(|(l, _)| *l == id);
        if listening {
            *client.listen.lock().unwrap() = None;
            self.sink.abandon(&id);
        }
        listening
    }

    /// The shared link is lost: a listen stream ends, saying so (the one purpose for which
    /// a 2026-07-28 server sends `notifications/cancelled`), so that the client listens again.
    pub(super) fn listen_lost(&self) {
        let Some(client) = &self.modern else { return };
        let Some((id, _)) = client.listen.lock().unwrap().take() else { return };
        let note = jsonrpc::notification(
            "notifications/cancelled",
            json!({"requestId": id.to_value(), "reason": "the gateway lost its upstream; listen again"}),
        );
        self.sink.deliver(Message::made(note), Route::Related(id.clone()));
        self.sink.abandon(&id);
    }
}
