//! Resource subscriptions and list changes of legacy sessions on a 2026-07-28 link. That era
//! has no `resources/subscribe`, and sends list changes only on a listen: the link holds one
//! `subscriptions/listen` upstream naming every uri its sessions hold (`resourceSubscriptions`)
//! and, once a legacy session is on it, the list changes the server declares
//! (`toolsListChanged`, …); it opens another whenever that set changes.
//! A listen is kept until a newer one is acknowledged (then cancelled, as any abandoned
//! request is), so no update is missed in between; one the server refuses fails only the
//! subscribes waiting for it, and those served before stay served. A subscribe is answered
//! once a listen naming its uri is acknowledged. A serving listen the server ends (its
//! `notifications/cancelled`, a closed stream) is opened again a second later, while some
//! session holds a uri or list changes are asked for.
//! The notifications the listen carries go where a legacy link's would: an update to the
//! sessions holding the uri on a shared link, a list change to every session; all to the one
//! session of an own link (`share::unrelated_targets`).

use super::types::*;
use crate::jsonrpc::{self, GATEWAY_BUSY, INTERNAL_ERROR, Id, Method, REQUEST_TIMEOUT, RpcError};
use crate::mcp::modern::client::ListenFilter;
use serde_json::{Value, json};
use std::sync::Arc;

impl ResourceListen {
    /// Whether list changes are asked for.
    fn asks_lists(&self) -> bool {
        self.lists != ListenFilter::default()
    }

    /// Whether a listen is wanted at all: some uri held, or list changes asked for.
    fn wanted(&self) -> bool {
        !self.uris.is_empty() || self.asks_lists()
    }

    /// What a listen opened now names.
    fn filter(&self) -> ListenFilter {
        ListenFilter { uris: self.uris.iter().cloned().collect(), ..self.lists.clone() }
    }
}

impl Link {
    /// A legacy session is on the link: from now on the link's listen also asks for the list
    /// changes the server declares (`capabilities`, its discover's), which legacy clients
    /// get as they would from a legacy server. Once per link; nothing if it declares none.
    pub fn listen_for_list_changes(self: &Arc<Self>, capabilities: &Value) {
        let all = ListenFilter { tools: true, prompts: true, resources: true, ..ListenFilter::default() };
        let lists = all.granted(capabilities);
        let mut st = self.core.state.lock().unwrap();
        let listen = &mut st.resource_listen;
        if lists == ListenFilter::default() || listen.lists == lists {
            return;
        }
        listen.lists = lists;
        self.open_resource_listen(listen);
    }

