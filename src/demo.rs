//! The built-in demo MCP server: a small, honest fixture for the default config, the tests
//! and the benchmarks. Tools `echo`, `add`, `slow` (progress), `fail`, `ask` (elicitation);
//! one resource and one prompt.
//!
//! It speaks line-delimited JSON-RPC over a byte stream, like any stdio server, and one
//! serving loop ([`serve`]) serves every stream it runs on: one end of an in-memory duplex
//! (`builtin = "demo"`, which the gateway reaches through its stdio transport, as it does a
//! child process), or this process's stdin/stdout (`taskgate demo-server`). Over Streamable
//! HTTP it is served by the gateway in front of it.

use crate::jsonrpc::{self, Id, Kind, METHOD_NOT_FOUND, Message, Method, RpcError};
use crate::locks::Mutex;
use crate::mcp::ProtocolVersion;
use crate::transport::lines::{BadKind, BadLine, LineReader};
use crate::transport::own_stdio::{self, OutQueue};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncRead, DuplexStream};
use tokio::sync::oneshot;
use tokio::task::{AbortHandle, JoinSet};

/// Bytes the in-memory duplex holds in each direction before a writer waits.
const DUPLEX_BUFFER: usize = 64 * 1024;
/// The longest line the demo reads, at least.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// Starts a demo server in-process, serving one end of an in-memory duplex, and returns the
/// other end. It reads lines of up to `max_line` bytes (at least 4 MiB). Once that end is
/// shut down or dropped, the server stops its calls, writes what it still holds and ends.
pub fn spawn(max_line: usize) -> DuplexStream {
    let (ours, theirs) = tokio::io::duplex(DUPLEX_BUFFER);
    let (input, output) = tokio::io::split(theirs);
    let out = OutQueue::spawn(output, own_stdio::OUT_BOUND);
    tokio::spawn(serve(
        input,
        out,
        Serving { max_line: max_line.max(MAX_LINE), own_process: false, linger: Duration::ZERO },
    ));
    ours
}

/// Serves the demo on this process's stdin/stdout until stdin closes; then the calls already
/// read finish (for at most 5 s) and their output is written. Backpressure as for
/// `taskgate stdio`: no line is read from stdin while more than [`own_stdio::OUT_BOUND`]
/// bytes wait for the client, and `slow` waits the same way before each progress step, so
/// nothing is dropped and nothing grows while the client does not read.
pub async fn serve_stdio() {
    let out = OutQueue::spawn_stdout(own_stdio::OUT_BOUND);
    serve(own_stdio::stdin(), out, Serving { max_line: MAX_LINE, own_process: true, linger: Duration::from_secs(5) })
        .await
}

/// How one demo server serves its stream.
struct Serving {
    /// The longest line it reads.
    max_line: usize,
    /// Whether the demo is a process of its own, which `crash` may end.
    own_process: bool,
    /// How long the calls already read may go on once the input has ended: a process on
    /// stdio finishes them (its client closed stdin and reads what is left), while a server
    /// in-process, whose gateway closed the connection, stops at once.
    linger: Duration,
}

/// The one serving loop: reads messages from `input` until it ends, answers on `out`. No
/// line is read while `out` holds more than its bound (see [`OutQueue`]). Each tool call
/// runs as a task of its own, so that one slow call does not hold up the rest, and none
/// outlives the loop: once the input has ended, what still runs after `linger` is stopped,
/// what is queued is written (for at most 2 s), and the output is shut down.
async fn serve<R: AsyncRead + Unpin>(input: R, out: Arc<OutQueue>, how: Serving) {
    let demo = Arc::new(Demo {
        out: out.clone(),
        waiting: Mutex::new(HashMap::new()),
        running: Mutex::new(HashMap::new()),
        next_id: Mutex::new(1),
        cancelled: AtomicU64::new(0),
        own_process: how.own_process,
    });
    let mut calls = JoinSet::new();
    let mut lines = LineReader::new(input, how.max_line);
    loop {
        let next = async {
            out.room().await;
            lines.next().await
        };
        let line = tokio::select! {
            line = next => line,
            // Ended calls are reaped as they end (the reader is cancel-safe).
            Some(_) = calls.join_next() => continue,
        };
        match line {
            None => break,
            Some(Ok(line)) => {
                for m in line.messages {
                    match m {
                        Ok(m) => demo.receive(m, &mut calls),
                        Err(r) => demo.emit(r.error.response(r.id.as_ref())),
                    }
                }
            }
            Some(Err(bad)) => demo.emit(unreadable(&bad)),
        }
    }
    let _ = tokio::time::timeout(how.linger, async { while calls.join_next().await.is_some() {} }).await;
    calls.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), out.drained()).await;
    out.finish();
}

