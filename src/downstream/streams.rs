//! The SSE streams of one downstream HTTP session: which stream each message goes to, the
//! bounded event buffer behind `Last-Event-ID` replay, and the standalone GET stream.
//!
//! Every event id is `<stream>-<seq>`: the stream it belongs to and a session-wide sequence
//! number, so a resuming client gets exactly the rest of the stream it lost.

use crate::gateway::client::{ClientSink, Route};
use crate::jsonrpc::{Id, Kind, Message};
use bytes::Bytes;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Instant;
use tokio::sync::mpsc;

/// One message on its way to the client.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub stream: u64,
    pub seq: u64,
    pub json: Bytes,
    pub is_response: bool,
}

impl Outgoing {
    pub fn event_id(&self) -> String {
        format!("{}-{}", self.stream, self.seq)
    }
}

struct Stream {
    /// The live connection, if the client is attached.
    tx: Option<mpsc::Sender<Outgoing>>,
    /// Responses this stream still owes; 0 for the GET stream.
    awaiting: usize,
    /// The POST accepts only `application/json`: the stream carries its responses and
    /// nothing else (what would have gone with them goes where unrelated messages go).
    json_only: bool,
}

struct Buffered {
    stream: u64,
    seq: u64,
    json: Bytes,
    is_response: bool,
}

struct State {
    next_stream: u64,
    next_seq: u64,
    streams: HashMap<u64, Stream>,
    request_stream: HashMap<Id, u64>,
    buffer: VecDeque<Buffered>,
    /// The bytes of the events in `buffer`.
    buffer_bytes: usize,
    /// Per stream, the newest of its events evicted from `buffer`: a client that saw less
    /// than that cannot resume without a gap.
    evicted: HashMap<u64, u64>,
    /// When `evicted` grew too large it was cleared, remembering the newest evicted event of
    /// any stream: resuming from before it is treated as a gap.
    evicted_floor: u64,
    get_stream: Option<u64>,
    /// Unrelated messages that found no open stream; flushed to the next GET stream.
    undelivered: VecDeque<Bytes>,
    undelivered_bytes: usize,
    last_activity: Instant,
    closed: bool,
}

/// Streams whose evictions are remembered one by one (see `State::evicted`).
const MAX_EVICTED_STREAMS: usize = 1024;

pub struct Streams {
    state: Mutex<State>,
    /// Woken when the last request owed a response gets it (see [`Streams::all_answered`]).
    answered: tokio::sync::Notify,
    buffer_limit: usize,
    buffer_bytes_limit: usize,
    channel_capacity: usize,
}

/// What a resuming GET gets: the events it missed, then the live stream (if still open).
pub struct Attached {
    pub replay: Vec<Outgoing>,
    pub rx: Option<mpsc::Receiver<Outgoing>>,
}

impl Streams {
    /// At most `buffer_limit` events kept for replay, and as many waiting for a GET stream,
    /// each bounded by the default of `[server] event_buffer_bytes` too.
    #[cfg(test)]
    pub fn new(buffer_limit: usize) -> Streams {
        Self::with_limits(buffer_limit, crate::config::ServerConfig::default().event_buffer_bytes)
    }

    /// At most `buffer_limit` events and `bytes_limit` bytes kept for replay; the same bounds
    /// apply to the messages waiting for a GET stream. The oldest go first.
    pub fn with_limits(buffer_limit: usize, bytes_limit: usize) -> Streams {
        Streams {
            answered: tokio::sync::Notify::new(),
            state: Mutex::new(State {
                next_stream: 1,
                next_seq: 1,
                streams: HashMap::new(),
                request_stream: HashMap::new(),
                buffer: VecDeque::new(),
                buffer_bytes: 0,
                evicted: HashMap::new(),
                evicted_floor: 0,
                get_stream: None,
                undelivered: VecDeque::new(),
                undelivered_bytes: 0,
                last_activity: Instant::now(),
                closed: false,
            }),
            buffer_limit,
            buffer_bytes_limit: bytes_limit,
            channel_capacity: buffer_limit.clamp(16, 1024),
        }
    }

