//! The `subscriptions/listen` streams of 2026-07-28 clients open at a front. A listen lasts
//! as long as its client wants, so a shutdown that waited for it would wait the whole
//! `drain_timeout`; instead each ends at once with the answer that says the server ended it
//! on purpose (`Session::end_listen_for_shutdown`). One entry per listen request in flight,
//! gone with it: bounded by the front's requests in flight. Each client (a principal, else
//! an address) holds at most `max_listens_per_client` of them: a listen holds a connection,
//! and one client must not take every descriptor.

use crate::gateway::session::Session;
use crate::locks::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

pub(crate) struct OpenListens {
    st: Mutex<State>,
    /// The listens each client holds (at most `max_connections` in all).
    per_client: Arc<crate::client_slots::ClientSlots>,
}

#[derive(Default)]
struct State {
    next: u64,
    open: HashMap<u64, Weak<Session>>,
    /// Shutdown has begun: a listen that opens now ends at once.
    ending: bool,
}

/// A listen's place among the open ones, until dropped.
pub(crate) struct Held(Weak<OpenListens>, u64);

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(l) = self.0.upgrade() {
            l.st.lock().unwrap().open.remove(&self.1);
        }
    }
}

impl OpenListens {
    pub(crate) fn new(max: usize, per_client: usize) -> Arc<OpenListens> {
        Arc::new(OpenListens {
            st: Mutex::default(),
            per_client: crate::client_slots::ClientSlots::new(max, per_client),
        })
    }

    /// A place for a listen of `client`, held while its stream is open; the error names the
    /// cap its client reached.
    pub(crate) fn reserve(&self, client: &str) -> Result<crate::client_slots::Slot, crate::jsonrpc::RpcError> {
        use crate::client_slots::Full;
        self.per_client.take(Some(client)).map_err(|full| {
            let why = match full {
                Full::Client(n) => {
                    format!("too many listen streams for this client (limit {n}, server.max_listens_per_client)")
                }
                Full::All(n) => format!("too many listen streams open (limit {n}, server.max_connections)"),
            };
            crate::jsonrpc::RpcError::new(crate::jsonrpc::GATEWAY_BUSY, why)
        })
    }

    /// `session` serves a listen that is open now (acknowledged, or still being answered):
    /// it is ended at shutdown while the returned place is held. Once shutdown has begun, it
    /// is ended here and then (`None`).
    pub(crate) fn hold(self: &Arc<Self>, session: &Arc<Session>) -> Option<Held> {
        {
            let mut st = self.st.lock().unwrap();
            if !st.ending {
                st.next += 1;
                let key = st.next;
                st.open.insert(key, Arc::downgrade(session));
                return Some(Held(Arc::downgrade(self), key));
            }
        }
        session.end_listen_for_shutdown();
        None
    }

    /// Shutdown: every open listen ends now with its answer, and any that opens later at
    /// once. Returns how many were ended.
    pub(crate) fn end_all(&self) -> usize {
        let open: Vec<Weak<Session>> = {
            let mut st = self.st.lock().unwrap();
            st.ending = true;
            st.open.drain().map(|(_, s)| s).collect()
        };
        open.iter().filter_map(Weak::upgrade).filter(|s| s.end_listen_for_shutdown()).count()
    }
}