/// The answer to a line that cannot be read: under the request's id when a scan of it found
/// one (so that the request fails now, not at its timeout), else under none.
fn unreadable(bad: &BadLine) -> Value {
    let code = match bad.kind {
        BadKind::TooLong(_) | BadKind::TooManyValues(_) => jsonrpc::INVALID_REQUEST,
        BadKind::InvalidUtf8 | BadKind::NotJson(_) => jsonrpc::PARSE_ERROR,
    };
    let id = bad.id.as_ref().filter(|_| bad.has_method);
    RpcError::new(code, bad.to_string()).response(id)
}

struct Demo {
    /// What the demo writes, one message a line.
    out: Arc<OutQueue>,
    /// Requests the demo sent the client, waiting for answers.
    waiting: Mutex<HashMap<Id, oneshot::Sender<Value>>>,
    /// Calls in progress, so that `notifications/cancelled` can stop them.
    running: Mutex<HashMap<Id, AbortHandle>>,
    next_id: Mutex<i64>,
    /// Cancellations received for calls still running (reported by `demo://stats`).
    cancelled: AtomicU64,
    /// Whether `crash` may end the process.
    own_process: bool,
}

impl Demo {
    /// Sends a message the demo made to its client (a line on its output).
    fn emit(&self, msg: Value) {
        self.out.push(serde_json::to_vec(&msg).expect("a JSON value serializes"));
    }

    fn receive(self: &Arc<Self>, frame: Message, calls: &mut JoinSet<()>) {
        match frame.kind() {
            Kind::Request => {
                let id = frame.id().cloned().expect("requests have ids");
                // Quick methods answer inline; tool calls run as tasks.
                if frame.method() == Method::ToolsCall {
                    let me = self.clone();
                    let task_id = id.clone();
                    // Locked across the spawn, so that the call cannot end before it is listed.
                    let mut running = self.running.lock().unwrap();
                    let handle = calls.spawn(async move {
                        let result = me.call_tool(frame.into_value()).await;
                        me.respond(&task_id, result);
                        me.running.lock().unwrap().remove(&task_id);
                    });
                    // An id reused while its first call runs: the first can no longer be
                    // cancelled by it.
                    running.insert(id, handle);
                } else {
                    let result = self.answer(frame.value());
                    self.respond(&id, result);
                }
            }
            Kind::Notification => {
                if frame.method() == Method::Cancelled
                    && let Some(id) = frame.request_id_param()
                    && let Some(h) = self.running.lock().unwrap().remove(&id)
                {
                    h.abort();
                    self.cancelled.fetch_add(1, Ordering::Relaxed);
                }
            }
            Kind::Response => {
                if let Some(id) = frame.id()
                    && let Some(tx) = self.waiting.lock().unwrap().remove(id)
                {
                    let _ = tx.send(frame.into_value());
                }
            }
        }
    }

    fn respond(&self, id: &Id, result: Result<Value, RpcError>) {
        let msg = match result {
            Ok(r) => jsonrpc::result_response(id, r),
            Err(e) => e.response(Some(id)),
        };
        self.emit(msg);
    }

    fn answer(&self, msg: &Value) -> Result<Value, RpcError> {
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        match msg.get("method").and_then(Value::as_str).unwrap_or("") {
            "initialize" => {
                let asked = params.get("protocolVersion").and_then(Value::as_str).and_then(ProtocolVersion::parse);
                let version = asked.unwrap_or(ProtocolVersion::LATEST);
                Ok(json!({
                    "protocolVersion": version.as_str(),
                    "capabilities": {"tools": {}, "resources": {}, "prompts": {}, "logging": {}},
                    "serverInfo": {"name": "taskgate-demo", "version": env!("CARGO_PKG_VERSION")},
                    "instructions": "The taskgate demo server: echo, add, slow, fail, ask."
                }))
            }
            "ping" | "logging/setLevel" => Ok(json!({})),
            "tools/list" => Ok(json!({"tools": tools(self.own_process)})),
            "resources/list" => Ok(json!({"resources": [{
                "uri": "demo://readme", "name": "readme", "mimeType": "text/plain",
                "description": "What the demo server is"
            }, {
                "uri": "demo://stats", "name": "stats", "mimeType": "application/json",
                "description": "Counters: cancellations received for running calls"
            }]})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": []})),
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some("demo://readme") => Ok(json!({"contents": [{
                    "uri": "demo://readme", "mimeType": "text/plain",
                    "text": "taskgate demo server: a fixture for tests and benchmarks."
                }]})),
                Some("demo://stats") => Ok(json!({"contents": [{
                    "uri": "demo://stats", "mimeType": "application/json",
                    "text": json!({"cancelled": self.cancelled.load(Ordering::Relaxed)}).to_string()
                }]})),
                other => Err(RpcError::new(jsonrpc::INVALID_PARAMS, format!("unknown resource {other:?}"))),
            },
            "prompts/list" => Ok(json!({"prompts": [{
                "name": "greet", "description": "Greets someone",
                "arguments": [{"name": "name", "description": "Who to greet", "required": true}]
            }]})),
            "prompts/get" => {
                if params.get("name").and_then(Value::as_str) != Some("greet") {
                    return Err(RpcError::new(jsonrpc::INVALID_PARAMS, "unknown prompt"));
                }
                let who = params.pointer("/arguments/name").and_then(Value::as_str).unwrap_or("world");
                Ok(
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {who}!")}}]}),
                )
            }
            m => Err(RpcError::new(METHOD_NOT_FOUND, format!("method not found: {m}"))),
        }
    }