    /// Opens the stream of a POST carrying `requests`. Fails with the id already in use if a
    /// request id is still awaiting its response (or appears twice).
    pub fn open_post(&self, requests: &[Id]) -> Result<(u64, mpsc::Receiver<Outgoing>), Id> {
        self.open_post_as(requests, false)
    }

    /// Like `open_post`, for a POST that accepts only `application/json`: the stream carries
    /// nothing but responses; progress and server requests sent while serving them go where
    /// unrelated messages go (the GET stream, or wait for it).
    pub fn open_json_post(&self, requests: &[Id]) -> Result<(u64, mpsc::Receiver<Outgoing>), Id> {
        self.open_post_as(requests, true)
    }

    fn open_post_as(&self, requests: &[Id], json_only: bool) -> Result<(u64, mpsc::Receiver<Outgoing>), Id> {
        let (opened, accepted) = self.open_batch(requests, json_only);
        if let Some(i) = accepted.iter().position(|ok| !ok) {
            if let Some((sid, _)) = opened {
                self.abandon(sid);
            }
            return Err(requests[i].clone());
        }
        Ok(opened.expect("at least one request was accepted"))
    }

    /// Opens the stream of a batch: each request id is accepted unless it is awaiting its
    /// response already or appeared earlier in the batch (`accepted`, in order). No stream
    /// is opened when none is accepted. The stream ends once every accepted request has its
    /// response; its channel has room for all of them, so a response never finds it full.
    /// `json_only` as in [`Streams::open_json_post`].
    pub fn open_batch(&self, requests: &[Id], json_only: bool) -> (Option<(u64, mpsc::Receiver<Outgoing>)>, Vec<bool>) {
        let mut st = self.state.lock().unwrap();
        let mut seen = std::collections::HashSet::new();
        let accepted: Vec<bool> =
            requests.iter().map(|id| !st.request_stream.contains_key(id) && seen.insert(id)).collect();
        let n = accepted.iter().filter(|ok| **ok).count();
        if n == 0 {
            return (None, accepted);
        }
        let sid = st.next_stream;
        st.next_stream += 1;
        let (tx, rx) = mpsc::channel(self.channel_capacity + n);
        st.streams.insert(sid, Stream { tx: Some(tx), awaiting: n, json_only });
        for (id, _) in requests.iter().zip(&accepted).filter(|(_, ok)| **ok) {
            st.request_stream.insert(id.clone(), sid);
        }
        st.last_activity = Instant::now();
        (Some((sid, rx)), accepted)
    }

    /// Forgets a POST stream whose requests were never sent.
    fn abandon(&self, sid: u64) {
        let mut st = self.state.lock().unwrap();
        st.streams.remove(&sid);
        st.request_stream.retain(|_, s| *s != sid);
    }

    /// Opens the standalone GET stream, replacing an earlier one, and hands it what waited.
    pub fn open_get(&self) -> Attached {
        let mut st = self.state.lock().unwrap();
        let sid = st.next_stream;
        st.next_stream += 1;
        if let Some(old) = st.get_stream.replace(sid) {
            st.streams.remove(&old);
        }
        let (tx, rx) = mpsc::channel(self.channel_capacity);
        st.streams.insert(sid, Stream { tx: None, awaiting: 0, json_only: false });
        let waiting: Vec<Bytes> = st.undelivered.drain(..).collect();
        st.undelivered_bytes = 0;
        let replay = waiting.into_iter().map(|json| self.buffer_event(&mut st, sid, json, false)).collect();
        st.streams.get_mut(&sid).expect("just inserted").tx = Some(tx);
        st.last_activity = Instant::now();
        Attached { replay, rx: Some(rx) }
    }

