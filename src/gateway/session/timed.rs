//! A session's requests, counted and timed: every message for the client passes through
//! [`TimedSink`] (the session's sink, wrapped), so a request's response is seen wherever it
//! is made (forwarded, answered by the gateway, a task's outcome, a modern round's end).
//! Start times are kept per request id, at most `max_in_flight` of them; one that never gets
//! a response (cancelled, the session ended) is dropped uncounted.

use crate::jsonrpc::{Id, Message, Method};
use crate::locks::Mutex;
use crate::metrics::{UpstreamMetrics, method_index, outcome_index};
use crate::upstream::client::{ClientSink, Route};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

pub(super) struct TimedSink {
    inner: Arc<dyn ClientSink>,
    metrics: Arc<UpstreamMetrics>,
    started: Mutex<HashMap<Id, (u8, Instant)>>,
    max: usize,
}

impl TimedSink {
    pub(super) fn new(inner: Arc<dyn ClientSink>, metrics: Arc<UpstreamMetrics>, max: usize) -> Arc<TimedSink> {
        Arc::new(TimedSink { inner, metrics, started: Mutex::new(HashMap::new()), max })
    }

    /// Client request `id`, of method `method`, arrived now.
    pub(super) fn started(&self, id: &Id, method: Method) {
        let mut started = self.started.lock().unwrap();
        if started.len() < self.max {
            started.insert(id.clone(), (method_index(method), Instant::now()));
        }
    }
}

impl ClientSink for TimedSink {
    fn deliver(&self, msg: Message, route: Route) {
        if let Route::Response(id) = &route {
            let started = self.started.lock().unwrap().remove(id);
            if let Some((method, at)) = started {
                let code = msg.is_error().then(|| msg.value().pointer("/error/code").and_then(Value::as_i64));
                let outcome = outcome_index(code.map(|c| c.unwrap_or(0)));
                self.metrics.answered(method, outcome, at.elapsed());
            }
        }
        self.inner.deliver(msg, route);
    }

    fn reaches_client_now(&self) -> bool {
        self.inner.reaches_client_now()
    }

    fn abandon(&self, id: &Id) {
        self.started.lock().unwrap().remove(id);
        self.inner.abandon(id);
    }

    fn discard_progress(&self, token: &crate::jsonrpc::ProgressToken) {
        self.inner.discard_progress(token);
    }
}
