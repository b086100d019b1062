//! The built-in demo MCP server: a small, honest fixture for the default config, the tests
//! and the benchmarks. Tools `echo`, `add`, `slow` (progress), `fail`, `ask` (elicitation);
//! one resource and one prompt. It runs in-process (`builtin = "demo"`), on stdio, or over
//! Streamable HTTP (`taskgate demo-server`).

use crate::jsonrpc::{self, Id, Kind, METHOD_NOT_FOUND, Message, Method, RpcError};
use crate::mcp::ProtocolVersion;
use crate::transport;
use crate::transport::InboundSink;
use crate::transport::own_stdio::{self, OutQueue};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The in-process end of a demo server.
pub struct DemoHandle {
    tx: mpsc::Sender<Message>,
    task: tokio::task::JoinHandle<()>,
    demo: Arc<Demo>,
}

impl DemoHandle {
    pub async fn send(&self, msg: Message) -> Result<(), transport::Error> {
        self.demo.busy.fetch_add(1, Ordering::SeqCst);
        self.tx.send(msg).await.map_err(|_| {
            self.demo.busy.fetch_sub(1, Ordering::SeqCst);
            transport::Error::DemoStopped
        })
    }

    pub fn close(&self) {
        self.task.abort();
    }
}

struct Demo {
    out: Arc<dyn InboundSink>,
    /// Requests the demo sent the client, waiting for answers.
    waiting: Mutex<HashMap<Id, oneshot::Sender<Value>>>,
    /// Calls in progress, so that `notifications/cancelled` can stop them.
    running: Mutex<HashMap<Id, tokio::task::AbortHandle>>,
    /// Messages sent to the demo and not yet handled, plus calls running: zero once every
    /// answer due has been sent.
    busy: AtomicUsize,
    next_id: Mutex<i64>,
    /// Cancellations received for calls still running (reported by `demo://stats`).
    cancelled: std::sync::atomic::AtomicU64,
    /// Whether `crash` may end the process (only when the demo is a process of its own).
    own_process: bool,
    /// On stdio: the queue for our stdout, whose room `slow` waits for before each progress
    /// step (everything else it sends answers a request, and stdin waits for that room).
    stdout: Option<Arc<OutQueue>>,
}

/// Starts a demo server whose output goes to `out`.
pub fn spawn(out: Arc<dyn InboundSink>) -> DemoHandle {
    spawn_with(out, None)
}

fn spawn_with(out: Arc<dyn InboundSink>, stdout: Option<Arc<OutQueue>>) -> DemoHandle {
    let (tx, mut rx) = mpsc::channel::<Message>(1024);
    let demo = Arc::new(Demo {
        out,
        waiting: Mutex::new(HashMap::new()),
        running: Mutex::new(HashMap::new()),
        busy: AtomicUsize::new(0),
        next_id: Mutex::new(1),
        cancelled: std::sync::atomic::AtomicU64::new(0),
        own_process: stdout.is_some(),
        stdout,
    });
    let me = demo.clone();
    let task = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            me.clone().receive(msg);
            me.busy.fetch_sub(1, Ordering::SeqCst);
        }
    });
    DemoHandle { tx, task, demo }
}

impl Demo {
    /// Sends a message the demo made to its client.
    fn emit(&self, msg: Value, related: Option<Id>) {
        self.out.message(Message::made(msg), related);
    }

    fn receive(self: Arc<Self>, frame: Message) {
        match frame.kind() {
            Kind::Request => {
                let id = frame.id().cloned().expect("requests have ids");
                // Quick methods answer inline; tool calls run as tasks so one slow call
                // does not hold up the rest.
                if frame.method() == Method::ToolsCall {
                    let me = self.clone();
                    let task_id = id.clone();
                    self.busy.fetch_add(1, Ordering::SeqCst);
                    // Locked across the spawn, so that the call cannot end before it is listed.
                    let mut running = self.running.lock().unwrap();
                    let handle = tokio::spawn(async move {
                        let result = me.call_tool(&task_id, frame.into_value()).await;
                        me.respond(&task_id, result);
                        // Whoever takes the entry (this, or a cancellation) ends the call.
                        if me.running.lock().unwrap().remove(&task_id).is_some() {
                            me.busy.fetch_sub(1, Ordering::SeqCst);
                        }
                    });
                    // An id reused while its first call runs: one entry for two calls.
                    if running.insert(id, handle.abort_handle()).is_some() {
                        self.busy.fetch_sub(1, Ordering::SeqCst);
                    }
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
                    self.busy.fetch_sub(1, Ordering::SeqCst);
                    self.cancelled.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
        self.emit(msg, Some(id.clone()));
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
                    "text": json!({"cancelled": self.cancelled.load(std::sync::atomic::Ordering::Relaxed)}).to_string()
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

    async fn call_tool(self: &Arc<Self>, id: &Id, msg: Value) -> Result<Value, RpcError> {
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
                        if let Some(q) = &self.stdout {
                            q.room().await;
                        }
                        self.emit(
                            jsonrpc::notification(
                                "notifications/progress",
                                json!({"progressToken": t, "progress": i, "total": steps, "message": format!("step {i} of {steps}")}),
                            ),
                            Some(id.clone()),
                        );
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
                    .ask_client(id, "elicitation/create", json!({
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

    /// Sends a request to the client while serving request `related`, and waits for the answer.
    async fn ask_client(&self, related: &Id, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = {
            let mut n = self.next_id.lock().unwrap();
            *n += 1;
            Id::Str(format!("demo-{n}"))
        };
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id.clone(), tx);
        self.emit(jsonrpc::request(&id, method, params), Some(related.clone()));
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

/// Serves the demo on this process's stdin/stdout until stdin closes; then the calls already
/// read finish (for at most 5 s) and their output is written. Backpressure as for
/// `taskgate stdio`: no line is read from stdin while more than [`own_stdio::OUT_BOUND`]
/// bytes wait for the client, and `slow` waits the same way before each progress step, so
/// nothing is dropped and nothing grows while the client does not read.
pub async fn serve_stdio() {
    struct Stdout(Arc<OutQueue>);
    impl InboundSink for Stdout {
        fn message(&self, msg: Message, _related: Option<Id>) {
            self.0.push(msg.into_bytes().into());
        }
        // The demo fails no request on its way, and its stdout does not close under it.
        fn request_failed(&self, _id: Id, _why: transport::Error) {}
        fn closed(&self, _reason: transport::Error) {}
    }
    let queue = OutQueue::spawn_stdout(own_stdio::OUT_BOUND);
    let out = Arc::new(Stdout(queue.clone()));
    let demo = spawn_with(out.clone(), Some(queue.clone()));
    let mut lines = crate::transport::lines::LineReader::new(own_stdio::stdin(), 4 * 1024 * 1024);
    loop {
        queue.room().await;
        let Some(line) = lines.next().await else { break };
        match line {
            Ok(line) => {
                for m in line.messages {
                    match m {
                        Ok(m) => {
                            if demo.send(m).await.is_err() {
                                return;
                            }
                        }
                        Err(r) => out.message(Message::made(r.error.response(r.id.as_ref())), None),
                    }
                }
            }
            Err(bad) => {
                out.message(Message::made(RpcError::new(jsonrpc::PARSE_ERROR, bad.to_string()).response(None)), None)
            }
        }
    }
    let calls_done = async {
        while demo.demo.busy.load(Ordering::SeqCst) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), calls_done).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), queue.drained()).await;
}
