//! Hosted tasks when the store fails mid-lifecycle (`StoreError::Backend`) as a task ends
//! (the end is kept and written again, `unstored`), or is slower than the questions of a
//! task (its status is shown before it is stored).

use super::*;
use crate::tasks::memory_store::MemoryStore;
use crate::tasks::store::{Edit, StoreFuture};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::watch;

/// A memory store whose next `failing` updates fail: after being applied (`applied`, as a
/// file store whose commit failed: memory has the change, the disk does not), or before
/// (a store that lost the change).
struct Failing {
    mem: MemoryStore,
    failing: AtomicUsize,
    applied: bool,
}

impl TaskStore for Failing {
    fn insert(&self, rec: TaskRecord, client_limit: usize) -> StoreFuture<'_, Result<TaskRecord, StoreError>> {
        TaskStore::insert(&self.mem, rec, client_limit)
    }
    fn get<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        TaskStore::get(&self.mem, id)
    }
    fn update<'a>(&'a self, id: &'a str, f: Edit<'a>) -> StoreFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let fail = self.failing.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        let after = (!fail || self.applied).then(|| self.mem.update(id, f));
        let failed = StoreError::Backend { store: "failing", cause: "the disk is full".into() };
        Box::pin(std::future::ready(if fail { Err(failed) } else { Ok(after.flatten()) }))
    }
    fn list<'a>(
        &'a self,
        owner: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Result<(Vec<TaskRecord>, bool), StoreError>> {
        TaskStore::list(&self.mem, owner, after, limit)
    }
    fn list_all(&self, after: u64, limit: usize) -> StoreFuture<'_, Result<(Vec<TaskRecord>, bool), StoreError>> {
        TaskStore::list_all(&self.mem, after, limit)
    }
    fn watch<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<Option<watch::Receiver<TaskStatus>>, StoreError>> {
        TaskStore::watch(&self.mem, id)
    }
    fn remove_if_expired<'a>(&'a self, id: &'a str, now: SystemTime) -> StoreFuture<'a, Option<TaskRecord>> {
        TaskStore::remove_if_expired(&self.mem, id, now)
    }
    fn last_seq(&self) -> StoreFuture<'_, u64> {
        TaskStore::last_seq(&self.mem)
    }
    fn stored_bytes(&self) -> StoreFuture<'_, usize> {
        TaskStore::stored_bytes(&self.mem)
    }
    fn count(&self) -> StoreFuture<'_, usize> {
        TaskStore::count(&self.mem)
    }
    fn name(&self) -> &'static str {
        "failing"
    }
}

/// A `tasks/result` waiter whose session has gone.
pub(super) struct Nobody;

impl ClientSession for Nobody {
    fn to_client(&self, _: crate::jsonrpc::Message, _: Route) {}
    fn relay_server_request(&self, _: &Arc<Link>, _: Id, _: Value, _: Route, _: Option<Arc<str>>) {}
    fn reaches_client_now(&self) -> bool {
        false
    }
    fn discard_progress(&self, _: &crate::jsonrpc::ProgressToken) {}
    fn owner(&self) -> &str {
        "nobody"
    }
}

async fn hosted(applied: bool) -> (Arc<Hosted>, Arc<Failing>, String) {
    hosted_waiting(applied, TasksConfig::default().store_outage_wait).await
}

/// [`hosted`], with `store_outage_wait` at `wait`.
async fn hosted_waiting(applied: bool, wait: Duration) -> (Arc<Hosted>, Arc<Failing>, String) {
    let store = Arc::new(Failing { mem: MemoryStore::new(10, 1 << 20), failing: AtomicUsize::new(0), applied });
    let h = Hosted::new(&TasksConfig { store_outage_wait: wait, ..TasksConfig::default() }, store.clone());
    h.start_sweeper();
    let policy =
        UpstreamTasks { ttl: Duration::from_millis(50), min_ttl: Duration::from_millis(1), ..Default::default() };
    let rec = h.create(("owner", "client"), "demo", &policy, None, &Value::Null).await.unwrap();
    store.failing.store(1, Ordering::Release);
    (h, store, rec.id)
}

fn answer() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "done"}]}})
}

#[tokio::test(start_paused = true)]
async fn an_end_the_store_holds_though_its_write_failed_still_expires() {
    let (h, store, id) = hosted(true).await;
    h.finish(&id, answer()).await;
    assert_eq!(store.mem.get(&id).unwrap().status, TaskStatus::Completed);
    // Its retention (50 ms) is counted, as any finished task's, on the paused clock: kept
    // before it ends, removed after, and it does not keep its place forever.
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(store.mem.get(&id).is_some(), "kept within its ttl");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(store.mem.get(&id).is_none(), "the finished task is removed once its ttl has passed");
}

#[tokio::test]
async fn an_end_the_store_failed_to_take_is_written_again() {
    let (h, _store, id) = hosted(false).await;
    let waiter = {
        let (h, id) = (h.clone(), id.clone());
        tokio::spawn(async move {
            let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
            h.result(&id, nobody, &Id::Num(3)).await
        })
    };
    tokio::task::yield_now().await;
    h.finish(&id, answer()).await;
    let resp = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("tasks/result hangs").unwrap();
    assert_eq!(resp["result"]["content"][0]["text"], "done", "{resp}");
}

