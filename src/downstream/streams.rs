//! The SSE streams of one downstream HTTP session: which stream each message goes to, the
//! bounded event buffer behind `Last-Event-ID` replay, and the standalone GET stream.
//!
//! Every event id is `<stream>-<seq>`: the stream it belongs to and a session-wide sequence
//! number, so a resuming client gets exactly the rest of the stream it lost.

use crate::jsonrpc::{Id, Kind, Message, RpcError, UPSTREAM_UNAVAILABLE};
use crate::locks::Mutex;
use crate::upstream::client::{ClientSink, Route};
use bytes::Bytes;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use tokio::sync::mpsc;
use tokio::time::Instant;

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
    /// A single-request POST still being handed to its session: what it gets is held in
    /// `State::parked` until the POST attaches (most often just its response, which then
    /// goes out as a JSON body without a channel ever being made).
    parked: bool,
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
    /// What parked streams got, until their POST attaches (it outlives a stream that
    /// completed meanwhile). At most `channel_capacity + 1` events a stream.
    parked: HashMap<u64, Vec<Outgoing>>,
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
                parked: HashMap::new(),
                last_activity: Instant::now(),
                closed: false,
            }),
            buffer_limit,
            buffer_bytes_limit: bytes_limit,
            channel_capacity: buffer_limit.clamp(16, 1024),
        }
    }

    /// Opens the stream of a batch: each request id is accepted unless it is awaiting its
    /// response already or appeared earlier in the batch (`accepted`, in order). No stream
    /// is opened when none is accepted. The stream ends once every accepted request has its
    /// response; its channel has room for all of them, so a response never finds it full.
    /// `json_only`: the POST accepts only `application/json`, and the stream carries nothing
    /// but responses (progress and server requests go where unrelated messages go).
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
        st.streams.insert(sid, Stream { tx: Some(tx), awaiting: n, json_only, parked: false });
        for (id, _) in requests.iter().zip(&accepted).filter(|(_, ok)| **ok) {
            st.request_stream.insert(id.clone(), sid);
        }
        st.last_activity = Instant::now();
        (Some((sid, rx)), accepted)
    }

    /// Opens the stream of a POST carrying the one request `id`, parked: no channel yet;
    /// what it gets waits for [`Streams::attach`]. Fails if `id` is awaiting its response.
    pub fn open_single(&self, id: &Id, json_only: bool) -> Result<u64, Id> {
        let mut st = self.state.lock().unwrap();
        // A sign of life of the session, whether the request is taken or refused.
        st.last_activity = Instant::now();
        if st.request_stream.contains_key(id) {
            return Err(id.clone());
        }
        let sid = st.next_stream;
        st.next_stream += 1;
        st.streams.insert(sid, Stream { tx: None, awaiting: 1, json_only, parked: true });
        st.request_stream.insert(id.clone(), sid);
        st.parked.insert(sid, Vec::new());
        Ok(sid)
    }

    /// The POST of parked stream `sid` takes what its stream got so far, and the live
    /// channel if the stream is still open (its response has not come yet). A response that
    /// came first goes out as a plain JSON body, which no client can resume: it leaves the
    /// replay buffer here, under the same lock.
    pub fn attach(&self, sid: u64) -> (Vec<Outgoing>, Option<mpsc::Receiver<Outgoing>>) {
        let mut st = self.state.lock().unwrap();
        let held = st.parked.remove(&sid).unwrap_or_default();
        if let Some(ev) = held.first().filter(|ev| ev.is_response) {
            Self::unbuffer_from(&mut st, ev);
        }
        let rx = match st.streams.get_mut(&sid) {
            Some(s) if s.parked => {
                let (tx, rx) = mpsc::channel(self.channel_capacity + 1);
                s.tx = Some(tx);
                s.parked = false;
                Some(rx)
            }
            _ => None,
        };
        (held, rx)
    }

    /// Forgets what a parked stream holds: its POST is gone before attaching.
    pub fn unpark(&self, sid: u64) {
        let mut st = self.state.lock().unwrap();
        st.parked.remove(&sid);
        // What still comes for it is only buffered, for a client that resumes.
        if let Some(s) = st.streams.get_mut(&sid) {
            s.parked = false;
        }
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
        st.streams.insert(sid, Stream { tx: None, awaiting: 0, json_only: false, parked: false });
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
        // A parked stream belongs to its POST, which is about to attach: the replay is all
        // a resuming client gets of it.
        let rx = st.streams.get_mut(&stream).filter(|s| !s.parked).map(|s| {
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
        if s.parked {
            // Held as a channel of that size would hold it; past that the POST only gets
            // what was held (the client can resume the rest), as with a full channel.
            match st.parked.get_mut(&stream) {
                Some(held) if held.len() <= self.channel_capacity => held.push(ev),
                _ => s.parked = false,
            }
        } else if let Some(tx) = &s.tx
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
        Self::unbuffer_from(&mut self.state.lock().unwrap(), ev);
    }

    /// [`Streams::unbuffer`], under the lock its caller holds (`st`).
    fn unbuffer_from(st: &mut State, ev: &Outgoing) {
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
        // A parked stream's POST is being served: the session is in use.
        if st.streams.values().any(|s| s.parked || s.tx.as_ref().is_some_and(|t| !t.is_closed())) {
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

    /// Ends every open stream. A request still owed a response is answered first, with
    /// -32000: its session ended (deleted, idled out) while it was handled, and its POST gets
    /// that error, not an empty 202 or a stream that ends without an answer.
    pub fn close(&self) {
        let ended = RpcError::new(UPSTREAM_UNAVAILABLE, "the session ended while this request was being handled");
        self.answer_pending(|id| ended.response(Some(id)));
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

    fn discard_progress(&self, token: &crate::jsonrpc::ProgressToken) {
        let mut st = self.state.lock().unwrap();
        let mut freed = 0;
        st.undelivered.retain(|json| {
            // Only progress waits here long enough to go stale; parse only what may match.
            if !json.windows(22).any(|w| w == b"notifications/progress") {
                return true;
            }
            let of = Message::parse(json.clone()).ok().and_then(|m| m.progress_token());
            let keep = of.is_none_or(|t| t != *token);
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
        let json = route.stamp(msg).into_bytes();
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
                            crate::warn_limit::warn_limited!(
                                "session event buffer full: dropped the oldest undelivered message"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// A parked stream (see [`Streams::open_single`]) whose POST is handing its request on: what
/// the stream holds is freed if the POST goes away before it attaches (the client hung up).
pub struct ParkedStream<'a> {
    pub streams: &'a Streams,
    pub sid: u64,
}

impl ParkedStream<'_> {
    /// The POST attaches ([`Streams::attach`]): nothing is left to free.
    pub fn attach(self) -> (Vec<Outgoing>, Option<mpsc::Receiver<Outgoing>>) {
        let this = std::mem::ManuallyDrop::new(self);
        this.streams.attach(this.sid)
    }
}

impl Drop for ParkedStream<'_> {
    fn drop(&mut self) {
        self.streams.unpark(self.sid);
    }
}

/// A POST's first event, as its answer decides between plain JSON and an event stream:
/// one held already, else the first within `window` on `rx`. `Err(rx)`: none came in time
/// (the answer is a stream); `Ok((None, _))`: the stream ended with nothing.
pub(crate) async fn first_event(
    held: &mut std::collections::VecDeque<Outgoing>,
    rx: Option<mpsc::Receiver<Outgoing>>,
    window: std::time::Duration,
) -> Result<(Option<Outgoing>, Option<mpsc::Receiver<Outgoing>>), mpsc::Receiver<Outgoing>> {
    match (held.pop_front(), rx) {
        (Some(ev), rx) => Ok((Some(ev), rx)),
        (None, None) => Ok((None, None)),
        (None, Some(mut rx)) => {
            let first = match tokio::time::Instant::now().checked_add(window) {
                Some(deadline) => tokio::time::timeout_at(deadline, rx.recv()).await,
                None => Ok(rx.recv().await),
            };
            match first {
                Ok(ev) => Ok((ev, Some(rx))),
                Err(_) => Err(rx),
            }
        }
    }
}
