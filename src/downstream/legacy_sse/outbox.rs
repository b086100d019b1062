//! The one event stream of a legacy HTTP+SSE session, as its session's [`ClientSink`]:
//! everything for the client, in order, waiting (bounded) for the stream to take it, and the
//! requests still owed a response.

use crate::jsonrpc::{Id, Message};
use crate::locks::Mutex;
use crate::upstream::client::{ClientSink, Route};
use bytes::Bytes;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::task::{Context, Poll, Waker};

/// Why a request cannot be taken.
#[derive(Debug, PartialEq)]
pub(crate) enum NotTaken {
    /// Its id is owed a response already.
    InUse,
    /// `max_in_flight` requests are owed responses.
    Busy,
    /// The stream ended.
    Closed,
}

struct State {
    queue: VecDeque<Bytes>,
    /// The bytes of the messages in `queue`.
    bytes: usize,
    /// The stream's task, waiting for the next message.
    waker: Option<Waker>,
    /// Client requests still owed a response.
    pending: HashSet<Id>,
    closed: bool,
}

pub(crate) struct Outbox {
    state: Mutex<State>,
    /// Woken when the last request owed a response gets it.
    answered: tokio::sync::Notify,
    max_events: usize,
    max_bytes: usize,
    max_pending: usize,
}

impl Outbox {
    /// At most `max_events` messages and `max_bytes` bytes wait for the stream (one message
    /// always fits an empty queue), and at most `max_pending` requests are owed responses.
    pub(crate) fn new(max_events: usize, max_bytes: usize, max_pending: usize) -> Outbox {
        Outbox {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                bytes: 0,
                waker: None,
                pending: HashSet::new(),
                closed: false,
            }),
            answered: tokio::sync::Notify::new(),
            max_events,
            max_bytes,
            max_pending,
        }
    }

    /// A client request is on its way to the session: its response is due on the stream.
    pub(crate) fn expect(&self, id: &Id) -> Result<(), NotTaken> {
        let mut st = self.state.lock().unwrap();
        if st.closed {
            return Err(NotTaken::Closed);
        }
        if st.pending.contains(id) {
            return Err(NotTaken::InUse);
        }
        if st.pending.len() >= self.max_pending {
            return Err(NotTaken::Busy);
        }
        st.pending.insert(id.clone());
        Ok(())
    }

    /// The next message for the stream; `None` once the outbox is closed and empty.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut st = self.state.lock().unwrap();
        if let Some(json) = st.queue.pop_front() {
            st.bytes -= json.len();
            return Poll::Ready(Some(json));
        }
        if st.closed {
            return Poll::Ready(None);
        }
        st.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Ends the stream once it has taken what waits; nothing more is taken or owed.
    pub(crate) fn close(&self) {
        let mut st = self.state.lock().unwrap();
        st.closed = true;
        st.pending.clear();
        self.answered.notify_waiters();
        if let Some(w) = st.waker.take() {
            w.wake();
        }
    }

    /// Requests still owed a response.
    pub(crate) fn awaiting_responses(&self) -> usize {
        self.state.lock().unwrap().pending.len()
    }

    /// Completes when no request is owed a response.
    pub(crate) async fn all_answered(&self) {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.state.lock().unwrap().pending.is_empty() {
                return;
            }
            answered.await;
        }
    }

    /// Answers every request still owed a response with `answer(id)` (a shutdown's error).
    pub(crate) fn answer_pending(&self, answer: impl Fn(&Id) -> Value) {
        let ids: Vec<Id> = self.state.lock().unwrap().pending.iter().cloned().collect();
        for id in ids {
            self.deliver(Message::made(answer(&id)), Route::Response(id));
        }
    }

    fn forget(&self, st: &mut State, id: &Id) -> bool {
        let was = st.pending.remove(id);
        if was && st.pending.is_empty() {
            self.answered.notify_waiters();
        }
        was
    }
}

impl ClientSink for Outbox {
    /// Everything goes to the one stream. A client that lets `event_buffer` messages (or
    /// `event_buffer_bytes`) pile up unread loses its stream, and with it the session: the
    /// transport has no way to resume, and dropping a message would leave a request hanging.
    fn deliver(&self, msg: Message, route: Route) {
        let json = route.stamp(msg).into_bytes();
        let mut st = self.state.lock().unwrap();
        if st.closed {
            return;
        }
        if let Route::Response(id) = &route
            && !self.forget(&mut st, id)
        {
            tracing::debug!("dropping response to {id}: no request is waiting for it");
            return;
        }
        if !st.queue.is_empty() && (st.queue.len() >= self.max_events || st.bytes + json.len() > self.max_bytes) {
            tracing::warn!(
                "legacy SSE client is not reading its stream ({} messages, {} bytes waiting; server.event_buffer, \
                 server.event_buffer_bytes): the stream is closed, which ends the session",
                st.queue.len(),
                st.bytes
            );
            st.queue.clear();
            st.bytes = 0;
            drop(st);
            self.close();
            return;
        }
        st.bytes += json.len();
        st.queue.push_back(json);
        if let Some(w) = st.waker.take() {
            w.wake();
        }
    }

    fn reaches_client_now(&self) -> bool {
        !self.state.lock().unwrap().closed
    }

    fn abandon(&self, id: &Id) {
        let mut st = self.state.lock().unwrap();
        self.forget(&mut st, id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn take(o: &Outbox) -> Poll<Option<Bytes>> {
        o.poll_take(&mut Context::from_waker(Waker::noop()))
    }

    fn msg(v: Value) -> Message {
        Message::made(v)
    }

    #[test]
    fn responses_go_out_once_and_only_when_owed() {
        let o = Outbox::new(8, 1 << 20, 2);
        let (one, two, three) = (Id::Num(1), Id::Num(2), Id::Num(3));
        assert_eq!(o.expect(&one), Ok(()));
        assert_eq!(o.expect(&one), Err(NotTaken::InUse));
        assert_eq!(o.expect(&two), Ok(()));
        assert_eq!(o.expect(&three), Err(NotTaken::Busy));
        o.deliver(msg(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), Route::Response(one.clone()));
        o.deliver(msg(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), Route::Response(one.clone()));
        o.abandon(&two);
        o.deliver(msg(json!({"jsonrpc": "2.0", "id": 2, "result": {}})), Route::Response(two));
        assert!(matches!(take(&o), Poll::Ready(Some(_))));
        assert!(take(&o).is_pending(), "one response, for the one request still owed it");
        assert_eq!(o.awaiting_responses(), 0);
    }

    #[test]
    fn a_client_that_does_not_read_loses_its_stream() {
        let o = Outbox::new(2, 1 << 20, 8);
        let note = || msg(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}));
        o.deliver(note(), Route::Unrelated);
        o.deliver(note(), Route::Unrelated);
        assert!(o.reaches_client_now());
        o.deliver(note(), Route::Unrelated);
        assert!(!o.reaches_client_now());
        assert_eq!(take(&o), Poll::Ready(None), "closed, and what waited is gone");
        assert_eq!(o.expect(&Id::Num(1)), Err(NotTaken::Closed));
    }

    #[test]
    fn one_large_message_fits_an_empty_queue_and_close_drains_first() {
        let o = Outbox::new(8, 10, 8);
        let big = msg(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"x": "0123456789"}}));
        o.deliver(big, Route::Unrelated);
        assert!(o.reaches_client_now());
        o.close();
        assert!(matches!(take(&o), Poll::Ready(Some(_))));
        assert_eq!(take(&o), Poll::Ready(None));
    }
}
