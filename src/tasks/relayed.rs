//! Upstream tasks relayed to clients that reach them by id alone: a 2026-07-28 client's
//! extension tasks that a 2025-11-25 upstream runs (`gateway::session::modern_client::tasks`). The
//! extension makes task ids bearer tokens, and an upstream's own need not be hard to guess,
//! so the client is given an id of the gateway's (128 bits, random) for each, kept here with
//! the upstream's id and the link it was created on: a task of a link that has since been
//! replaced is not asked about (its id may be another task's on the new one). Bounded by
//! `[tasks] max_tasks`, the least recently used forgotten first.
//!
//! Kept with each task, as the link's subscriber for it ([`RelayedTaskEvents`]):
//! - the upstream's questions during the task (server requests tagged with related-task,
//!   whichever stream carried them), held ([`HeldInputs`]) for the client's `tasks/get` to
//!   show and its `tasks/update` to answer; only those the creating request's capabilities
//!   cover (the rest are refused upstream, -32601), at most `max_in_flight` per task and
//!   per upstream in all (past it -32004 upstream). While the task waits for input, one
//!   `tasks/result` is kept pending upstream ([`RelayedTasks::follow`]): 2025-11-25 servers
//!   send their questions on its stream.
//! - the task as last heard of (its status notifications, the answers to `tasks/get`), which
//!   `subscriptions/listen` streams watch ([`RelayedTasks::watch`]).

use crate::jsonrpc::{self, GATEWAY_BUSY, Id, RpcError};
use crate::locks::Mutex;
use crate::mcp::task_messages::{TaskStatus, TaskView};
use crate::tasks::held_inputs::{HeldInputs, declares, undeclared};
use crate::upstream::link::{Link, RelayedTaskEvents};
use lru::LruCache;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Arc, Weak};
use tokio::sync::watch;

/// Where a relayed task runs: its upstream, the link's generation, and its id there.
#[derive(Clone, PartialEq, Eq, Hash)]
struct At {
    upstream: String,
    generation: u64,
    upstream_id: String,
}

impl At {
    fn new(upstream: &str, generation: u64, upstream_id: &str) -> At {
        At { upstream: upstream.into(), generation, upstream_id: upstream_id.into() }
    }

    fn of(link: &Link, upstream_id: &str) -> At {
        At::new(link.upstream_name(), link.generation(), upstream_id)
    }
}

struct Relayed {
    at: At,
    /// Whose it is: only its owner's requests resolve it (with authentication, the creating
    /// principal's).
    owner: String,
    /// The client capabilities the creating request declared: the upstream may ask only
    /// for those.
    declared: Value,
    inputs: HeldInputs,
    /// A `tasks/result` is pending upstream for it (the stream its questions come on).
    following: bool,
    /// The task (core `Task`) as last heard of, once it has been.
    seen: watch::Sender<Option<Value>>,
}

struct State {
    ids: LruCache<String, Relayed>,
    by_upstream: HashMap<At, String>,
    /// Questions held per upstream, all its relayed tasks together.
    held: HashMap<String, usize>,
}

impl State {
    fn forget_inputs(&mut self, upstream: &str, n: usize) {
        if let Some(c) = self.held.get_mut(upstream) {
            *c = c.saturating_sub(n);
        }
    }

    /// Questions held for `upstream`'s tasks on links that have since closed can never be
    /// answered: they go, and count no more (looked for only at the limit).
    fn forget_unanswerable(&mut self, upstream: &str) {
        let mut gone = 0;
        for (_, r) in self.ids.iter_mut().filter(|(_, r)| r.at.upstream == upstream) {
            if r.inputs.on_closed_link() {
                gone += r.inputs.take_all().len();
            }
        }
        self.forget_inputs(upstream, gone);
    }
}

pub struct RelayedTasks {
    st: Mutex<State>,
    /// Questions held per task, and per upstream in all.
    max_inputs: usize,
    /// The bytes of questions held, shared with the hosted tasks.
    held_bytes: Arc<crate::tasks::held_inputs::HeldBytes>,
    me: Weak<RelayedTasks>,
}

impl RelayedTasks {
    pub fn new(
        capacity: usize,
        max_inputs: usize,
        held_bytes: Arc<crate::tasks::held_inputs::HeldBytes>,
    ) -> Arc<RelayedTasks> {
        let cap = NonZeroUsize::new(capacity.max(1)).expect("at least one");
        Arc::new_cyclic(|me| RelayedTasks {
            st: Mutex::new(State { ids: LruCache::new(cap), by_upstream: HashMap::new(), held: HashMap::new() }),
            max_inputs,
            held_bytes,
            me: me.clone(),
        })
    }

