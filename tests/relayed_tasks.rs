//! A 2026-07-28 client of the tasks extension in front of a 2025-11-25 task server: its
//! tasks are the upstream's, relayed under ids of the gateway's. What the server asks during
//! such a task reaches the client as `inputRequests` in `tasks/get`, and its `tasks/update`
//! answers it upstream.
//!
//! The scripted server runs `ask` as task `up-1`: `input_required` until the gateway has
//! answered its elicitation (sent on the stream of a `tasks/result`, tagged with the task),
//! then `completed` with a result that says what the answer was (and a status notification
//! saying so on that stream).

use crate::common;

use common::modern_client::*;
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const ELICIT: &str = "elicit-1";

fn ext_with(caps: Value) -> Value {
    let mut c = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    if let (Some(c), Some(more)) = (c.as_object_mut(), caps.as_object()) {
        c.extend(more.clone());
    }
    c
}

fn ext() -> Value {
    ext_with(json!({"elicitation": {}}))
}

/// The gateway's answer to the server's elicitation, once it has come.
fn answer_of(got: &[Value]) -> Option<Value> {
    got.iter().find(|m| m.get("method").is_none() && m["id"] == ELICIT).cloned()
}

/// What the task's result says of the answer.
fn outcome(answer: &Value) -> String {
    match answer.get("result") {
        Some(r) => format!("answer: {}", r["content"]["colour"].as_str().unwrap_or("?")),
        None => format!("refused: {}", answer["error"]["code"]),
    }
}

/// A core task of a scripted server: `id`, in `status`, polled every `poll_ms`.
fn up_task(id: &str, status: &str, poll_ms: u64) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": poll_ms})
}

