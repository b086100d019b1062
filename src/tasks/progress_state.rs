//! The progress-state dialect's memory (`progress/get`): for each progress token a client
//! used, the latest progress of its request and, once the request has ended, its result,
//! kept for the retention and scoped to the owner (the client's session).
//!
//! A request that reuses a token whose state is still open (`working`, or `input-required`
//! waiting for the client's next turn) continues that state; a token whose request has
//! ended starts over. Bounded: states per owner and in all by the task store's counts, and
//! in bytes by its byte limits, each state counted whole (its token, message, error and kept
//! result): one state is at most `max_result_bytes` (a larger result is not kept), all of
//! them `max_store_bytes`; a token longer than `max_task_id_bytes` is not followed. Progress messages are cut like
//! status messages, and progress values are kept only as the numbers they are. An ended state
//! is forgotten when its retention passes, or earlier, oldest first, to make room; an open
//! one never is (a new token then goes untracked).
//! Retentions are timed by the clock's [`Deadlines`]: a task removes each ended state when
//! its retention passes, instead of sweeping on every access.

use crate::clock::{Deadlines, wall_now};
use crate::jsonrpc::{ProgressToken, RpcError};
use crate::locks::Mutex;
use crate::tasks::store::rfc3339;
use crate::tasks::text_bounds::bounded;
use lru::LruCache;
use serde_json::{Map, Number, Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// A request's state as the proposal names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Working,
    InputRequired,
    Completed,
    Failed,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Working => "working",
            State::InputRequired => "input-required",
            State::Completed => "completed",
            State::Failed => "failed",
        }
    }

    /// A state an upstream that speaks the proposal put in its result (`input_required` as
    /// the proposal's own example spells it, too).
    fn parse(s: &str) -> Option<State> {
        match s {
            "working" => Some(State::Working),
            "input-required" | "input_required" => Some(State::InputRequired),
            "completed" => Some(State::Completed),
            "failed" => Some(State::Failed),
            _ => None,
        }
    }

    fn is_open(self) -> bool {
        matches!(self, State::Working | State::InputRequired)
    }
}

/// What a state costs beyond the text it keeps: its fields, its place in the maps.
const ENTRY_OVERHEAD: usize = 256;

struct Entry {
    state: State,
    /// The token's bytes, counted twice: it keys the owner's map and the ended order.
    token_bytes: usize,
    progress: Option<Number>,
    total: Option<Number>,
    message: Option<String>,
    updated: SystemTime,
    /// Requests in flight under the token.
    requests: usize,
    /// Questions of the upstream's that wait for the client.
    inputs: usize,
    /// The last response's result (partial content while open), as JSON text.
    result: Option<Arc<str>>,
    /// The last response's error.
    error: Option<Value>,
    /// When an ended state is forgotten.
    expires: Option<Instant>,
}

impl Entry {
    fn new(token: &ProgressToken) -> Entry {
        Entry {
            state: State::Working,
            token_bytes: token_bytes(token),
            progress: None,
            total: None,
            message: None,
            updated: wall_now(),
            requests: 1,
            inputs: 0,
            result: None,
            error: None,
            expires: None,
        }
    }

    /// The whole state: what [`Limits`] count.
    fn bytes(&self) -> usize {
        ENTRY_OVERHEAD
            + 2 * self.token_bytes
            + self.message.as_ref().map_or(0, String::len)
            + self.error.as_ref().map_or(0, json_bytes)
            + self.result.as_ref().map_or(0, |r| r.len())
    }

    /// `_meta.progress` as the proposal defines it, with the latest progress values.
    fn meta(&self, token: &ProgressToken) -> Value {
        let mut m = Map::new();
        m.insert("progressToken".into(), token.to_value());
        m.insert("state".into(), self.state.as_str().into());
        m.insert("timestamp".into(), rfc3339(self.updated).into());
        if let Some(msg) = &self.message {
            m.insert("message".into(), msg.clone().into());
        }
        if let Some(p) = &self.progress {
            m.insert("progress".into(), p.clone().into());
        }
        if let Some(t) = &self.total {
            m.insert("total".into(), t.clone().into());
        }
        Value::Object(m)
    }
}

