//! Resource subscriptions of legacy sessions on a 2026-07-28 link. That era has no
//! `resources/subscribe`: the link holds one `subscriptions/listen` upstream naming every uri
//! its sessions hold (`resourceSubscriptions`), and opens it again whenever that set changes
//! (the old one is cancelled as any abandoned request is). A subscribe is answered once the
//! listen naming its uri is acknowledged, so that no update sent after the answer is missed.
//! The `notifications/resources/updated` the listen carries go where a legacy link's would:
//! to the sessions holding the uri on a shared link, to the one session of an own link
//! (`share::unrelated_targets`).

use super::types::*;
use crate::jsonrpc::{self, GATEWAY_BUSY, INTERNAL_ERROR, Id, Method, REQUEST_TIMEOUT, RpcError};
use serde_json::json;
use std::sync::Arc;

impl Link {
    /// `uri` is now held (`held`), or no longer held by any session of the link: the listen
    /// upstream is opened again naming the new set (its number is returned, for
    /// [`Link::listening`]), or closed when the set is empty. An own link holds at most
    /// `limit` uris (-32004 past it); a shared link counts per session (`Link::subscribe`).
    pub fn listen_for_resource(self: &Arc<Self>, uri: &str, held: bool, limit: usize) -> Result<Option<u64>, RpcError> {
        let mut st = self.core.state.lock().unwrap();
        let listen = &mut st.resource_listen;
        if held && !self.core.shared && !listen.uris.contains(uri) && listen.uris.len() >= limit {
            return Err(RpcError::new(
                GATEWAY_BUSY,
                format!("this session holds {limit} resource subscriptions already (server.max_in_flight)"),
            ));
        }
        let changed = if held { listen.uris.insert(uri.to_string()) } else { listen.uris.remove(uri) };
        if !changed {
            return Ok(None);
        }
        if let Some(old) = listen.stream.take() {
            old.abort();
        }
        if listen.uris.is_empty() {
            return Ok(None);
        }
        listen.opened += 1;
        let uris: Vec<String> = listen.uris.iter().cloned().collect();
        // Spawned under the lock, so that the newest set is the one whose listen is kept.
        listen.stream = Some(tokio::spawn(self.clone().hold_resource_listen(uris, listen.opened)).abort_handle());
        Ok(Some(listen.opened))
    }

    /// Waits (at most `request_timeout`) until listen number `listen`, or one after it, is
    /// acknowledged: an error if the upstream refused it or never answered.
    pub async fn listening(&self, listen: u64) -> Result<(), RpcError> {
        let mut settled = self.core.state.lock().unwrap().resource_listen.settled.subscribe();
        let outcome = tokio::time::timeout(self.request_timeout, settled.wait_for(|s| s.listen >= listen)).await;
        match outcome {
            Ok(Ok(s)) => match &s.refused {
                None => Ok(()),
                Some(why) => Err(RpcError::new(
                    INTERNAL_ERROR,
                    format!("the upstream refused the subscriptions/listen that holds resource subscriptions: {why}"),
                )),
            },
            Ok(Err(_)) => {
                Err(self.core.closed_error(&self.close_reason().unwrap_or(super::error::CloseReason::SessionEnded)))
            }
            Err(_) => Err(RpcError::new(
                REQUEST_TIMEOUT,
                format!(
                    "the upstream did not acknowledge the subscriptions/listen that holds resource subscriptions within request_timeout ({}s)",
                    self.request_timeout.as_secs_f64()
                ),
            )),
        }
    }

    /// Listen number `n`, for `uris`, held until it is replaced (aborted: its request is
    /// abandoned, and the upstream told) or the link closes.
    async fn hold_resource_listen(self: Arc<Self>, uris: Vec<String>, n: u64) {
        let count = uris.len();
        let listen = jsonrpc::request(
            &Id::Num(0),
            Method::SubscriptionsListen,
            json!({"notifications": {"resourceSubscriptions": uris}}),
        );
        let mut up_id = None;
        let registered = |id| {
            up_id = Some(id);
            self.core.state.lock().unwrap().resource_listen.current = Some((id, n));
        };
        let end = self.internal_request(listen, None, None, registered).await;
        let why = match end {
            Ok(end) => match end.get("error") {
                Some(e) => {
                    tracing::warn!(upstream = %self.core.upstream, "the upstream refused the subscriptions/listen holding its legacy clients' {count} resource subscriptions: {e}");
                    e.get("message").and_then(|m| m.as_str()).unwrap_or("an error").to_string()
                }
                None => {
                    tracing::info!(upstream = %self.core.upstream, "the upstream ended the subscriptions/listen holding its legacy clients' {count} resource subscriptions");
                    "it ended the listen".to_string()
                }
            },
            Err(e) => e.message,
        };
        // A listen that ends before its acknowledgement was refused; after it, this changes nothing.
        if let Some(id) = up_id {
            self.core.resource_listen_settled(id, Some(why));
        }
    }
}

impl LinkCore {
    /// The upstream acknowledged (`refused`: `None`) or refused the listen it knows as
    /// `up_id`. Only the newest listen's outcome counts, and only its first.
    pub(super) fn resource_listen_settled(&self, up_id: i64, refused: Option<String>) {
        let st = self.state.lock().unwrap();
        let listen = &st.resource_listen;
        if let Some((id, n)) = listen.current
            && id == up_id
        {
            listen.settled.send_if_modified(|s| {
                let newer = s.listen < n;
                if newer {
                    *s = Settled { listen: n, refused };
                }
                newer
            });
        }
    }
}