    /// Resumes the stream named in `last_event_id`: replays what followed it, and stays
    /// attached if the stream is still open. `None` if the id is not one of ours.
    pub fn resume(&self, last_event_id: &str) -> Option<Attached> {
        let (stream, seq) = last_event_id.split_once('-')?;
        let (stream, seq): (u64, u64) = (stream.parse().ok()?, seq.parse().ok()?);
        let mut st = self.state.lock().unwrap();
        if stream >= st.next_stream {
            return None;
        }
        let newest_lost = st.evicted.get(&stream).copied().unwrap_or(0).max(st.evicted_floor);
        if newest_lost > seq {
            tracing::debug!("Last-Event-ID {last_event_id} is older than the replay buffer keeps");
            return None;
        }
        st.last_activity = Instant::now();
        let replay = st
            .buffer
            .iter()
            .filter(|b| b.stream == stream && b.seq > seq)
            .map(|b| Outgoing { stream, seq: b.seq, json: b.json.clone(), is_response: b.is_response })
            .collect();
        let rx = st.streams.get_mut(&stream).map(|s| {
            let (tx, rx) = mpsc::channel(self.channel_capacity);
            s.tx = Some(tx);
            rx
        });
        Some(Attached { replay, rx })
    }

    fn buffer_event(&self, st: &mut State, stream: u64, json: Bytes, is_response: bool) -> Outgoing {
        let seq = st.next_seq;
        st.next_seq += 1;
        st.buffer_bytes += json.len();
        st.buffer.push_back(Buffered { stream, seq, json: json.clone(), is_response });
        while st.buffer.len() > self.buffer_limit || st.buffer_bytes > self.buffer_bytes_limit {
            let Some(old) = st.buffer.pop_front() else { break };
            st.buffer_bytes -= old.json.len();
            if st.evicted.len() >= MAX_EVICTED_STREAMS && !st.evicted.contains_key(&old.stream) {
                st.evicted_floor = st.evicted.values().copied().max().unwrap_or(0).max(st.evicted_floor);
                st.evicted.clear();
            }
            st.evicted.insert(old.stream, old.seq);
        }
        Outgoing { stream, seq, json, is_response }
    }

    /// Puts an event on a stream: into the replay buffer, and onto the live connection if
    /// there is one. A connection that cannot keep up is dropped (the client can resume).
    fn push(&self, st: &mut State, stream: u64, json: Bytes, is_response: bool) {
        let ev = self.buffer_event(st, stream, json, is_response);
        let Some(s) = st.streams.get_mut(&stream) else { return };
        if let Some(tx) = &s.tx
            && tx.try_send(ev).is_err()
        {
            s.tx = None;
        }
        if is_response {
            s.awaiting = s.awaiting.saturating_sub(1);
            if s.awaiting == 0 {
                // The stream is complete: the connection ends once it has sent what it has.
                st.streams.remove(&stream);
            }
        }
    }

    /// Drops an event from the replay buffer: it went out as a plain JSON body, which no
    /// client can resume.
    pub fn unbuffer(&self, ev: &Outgoing) {
        let mut st = self.state.lock().unwrap();
        if let Some(pos) = st.buffer.iter().rposition(|b| b.seq == ev.seq)
            && let Some(b) = st.buffer.remove(pos)
        {
            st.buffer_bytes -= b.json.len();
        }
    }

    /// `None` when no stream has a live connection and nothing happened for `idle`: the
    /// session is idle. Otherwise the earliest it may be: `idle` after its last sign of
    /// life, or `idle` from now while a stream is connected.
    pub fn idle_until(&self, idle: std::time::Duration) -> Option<Instant> {
        let st = self.state.lock().unwrap();
        let now = Instant::now();
        if st.streams.values().any(|s| s.tx.as_ref().is_some_and(|t| !t.is_closed())) {
            return Some(now + idle);
        }
        let due = st.last_activity + idle;
        (due > now).then_some(due)
    }

    pub fn touch(&self) {
        self.state.lock().unwrap().last_activity = Instant::now();
    }

    /// Requests whose responses are still owed to the client.
    pub fn awaiting_responses(&self) -> usize {
        self.state.lock().unwrap().request_stream.len()
    }

    /// Completes when no request is owed a response.
    pub async fn all_answered(&self) {
        loop {
            let answered = self.answered.notified();
            tokio::pin!(answered);
            answered.as_mut().enable();
            if self.state.lock().unwrap().request_stream.is_empty() {
                return;
            }
            answered.await;
        }
    }

    /// Answers every request still owed a response with `answer(id)` (a shutdown's error);
    /// each stream ends after its last answer.
    pub fn answer_pending(&self, answer: impl Fn(&Id) -> Value) {
        let ids: Vec<Id> = self.state.lock().unwrap().request_stream.keys().cloned().collect();
        for id in ids {
            self.deliver(Message::made(answer(&id)), Route::Response(id));
        }
    }

