//! The progress states' bounds and lifecycle.

use super::*;

struct Store(ProgressStates, usize);

impl std::ops::Deref for Store {
    type Target = ProgressStates;
    fn deref(&self) -> &ProgressStates {
        &self.0
    }
}

impl Store {
    fn begin(&self, owner: &Arc<str>, token: &ProgressToken) -> bool {
        self.0.begin(owner, token, self.1)
    }
}

fn store(max_states: usize, per_owner: usize) -> Store {
    Store(
        ProgressStates::new(Limits {
            max_states,
            max_result_bytes: 1000,
            max_bytes: 10_000,
            max_message_bytes: 64,
            max_token_bytes: 300,
        }),
        per_owner,
    )
}

fn tok(s: &str) -> ProgressToken {
    ProgressToken::Str(s.into())
}

const KEEP: Duration = Duration::from_secs(60);

#[test]
fn a_request_goes_from_working_to_completed_with_its_result() {
    let s = store(10, 10);
    let o: Arc<str> = "a".into();
    assert!(s.begin(&o, &tok("t")));
    s.progress(&o, &tok("t"), &json!({"progress": 5, "total": 10, "message": "half"}));
    let got = s.get(&o, &tok("t")).unwrap();
    assert_eq!(got["_meta"]["progress"]["state"], "working");
    assert_eq!(got["_meta"]["progress"]["progress"], 5);
    assert_eq!(got["_meta"]["progress"]["message"], "half");
    let meta = s.ended(&o, &tok("t"), &json!({"result": {"content": [{"type": "text", "text": "done"}]}}), KEEP);
    assert_eq!(meta.unwrap()["state"], "completed");
    let got = s.get(&o, &tok("t")).unwrap();
    assert_eq!(got["content"][0]["text"], "done");
    assert_eq!(got["_meta"]["progress"]["state"], "completed");
    // Another owner does not see it.
    assert!(s.get(&"b".into(), &tok("t")).is_err());
}

#[test]
fn errors_fail_and_questions_require_input() {
    let s = store(10, 10);
    let o: Arc<str> = "a".into();
    s.begin(&o, &tok("t"));
    s.input_asked(&o, &tok("t"));
    assert_eq!(s.get(&o, &tok("t")).unwrap()["_meta"]["progress"]["state"], "input-required");
    s.input_answered(&o, &tok("t"));
    assert_eq!(s.get(&o, &tok("t")).unwrap()["_meta"]["progress"]["state"], "working");
    s.ended(&o, &tok("t"), &json!({"error": {"code": -32603, "message": "boom"}}), KEEP);
    let got = s.get(&o, &tok("t")).unwrap();
    assert_eq!(got["_meta"]["progress"]["state"], "failed");
    assert_eq!(got["error"]["message"], "boom");
}

#[test]
fn an_open_token_is_continued_and_an_ended_one_starts_over() {
    let s = store(10, 10);
    let o: Arc<str> = "a".into();
    s.begin(&o, &tok("t"));
    s.begin(&o, &tok("t"));
    // The first of the two ends: the state is still the second's.
    s.ended(&o, &tok("t"), &json!({"result": {"content": []}}), KEEP);
    assert_eq!(s.get(&o, &tok("t")).unwrap()["_meta"]["progress"]["state"], "working");
    s.ended(&o, &tok("t"), &json!({"result": {"content": [], "n": 2}}), KEEP);
    assert_eq!(s.get(&o, &tok("t")).unwrap()["n"], 2);
    // A server that speaks the proposal asks for the next turn: the token stays open.
    s.begin(&o, &tok("u"));
    let turn = json!({"result": {"content": [], "_meta": {"progress": {"state": "input_required"}}}});
    assert_eq!(s.ended(&o, &tok("u"), &turn, KEEP).unwrap()["state"], "input-required");
    s.begin(&o, &tok("u"));
    assert_eq!(s.get(&o, &tok("u")).unwrap()["_meta"]["progress"]["state"], "working");
    // An ended token starts over: its old result is gone.
    s.begin(&o, &tok("t"));
    assert!(s.get(&o, &tok("t")).unwrap().get("n").is_none());
    assert_eq!(s.usage().0, 2);
}

#[test]
fn limits_evict_ended_states_and_never_open_ones() {
    let s = store(2, 2);
    let o: Arc<str> = "a".into();
    s.begin(&o, &tok("1"));
    s.begin(&o, &tok("2"));
    // Both open: no room for a third.
    assert!(!s.begin(&o, &tok("3")));
    s.ended(&o, &tok("1"), &json!({"result": {}}), KEEP);
    assert!(s.begin(&o, &tok("3")));
    assert!(s.get(&o, &tok("1")).is_err());
    assert_eq!(s.usage().0, 2);
    // Another owner's ended state is not this owner's to take under its own cap.
    let s = store(10, 1);
    let b: Arc<str> = "b".into();
    s.begin(&b, &tok("x"));
    s.ended(&b, &tok("x"), &json!({"result": {}}), KEEP);
    s.begin(&o, &tok("y"));
    assert!(!s.begin(&o, &tok("z")));
    assert!(s.get(&b, &tok("x")).is_ok());
}