/// What a scripted 2025-11-25 task server answers whatever its tasks do: `initialize` (with
/// tasks), no `server/discover`, its one tool `tool` (a task required), and a call of it
/// (task `task_id`, working).
fn task_server_basics(req: &Value, tool: &str, task_id: &str) -> Option<Vec<Step>> {
    Some(match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
        "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
        "tools/list" => vec![reply(
            req,
            json!({"tools": [{"name": tool, "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
        )],
        "tools/call" => vec![reply(req, json!({"task": up_task(task_id, "working", 50)}))],
        _ => return None,
    })
}

async fn asking_task_server() -> Scripted {
    Scripted::start(move |req| {
        let task = |status: &str| up_task("up-1", status, 50);
        if let Some(steps) = task_server_basics(req, "ask", "up-1") {
            return steps;
        }
        let req = req.clone();
        match req["method"].as_str().unwrap_or("") {
            "tasks/get" => vec![Step::Then(Arc::new(move |got: &[Value]| {
                let status = if answer_of(got).is_some() { "completed" } else { "input_required" };
                vec![reply(&req, task(status))]
            }))],
            "tasks/result" => vec![Step::Then(Arc::new(move |got: &[Value]| {
                let req = req.clone();
                let result = move |answer: &Value| json!({"content": [{"type": "text", "text": outcome(answer)}]});
                if let Some(a) = answer_of(got) {
                    return vec![reply(&req, result(&a))];
                }
                let elicit = json!({"jsonrpc": "2.0", "id": ELICIT, "method": "elicitation/create", "params": {
                    "message": "colour?", "requestedSchema": {"type": "object", "properties": {"colour": {"type": "string"}}},
                    "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "up-1"}}}});
                vec![
                    Step::Send(elicit),
                    Step::AwaitResponse(json!(ELICIT)),
                    Step::Then(Arc::new(move |got: &[Value]| {
                        let a = answer_of(got).expect("answered");
                        let done = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task("completed")});
                        vec![Step::Send(done), reply(&req, result(&a))]
                    })),
                ]
            }))],
            _ => vec![reply(&req, json!({}))],
        }
    })
    .await
}

async fn get(c: &HttpMcp, task: &str, caps: &Value) -> Value {
    call(c, &request(json!("g"), "tasks/get", json!({"taskId": task}), caps.clone())).await.1
}

/// Polls `tasks/get` until `done` holds of its answer (bounded).
async fn poll_until(c: &HttpMcp, task: &str, caps: &Value, done: impl Fn(&Value) -> bool) -> Value {
    poll(&format!("task {task} gets there"), async || {
        let last = get(c, task, caps).await;
        done(&last).then_some(last)
    })
    .await
}

async fn gateway_for(up: &Scripted) -> Gw {
    let never = "[upstream.tasks]\nhosted = \"never\"\n";
    let config = format!("{}{never}{}{never}", http_upstream("up", &up.url()), http_upstream("other", &up.url()));
    start_gateway(&config).await
}

/// The asking task server, a gateway in front of it, and a client of its `up`.
async fn asking_setup() -> (Scripted, Gw, HttpMcp) {
    let up = asking_task_server().await;
    let gw = gateway_for(&up).await;
    let c = HttpMcp::new(&gw.url("up"));
    (up, gw, c)
}

/// Polls `tasks/get` until the task shows an input request; returns that answer.
async fn poll_until_asked(c: &HttpMcp, task: &str, caps: &Value) -> Value {
    poll_until(c, task, caps, |r| r["result"]["inputRequests"].as_object().is_some_and(|m| !m.is_empty())).await
}

async fn start_ask(c: &HttpMcp, caps: &Value) -> String {
    let (_, r, _) =
        call(c, &request(json!(1), "tools/call", json!({"name": "ask", "arguments": {}}), caps.clone())).await;
    assert_eq!(r["result"]["resultType"], "task", "{r}");
    r["result"]["taskId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_upstreams_question_is_shown_and_answered_through_tasks_update() {
    let (up, gw, c) = asking_setup().await;
    let caps = ext();
    let id = start_ask(&c, &caps).await;

    let waiting = poll_until_asked(&c, &id, &caps).await;
    let w = &waiting["result"];
    assert_eq!((w["status"].as_str(), w["taskId"].as_str()), (Some("input_required"), Some(id.as_str())), "{waiting}");
    let requests = w["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{w}");
    let (key, asked) = requests.iter().next().unwrap();
    assert_eq!(
        (asked["method"].as_str(), asked["params"]["message"].as_str()),
        (Some("elicitation/create"), Some("colour?"))
    );
    assert!(asked["params"].get("_meta").is_none(), "the related-task tag is the upstream's: {asked}");
    // Asked again, the same question under the same key.
    assert_eq!(get(&c, &id, &caps).await["result"]["inputRequests"], w["inputRequests"]);

    let update = |responses: Value| {
        request(json!("u"), "tasks/update", json!({"taskId": id, "inputResponses": responses}), caps.clone())
    };
    // A key that is not outstanding is ignored: acknowledged, nothing goes upstream.
    let (_, r, _) = call(&c, &update(json!({"no-such-key": {"action": "accept", "content": {"colour": "red"}}}))).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    assert!(answer_of(&up.received.lock().unwrap()).is_none(), "not answered upstream");
    assert_eq!(get(&c, &id, &caps).await["result"]["inputRequests"], w["inputRequests"], "still outstanding");

    // The task's id at another upstream, and an id no one handed out: not found.
    let other = HttpMcp::new(&gw.url("other"));
    let (_, r, _) = call(&other, &update(json!({key.clone(): {"action": "decline"}}))).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let unknown = request(json!("x"), "tasks/update", json!({"taskId": "up-1", "inputResponses": {}}), caps.clone());
    assert_eq!(call(&c, &unknown).await.1["error"]["code"], -32602, "the upstream's own id is not a client's");
    assert!(answer_of(&up.received.lock().unwrap()).is_none(), "still not answered upstream");

    let (_, r, _) = call(&c, &update(json!({key.clone(): {"action": "accept", "content": {"colour": "blue"}}}))).await;
    assert_eq!(r["result"], json!({"resultType": "complete"}), "{r}");
    let done = poll_until(&c, &id, &caps, |r| r["result"]["status"] == "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "answer: blue", "{done}");
    let sent = answer_of(&up.received.lock().unwrap()).unwrap();
    assert_eq!(sent["result"]["action"], "accept", "the client's answer, as it gave it: {sent}");
    assert!(done["result"].get("inputRequests").is_none(), "{done}");
}

#[tokio::test]
async fn a_question_the_client_did_not_declare_it_can_answer_is_refused_upstream() {
    let (_up, _gw, c) = asking_setup().await;
    // The extension, and sampling, but not elicitation.
    let caps = ext_with(json!({"sampling": {}}));
    let id = start_ask(&c, &caps).await;
    let done = poll_until(&c, &id, &caps, |r| {
        assert!(
            r["result"]["inputRequests"].as_object().is_none_or(|m| m.is_empty()),
            "never shown to the client: {r}"
        );
        r["result"]["status"] == "completed"
    })
    .await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "refused: -32601", "{done}");
}

/// `subscriptions/listen` with `taskIds`: the upstream's status notification for a relayed
/// task reaches the stream as the extension's `notifications/tasks`, under the client's id
/// and with the outcome inline; the upstream's own id is not granted.
#[tokio::test]
async fn a_listen_stream_carries_the_upstreams_status_of_a_relayed_task() {
    let (_up, _gw, c) = asking_setup().await;
    let caps = ext();
    let id = start_ask(&c, &caps).await;
    let waiting = poll_until_asked(&c, &id, &caps).await;
    let key = waiting["result"]["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();

    let listen =
        request(json!(7), "subscriptions/listen", json!({"notifications": {"taskIds": [id, "up-1"]}}), caps.clone());
    let (mut events, ack) = listen_stream(&c, &listen).await;
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}), "{ack}");

    let update = request(
        json!("u"),
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"colour": "green"}}}}),
        caps.clone(),
    );
    assert_eq!(call(&c, &update).await.1["result"], json!({"resultType": "complete"}));
    let (_, note) = events.next().await.expect("the task's notification");
    assert_eq!(note["method"], "notifications/tasks", "{note}");
    let p = &note["params"];
    assert_eq!((p["taskId"].as_str(), p["status"].as_str()), (Some(id.as_str()), Some("completed")), "{note}");
    assert_eq!(
        (p["ttlMs"].as_u64(), p["pollIntervalMs"].as_u64()),
        (Some(60000), Some(50)),
        "the extension's names: {note}"
    );
    assert!(p.get("ttl").is_none(), "{note}");
    assert_eq!(p["result"]["content"][0]["text"], "answer: green", "the outcome inline: {note}");
    assert_eq!(p["_meta"]["io.modelcontextprotocol/subscriptionId"], 7, "{note}");
}