    /// Ends every open stream.
    pub fn close(&self) {
        let mut st = self.state.lock().unwrap();
        st.closed = true;
        st.streams.clear();
        st.request_stream.clear();
        self.answered.notify_waiters();
        st.buffer.clear();
        st.buffer_bytes = 0;
        st.undelivered.clear();
        st.undelivered_bytes = 0;
    }
}

impl ClientSink for Streams {
    fn abandon(&self, id: &Id) {
        let mut st = self.state.lock().unwrap();
        let Some(sid) = st.request_stream.remove(id) else { return };
        if st.request_stream.is_empty() {
            self.answered.notify_waiters();
        }
        if let Some(s) = st.streams.get_mut(&sid) {
            s.awaiting = s.awaiting.saturating_sub(1);
            if s.awaiting == 0 {
                // Nothing more is due on it: the connection ends once it has sent what it has.
                st.streams.remove(&sid);
            }
        }
    }

    fn discard_progress(&self, token: &Value) {
        let mut st = self.state.lock().unwrap();
        let mut freed = 0;
        st.undelivered.retain(|json| {
            // Only progress waits here long enough to go stale; parse only what may match.
            if !json.windows(22).any(|w| w == b"notifications/progress") {
                return true;
            }
            let of = Message::parse(json.clone()).ok().and_then(|m| m.progress_token());
            let keep = of.is_none_or(|t| t.to_value() != *token);
            if !keep {
                freed += json.len();
            }
            keep
        });
        st.undelivered_bytes -= freed;
    }

    fn reaches_client_now(&self) -> bool {
        let st = self.state.lock().unwrap();
        st.get_stream.and_then(|g| st.streams.get(&g)).is_some_and(|s| s.tx.as_ref().is_some_and(|t| !t.is_closed()))
    }

