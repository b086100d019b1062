//! The streams of a session: routing, replay, bounds, parked single-request POSTs.

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

/// A single-request POST's stream, attached at once (its channel made).
fn post(s: &Streams, id: i64, json_only: bool) -> Result<(u64, mpsc::Receiver<Outgoing>), Id> {
    let sid = s.open_single(&Id::Num(id), json_only)?;
    let (held, rx) = s.attach(sid);
    assert!(held.is_empty());
    Ok((sid, rx.expect("still open")))
}

fn ids(v: &[i64]) -> Vec<Id> {
    v.iter().map(|n| Id::Num(*n)).collect()
}

#[test]
fn response_ends_its_stream_and_replays_after_disconnect() {
    let s = Streams::new(16);
    let (sid, mut rx) = post(&s, 1, false).unwrap();
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
    let (_a, _rx_a) = post(&s, 1, false).unwrap();
    let (opened, accepted) = s.open_batch(&ids(&[1, 2, 2, 3]), false);
    assert_eq!(accepted, vec![false, true, false, true]);
    let (sid, mut rx) = opened.unwrap();
    s.deliver(m(json!({"id": 2})), Route::Response(Id::Num(2)));
    s.deliver(m(json!({"id": 3})), Route::Response(Id::Num(3)));
    assert_eq!(rx.try_recv().unwrap().stream, sid);
    assert_eq!(rx.try_recv().unwrap().stream, sid);
    assert!(rx.try_recv().is_err() && !s.state.lock().unwrap().streams.contains_key(&sid), "the stream ended");
    assert!(s.open_batch(&ids(&[1]), false).0.is_none(), "nothing accepted, nothing opened");
    let before = s.state.lock().unwrap().streams.len();
    assert!(post(&s, 1, false).is_err(), "an id in use");
    assert_eq!(s.state.lock().unwrap().streams.len(), before, "a refused POST leaves nothing");
}

#[test]
fn a_parked_post_gets_what_came_while_it_was_handed_on_and_then_a_channel() {
    let s = Streams::new(16);
    // The answer came at once: taken with the stream already ended, no channel made.
    let sid = s.open_single(&Id::Num(1), false).unwrap();
    s.deliver(m(json!({"id": 1})), Route::Response(Id::Num(1)));
    let (held, rx) = s.attach(sid);
    assert!(rx.is_none() && held.len() == 1 && held[0].is_response);
    assert!(!s.state.lock().unwrap().streams.contains_key(&sid) && s.state.lock().unwrap().parked.is_empty());
    // Progress first, the answer later: held, then the channel carries the rest.
    let sid = s.open_single(&Id::Num(2), false).unwrap();
    s.deliver(m(json!({"p": 1})), Route::Related(Id::Num(2)));
    let (held, rx) = s.attach(sid);
    assert_eq!(held.len(), 1);
    s.deliver(m(json!({"id": 2})), Route::Response(Id::Num(2)));
    assert!(rx.expect("still open").try_recv().unwrap().is_response);
    // A POST gone before attaching leaves nothing held, also for what comes after it went.
    let sid = s.open_single(&Id::Num(3), false).unwrap();
    s.deliver(m(json!({"p": 3})), Route::Related(Id::Num(3)));
    s.unpark(sid);
    s.deliver(m(json!({"id": 3})), Route::Response(Id::Num(3)));
    assert!(s.state.lock().unwrap().parked.is_empty());
    assert!(!s.state.lock().unwrap().streams.contains_key(&sid), "answered, the stream ended");
    // Bounded as a channel is: past its room only what was held.
    let sid = s.open_single(&Id::Num(4), false).unwrap();
    for i in 0..100 {
        s.deliver(m(json!({"i": i})), Route::Related(Id::Num(4)));
    }
    let (held, rx) = s.attach(sid);
    assert!(held.len() <= 17 && rx.is_none(), "{} held", held.len());
}

/// An answer taken at once goes out as a plain JSON body, which no client can resume: it
/// leaves the replay buffer as the POST attaches. One that came after progress is the end
/// of an event stream, and stays there for a client that resumes it.
#[test]
fn an_answer_taken_at_once_leaves_the_replay_buffer_and_one_after_progress_stays() {
    let s = Streams::new(16);
    let buffered = |s: &Streams| s.state.lock().unwrap().buffer.len();
    let sid = s.open_single(&Id::Num(1), false).unwrap();
    s.deliver(m(json!({"id": 1})), Route::Response(Id::Num(1)));
    assert_eq!(buffered(&s), 1);
    let (held, _) = s.attach(sid);
    assert!(held[0].is_response);
    assert_eq!(buffered(&s), 0, "the answer that goes out as JSON is not kept for a resume");

    let sid = s.open_single(&Id::Num(2), false).unwrap();
    s.deliver(m(json!({"p": 2})), Route::Related(Id::Num(2)));
    s.deliver(m(json!({"id": 2})), Route::Response(Id::Num(2)));
    let (held, _) = s.attach(sid);
    assert_eq!(held.len(), 2);
    let resumed = s.resume(&held[0].event_id()).expect("a stream of ours");
    let replayed: Vec<bool> = resumed.replay.iter().map(|o| o.is_response).collect();
    assert_eq!(replayed, vec![true], "the answer after progress is the stream's, kept for a resume");
}

#[test]
fn a_parked_post_keeps_its_session_in_use_and_is_not_taken_by_a_resume() {
    let s = Streams::new(16);
    let sid = s.open_single(&Id::Num(1), false).unwrap();
    s.state.lock().unwrap().last_activity = Instant::now() - std::time::Duration::from_secs(60);
    assert!(s.idle_until(std::time::Duration::from_secs(1)).is_some(), "a call being handed on is activity");
    s.deliver(m(json!({"p": 1})), Route::Related(Id::Num(1)));
    let first = s.state.lock().unwrap().parked[&sid][0].event_id();
    let resumed = s.resume(&first).expect("a stream of ours");
    assert!(resumed.rx.is_none(), "the POST keeps its stream");
    let (held, rx) = s.attach(sid);
    assert_eq!(held.len(), 1);
    s.deliver(m(json!({"id": 1})), Route::Response(Id::Num(1)));
    assert!(rx.expect("still open").try_recv().unwrap().is_response);
}

#[test]
fn a_json_only_post_carries_nothing_but_its_response() {
    let s = Streams::new(16);
    let (_sid, mut rx) = post(&s, 1, true).unwrap();
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
    let (sid, rx) = post(&s, 7, false).unwrap();
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
    let (_a, mut rx_a) = post(&s, 1, false).unwrap();
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
    let (_sid, _rx) = post(&s, 7, false).unwrap();
    assert!(post(&s, 7, false).is_err());
    for i in 0..100 {
        s.deliver(m(json!({"i": i})), Route::Related(Id::Num(7)));
    }
    assert!(s.state.lock().unwrap().buffer.len() <= 4);
    for _ in 0..100 {
        s.deliver(m(json!({})), Route::Unrelated);
    }
    assert!(s.state.lock().unwrap().undelivered.len() <= 4);
}

/// What a test's log lines are written into.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<crate::locks::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_flood_of_messages_dropped_for_want_of_a_get_stream_logs_one_warning() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    tracing::subscriber::with_default(subscriber, || {
        let s = Streams::new(16);
        for n in 0..2000 {
            s.deliver(m(json!({"n": n})), Route::Unrelated);
        }
    });
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let lines = text.lines().filter(|l| l.contains("session event buffer full")).count();
    assert_eq!(lines, 1, "one line within the interval, not one per dropped message:\n{text}");
}
