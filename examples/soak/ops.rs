//! The soak's operations. Each sends its requests, checks every response against its request
//! (id, expected result or expected error code, HTTP status) and returns a description of the
//! first mismatch.

use crate::client::{Http, Mcp, Outcome, take_response};
use crate::upstream::State as TaskServer;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub type Check = Result<(), String>;

/// What an operation may use: the gateway's base URL and the task server's state.
pub struct Env {
    pub base: String,
    pub http: Http,
    pub tasks: std::sync::Arc<TaskServer>,
}

impl Env {
    pub fn mcp(&self, route: &str, version: &str) -> Mcp {
        Mcp::new(&self.http, format!("{}/mcp/{route}", self.base), version)
    }
}

fn expect(cond: bool, what: impl FnOnce() -> String) -> Check {
    if cond { Ok(()) } else { Err(what()) }
}

fn result<'a>(out: &'a Outcome, what: &str) -> Result<&'a Value, String> {
    out.response.get("result").ok_or_else(|| format!("{what}: expected a result, got {}", out.response))
}

fn text(result: &Value) -> &str {
    result.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("")
}

fn error_is(out: &Outcome, code: i64, what: &str) -> Check {
    expect(out.error_code() == Some(code), || format!("{what}: expected error {code}, got {}", out.response))
}

/// `echo` and `add` on the demo.
pub async fn plain(s: &Mcp, n: u64) -> Check {
    let tag = format!("plain-{n}");
    let out = s.request("tools/call", json!({"name": "echo", "arguments": {"text": tag, "extra": [n]}})).await?;
    let r = result(&out, "echo")?;
    expect(text(r) == tag && r.pointer("/structuredContent/arguments/extra/0") == Some(&json!(n)), || {
        format!("echo {tag}: got {r}")
    })?;
    let (a, b) = (n as f64, 0.5);
    let out = s.request("tools/call", json!({"name": "add", "arguments": {"a": a, "b": b}})).await?;
    let r = result(&out, "add")?;
    expect(r.pointer("/structuredContent/sum").and_then(Value::as_f64) == Some(a + b), || format!("add: got {r}"))
}

/// `slow` with a progress token: rising progress for that token only, the last value before
/// the result, and the result.
pub async fn progress(s: &Mcp, n: u64) -> Check {
    let token = format!("p-{n}");
    let params =
        json!({"name": "slow", "arguments": {"duration_ms": 60, "steps": 3}, "_meta": {"progressToken": token}});
    let out = s.request("tools/call", params).await?;
    let r = result(&out, "slow")?;
    expect(text(r) == "done after 3 steps", || format!("slow: got {r}"))?;
    let mut last = 0.0;
    for m in &out.others {
        if m["method"] != "notifications/progress" {
            continue;
        }
        expect(m["params"]["progressToken"] == token.as_str(), || format!("progress for another token: {m}"))?;
        let v = m["params"]["progress"].as_f64().unwrap_or(-1.0);
        expect(v > last, || format!("progress did not rise: {last} then {v}"))?;
        last = v;
    }
    expect(last == 3.0, || format!("the last progress before the result was {last}, want 3: {:?}", out.others))
}

/// A hosted task on the demo (2025-11-25): create, get, result.
pub async fn hosted(s: &Mcp, n: u64) -> Check {
    let tag = format!("hosted-{n}");
    let out =
        s.request("tools/call", json!({"name": "echo", "arguments": {"text": tag}, "task": {"ttl": 5000}})).await?;
    let r = result(&out, "task call")?;
    let id = r.pointer("/task/taskId").and_then(Value::as_str).ok_or_else(|| format!("no taskId: {r}"))?.to_string();
    let status = r.pointer("/task/status").and_then(Value::as_str).unwrap_or("");
    expect(matches!(status, "working" | "completed"), || format!("new task status {status:?}"))?;
    let out = s.request("tasks/get", json!({"taskId": id})).await?;
    let r = result(&out, "tasks/get")?;
    expect(r["taskId"] == id.as_str() && matches!(r["status"].as_str(), Some("working" | "completed")), || {
        format!("tasks/get {id}: got {r}")
    })?;
    let out = s.request("tasks/result", json!({"taskId": id})).await?;
    let r = result(&out, "tasks/result")?;
    let related = r.pointer("/_meta/io.modelcontextprotocol~1related-task/taskId");
    expect(text(r) == tag && related == Some(&json!(id)), || format!("tasks/result {id}: got {r}"))
}

/// A hosted task cancelled while it runs: `cancelled` at once and after, no result.
pub async fn hosted_cancel(s: &Mcp) -> Check {
    let params = json!({"name": "slow", "arguments": {"duration_ms": 10000, "steps": 2}, "task": {"ttl": 5000}});
    let out = s.request("tools/call", params).await?;
    let r = result(&out, "slow task")?;
    let id = r.pointer("/task/taskId").and_then(Value::as_str).ok_or_else(|| format!("no taskId: {r}"))?.to_string();
    let out = s.request("tasks/cancel", json!({"taskId": id})).await?;
    let r = result(&out, "tasks/cancel")?;
    expect(r["status"] == "cancelled", || format!("tasks/cancel {id}: got {r}"))?;
    let out = s.request("tasks/get", json!({"taskId": id})).await?;
    expect(result(&out, "tasks/get")?["status"] == "cancelled", || format!("after cancel: {}", out.response))?;
    let out = s.request("tasks/result", json!({"taskId": id})).await?;
    error_is(&out, -32603, "tasks/result of a cancelled task")
}

