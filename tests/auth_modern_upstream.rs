//! Tasks of a 2026-07-28 upstream of the tasks extension, made by 2026-07-28 clients of
//! authenticated principals: bound to the principal that made them, although the upstream
//! (which sees one client, the gateway) hands out guessable ids (`task-1`, `task-2`, …).
//! Another principal's every request about them is answered as for an id nobody has, and
//! none reaches the upstream. Without authentication the ids stay bearer tokens.
//!
//! The scripted server is `common::ext_server`.

use crate::common;

use common::ext_server::{EXT, Server, extension_server};
use common::modern_client as modern;
use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";
const NOBODYS: &str = "0123456789abcdef0123456789abcdef";

struct Setup {
    up: Scripted,
    gw: Gw,
    _dir: tempfile::TempDir,
}

/// The gateway in front of the scripted extension server, with bearer tokens for alice and
/// bob when `auth`.
async fn setup(auth: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let up = Scripted::start(extension_server(Arc::new(Mutex::new(Server::default())))).await;
    let gw = start_gateway(&config(auth, &dir, &up)).await;
    Setup { up, gw, _dir: dir }
}

/// The config of a gateway in front of `up`, its token files in `dir`.
fn config(auth: bool, dir: &tempfile::TempDir, up: &Scripted) -> String {
    let mut config = String::new();
    if auth {
        config.push_str(&bearer_tokens(dir, &[("alice", ALICE), ("bob", BOB)]));
    }
    config.push_str(&http_upstream("up", &up.url()));
    config
}

fn client(gw: &Gw, token: Option<&str>) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.bearer = token.map(str::to_string);
    c
}

fn caps() -> Value {
    json!({"extensions": {EXT: {}}, "elicitation": {}})
}

/// The one message answering modern request `method` with `params`.
async fn ask(c: &HttpMcp, method: &str, params: Value) -> Value {
    let (status, answer, _) = modern::call(c, &modern::request(json!(1), method, params, caps())).await;
    assert_eq!(status, 200, "{method}: {answer}");
    answer
}

/// A task the client makes by calling `tool`: its id.
async fn make(c: &HttpMcp, tool: &str) -> String {
    let created = ask(c, "tools/call", json!({"name": tool, "arguments": {}})).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_string()
}

async fn get(c: &HttpMcp, id: &str) -> Value {
    ask(c, "tasks/get", json!({"taskId": id})).await
}

/// The params of each method asked about task `id`.
fn params_of(method: &str, id: &str) -> Value {
    match method {
        "tasks/update" => {
            json!({"taskId": id, "inputResponses": {"answer": {"action": "accept", "content": {"answer": "red"}}}})
        }
        _ => json!({"taskId": id}),
    }
}

/// The HTTP status and the whole error object `method` of task `id` gets, with the id in its
/// message replaced (so that one for another id compares equal).
async fn error_for(c: &HttpMcp, method: &str, id: &str) -> Value {
    let req = modern::request(json!(1), method, params_of(method, id), caps());
    let (status, answer, _) = modern::call(c, &req).await;
    let mut e = answer.get("error").cloned().unwrap_or_else(|| panic!("{method} of {id} answered {answer}"));
    if let Some(m) = e["message"].as_str() {
        e["message"] = m.replace(id, "<id>").into();
    }
    json!({"status": status, "error": e})
}

/// What the upstream received that names task `id` (as `params.taskId`, or among a listen's
/// `taskIds`).
fn about(up: &Scripted, id: &str) -> usize {
    up.received
        .lock()
        .unwrap()
        .iter()
        .filter(|m| {
            m["params"]["taskId"] == id
                || m["params"]["notifications"]["taskIds"].as_array().is_some_and(|ids| ids.iter().any(|t| t == id))
        })
        .count()
}

/// A `subscriptions/listen` for `ids`: its acknowledgement, and the `notifications/tasks`
/// the stream carries before the scripted server's log line says it sent every one.
async fn listen(c: &HttpMcp, ids: &[&str]) -> (Value, Vec<Value>) {
    let req = modern::request(json!(5), "subscriptions/listen", json!({"notifications": {"taskIds": ids}}), caps());
    let (mut events, ack) = modern::listen_stream(c, &req).await;
    let mut notes = Vec::new();
    for _ in 0..20 {
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await;
        let (_, m) = next.expect("the stream goes on").expect("the stream stays open");
        match m["method"].as_str() {
            Some("notifications/message") if m["params"]["data"] == "granted tasks sent" => return (ack, notes),
            Some("notifications/tasks") => notes.push(m),
            _ => {}
        }
    }
    panic!("no end of the granted tasks' notifications: {notes:?}");
}