/// The same over a stdio upstream, whose lines say nothing of which request a question
/// serves: the related-task tag alone places it. The script keeps its one answer in a file.
#[tokio::test]
async fn over_a_stdio_upstream_too() {
    const ARMS: &str = r#"
    tools/list) reply '{"tools":[{"name":"ask","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}' ;;
    ask) reply "{\"task\":$(printf "$TASK" working)}" ;;
    tasks/get) if [ -f "$ANSWER" ]; then reply "$(printf "$TASK" completed)"; else reply "$(printf "$TASK" input_required)"; fi ;;
    tasks/result)
        asker=$id
        if [ ! -f "$ANSWER" ]; then
            printf '{"jsonrpc":"2.0","id":"elicit-1","method":"elicitation/create","params":{"message":"colour?","requestedSchema":{"type":"object"},"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}}\n'
            while IFS= read -r l; do
                case "$l" in
                    *'"id":"elicit-1"'*) sed -n 's/.*"colour":"\([^"]*\)".*/\1/p' <<<"$l" > "$ANSWER"; break ;;
                    *'"method":"tasks/get"'*) id=$(sed -n 's/^{[^{]*"id":\([0-9]*\).*/\1/p' <<<"$l"); reply "$(printf "$TASK" input_required)" ;;
                esac
            done
        fi
        id=$asker
        reply "{\"content\":[{\"type\":\"text\",\"text\":\"answer: $(cat "$ANSWER")\"}]}" ;;