/// A plain call of the upstream's task-required tool from a 2025-06-18 client: bridged.
pub async fn bridged(s: &Mcp, n: u64) -> Check {
    let tag = format!("bridged-{n}");
    let out = s.request("tools/call", json!({"name": "required", "arguments": {"delay_ms": 30, "tag": tag}})).await?;
    let r = result(&out, "bridged call")?;
    expect(text(r) == format!("done {tag}"), || format!("bridged {tag}: got {r}"))?;
    expect(r.pointer("/_meta/io.modelcontextprotocol~1related-task").is_none(), || {
        format!("a 2025-06-18 client got related-task _meta: {r}")
    })
}

/// A bridged call the client cancels: the upstream task must be cancelled.
pub async fn bridged_cancel(env: &Env, s: &Mcp, n: u64) -> Check {
    let tag = format!("cancel-{n}");
    let id = s.next_id();
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "required", "arguments": {"delay_ms": 10000, "tag": tag}}});
    let mut pending = tokio::spawn({
        let s = s.clone();
        async move { s.post(serde_json::to_vec(&call).unwrap()).await }
    });
    // Cancel once the gateway follows the task (it asked the upstream about it): a cancel that
    // arrives while the task is being created is not passed on (see docs/testing.md, Soak).
    let task = wait_until(Duration::from_secs(10), || env.tasks.task_for(&tag).filter(|t| env.tasks.followed(t)))
        .await
        .ok_or_else(|| format!("{tag}: the gateway never followed the bridged task"))?;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id, "reason": "soak"}});
    let ack = s.post(serde_json::to_vec(&cancel).unwrap()).await?;
    expect(ack.status == 202, || format!("notifications/cancelled: HTTP {}", ack.status))?;
    wait_until(Duration::from_secs(10), || env.tasks.was_cancelled(&task).then_some(()))
        .await
        .ok_or_else(|| format!("{tag}: upstream task {task} was not cancelled"))?;
    // No response is due for a cancelled request, and the gateway keeps the call's stream
    // open (with keep-alives); if a response does come within a second it must be an error
    // for this id. Then the client drops the stream, as a client that cancelled does.
    match tokio::time::timeout(Duration::from_secs(1), &mut pending).await {
        Ok(reply) => {
            let reply = reply.map_err(|e| e.to_string())??;
            if reply.messages.iter().any(|m| m.get("method").is_none()) {
                let out = take_response(reply, id, "cancelled call")?;
                expect(out.response.get("error").is_some(), || {
                    format!("{tag}: a cancelled call got a result: {}", out.response)
                })?;
            }
        }
        Err(_) => pending.abort(),
    }
    Ok(())
}

async fn wait_until<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A new session on `route`: initialize, one call, DELETE, then the session is gone (404).
pub async fn churn(env: &Env, route: &str, n: u64) -> Check {
    let mut s = env.mcp(route, if (n / 12).is_multiple_of(2) { "2025-11-25" } else { "2025-03-26" });
    s.initialize().await?;
    let out = s.request("tools/call", json!({"name": "echo", "arguments": {"text": "churn"}})).await?;
    expect(text(result(&out, "churn echo")?) == "churn", || format!("churn echo: {}", out.response))?;
    let status = s.delete().await?;
    expect(status == 200 || status == 204, || format!("DELETE: HTTP {status}"))?;
    let reply = s.post(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()).await?;
    expect(reply.status == 404, || format!("a request in a deleted session: HTTP {}", reply.status))
}

/// Bad input on an established session; none of it may disturb the session.
pub async fn bad_input(s: &Mcp, n: u64, max_body: usize) -> Check {
    let reply = s.post(br#"{"jsonrpc":"2.0","id":5,"method":"#.to_vec()).await?;
    expect(
        reply.status == 400 && reply.messages.first().and_then(|m| m.pointer("/error/code")) == Some(&json!(-32700)),
        || format!("malformed JSON: HTTP {} {:?}", reply.status, reply.messages),
    )?;
    let id = s.next_id();
    let reply = s.post(serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": 7})).unwrap()).await?;
    expect(reply.status == 400, || format!("method 7: HTTP {}", reply.status))?;
    error_is(&take_response(reply, id, "method 7")?, -32600, "method 7")?;
    let out = s.request("tools/call", json!({"name": "add", "arguments": {"a": "one", "b": []}})).await?;
    let r = result(&out, "add with wrong types")?;
    expect(r["isError"] == true && text(r) == "a and b must be numbers", || format!("add wrong types: {r}"))?;
    let out = s.request("tools/call", json!({"name": format!("no-such-tool-{n}"), "arguments": {}})).await?;
    error_is(&out, -32602, "unknown tool")?;
    let out = s.request("tasks/get", json!({"taskId": format!("{n:032x}")})).await?;
    error_is(&out, -32602, "unknown task id")?;
    let out = s.request("tasks/result", json!({"taskId": 12})).await?;
    expect(out.error_code().is_some(), || format!("taskId of the wrong type: {}", out.response))?;
    let mut big =
        br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":""#.to_vec();
    big.resize(big.len() + max_body + 1, b'x');
    big.extend_from_slice(br#""}}}"#);
    // The gateway answers 413 without reading the whole body and then closes the connection
    // (without `connection: close`), so this goes on a connection nobody reuses; a client
    // still writing may see the close instead of the answer. Either is a refusal.
    match s.on_own_connection().post(big).await {
        Ok(reply) => expect(reply.status == 413, || format!("oversize body: HTTP {}", reply.status))?,
        Err(e) => expect(e.starts_with("POST failed"), || format!("oversize body: {e}"))?,
    }
    let mut stranger = s.clone();
    stranger.session = Some(format!("no-such-session-{n}"));
    let reply = stranger.post(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()).await?;
    expect(reply.status == 404, || format!("unknown session: HTTP {}", reply.status))?;
    // The session still works.
    let out = s.request("ping", json!({})).await?;
    result(&out, "ping after bad input").map(|_| ())
}