#[tokio::test]
async fn another_principals_upstream_tasks_are_as_ids_nobody_has() {
    let Setup { up, gw, _dir } = setup(true).await;
    let alice = client(&gw, Some(ALICE));
    // A task that finishes (three steps, a tasks/get each), one that runs on, one that asks.
    let done = make(&alice, "slow").await;
    for _ in 0..4 {
        get(&alice, &done).await;
    }
    assert_eq!(get(&alice, &done).await["result"]["status"], "completed");
    let running = make(&alice, "endless").await;
    let asking = make(&alice, "ask").await;
    assert_eq!(get(&alice, &asking).await["result"]["status"], "input_required");
    let alices = [&done, &running, &asking];
    let before: Vec<usize> = alices.iter().map(|id| about(&up, id)).collect();
    let received_before = up.received.lock().unwrap().len();

    // Bob, a 2026-07-28 client too, learns alice's ids (here: guesses them).
    let bob = client(&gw, Some(BOB));
    let mut tried = 0;
    for method in ["tasks/get", "tasks/update", "tasks/cancel", "tasks/result"] {
        let expected = error_for(&bob, method, NOBODYS).await;
        // The era has no tasks/result: it is refused (404, -32601) whatever it names.
        let code = if method == "tasks/result" { -32601 } else { -32602 };
        assert_eq!(expected["error"]["code"], code, "{method}: {expected}");
        for id in alices {
            assert_eq!(error_for(&bob, method, id).await, expected, "{method} of alice's {id}");
            tried += 1;
        }
    }
    assert_eq!(tried, 12);
    // A listen for alice's tasks is granted none of them, as for an id nobody has.
    let (expected_ack, _) = listen(&bob, &[NOBODYS]).await;
    let (ack, notes) = listen(&bob, &[&done, &running, &asking]).await;
    assert_eq!(ack["params"]["notifications"], expected_ack["params"]["notifications"], "{ack}");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([]), "{ack}");
    assert_eq!(notes, Vec::<Value>::new(), "no notification of alice's tasks, though the upstream sent them");
    // Nothing about alice's tasks reached the upstream from bob: only his two listens did.
    let after: Vec<usize> = alices.iter().map(|id| about(&up, id)).collect();
    assert_eq!(after, before, "the upstream heard nothing of alice's ids from bob");
    let from_bob: Vec<String> = up.received.lock().unwrap()[received_before..]
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("").to_string())
        .filter(|m| m.starts_with("tasks/"))
        .collect();
    assert_eq!(from_bob, Vec::<String>::new());

    // Bob's own task is his, and alice cannot ask about it.
    let bobs = make(&bob, "endless").await;
    assert_eq!(get(&bob, &bobs).await["result"]["status"], "working");
    let expected = error_for(&alice, "tasks/get", NOBODYS).await;
    assert_eq!(error_for(&alice, "tasks/get", &bobs).await, expected, "alice asking about bob's");

    // Alice still gets, answers, listens to and cancels hers.
    assert_eq!(get(&alice, &done).await["result"]["result"]["content"][0]["text"], "slow done after 3 steps");
    let got = get(&alice, &asking).await;
    assert!(got["result"]["inputRequests"].get("answer").is_some(), "{got}");
    let acked = ask(&alice, "tasks/update", params_of("tasks/update", &asking)).await;
    assert!(acked.get("result").is_some(), "{acked}");
    assert_eq!(get(&alice, &asking).await["result"]["result"]["content"][0]["text"], "answer: red");
    // The scripted server sends every task's notifications on every listen stream: alice's
    // carries hers (the one granted first), never bob's.
    let (ack, notes) = listen(&alice, &[&running, NOBODYS]).await;
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([running]), "{ack}");
    let noted: Vec<&str> = notes.iter().filter_map(|n| n["params"]["taskId"].as_str()).collect();
    assert_eq!(noted.first(), Some(&running.as_str()), "{notes:?}");
    assert!(!noted.contains(&bobs.as_str()), "bob's task on alice's stream: {noted:?}");
    assert_eq!(noted.len(), 3, "alice's three: {noted:?}");
    let acked = ask(&alice, "tasks/cancel", json!({"taskId": running})).await;
    assert!(acked.get("result").is_some(), "{acked}");
    assert_eq!(get(&alice, &running).await["result"]["status"], "cancelled");
    // Another session of alice's (a second connection with her token) sees them too.
    let again = client(&gw, Some(ALICE));
    assert_eq!(get(&again, &done).await["result"]["status"], "completed");
}