"#;
    let script = StdioScript::new(ARMS);
    let answer = script.path().with_file_name("answer");
    let caps = r#"{"tools":{},"tasks":{"requests":{"tools":{"call":{}}}}}"#;
    let task = r#"{"taskId":"up-1","status":"%s","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":50}"#;
    let table = format!(
        "{}env = {{ ANSWER = {:?}, CAPS = {caps:?}, TASK = {task:?} }}\n[upstream.tasks]\nhosted = \"never\"\n",
        script.upstream("up"),
        answer.to_str().unwrap()
    );
    let mut c = StdioMcp::start(&table, "up").await;
    let caps = ext();
    c.send(&request(json!(1), "tools/call", json!({"name": "ask", "arguments": {}}), caps.clone())).await;
    let r = c.wait_response(1).await;
    assert_eq!(r.result()["resultType"], "task", "{:?}", r.response);
    let id = r.result()["taskId"].as_str().unwrap().to_string();
    let mut n = 100;
    let mut get = async |c: &mut StdioMcp| {
        n += 1;
        c.send(&request(json!(n), "tasks/get", json!({"taskId": id}), caps.clone())).await;
        c.wait_response(n).await.response
    };
    let asked = poll("the task asks", async || {
        let asked = get(&mut c).await;
        asked["result"]["inputRequests"].as_object().is_some_and(|m| !m.is_empty()).then_some(asked)
    })
    .await;
    let key = asked["result"]["inputRequests"].as_object().expect("asked").keys().next().unwrap().clone();
    assert_eq!(asked["result"]["inputRequests"][&key]["params"]["message"], "colour?", "{asked}");
    let update = request(
        json!(2),
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"colour": "red"}}}}),
        caps.clone(),
    );
    c.send(&update).await;
    assert_eq!(c.wait_response(2).await.response["result"], json!({"resultType": "complete"}));
    let done = poll("the task completes", async || {
        let done = get(&mut c).await;
        (done["result"]["status"] == "completed").then_some(done)
    })
    .await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "answer: red", "{done}");
}