#[test]
fn retention_passes_and_large_results_are_not_kept() {
    let s = store(10, 10);
    let o: Arc<str> = "a".into();
    s.begin(&o, &tok("t"));
    s.ended(&o, &tok("t"), &json!({"result": {}}), Duration::ZERO);
    assert!(s.get(&o, &tok("t")).is_err());
    assert_eq!(s.usage(), (0, 0));
    s.begin(&o, &tok("big"));
    let big = "x".repeat(2000);
    s.ended(&o, &tok("big"), &json!({"result": {"text": big}}), KEEP);
    let got = s.get(&o, &tok("big")).unwrap();
    assert_eq!(got["_meta"]["progress"]["state"], "completed");
    assert!(got["_meta"]["progress"]["message"].as_str().unwrap().contains("too large"));
    assert!(s.usage().1 < 1000, "the state without its result: {:?}", s.usage());
    s.drop_owner(&o);
    assert_eq!(s.usage(), (0, 0));
}

#[test]
fn a_state_is_counted_whole_token_message_and_error_included() {
    let s = store(100, 100);
    let o: Arc<str> = "a".into();
    // A token too long is not followed (past max_token_bytes, or one state's bound).
    assert!(!s.begin(&o, &tok(&"t".repeat(301))));
    assert_eq!(s.usage(), (0, 0));
    // Tokens count toward the bytes of all states: open states of 700 bytes each fill
    // 10 000 in 14; the 15th finds no room, then takes an ended one's.
    for i in 0..14 {
        assert!(s.begin(&o, &tok(&format!("{i:0>222}"))), "state {i}");
    }
    assert!(s.usage().1 <= 10_000);
    assert!(!s.begin(&o, &tok(&format!("{:0>222}", 14))), "no room: all open");
    s.ended(&o, &tok(&format!("{:0>222}", 0)), &json!({"result": {}}), KEEP);
    assert!(s.begin(&o, &tok(&format!("{:0>222}", 14))));
    assert!(s.get(&o, &tok(&format!("{:0>222}", 0))).is_err(), "the ended one made room");
    assert!(s.usage().1 <= 10_000);

    let s = store(100, 100);
    s.begin(&o, &tok("t"));
    let before = s.usage().1;
    // A progress message is cut; progress values that are not numbers are not kept.
    s.progress(&o, &tok("t"), &json!({"progress": "x".repeat(5000), "total": 9, "message": "m".repeat(5000)}));
    let got = s.get(&o, &tok("t")).unwrap();
    let meta = &got["_meta"]["progress"];
    assert!(meta.get("progress").is_none());
    assert_eq!(meta["total"], 9);
    assert!(meta["message"].as_str().unwrap().len() <= 64);
    assert!(s.usage().1 <= before + 64);
    // An error whose data does not fit keeps its code and cut message.
    let err = json!({"error": {"code": -32603, "message": "e".repeat(5000), "data": "d".repeat(5000)}});
    s.ended(&o, &tok("t"), &err, KEEP);
    let got = s.get(&o, &tok("t")).unwrap();
    assert_eq!(got["error"]["code"], -32603);
    assert!(got["error"].get("data").is_none());
    assert!(got["error"]["message"].as_str().unwrap().len() <= 64);
    assert!(s.usage().1 <= 1000);
    // The answer for an unknown token does not repeat a long token whole.
    let unknown = s.get(&o, &tok(&"u".repeat(5000))).unwrap_err();
    assert!(unknown.message.len() < 400, "{}", unknown.message.len());
}

#[tokio::test(start_paused = true)]
async fn an_ended_state_is_removed_when_its_retention_passes_without_being_asked_for() {
    let s = store(10, 10);
    let o: Arc<str> = "a".into();
    s.begin(&o, &tok("t"));
    s.ended(&o, &tok("t"), &json!({"result": {"n": 1}}), KEEP);
    tokio::time::advance(KEEP - Duration::from_secs(1)).await;
    assert_eq!(s.get(&o, &tok("t")).unwrap()["n"], 1, "kept within its retention");
    tokio::time::advance(Duration::from_secs(1)).await;
    // The removing task runs at the retention's end: nothing asked for the state.
    tokio::task::yield_now().await;
    assert_eq!(s.usage(), (0, 0), "removed at the end of its retention");
}