    /// `uri` is now held (`held`), or no longer held by any session of the link: a listen is
    /// opened naming the new set (its number is returned, for [`Link::listening`]), or all
    /// are closed when the set is empty. An own link holds at most `limit` uris (-32004 past
    /// it); a shared link counts per session (`Link::subscribe`).
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
        if !listen.wanted() {
            for o in std::mem::take(&mut listen.open).into_values() {
                o.task.abort();
            }
            listen.serving = None;
            return Ok(None);
        }
        Ok(Some(self.open_resource_listen(listen)))
    }

    /// Opens a listen for the current set, under the link's lock (so that listens are
    /// numbered in the order of the sets they name). Past [`MAX_UNANSWERED`] listens waiting
    /// for an answer, the oldest goes: a newer one names what it named, if still held.
    fn open_resource_listen(self: &Arc<Self>, listen: &mut ResourceListen) -> u64 {
        let unanswered: Vec<u64> = listen.open.keys().copied().filter(|n| Some(*n) != listen.serving).collect();
        if unanswered.len() >= MAX_UNANSWERED
            && let Some(o) = listen.open.remove(&unanswered[0])
        {
            o.task.abort();
        }
        listen.opened += 1;
        let n = listen.opened;
        let task = tokio::spawn(self.clone().hold_resource_listen(listen.filter(), n));
        listen.open.insert(n, OpenListen { task: task.abort_handle(), up_id: None, lists: listen.asks_lists() });
        n
    }

    /// Waits (at most `request_timeout`) until listen number `listen`, or a newer one, is
    /// acknowledged: an error if the upstream refused it, or answered nothing in time.
    pub async fn listening(&self, listen: u64) -> Result<(), RpcError> {
        let mut outcomes = self.core.state.lock().unwrap().resource_listen.outcomes.subscribe();
        let decided = |o: &Outcomes| o.acknowledged >= listen || o.refused.contains_key(&listen);
        let outcome = tokio::time::timeout(self.request_timeout, outcomes.wait_for(decided)).await;
        match outcome {
            Ok(Ok(o)) => match o.refused.get(&listen).filter(|_| o.acknowledged < listen) {
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

    /// Listen number `n`, for `filter`, held until a newer one is acknowledged (then aborted:
    /// its request is abandoned, and the upstream told) or the link closes. One that served
    /// and ended is opened again, and so is the newest naming the list changes that failed
    /// (refused, not sent): nothing else would ask for them again. Each time after a longer
    /// wait, while they keep ending within [`STEADY`].
    async fn hold_resource_listen(self: Arc<Self>, filter: ListenFilter, n: u64) {
        let count = filter.uris.len();
        let listen =
            jsonrpc::request(&Id::Num(0), Method::SubscriptionsListen, json!({"notifications": filter.to_value()}));
        let mut up_id = None;
        let registered = |id| {
            up_id = Some(id);
            if let Some(open) = self.core.state.lock().unwrap().resource_listen.open.get_mut(&n) {
                open.up_id = Some(id);
            }
        };
        let started = tokio::time::Instant::now();
        let end = self.internal_request(listen, None, None, registered).await;
        let why = match end {
            Ok(end) => match end.get("error") {
                Some(e) => {
                    tracing::warn!(upstream = %self.core.upstream, "the subscriptions/listen for its legacy clients ({count} resource subscriptions) was refused or ended: {e}");
                    e.get("message").and_then(|m| m.as_str()).unwrap_or("an error").to_string()
                }
                None => {
                    tracing::info!(upstream = %self.core.upstream, "the upstream ended the subscriptions/listen for its legacy clients ({count} resource subscriptions)");
                    "it ended the listen".to_string()
                }
            },
            Err(e) => e.message,
        };
        if let Some(id) = up_id {
            self.core.resource_listen_settled(id, Some(why));
        }
        let wait = {
            let mut st = self.core.state.lock().unwrap();
            let listen = &mut st.resource_listen;
            let lists = listen.open.remove(&n).is_some_and(|o| o.lists);
            let served = listen.serving == Some(n);
            if served {
                listen.serving = None;
            }
            let newest = listen.open.keys().all(|m| *m < n);
            if !(served || (newest && lists)) {
                return;
            }
            listen.backoff = if started.elapsed() >= STEADY || listen.backoff.is_zero() {
                REOPEN_AFTER
            } else {
                (listen.backoff * 2).min(STEADY)
            };
            listen.backoff
        };
        if self.close_reason().is_some() {
            return;
        }
        // Nothing replaced it: what the sessions want is listened to again.
        tokio::time::sleep(wait).await;
        let mut st = self.core.state.lock().unwrap();
        let listen = &mut st.resource_listen;
        if listen.open.is_empty() && listen.wanted() {
            self.open_resource_listen(listen);
        }
    }
}

/// Listens waiting for the server's answer at once, per link.
const MAX_UNANSWERED: usize = 4;

/// How long after a listen ended the next is opened, at first (a server that ends every
/// listen at once is asked at most this often, then ever less often).
const REOPEN_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A listen that lasted this long ended for a reason of its own: the next wait is the first
/// again. Also the longest wait.
const STEADY: std::time::Duration = std::time::Duration::from_secs(60);

/// Refusals remembered for the subscribes waiting on them.
const REFUSALS_KEPT: usize = 16;

impl LinkState {
    /// The requests in flight that count against `max_in_flight`: all but the link's own
    /// listens (at most five).
    pub(super) fn counted_in_flight(&self) -> usize {
        let own = self.resource_listen.open.values().filter(|o| o.up_id.is_some()).count();
        self.pending.len().saturating_sub(own)
    }
}

impl LinkCore {
    /// Whether the link's own listen hears `method` (a list change), so that a client's
    /// listen need not pass it on to the other sessions as well.
    pub(super) fn hears_list_change(&self, method: Method) -> bool {
        let st = self.state.lock().unwrap();
        let listen = &st.resource_listen;
        let serving = listen.serving.and_then(|n| listen.open.get(&n));
        serving.is_some_and(|o| o.lists) && listen.lists.carries(method, None)
    }

    /// The upstream acknowledged (`refused`: `None`) or refused (or ended) the listen it
    /// knows as `up_id`. Acknowledged, it serves from now on, and the older ones go; refused
    /// before that, the subscribes waiting on it are told why.
    pub(super) fn resource_listen_settled(&self, up_id: i64, refused: Option<String>) {
        let mut st = self.state.lock().unwrap();
        let listen = &mut st.resource_listen;
        let Some(n) = listen.open.iter().find(|(_, o)| o.up_id == Some(up_id)).map(|(n, _)| *n) else { return };
        if listen.outcomes.borrow().acknowledged >= n {
            return;
        }
        match refused {
            None => {
                let older: Vec<u64> = listen.open.range(..n).map(|(m, _)| *m).collect();
                for m in older {
                    if let Some(o) = listen.open.remove(&m) {
                        o.task.abort();
                    }
                }
                listen.serving = Some(n);
                listen.outcomes.send_modify(|o| o.acknowledged = n);
            }
            Some(why) => listen.outcomes.send_modify(|o| {
                o.refused.insert(n, why);
                while o.refused.len() > REFUSALS_KEPT {
                    o.refused.pop_first();
                }
            }),
        }
    }
}