/// Questions held for a relayed task are bounded by `max_in_flight`: past it, the upstream
/// gets -32004 and the client sees only those held.
#[tokio::test]
async fn questions_held_for_a_task_are_bounded() {
    let up = Scripted::start(|req| {
        let task = json!({"taskId": "up-1", "status": "input_required", "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 50});
        let ask = |n: u32| {
            Step::Send(json!({"jsonrpc": "2.0", "id": format!("q-{n}"), "method": "elicitation/create", "params": {
                "message": format!("question {n}"), "requestedSchema": {"type": "object"},
                "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "up-1"}}}}))
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}})),
            "server/discover" => vec![Step::Plain(404, vec![], "not found".into())],
            "tools/list" => vec![reply(
                req,
                json!({"tools": [{"name": "ask", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}}]}),
            )],
            "tools/call" => vec![reply(req, json!({"task": task}))],
            "tasks/get" => vec![reply(req, task)],
            // Three questions, and no result while the test runs.
            "tasks/result" => vec![ask(1), ask(2), ask(3), Step::AwaitResponse(json!("q-3")), Step::Sleep(10_000)],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await;
    let gw = start_gateway(&format!(
        "[server]\nmax_in_flight = 2\n\n{}[upstream.tasks]\nhosted = \"never\"\n",
        http_upstream("up", &up.url())
    ))
    .await;
    let c = HttpMcp::new(&gw.url("up"));
    let caps = ext();
    let id = start_ask(&c, &caps).await;
    let refused = |got: &[Value]| got.iter().find(|m| m.get("method").is_none() && m["id"] == "q-3").cloned();
    poll_until(&c, &id, &caps, |_| refused(&up.received.lock().unwrap()).is_some()).await;
    let refusal = refused(&up.received.lock().unwrap()).unwrap();
    assert_eq!(refusal["error"]["code"], -32004, "{refusal}");
    let shown = get(&c, &id, &caps).await;
    let asked: Vec<&str> = shown["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .values()
        .map(|q| q["params"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["question 1", "question 2"], "{shown}");
}

/// A 2025-11-25 server that never sends status notifications: its task `up-q` completes on
/// the third `tasks/get`.
async fn quiet_task_server() -> Scripted {
    Scripted::start(move |req| {
        if let Some(steps) = task_server_basics(req, "job", "up-q") {
            return steps;
        }
        let task = |status: &str| up_task("up-q", status, 100);
        let req = req.clone();
        match req["method"].as_str().unwrap_or("") {
            "tasks/get" => vec![Step::Then(Arc::new(move |got: &[Value]| {
                let asked = got.iter().filter(|m| m["method"] == "tasks/get").count();
                vec![reply(&req, task(if asked >= 3 { "completed" } else { "working" }))]
            }))],
            "tasks/result" => vec![reply(&req, json!({"content": [{"type": "text", "text": "done"}]}))],
            _ => vec![reply(&req, json!({}))],
        }
    })
    .await
}

/// The quiet server, a gateway in front of it, a client that declared the extension, and the
/// id the client was given for the task its call started.
async fn quiet_task_started() -> (Scripted, Gw, HttpMcp, String) {
    let up = quiet_task_server().await;
    let gw = gateway_for(&up).await;
    let c = HttpMcp::new(&gw.url("up"));
    let (_, r, _) = call(&c, &request(json!(1), "tools/call", json!({"name": "job", "arguments": {}}), ext())).await;
    let id = r["result"]["taskId"].as_str().expect("a task").to_string();
    (up, gw, c, id)
}

/// A listen stream granted a relayed task hears of its end although the server sends no
/// status notification and the client never polls: the gateway asks the server while
/// someone listens (at the task's `pollInterval`), and stops once the task ended.
#[tokio::test]
async fn a_listen_stream_hears_of_a_quiet_servers_task_by_the_gateways_polls() {
    let (up, _gw, c, id) = quiet_task_started().await;
    let caps = ext();
    let listen = request(json!(7), "subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), caps.clone());
    let (mut events, ack) = listen_stream(&c, &listen).await;
    assert_eq!(ack["params"]["notifications"], json!({"taskIds": [id]}), "{ack}");
    let done = loop {
        let (_, note) = tokio::time::timeout(STEP, events.next()).await.expect("told in time").expect("a note");
        assert_eq!(
            (note["method"].as_str(), note["params"]["taskId"].as_str()),
            (Some("notifications/tasks"), Some(id.as_str()))
        );
        if note["params"]["status"] == "completed" {
            break note;
        }
        assert_eq!(note["params"]["status"], "working", "{note}");
    };
    assert_eq!(done["params"]["result"]["content"][0]["text"], "done", "the outcome inline: {done}");
    let asked = calls_to(&up, "tasks/get").len();
    assert!(asked >= 3, "{asked}");
    // Kept: that no poll comes within five poll intervals has no event to wait for.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(calls_to(&up, "tasks/get").len(), asked, "no more polls once the task ended");
}

/// A listen granted a relayed task that had already ended is told so at once, and the
/// gateway does not go on asking the server about it.
#[tokio::test]
async fn a_listen_on_an_ended_relayed_task_is_told_at_once_and_polls_nothing() {
    let (up, _gw, c, id) = quiet_task_started().await;
    let caps = ext();
    poll_until(&c, &id, &caps, |r| r["result"]["status"] == "completed").await;
    let listen = request(json!(7), "subscriptions/listen", json!({"notifications": {"taskIds": [id]}}), caps.clone());
    let (mut events, _ack) = listen_stream(&c, &listen).await;
    let (_, note) = tokio::time::timeout(STEP, events.next()).await.expect("told in time").expect("a note");
    assert_eq!(note["params"]["status"], "completed", "{note}");
    let asked = calls_to(&up, "tasks/get").len();
    // Kept: that no poll comes within five poll intervals has no event to wait for.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(calls_to(&up, "tasks/get").len(), asked, "an ended task is not polled");
}
