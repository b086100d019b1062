//! The client side of `taskgate stdio`: its stdout (every message a line, through a queue
//! that never drops), and the count of its requests still waiting for an answer, by which
//! the stdin front paces its reading.

use crate::jsonrpc::{Id, Message};
use crate::transport::own_stdio::OutQueue;
use crate::upstream::client::{ClientSink, Route};
use std::collections::HashSet;
use std::sync::Arc;

/// The client side of `taskgate stdio`: everything for the client becomes a line on stdout,
/// through a queue that never drops (see [`OutQueue`] for what bounds it).
pub struct StdoutSink {
    pub out: Arc<OutQueue>,
    pub in_flight: Arc<InFlight>,
}

impl ClientSink for StdoutSink {
    fn deliver(&self, msg: Message, route: Route) {
        self.out.push(route.stamp(msg).into_bytes().into());
        // After the push: once no request is in flight, every answer is in the queue.
        if let Route::Response(id) = &route {
            self.in_flight.answered(id);
        }
    }
}

/// The client's requests not yet answered (nor cancelled by the client), so that the stdin
/// front stops reading while `max_in_flight` of them wait: a fast client is slowed down
/// rather than refused.
#[derive(Default)]
pub struct InFlight {
    st: crate::locks::Mutex<InFlightState>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct InFlightState {
    ids: HashSet<Id>,
    waiting: bool,
}

impl InFlight {
    /// A request is handed to the session.
    pub fn started(&self, id: &Id) {
        self.st.lock().unwrap().ids.insert(id.clone());
    }

    /// Its response went to the client, or the client cancelled it (then none is due).
    pub fn answered(&self, id: &Id) {
        let wake = {
            let mut st = self.st.lock().unwrap();
            st.ids.remove(id) && std::mem::take(&mut st.waiting)
        };
        if wake {
            self.changed.notify_waiters();
        }
    }

    /// Waits until fewer than `max` requests are waiting for their answers.
    pub async fn below(&self, max: usize) {
        self.wait_for(|n| n < max).await
    }

    /// Waits until every request read has been answered.
    pub async fn none(&self) {
        self.wait_for(|n| n == 0).await
    }

    async fn wait_for(&self, done: impl Fn(usize) -> bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut st = self.st.lock().unwrap();
                if done(st.ids.len()) {
                    return;
                }
                st.waiting = true;
            }
            changed.await;
        }
    }
}