/// The bytes of a token's text (its digits for a number).
fn token_bytes(token: &ProgressToken) -> usize {
    match token {
        ProgressToken::Str(s) => s.len(),
        ProgressToken::Num(n) => n.to_string().len(),
    }
}

fn json_bytes(v: &Value) -> usize {
    serde_json::to_string(v).map_or(0, |t| t.len())
}

type Key = (Arc<str>, ProgressToken);

#[derive(Default)]
struct Inner {
    by_owner: HashMap<Arc<str>, HashMap<ProgressToken, Entry>>,
    /// Ended states, the one that ended longest ago first.
    ended: Option<LruCache<Key, ()>>,
    count: usize,
    bytes: usize,
}

impl Inner {
    fn ended(&mut self) -> &mut LruCache<Key, ()> {
        self.ended.get_or_insert_with(LruCache::unbounded)
    }

    fn remove(&mut self, owner: &Arc<str>, token: &ProgressToken) {
        let Some(states) = self.by_owner.get_mut(owner) else { return };
        if let Some(e) = states.remove(token) {
            self.count -= 1;
            self.bytes -= e.bytes();
        }
        if states.is_empty() {
            self.by_owner.remove(owner);
        }
        self.ended().pop(&(owner.clone(), token.clone()));
    }

    /// Forgets the state that ended longest ago; `false` if none has ended.
    fn evict_oldest(&mut self) -> bool {
        match self.ended().pop_lru() {
            Some(((owner, token), ())) => {
                self.remove(&owner, &token);
                true
            }
            None => false,
        }
    }
}

/// The limits of the store (from `[tasks]`; per owner, the upstream's `max_tasks_per_owner`).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_states: usize,
    /// One state, whole.
    pub max_result_bytes: usize,
    /// All states, whole.
    pub max_bytes: usize,
    /// A progress or error message (longer ones are cut).
    pub max_message_bytes: usize,
    /// A token followed (a longer one is not): so that one client's few requests cannot
    /// hold the whole budget with their tokens.
    pub max_token_bytes: usize,
}

pub struct ProgressStates {
    inner: Arc<Mutex<Inner>>,
    /// When each ended state's retention passes.
    retention: Arc<Deadlines<Key>>,
    limits: Limits,
}