    async fn call_tool(self: &Arc<Self>, msg: Value) -> Result<Value, RpcError> {
        let name = msg.pointer("/params/name").and_then(Value::as_str).unwrap_or("");
        let args = msg.pointer("/params/arguments").cloned().unwrap_or(json!({}));
        let token = jsonrpc::progress_token(&msg).cloned();
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        match name {
            "echo" => {
                // The arguments come back whole as structured content, so a client can see
                // that fields nobody declared arrived intact.
                let mut r = text(args.get("text").and_then(Value::as_str).unwrap_or("").to_string());
                r["structuredContent"] = json!({"arguments": args});
                Ok(r)
            }
            "crash" if self.own_process => {
                let delay = args.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(delay)).await;
                std::process::exit(3);
            }
            "add" => {
                let a = args.get("a").and_then(Value::as_f64);
                let b = args.get("b").and_then(Value::as_f64);
                match (a, b) {
                    (Some(a), Some(b)) => {
                        let mut r = text(format_number(a + b));
                        r["structuredContent"] = json!({"sum": a + b});
                        Ok(r)
                    }
                    _ => Ok(json!({"content": [{"type": "text", "text": "a and b must be numbers"}], "isError": true})),
                }
            }
            "slow" => {
                let duration = args.get("duration_ms").and_then(Value::as_u64).unwrap_or(1000).min(600_000);
                let steps = args.get("steps").and_then(Value::as_u64).unwrap_or(5).clamp(1, 100_000);
                let step = Duration::from_micros(duration * 1000 / steps);
                for i in 1..=steps {
                    if step.is_zero() {
                        tokio::task::yield_now().await;
                    } else {
                        tokio::time::sleep(step).await;
                    }
                    if let Some(t) = &token {
                        // Progress answers nothing: it waits for room, as the reader does.
                        self.out.room().await;
                        self.emit(jsonrpc::notification(
                            jsonrpc::Method::Progress,
                            json!({"progressToken": t, "progress": i, "total": steps, "message": format!("step {i} of {steps}")}),
                        ));
                    }
                }
                Ok(text(format!("done after {steps} steps")))
            }
            "fail" => {
                let why = args.get("message").and_then(Value::as_str).unwrap_or("the demo tool failed, as asked");
                Ok(json!({"content": [{"type": "text", "text": why}], "isError": true}))
            }
            "ask" => {
                let question = args.get("question").and_then(Value::as_str).unwrap_or("What is your answer?");
                let reply = self
                    .ask_client("elicitation/create", json!({
                        "message": question,
                        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
                    }))
                    .await?;
                if let Some(e) = reply.get("error") {
                    return Ok(
                        json!({"content": [{"type": "text", "text": format!("elicitation failed: {e}")}], "isError": true}),
                    );
                }
                let action = reply.pointer("/result/action").and_then(Value::as_str).unwrap_or("");
                match reply.pointer("/result/content/answer").and_then(Value::as_str) {
                    Some(a) if action == "accept" => Ok(text(format!("answer: {a}"))),
                    _ => Ok(text(format!("no answer ({action})"))),
                }
            }
            other => Err(RpcError::new(jsonrpc::INVALID_PARAMS, format!("unknown tool {other:?}"))),
        }
    }

    /// Sends a request to the client, and waits for the answer.
    async fn ask_client(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = {
            let mut n = self.next_id.lock().unwrap();
            *n += 1;
            Id::Str(format!("demo-{n}"))
        };
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id.clone(), tx);
        self.emit(jsonrpc::request_named(&id, method, params));
        rx.await.map_err(|_| RpcError::new(jsonrpc::INTERNAL_ERROR, "the client never answered"))
    }
}