    /// The id a client is given for task `upstream_id` of upstream `upstream`, created on
    /// its link of generation `generation` by a request that declared client capabilities
    /// `declared`, for owner `owner`.
    pub fn mint(&self, upstream: &str, generation: u64, upstream_id: &str, declared: Value, owner: &str) -> String {
        let id = crate::random::id128();
        let at = At::new(upstream, generation, upstream_id);
        let relayed = Relayed {
            at: at.clone(),
            owner: owner.to_string(),
            declared,
            inputs: HeldInputs::default(),
            following: false,
            seen: watch::channel(None).0,
        };
        let mut st = self.st.lock().unwrap();
        st.by_upstream.insert(at, id.clone());
        if let Some((old_id, mut old)) = st.ids.push(id.clone(), relayed) {
            // Forgotten (unless the upstream has since reused its id for a task still kept):
            // its questions can no longer reach a client.
            if st.by_upstream.get(&old.at) == Some(&old_id) {
                st.by_upstream.remove(&old.at);
            }
            let held = old.inputs.take_all();
            st.forget_inputs(&old.at.upstream, held.len());
            for h in held {
                let why = "the gateway no longer keeps this task";
                h.link.refuse(h.upstream_id, RpcError::new(jsonrpc::INTERNAL_ERROR, why));
            }
        }
        id
    }

    /// The upstream's id of the task a client knows as `id`, if it is one of upstream
    /// `upstream`'s on its link of generation `generation`, and `owner`'s.
    pub fn resolve(&self, id: &str, upstream: &str, generation: u64, owner: &str) -> Option<String> {
        let mut st = self.st.lock().unwrap();
        let r = st.ids.get(id)?;
        (r.at.upstream == upstream && r.at.generation == generation && r.owner == owner)
            .then(|| r.at.upstream_id.clone())
    }

    /// The questions held for task `id`, by key, as the tasks extension lists them.
    pub fn held_input_requests(&self, id: &str) -> Map<String, Value> {
        self.st.lock().unwrap().ids.peek(id).map(|r| r.inputs.listed()).unwrap_or_default()
    }

    /// Answers the question held under `key` for task `id` with `result` (a client's
    /// `tasks/update`): `false` if none is held under that key, or `result` is not an
    /// object (no answer to any input request is anything else).
    pub async fn answer_held_input(&self, id: &str, key: &str, result: Value) -> bool {
        if !result.is_object() {
            return false;
        }
        let held = {
            let mut st = self.st.lock().unwrap();
            let Some(r) = st.ids.peek_mut(id) else { return false };
            let Some(h) = r.inputs.take(key) else { return false };
            let upstream = r.at.upstream.clone();
            st.forget_inputs(&upstream, 1);
            h
        };
        held.answer(result).await;
        true
    }

    /// Task `id`'s snapshots from now on (`None` until one is heard of).
    pub fn watch(&self, id: &str) -> Option<watch::Receiver<Option<Value>>> {
        self.st.lock().unwrap().ids.peek(id).map(|r| r.seen.subscribe())
    }

    /// The upstream said what task `id` is now (`task`: a core `Task`): watchers see it if
    /// it changed; a task that ended has no questions left.
    pub fn observe(&self, id: &str, task: &Value) {
        let mut st = self.st.lock().unwrap();
        let Some(r) = st.ids.peek_mut(id) else { return };
        r.seen.send_if_modified(|seen| {
            let changed = seen.as_ref() != Some(task);
            if changed {
                *seen = Some(task.clone());
            }
            changed
        });
        let ended = TaskView::of(task).is_terminal();
        if ended {
            let n = r.inputs.take_all().len();
            let upstream = r.at.upstream.clone();
            st.forget_inputs(&upstream, n);
        }
    }

    /// Task `id` waits for input: a `tasks/result` is kept pending upstream on `link`, for
    /// 2025-11-25 servers send their questions on its stream (once at a time per task;
    /// bounded by `request_timeout`, then the next look at the task starts another).
    pub fn follow(&self, link: &Arc<Link>, id: &str) {
        let upstream_id = {
            let mut st = self.st.lock().unwrap();
            let Some(r) = st.ids.peek_mut(id) else { return };
            if r.following || r.at.generation != link.generation() || r.at.upstream != link.upstream_name() {
                return;
            }
            r.following = true;
            r.at.upstream_id.clone()
        };
        let (me, link, id) = (self.me.clone(), link.clone(), id.to_string());
        tokio::spawn(async move {
            // Its answer is read again when the client asks for the outcome.
            let _ = link.request(crate::jsonrpc::Method::TasksResult, json!({"taskId": upstream_id})).await;
            if let Some(me) = me.upgrade()
                && let Some(r) = me.st.lock().unwrap().ids.peek_mut(&id)
            {
                r.following = false;
            }
        });
    }

    fn ours(&self, link: &Link, upstream_id: &str) -> Option<String> {
        self.ours_at(&At::of(link, upstream_id))
    }

    fn ours_at(&self, at: &At) -> Option<String> {
        self.st.lock().unwrap().by_upstream.get(at).cloned()
    }
}

impl RelayedTaskEvents for RelayedTasks {
    fn relays(&self, link: &Link, task_id: &str) -> bool {
        self.ours(link, task_id).is_some()
    }

