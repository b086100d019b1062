//! Helpers of the shared-link tests (tests/shared_links.rs, tests/shared_links_review.rs):
//! configs with `share = true`, sessions, and the scripted upstreams both use.

#![allow(dead_code)]

use crate::common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// `table` (one `[[upstream]]` table, without sub-tables) with `share = true`.
pub fn shared(table: &str) -> String {
    shared_with("", table)
}

/// As [`shared`], with more `[server]` settings.
pub fn shared_with(server: &str, table: &str) -> String {
    format!("[server]\nprogress_min_interval = \"0ms\"\n{server}{table}share = true\nrequest_timeout = \"10s\"\n")
}

pub async fn session(gw: &Gw, version: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize(version).await;
    c
}

/// A session whose client declares only `capabilities`.
pub async fn session_with(gw: &Gw, version: &str, capabilities: Value) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    let params =
        json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "t", "version": "0"}});
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params});
    let resp = c.post_raw(serde_json::to_vec(&init).unwrap(), &[]).await;
    assert_eq!(resp.status, 200);
    c.session = Some(resp.headers.get("mcp-session-id").unwrap().to_str().unwrap().to_string());
    c.version = Some(version.to_string());
    assert_eq!(c.notify("notifications/initialized", json!({})).await, 202);
    c
}

pub fn text(out: &Outcome) -> String {
    out.result()["content"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// The next message on a GET stream.
pub async fn next(events: &mut SseReader) -> Value {
    events.next().await.expect("the GET stream ended").1
}

/// A step that waits (at most 10 s) until the server has received a message `pred` accepts,
/// then goes on with `then`.
pub fn when(pred: fn(&Value) -> bool, then: Vec<Step>) -> Step {
    fn poll(pred: fn(&Value) -> bool, then: Vec<Step>, left: u32) -> Step {
        Step::Then(Arc::new(move |got: &[Value]| {
            if got.iter().any(pred) || left == 0 {
                then.clone()
            } else {
                vec![Step::Sleep(10), poll(pred, then.clone(), left - 1)]
            }
        }))
    }
    poll(pred, then, 1000)
}

/// `slow {who}`: progress 1 and 2 under the request's token, then "done for <who>".
pub async fn slow_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => {
            let tok = req["params"]["_meta"]["progressToken"].clone();
            let who = req["params"]["arguments"]["who"].as_str().unwrap_or("?").to_string();
            let ms = req["params"]["arguments"]["ms"].as_u64().unwrap_or(100);
            let mut steps = vec![Step::Sleep(ms)];
            if !tok.is_null() {
                steps.extend([progress(&tok, 1.0), Step::Sleep(ms), progress(&tok, 2.0)]);
            }
            steps.push(reply(req, json!({"content": [{"type": "text", "text": format!("done for {who}")}]})));
            steps
        }
        _ => vec![reply(req, json!({}))],
    })
    .await
}
/// `ask {who}`: asks the client to sample, on the call's stream, and answers with what the
/// client said (or the error it got).
pub async fn asking_server() -> Scripted {
    Scripted::start(|req| match req["method"].as_str().unwrap_or("") {
        "initialize" => init_result(req, json!({"tools": {}})),
        "tools/call" => {
            let who = req["params"]["arguments"]["who"].as_str().unwrap().to_string();
            let ask_id = json!(format!("ask-{who}"));
            let req_id = req["id"].clone();
            vec![
                Step::Send(json!({"jsonrpc": "2.0", "id": ask_id, "method": "sampling/createMessage",
                    "params": {"messages": [], "maxTokens": 5}})),
                Step::AwaitResponse(ask_id.clone()),
                Step::Then(Arc::new(move |got: &[Value]| {
                    let answer = got.iter().find(|m| m.get("method").is_none() && m["id"] == ask_id).unwrap();
                    let said = match answer.pointer("/result/content/text") {
                        Some(t) => t.as_str().unwrap().to_string(),
                        None => format!("refused: {} {}", answer["error"]["code"], answer["error"]["message"].as_str().unwrap()),
                    };
                    vec![Step::Send(json!({"jsonrpc": "2.0", "id": req_id, "result": {"content": [{"type": "text", "text": said}]}}))]
                })),
            ]
        }
        _ => vec![reply(req, json!({}))],
    })
    .await
}
pub const ARMS: &str = r#"
    pid) reply "{\"content\":[{\"type\":\"text\",\"text\":\"$$\"}]}" ;;
    roots) printf '{"jsonrpc":"2.0","id":"r1","method":"roots/list"}\n'; IFS= read -r answer; reply "{\"content\":[],\"answer\":$answer}" ;;
    ping) printf '{"jsonrpc":"2.0","id":"p1","method":"ping"}\n'; IFS= read -r answer; reply "{\"content\":[],\"answer\":$answer}" ;;
    announce) printf '{"jsonrpc":"2.0","method":"notifications/custom","params":{"secret":"for nobody"}}\n'
        ( for _ in $(seq 1000); do [ -f "$LOG.go" ] && break; sleep 0.01; done
          printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"a log for nobody"}}\n'
          printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n' ) &
        reply '{"content":[]}' ;;
    resources/subscribe|resources/unsubscribe) echo "$line" >> "$LOG"; reply '{}' ;;
    touch) for u in a b; do printf '{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"file:///%s"}}\n' "$u"; done
        printf '{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}\n'
        reply '{"content":[]}' ;;
    hang) echo "$id" >> "$LOG" ;;
    tokask) tok=$(sed -n 's/.*"progressToken":"\([^"]*\)".*/\1/p' <<<"$line")
        printf '{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5,"_meta":{"progressToken":"%s"}}}\n' "$tok"
        IFS= read -r answer; reply "{\"content\":[],\"answer\":$answer}" ;;
    die) exit 3 ;;