#[tokio::test]
async fn without_authentication_an_upstream_task_id_is_a_bearer_token() {
    let Setup { up, gw, _dir } = setup(false).await;
    let maker = client(&gw, None);
    let id = make(&maker, "endless").await;
    // Any client that has the id reaches the task, and the upstream is asked.
    let other = client(&gw, None);
    assert_eq!(get(&other, &id).await["result"]["status"], "working");
    assert_eq!(about(&up, &id), 1);
    let acked = ask(&other, "tasks/cancel", json!({"taskId": id})).await;
    assert!(acked.get("result").is_some(), "{acked}");
    assert_eq!(get(&maker, &id).await["result"]["status"], "cancelled");
    // An id nobody has is the upstream's to answer, as before.
    let unknown = ask(&other, "tasks/get", json!({"taskId": NOBODYS})).await;
    assert_eq!(unknown["error"], json!({"code": -32602, "message": "unknown task"}), "{unknown}");
    let (ack, notes) = listen(&other, &[&id]).await;
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "{ack}");
    assert_eq!(notes.len(), 1, "the one task there is: {notes:?}");
    assert_eq!(notes[0]["params"]["taskId"], id.as_str(), "{notes:?}");
}

#[tokio::test]
async fn a_legacy_client_of_another_principal_cannot_reach_them_by_name_either() {
    let Setup { up, gw, _dir } = setup(true).await;
    let alice = client(&gw, Some(ALICE));
    let running = make(&alice, "endless").await;
    let before = up.received.lock().unwrap().len();
    for version in ["2025-06-18", "2025-11-25"] {
        let mut bob = client(&gw, Some(BOB));
        bob.initialize(version).await;
        for method in ["tasks/get", "tasks/update", "tasks/cancel", "tasks/result"] {
            let mut answers = Vec::new();
            for id in [NOBODYS, running.as_str()] {
                let out = bob.request(method, params_of(method, id)).await;
                let mut e = out.response["error"].clone();
                e["message"] =
                    e["message"].as_str().unwrap_or_else(|| panic!("{:?}", out.response)).replace(id, "<id>").into();
                answers.push(e);
            }
            assert_eq!(answers[0]["code"], -32602, "{version} {method}: {answers:?}");
            assert_eq!(answers[1], answers[0], "{version} {method} of alice's");
        }
        // Its listen (which its era lacks, passed by name) asks for none of hers.
        let listen = json!({"notifications": {"taskIds": [running]}});
        let out = bob.request("subscriptions/listen", listen).await;
        assert!(out.response.get("error").is_some() || out.response.get("result").is_some(), "{:?}", out.response);
    }
    let heard: Vec<Value> = up.received.lock().unwrap()[before..].to_vec();
    let named: Vec<&Value> = heard.iter().filter(|m| m.to_string().contains(&format!("\"{running}\""))).collect();
    assert!(named.is_empty(), "the upstream heard of alice's task from bob: {named:?}");
    // Alice's task is as it was.
    assert_eq!(get(&alice, &running).await["result"]["status"], "working");
}

/// The binding is kept in memory: after a restart a task made before it is unknown to its
/// principal too, and the upstream is not asked about it.
#[tokio::test]
async fn after_a_restart_a_task_made_before_it_is_unknown_to_its_principal_too() {
    use common::gateway_proc::start;
    let dir = tempfile::tempdir().unwrap();
    let up = Scripted::start(extension_server(Arc::new(Mutex::new(Server::default())))).await;
    let path = dir.path().join("config.toml");
    std::fs::write(&path, format!("[server]\nlisten = \"127.0.0.1:0\"\n{}", config(true, &dir, &up))).unwrap();
    let (gw, addr) = start(&path).await;
    let url = format!("http://{addr}/mcp/up");
    let mut alice = HttpMcp::new(&url);
    alice.bearer = Some(ALICE.into());
    let id = make(&alice, "endless").await;
    assert_eq!(get(&alice, &id).await["result"]["status"], "working");
    drop(gw); // SIGTERM, awaited
    let (_gw, addr) = start(&path).await;
    alice.url = format!("http://{addr}/mcp/up");
    let heard = about(&up, &id);
    let expected = error_for(&alice, "tasks/get", NOBODYS).await;
    assert_eq!(expected["error"]["code"], -32602);
    assert_eq!(error_for(&alice, "tasks/get", &id).await, expected);
    assert_eq!(about(&up, &id), heard, "the upstream is not asked");
    // A task made after the restart is hers as before.
    let again = make(&alice, "endless").await;
    assert_eq!(get(&alice, &again).await["result"]["status"], "working");
}