    fn input_request(&self, link: &Arc<Link>, task_id: &str, upstream_id: Id, msg: Value) {
        let refusal = {
            let mut st = self.st.lock().unwrap();
            if st.held.get(link.upstream_name()).is_some_and(|n| *n >= self.max_inputs) {
                st.forget_unanswerable(link.upstream_name());
            }
            let total = st.held.get(link.upstream_name()).copied().unwrap_or(0);
            let ours = st.by_upstream.get(&At::of(link, task_id)).cloned();
            match ours.and_then(|o| st.ids.peek_mut(&o)) {
                None => Some(RpcError::new(jsonrpc::INTERNAL_ERROR, "no client can answer for this task")),
                Some(r) if !declares(Some(&r.declared), &msg) => Some(undeclared(&msg)),
                Some(_) if total >= self.max_inputs => {
                    Some(RpcError::new(GATEWAY_BUSY, "too many questions waiting for clients"))
                }
                Some(r) => match r.inputs.hold(link, upstream_id.clone(), msg, self.max_inputs, &self.held_bytes) {
                    Err(crate::tasks::held_inputs::NotHeld::Count) => {
                        Some(RpcError::new(GATEWAY_BUSY, "too many questions waiting for the client"))
                    }
                    Err(bytes) => Some(bytes.refusal()),
                    Ok(_) => {
                        // Watchers see the task wait for the question.
                        r.seen.send_modify(|seen| {
                            if let Some(t) = seen.as_mut() {
                                t["status"] = TaskStatus::InputRequired.as_str().into();
                            }
                        });
                        *st.held.entry(link.upstream_name().to_string()).or_default() += 1;
                        None
                    }
                },
            }
        };
        if let Some(e) = refusal {
            tracing::info!(upstream = %link.upstream_name(), task = task_id, "refused a question of a relayed task: {}", e.message);
            link.refuse(upstream_id, e);
        }
    }

    fn status(&self, link: &Arc<Link>, task_id: &str, task: Value) {
        let Some(ours) = self.ours(link, task_id) else { return };
        self.observe(&ours, &task);
        if TaskView::of(&task).status() == Some(TaskStatus::InputRequired) {
            self.follow(link, &ours);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_handed_out_on_the_same_link_and_bounded() {
        let r = RelayedTasks::new(2, 4, crate::tasks::held_inputs::HeldBytes::new(1 << 20));
        let a = r.mint("a", 1, "up-1", json!({}), "o");
        assert_ne!(a, "up-1");
        assert_eq!(r.resolve(&a, "a", 1, "o").as_deref(), Some("up-1"));
        assert_eq!(r.resolve(&a, "b", 1, "o"), None, "per upstream");
        assert_eq!(r.resolve(&a, "a", 2, "o"), None, "a replaced link's task");
        assert_eq!(r.resolve("up-1", "a", 1, "o"), None, "the upstream's id is not the client's");
        assert_eq!(r.resolve(&a, "a", 1, "another"), None, "another owner's");
        assert_eq!(r.ours_at(&At::new("a", 1, "up-1")), Some(a.clone()), "found by the upstream's id");
        let b = r.mint("a", 1, "up-2", json!({}), "o");
        let c = r.mint("a", 1, "up-3", json!({}), "o");
        assert_eq!(r.resolve(&a, "a", 1, "o"), None, "evicted");
        assert_eq!(r.ours_at(&At::new("a", 1, "up-1")), None, "and not found by the upstream's id");
        assert_eq!(r.resolve(&b, "a", 1, "o").as_deref(), Some("up-2"));
        assert_eq!(r.resolve(&c, "a", 1, "o").as_deref(), Some("up-3"));

        // An id the upstream reused stays found when the older task of that id is forgotten.
        let d = r.mint("a", 1, "up-3", json!({}), "o");
        r.mint("a", 1, "up-4", json!({}), "o");
        assert_eq!(r.resolve(&c, "a", 1, "o"), None, "evicted");
        assert_eq!(r.ours_at(&At::new("a", 1, "up-3")), Some(d));
    }

    #[test]
    fn watchers_see_what_changed_and_an_ended_task_keeps_no_questions() {
        let r = RelayedTasks::new(4, 4, crate::tasks::held_inputs::HeldBytes::new(1 << 20));
        let a = r.mint("a", 1, "up-1", json!({}), "o");
        let mut w = r.watch(&a).unwrap();
        assert!(w.borrow().is_none(), "nothing heard yet");
        let working = json!({"taskId": "up-1", "status": "working"});
        r.observe(&a, &working);
        assert!(w.has_changed().unwrap());
        assert_eq!(w.borrow_and_update().as_ref(), Some(&working));
        r.observe(&a, &working);
        assert!(!w.has_changed().unwrap(), "the same again is no change");
        r.observe(&a, &json!({"taskId": "up-1", "status": "completed"}));
        assert_eq!(w.borrow_and_update().as_ref().unwrap()["status"], "completed");
        assert!(r.watch("nope").is_none());
        assert!(r.held_input_requests(&a).is_empty());
    }
}