/// A link to the in-process demo server, reporting to `h`.
pub(super) async fn demo_link(h: &Arc<Hosted>) -> Arc<Link> {
    let http = crate::transport::http_client::HttpClient::new(1 << 20, Duration::from_secs(5));
    let permits = crate::client_slots::ClientSlots::new(4, 4);
    let limits = crate::config::ServerConfig::default();
    let relayed = crate::tasks::relayed::RelayedTasks::new(10, 10, crate::tasks::held_inputs::HeldBytes::new(1 << 20));
    let env = crate::upstream::link::LinkEnv {
        http: &http,
        permits: &permits,
        client: None,
        limits: &limits,
        tasks: h.clone(),
        relayed,
        credential: None,
    };
    Link::connect(env, &crate::config::UpstreamConfig::plain_demo(), 1, false).await.unwrap()
}

#[tokio::test]
async fn a_cancel_the_store_failed_to_write_names_the_store_and_ends_the_hot_state() {
    let (h, store, id) = hosted(true).await;
    let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
    h.track(&id, demo_link(&h).await, nobody, None);
    let err = h.cancel(&id).await.unwrap_err();
    assert_eq!(err.code, jsonrpc::INTERNAL_ERROR);
    assert!(err.message.contains("failing task store"), "{}", err.message);
    assert_eq!(store.mem.get(&id).unwrap().status, TaskStatus::Cancelled, "the store holds the cancel");
    assert!(!h.runs(&id), "so the task no longer runs here: its hot state (and link) are let go");
}

/// A `tasks/result` waiting on task `id`, which runs on the demo link, once it waits.
async fn waiting_result(h: &Arc<Hosted>, id: &str) -> tokio::task::JoinHandle<Value> {
    let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
    h.track(id, demo_link(h).await, nobody.clone(), None);
    let waiter = {
        let (h, id) = (h.clone(), id.to_string());
        tokio::spawn(async move { h.result(&id, nobody, &Id::Num(3)).await })
    };
    for _ in 0..100 {
        if h.running.lock().unwrap().get(id).is_some_and(|r| !r.result_waiters.is_empty()) {
            break;
        }
        tokio::task::yield_now().await;
    }
    waiter
}

#[tokio::test]
async fn an_end_the_store_refused_is_kept_written_when_it_comes_back_and_then_expires() {
    let (h, store, id) = hosted(false).await;
    // Both writes of the end fail, and the next three tries too: the store is back after.
    store.failing.store(5, Ordering::Release);
    let waiter = waiting_result(&h, &id).await;
    h.finish(&id, answer()).await;
    assert!(!h.runs(&id), "its call and link are let go at once");
    let resp = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("tasks/result hangs").unwrap();
    assert_eq!(resp["result"]["content"][0]["text"], "done", "the waiter gets the result once stored: {resp}");
    assert_eq!(store.mem.get(&id).unwrap().status, TaskStatus::Completed);
    // Retained as any finished task (ttl 50 ms), then removed: its owner's place is given back.
    let mut gone = false;
    for _ in 0..100 {
        if store.mem.is_empty() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the task's place in the store (and its owner's quota) is released");
}

#[tokio::test]
async fn a_result_waiting_on_a_store_that_stays_down_answers_naming_it_within_the_bound() {
    let (h, store, id) = hosted_waiting(false, Duration::from_millis(300)).await;
    store.failing.store(usize::MAX, Ordering::Release);
    let waiter = waiting_result(&h, &id).await;
    h.finish(&id, answer()).await;
    let resp = tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("tasks/result hangs").unwrap();
    assert_eq!(resp["error"]["code"], jsonrpc::INTERNAL_ERROR, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("failing task store") && message.contains("store_outage_wait"), "{message}");
    // A later tasks/result on the kept end waits the bound too, and answers alike.
    let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
    let again = tokio::time::timeout(Duration::from_secs(5), h.result(&id, nobody.clone(), &Id::Num(4))).await;
    assert_eq!(again.expect("bounded")["error"]["code"], jsonrpc::INTERNAL_ERROR);
    // The store comes back: the end is written, and a tasks/result then gets it.
    store.failing.store(0, Ordering::Release);
    for _ in 0..100 {
        if store.mem.get(&id).unwrap().status.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.mem.get(&id).unwrap().status, TaskStatus::Completed, "written once the store is back");
    let resp = tokio::time::timeout(Duration::from_secs(5), h.result(&id, nobody, &Id::Num(5))).await.expect("bounded");
    assert_eq!(resp["result"]["content"][0]["text"], "done", "{resp}");
}

#[tokio::test]
async fn a_question_shows_its_task_input_required_before_the_store_hears_of_it() {
    let (h, store, id) = hosted(false).await;
    store.failing.store(0, Ordering::Release);
    let nobody: Weak<dyn ClientSession> = Weak::<Nobody>::new();
    h.track(&id, demo_link(&h).await, nobody, None);
    // The store's write is a task of its own, not run yet on this one-thread runtime.
    h.input_asked_soon(&id);
    assert_eq!(h.status(&id).await.unwrap().0, TaskStatus::InputRequired, "shown at once");
    assert_eq!(h.get(&id).await.unwrap()["status"], "input_required");
    h.input_answered_soon(&id);
    assert_eq!(h.status(&id).await.unwrap().0, TaskStatus::Working);
    // Both writes done, the store agrees.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    assert_eq!(TaskStore::get(&*store, &id).await.unwrap().unwrap().status, TaskStatus::Working);
}