"#;
/// A scripted stdio upstream with [`ARMS`], logging to `$LOG` in its own directory.
pub fn script() -> (StdioScript, std::path::PathBuf) {
    let script = StdioScript::new(ARMS);
    let log = script.path().with_file_name("log");
    (script, log)
}
pub fn table(script: &StdioScript, log: &std::path::Path) -> String {
    format!("{}env = {{ LOG = {:?} }}\n", script.upstream("up"), log.to_str().unwrap())
}
pub fn log_lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}
/// A task server: `job` runs as a task (`task-1`, working until cancelled); its GET stream
/// announces task-1's status once a `tasks/get` came (the client has seen the task created
/// by then), then a list change.
pub async fn task_server() -> Scripted {
    let get_once = Arc::new(AtomicBool::new(false));
    Scripted::start_with_get(move |req| {
        if req["http"] == "GET" {
            if get_once.swap(true, Ordering::Relaxed) {
                return vec![];
            }
            let status = json!({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": {"taskId": "task-1",
                "status": "working", "statusMessage": "still at it", "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000}});
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            return vec![when(|m| m["method"] == "tasks/get", vec![Step::Send(status), Step::Send(changed)]), Step::Sleep(60_000)];
        }
        let task = |id: &Value, status: &str| {
            json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100})
        };
        match req["method"].as_str().unwrap_or("") {
            "initialize" => init_result(req, json!({"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}})),
            "tools/list" => vec![reply(req, json!({"tools": [{"name": "job", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}]}))],
            "tools/call" => vec![reply(req, json!({"task": task(&json!("task-1"), "working")}))],
            "tasks/get" => vec![reply(req, task(&req["params"]["taskId"], "working"))],
            "tasks/cancel" => vec![reply(req, task(&req["params"]["taskId"], "cancelled"))],
            "tasks/list" => vec![reply(req, json!({"tasks": [task(&json!("task-1"), "working")]}))],
            _ => vec![reply(req, json!({}))],
        }
    })
    .await
}