    fn deliver(&self, msg: Message, route: Route) {
        let msg_is_notification = msg.kind() == Kind::Notification;
        let json = msg.into_bytes();
        let mut st = self.state.lock().unwrap();
        if st.closed {
            return;
        }
        let live = |s: &Stream| !s.json_only && s.tx.as_ref().is_some_and(|t| !t.is_closed());
        match route {
            Route::Response(id) => match st.request_stream.remove(&id) {
                Some(sid) => {
                    self.push(&mut st, sid, json, true);
                    if st.request_stream.is_empty() {
                        self.answered.notify_waiters();
                    }
                }
                None => tracing::debug!("dropping response to {id}: no stream is waiting for it"),
            },
            Route::Related(id)
                if st.request_stream.get(&id).is_some_and(|sid| st.streams.get(sid).is_some_and(|s| !s.json_only)) =>
            {
                let sid = st.request_stream[&id];
                self.push(&mut st, sid, json, false);
            }
            Route::Related(id)
                if msg_is_notification
                    && st.request_stream.contains_key(&id)
                    && !st.get_stream.and_then(|g| st.streams.get(&g)).is_some_and(&live) =>
            {
                // Progress (or a log) of a request whose POST takes only JSON, with no GET
                // stream open: stale by the time one opens, so it is dropped.
                tracing::debug!("dropping a notification for {id}: its POST takes only JSON and no GET stream is open");
            }
            Route::Related(_) | Route::Unrelated => {
                // The GET stream is the place for it; failing that it waits for the next GET
                // stream. Never another request's stream: what goes there belongs to that
                // request.
                let target = st.get_stream.filter(|g| st.streams.get(g).is_some_and(live));
                match target {
                    Some(sid) => self.push(&mut st, sid, json, false),
                    None => {
                        st.undelivered_bytes += json.len();
                        st.undelivered.push_back(json);
                        while st.undelivered.len() > self.buffer_limit || st.undelivered_bytes > self.buffer_bytes_limit
                        {
                            let Some(old) = st.undelivered.pop_front() else { break };
                            st.undelivered_bytes -= old.len();
                            tracing::warn!("session event buffer full: dropped the oldest undelivered message");
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A message carrying `v`: `v` itself when it names a method (with `jsonrpc` added), a
    /// response when it has only an id, else a notification with `v` as its params.
    fn m(v: serde_json::Value) -> Message {
        let mut msg = json!({"jsonrpc": "2.0"});
        match (v.get("method"), v.get("id")) {
            (Some(_), _) => {
                for (k, x) in v.as_object().unwrap() {
                    msg[k] = x.clone();
                }
            }
            (None, Some(id)) => {
                msg["id"] = id.clone();
                msg["result"] = json!({});
            }
            (None, None) => {
                msg["method"] = json!("notifications/message");
                msg["params"] = v;
            }
        }
        Message::made(msg)
    }

    fn ids(v: &[i64]) -> Vec<Id> {
        v.iter().map(|n| Id::Num(*n)).collect()
    }

    #[test]
    fn response_ends_its_stream_and_replays_after_disconnect() {
        let s = Streams::new(16);
        let (sid, mut rx) = s.open_post(&ids(&[1])).unwrap();
        s.deliver(m(json!({"n":1})), Route::Related(Id::Num(1)));
        let first = rx.try_recv().unwrap();
        assert_eq!(first.stream, sid);
        drop(rx); // client goes away
        s.deliver(m(json!({"n":2})), Route::Related(Id::Num(1)));
        s.deliver(m(json!({"id":1})), Route::Response(Id::Num(1)));
        let resumed = s.resume(&first.event_id()).unwrap();
        let got: Vec<&[u8]> = resumed.replay.iter().map(|o| &o.json[..]).collect();
        let (n2, id1) = (m(json!({"n":2})), m(json!({"id":1})));
        assert_eq!(got, vec![&n2.bytes()[..], &id1.bytes()[..]]);
        assert!(resumed.rx.is_none(), "a finished stream stays closed");
    }

    #[test]
    fn unrelated_messages_wait_for_a_get_stream() {
        let s = Streams::new(16);
        s.deliver(m(json!({"log":1})), Route::Unrelated);
        let a = s.open_get();
        assert_eq!(a.replay.len(), 1);
        s.deliver(m(json!({"log":2})), Route::Unrelated);
        assert_eq!(a.rx.unwrap().try_recv().unwrap().json, m(json!({"log":2})).into_bytes());
    }

    #[test]
    fn a_batch_refuses_ids_in_use_and_duplicates_and_ends_after_the_rest() {
        let s = Streams::new(16);
        let (_a, _rx_a) = s.open_post(&ids(&[1])).unwrap();
        let (opened, accepted) = s.open_batch(&ids(&[1, 2, 2, 3]), false);
        assert_eq!(accepted, vec![false, true, false, true]);
        let (sid, mut rx) = opened.unwrap();
        s.deliver(m(json!({"id": 2})), Route::Response(Id::Num(2)));
        s.deliver(m(json!({"id": 3})), Route::Response(Id::Num(3)));
        assert_eq!(rx.try_recv().unwrap().stream, sid);
        assert_eq!(rx.try_recv().unwrap().stream, sid);
        assert!(rx.try_recv().is_err() && !s.state.lock().unwrap().streams.contains_key(&sid), "the stream ended");
        assert!(s.open_batch(&ids(&[1]), false).0.is_none(), "nothing accepted, nothing opened");
        assert!(s.open_post(&ids(&[5, 5])).is_err());
        assert!(!s.state.lock().unwrap().request_stream.contains_key(&Id::Num(5)), "a refused POST leaves nothing");
    }

    #[test]
    fn a_json_only_post_carries_nothing_but_its_response() {
        let s = Streams::new(16);
        let (_sid, mut rx) = s.open_json_post(&ids(&[1])).unwrap();
        s.deliver(m(json!({"progress": 1})), Route::Related(Id::Num(1)));
        s.deliver(m(json!({"id": "s1", "method": "elicitation/create"})), Route::Related(Id::Num(1)));
        s.deliver(m(json!({"log": 1})), Route::Unrelated);
        let get = s.open_get();
        s.deliver(m(json!({"progress": 2})), Route::Related(Id::Num(1)));
        s.deliver(m(json!({"id": 1})), Route::Response(Id::Num(1)));
        assert_eq!(rx.try_recv().unwrap().json, m(json!({"id":1})).into_bytes());
        assert!(rx.try_recv().is_err(), "nothing else on the POST");
        let waited: Vec<&[u8]> = get.replay.iter().map(|o| &o.json[..]).collect();
        let (asked, log) = (m(json!({"id":"s1","method":"elicitation/create"})), m(json!({"log":1})));
        assert_eq!(
            waited,
            vec![&asked.bytes()[..], &log.bytes()[..]],
            "the server request waited; the progress was dropped"
        );
        assert_eq!(
            get.rx.unwrap().try_recv().unwrap().json,
            m(json!({"progress":2})).into_bytes(),
            "with a GET stream open, progress goes there"
        );
    }

    #[test]
    fn buffers_are_bounded_in_bytes_and_a_lost_gap_gets_a_fresh_stream() {
        let s = Streams::with_limits(1000, 4096);
        let (sid, rx) = s.open_post(&ids(&[7])).unwrap();
        drop(rx);
        let kib = "x".repeat(1000);
        for i in 0..20 {
            s.deliver(m(json!({"i": i, "pad": kib})), Route::Related(Id::Num(7)));
        }
        let (len, bytes) = {
            let st = s.state.lock().unwrap();
            (st.buffer.len(), st.buffer.iter().map(|b| b.json.len()).sum::<usize>())
        };
        assert!(bytes <= 4096 && len >= 3, "{len} events, {bytes} bytes");
        // The client saw event 1 only: events 2.. are partly gone, so no replay with a gap.
        assert!(s.resume(&format!("{sid}-1")).is_none(), "a fresh stream instead");
        let last_kept = s.state.lock().unwrap().buffer.front().unwrap().seq;
        let resumed = s.resume(&format!("{sid}-{}", last_kept)).expect("what is kept still replays");
        assert_eq!(resumed.replay.len(), len - 1);
        for _ in 0..20 {
            s.deliver(m(json!({"pad": kib})), Route::Unrelated);
        }
        let waiting: usize = s.state.lock().unwrap().undelivered.iter().map(|b| b.len()).sum();
        assert!(waiting <= 4096, "{waiting} bytes wait for a GET stream");
    }

    #[test]
    fn pending_requests_can_all_be_answered_at_once() {
        let s = Streams::new(16);
        let (_a, mut rx_a) = s.open_post(&ids(&[1])).unwrap();
        let (_b, mut rx_b) = s.open_batch(&ids(&[2, 3]), false).0.unwrap();
        assert_eq!(s.awaiting_responses(), 3);
        s.answer_pending(|id| json!({"jsonrpc": "2.0", "id": id.to_value(), "error": {"code": 1, "message": "m"}}));
        assert_eq!(s.awaiting_responses(), 0);
        assert!(rx_a.try_recv().unwrap().is_response);
        assert!(rx_b.try_recv().unwrap().is_response && rx_b.try_recv().unwrap().is_response);
        assert!(matches!(rx_a.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)), "the stream ended");
    }

    #[tokio::test]
    async fn all_answered_wakes_when_the_last_response_goes_out() {
        let s = std::sync::Arc::new(Streams::new(16));
        let (_a, _rx) = s.open_batch(&ids(&[1, 2]), false).0.unwrap();
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.all_answered().await }
        });
        s.deliver(m(json!({"id": 1})), Route::Response(Id::Num(1)));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "one request is still owed its response");
        s.deliver(m(json!({"id": 2})), Route::Response(Id::Num(2)));
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter).await.unwrap().unwrap();
    }

    #[test]
    fn buffer_is_bounded_and_ids_in_use_are_refused() {
        let s = Streams::new(4);
        let (_sid, _rx) = s.open_post(&ids(&[7])).unwrap();
        assert!(s.open_post(&ids(&[7])).is_err());
        for i in 0..100 {
            s.deliver(m(json!({"i": i})), Route::Related(Id::Num(7)));
        }
        assert!(s.state.lock().unwrap().buffer.len() <= 4);
        for _ in 0..100 {
            s.deliver(m(json!({})), Route::Unrelated);
        }
        assert!(s.state.lock().unwrap().undelivered.len() <= 4);
    }
}