fn format_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { x.to_string() }
}

fn tools(own_process: bool) -> Value {
    let mut list = json!([
        {"name": "echo", "description": "Returns its text",
         "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "add", "description": "Adds two numbers",
         "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}},
        {"name": "slow", "description": "Takes duration_ms, reporting progress in steps",
         "inputSchema": {"type": "object", "properties": {"duration_ms": {"type": "integer"}, "steps": {"type": "integer"}}}},
        {"name": "fail", "description": "Always fails (isError)",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
        {"name": "ask", "description": "Asks the client a question (elicitation) and returns the answer",
         "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}}}
    ]);
    if own_process {
        list.as_array_mut().expect("array").push(json!({
            "name": "crash", "description": "Ends the demo server process after delay_ms (exit status 3), for failure tests",
            "inputSchema": {"type": "object", "properties": {"delay_ms": {"type": "integer"}}}
        }));
    }
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};

    type Client = (BufReader<ReadHalf<DuplexStream>>, WriteHalf<DuplexStream>);

    fn client() -> Client {
        let (r, w) = tokio::io::split(spawn(1024));
        (BufReader::new(r), w)
    }

    async fn send(c: &mut Client, msg: Value) {
        let mut line = serde_json::to_vec(&msg).unwrap();
        line.push(b'\n');
        c.1.write_all(&line).await.unwrap();
    }

    /// The next line, or None at the end of the stream.
    async fn recv(c: &mut Client) -> Option<Value> {
        let mut line = String::new();
        (c.0.read_line(&mut line).await.unwrap() > 0).then(|| serde_json::from_str(&line).unwrap())
    }

    fn slow(id: i64, ms: u64) -> Value {
        let args = json!({"duration_ms": ms, "steps": ms / 1000});
        jsonrpc::request(
            &Id::Num(id),
            jsonrpc::Method::ToolsCall,
            json!({"name": "slow", "arguments": args, "_meta": {"progressToken": "p"}}),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_stops_and_is_counted() {
        let mut c = client();
        send(&mut c, slow(1, 60_000)).await;
        assert_eq!(recv(&mut c).await.unwrap()["method"], "notifications/progress");
        send(&mut c, jsonrpc::notification(jsonrpc::Method::Cancelled, json!({"requestId": 1}))).await;
        send(&mut c, jsonrpc::request(&Id::Num(2), jsonrpc::Method::ResourcesRead, json!({"uri": "demo://stats"})))
            .await;
        // Progress already on its way may come first; the call's answer never does.
        let stats = loop {
            let m = recv(&mut c).await.unwrap();
            assert_ne!(m["id"], 1, "the cancelled call answered: {m}");
            if m["id"] == 2 {
                break m;
            }
        };
        assert_eq!(stats["result"]["contents"][0]["text"], r#"{"cancelled":1}"#);
    }

    /// The gateway closing the connection ends the demo at once: no call of it goes on (nor
    /// any task of it), and its end of the stream closes.
    #[tokio::test(start_paused = true)]
    async fn closing_the_stream_ends_the_demo_and_its_calls() {
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let started = tokio::time::Instant::now();
        let mut c = client();
        send(&mut c, slow(1, 60_000)).await;
        assert_eq!(recv(&mut c).await.unwrap()["method"], "notifications/progress");
        c.1.shutdown().await.unwrap();
        while let Some(m) = recv(&mut c).await {
            assert_eq!(m["method"], "notifications/progress", "{m}");
        }
        assert!(started.elapsed() < Duration::from_secs(10), "the call ran on: {:?}", started.elapsed());
        for _ in 0..100 {
            if metrics.num_alive_tasks() == before {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(metrics.num_alive_tasks(), before, "a task of the demo is left");
    }

    /// A request too long to read is answered under its id, at once.
    #[tokio::test]
    async fn a_request_too_long_to_read_fails_under_its_id() {
        let mut c = client();
        let long = "x".repeat(MAX_LINE + 1);
        send(
            &mut c,
            jsonrpc::request(
                &Id::Num(3),
                jsonrpc::Method::ToolsCall,
                json!({"name": "echo", "arguments": {"text": long}}),
            ),
        )
        .await;
        let answer = recv(&mut c).await.unwrap();
        assert_eq!(
            (answer["id"].clone(), answer["error"]["code"].clone()),
            (json!(3), json!(jsonrpc::INVALID_REQUEST))
        );
        send(&mut c, jsonrpc::request(&Id::Num(4), jsonrpc::Method::Ping, json!({}))).await;
        assert_eq!(recv(&mut c).await.unwrap()["id"], 4, "still serving");
    }
}