impl ProgressStates {
    /// Ended states are removed when their retention passes by a task on the current
    /// runtime; without one (a unit test), a state past its retention is only refused.
    pub fn new(limits: Limits) -> ProgressStates {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let retention = Arc::new(Deadlines::new(Duration::MAX, Duration::MAX));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(forget_when_due(Arc::downgrade(&inner), retention.clone()));
        }
        ProgressStates { inner, retention, limits }
    }

    /// A request under `token` starts: it continues the token's open state, or starts a new
    /// one. `false` when there is no room (the request goes on untracked): the owner keeps
    /// at most `per_owner` states.
    pub fn begin(&self, owner: &Arc<str>, token: &ProgressToken, per_owner: usize) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let now = Instant::now();
        let continues = inner
            .by_owner
            .get_mut(owner)
            .and_then(|s| s.get_mut(token))
            .filter(|e| e.state.is_open() && e.expires.is_none_or(|t| t > now));
        if let Some(e) = continues {
            e.requests += 1;
            e.expires = None;
            if e.inputs == 0 {
                e.state = State::Working;
            }
            e.updated = wall_now();
            inner.ended().pop(&(owner.clone(), token.clone()));
            return true;
        }
        inner.remove(owner, token);
        let entry = Entry::new(token);
        let cost = entry.bytes();
        if entry.token_bytes > self.limits.max_token_bytes || cost > self.limits.max_result_bytes {
            return false;
        }
        loop {
            let own = inner.by_owner.get(owner).map_or(0, HashMap::len);
            if own >= per_owner {
                // Only the owner's own ended states make room under its cap.
                let oldest = inner.ended().iter().rev().find(|((o, _), _)| o == owner).map(|(k, _)| k.clone());
                let Some((o, t)) = oldest else { return false };
                inner.remove(&o, &t);
            } else if inner.count >= self.limits.max_states || inner.bytes + cost > self.limits.max_bytes {
                if !inner.evict_oldest() {
                    return false;
                }
            } else {
                break;
            }
        }
        inner.by_owner.entry(owner.clone()).or_default().insert(token.clone(), entry);
        inner.count += 1;
        inner.bytes += cost;
        true
    }

    /// Progress under the token: the latest values and message.
    /// The message, cut to `max_message_bytes`, replaces the last one only where the state's
    /// bytes stay within the limits (else the last one stays).
    pub fn progress(&self, owner: &Arc<str>, token: &ProgressToken, progress: &Value) {
        let mut inner = self.inner.lock().unwrap();
        let limits = self.limits;
        let free = limits.max_bytes.saturating_sub(inner.bytes);
        let Some(e) = inner.by_owner.get_mut(owner).and_then(|s| s.get_mut(token)) else { return };
        if !e.state.is_open() {
            return;
        }
        let before = e.bytes();
        e.progress = progress.get("progress").and_then(Value::as_number).cloned();
        e.total = progress.get("total").and_then(Value::as_number).cloned();
        if let Some(m) = progress.get("message").and_then(Value::as_str) {
            let m = bounded(m, limits.max_message_bytes);
            let old = e.message.as_ref().map_or(0, String::len);
            if before - old + m.len() <= limits.max_result_bytes.min(free + before) {
                e.message = Some(m.into_owned());
            }
        }
        e.updated = wall_now();
        let after = e.bytes();
        inner.bytes = inner.bytes - before + after;
    }

    /// The upstream asked the client something for the token's request.
    pub fn input_asked(&self, owner: &Arc<str>, token: &ProgressToken) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(e) = inner.by_owner.get_mut(owner).and_then(|s| s.get_mut(token))
            && e.state.is_open()
        {
            e.inputs += 1;
            e.state = State::InputRequired;
            e.updated = wall_now();
        }
    }

    /// The client answered (or can no longer answer) one of those questions.
    pub fn input_answered(&self, owner: &Arc<str>, token: &ProgressToken) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(e) = inner.by_owner.get_mut(owner).and_then(|s| s.get_mut(token))
            && e.inputs > 0
        {
            e.inputs -= 1;
            if e.inputs == 0 && e.state == State::InputRequired {
                e.state = State::Working;
                e.updated = wall_now();
            }
        }
    }

    /// A request under the token was answered with `resp` (its whole response): the state
    /// takes its outcome once no other request continues it, and is kept for `retention`.
    /// Returns the `_meta.progress` the result is to carry.
    pub fn ended(&self, owner: &Arc<str>, token: &ProgressToken, resp: &Value, retention: Duration) -> Option<Value> {
        let mut inner = self.inner.lock().unwrap();
        let limits = self.limits;
        let free = limits.max_bytes.saturating_sub(inner.bytes);
        let e = inner.by_owner.get_mut(owner).and_then(|s| s.get_mut(token))?;
        e.requests = e.requests.saturating_sub(1);
        let before = e.bytes();
        // What the state may grow to: its own bound, and the room left in all.
        let room = limits.max_result_bytes.min(free + before);
        if let Some(err) = resp.get("error") {
            e.result = None;
            e.error = None;
            let message = err.get("message").and_then(Value::as_str).map(|m| bounded(m, limits.max_message_bytes));
            if e.requests == 0 {
                e.state = State::Failed;
                e.message = message.as_deref().map(str::to_string);
            }
            // The error whole if it fits; else its code and cut message (its data is dropped).
            e.error = Some(err.clone());
            if e.bytes() > room {
                let mut kept = Map::new();
                if let Some(code) = err.get("code") {
                    kept.insert("code".into(), code.clone());
                }
                kept.insert("message".into(), message.unwrap_or_default().into_owned().into());
                e.error = Some(Value::Object(kept));
                if e.bytes() > room {
                    e.error = None;
                }
            }
        } else if let Some(result) = resp.get("result") {
            // An upstream that speaks the proposal says itself whether it is done.
            let said = result.pointer("/_meta/progress/state").and_then(Value::as_str).and_then(State::parse);
            let text = serde_json::to_string(result).expect("values serialize");
            e.error = None;
            e.result = None;
            e.result = if e.bytes() + text.len() <= room {
                Some(text.into())
            } else {
                e.message = Some(format!("the result ({} bytes) was too large to keep", text.len()));
                None
            };
            if e.requests == 0 {
                e.state = said.unwrap_or(State::Completed);
            }
        }
        // A message the room left cannot take goes (the state, its error and result stay).
        if e.bytes() > room {
            e.message = None;
        }
        e.updated = wall_now();
        let after = e.bytes();
        let ends = e.requests == 0;
        if ends {
            e.inputs = 0;
            let end = Instant::now();
            let end = end.checked_add(retention).unwrap_or(end);
            e.expires = Some(end);
            self.retention.insert_until((owner.clone(), token.clone()), end);
        }
        let meta = e.meta(token);
        inner.bytes = inner.bytes - before + after;
        if ends {
            inner.ended().put((owner.clone(), token.clone()), ());
        }
        Some(meta)
    }

    /// The `progress/get` result for the token: the kept result (or partial content) with
    /// `_meta.progress`, or the error the request ended with under `error`.
    pub fn get(&self, owner: &Arc<str>, token: &ProgressToken) -> Result<Value, RpcError> {
        let mut inner = self.inner.lock().unwrap();
        // Past its retention, whether or not the task removing it has run yet.
        let now = Instant::now();
        if inner.by_owner.get(owner).and_then(|s| s.get(token)).is_some_and(|e| e.expires.is_some_and(|t| t <= now)) {
            inner.remove(owner, token);
        }
        let e = inner.by_owner.get(owner).and_then(|s| s.get(token)).ok_or_else(|| {
            let token = token.to_string();
            RpcError::new(
                crate::jsonrpc::INVALID_PARAMS,
                format!("no progress state for token {}: unknown, or its retention has passed", bounded(&token, 200)),
            )
        })?;
        let mut result = e
            .result
            .as_deref()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({"content": []}));
        if let Some(err) = &e.error {
            result["error"] = err.clone();
        }
        if !result.get("_meta").is_some_and(Value::is_object) {
            result["_meta"] = json!({});
        }
        result["_meta"]["progress"] = e.meta(token);
        Ok(result)
    }

    /// The owner (a session that ended) is gone: so are its states.
    pub fn drop_owner(&self, owner: &Arc<str>) {
        let mut inner = self.inner.lock().unwrap();
        let Some(states) = inner.by_owner.remove(owner) else { return };
        for (token, e) in states {
            inner.count -= 1;
            inner.bytes -= e.bytes();
            inner.ended().pop(&(owner.clone(), token));
        }
    }

    /// States kept, and their bytes, each counted whole (for tests and metrics).
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock().unwrap();
        (inner.count, inner.bytes)
    }
}

/// Removes each ended state whose retention has passed, until the states are dropped.
async fn forget_when_due(inner: Weak<Mutex<Inner>>, retention: Arc<Deadlines<Key>>) {
    while let Some(((owner, token), _)) = retention.expired().await {
        let Some(inner) = inner.upgrade() else { return };
        let mut inner = inner.lock().unwrap();
        // A state that began again since, or ended again later, is not this retention's.
        let now = Instant::now();
        if inner.by_owner.get(&owner).and_then(|s| s.get(&token)).is_some_and(|e| e.expires.is_some_and(|t| t <= now)) {
            inner.remove(&owner, &token);
        }
    }
}

impl Drop for ProgressStates {
    fn drop(&mut self) {
        self.retention.close();
    }
}

#[cfg(test)]
mod tests;
