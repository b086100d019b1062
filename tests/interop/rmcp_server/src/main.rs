//! Interop peer for taskgate: an MCP server on the Rust SDK `rmcp` 3.11.0 (crates.io) that
//! runs long work as tasks of the extension `io.modelcontextprotocol/tasks` (SEP-2663).
//!
//! The SDK is dual era: `server/discover` and stateless requests whose `_meta` names
//! 2026-07-28 select the modern lifecycle; `initialize` selects a legacy session
//! (2024-11-05 … 2025-11-25). This server advertises the extension (`capabilities.extensions`)
//! and, per the extension, decides by itself which calls become tasks:
//!
//! ```text
//! echo  {text}                  -> text, never a task
//! slow  {seconds=1, steps=3}    -> modern request declaring the extension: a task
//!                                  (`resultType: "task"`) whose status message is
//!                                  "step <i> of <steps>" after each step, completing with
//!                                  "slow done after <steps> steps"; tasks/cancel stops it
//!                                  (status `cancelled`).
//!                                  modern request without the extension: error -32021.
//!                                  legacy session: a plain call, one notifications/progress
//!                                  per step (with a progress token), same text.
//! ask   {question}              -> modern + extension: a task that goes `input_required` with
//!                                  inputRequests {"answer": elicitation/create (form, one
//!                                  string property `answer`)}; after tasks/update it
//!                                  completes with "answer: <answer>" (or "ask: <action>" if
//!                                  the elicitation was not accepted).
//!                                  modern without the extension: -32021. legacy session: a
//!                                  tool error (isError) saying it needs the extension.
//! stats {}                      -> JSON text {"slow_started", "slow_finished",
//!                                  "slow_cancelled"} for this process (all transports and
//!                                  eras together).
//! ```
//!
//! Usage: `taskgate-interop-rmcp-server` (stdio) or `... --http <port>` (Streamable HTTP on
//! 127.0.0.1:<port> at `/mcp`; port 0 picks one; prints `listening <port>` once bound).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities, ContentBlock,
    CreateTaskResult, GetTaskParams, GetTaskResult, Implementation, InputRequest, JsonObject, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
    UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// The `pollIntervalMs` every task suggests (short, so that tests poll often).
const POLL_INTERVAL_MS: u64 = 250;
/// The `ttlMs` of every task.
const TASK_TTL_MS: u64 = 300_000;

const USAGE: &str = "usage: taskgate-interop-rmcp-server [--http <port>]";

#[derive(Default)]
struct Stats {
    slow_started: AtomicU64,
    slow_finished: AtomicU64,
    slow_cancelled: AtomicU64,
}

impl Stats {
    fn to_json(&self) -> String {
        json!({
            "slow_started": self.slow_started.load(Ordering::SeqCst),
            "slow_finished": self.slow_finished.load(Ordering::SeqCst),
            "slow_cancelled": self.slow_cancelled.load(Ordering::SeqCst),
        })
        .to_string()
    }
}

/// Shared by every instance (the HTTP transport makes one per request or session), so that
/// tasks created through one request can be polled through another.
#[derive(Clone, Default)]
struct InteropServer {
    tasks: TaskManager,
    stats: Arc<Stats>,
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s.into())])
}

fn tool_error(s: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(s.into())])
}

fn schema(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => unreachable!("tool schemas are objects"),
    }
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Returns its text argument unchanged",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"]
            })),
        ),
        Tool::new(
            "slow",
            "Takes `seconds` in `steps` steps; a task for clients that declare the tasks extension",
            schema(json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "default": 1},
                    "steps": {"type": "integer", "minimum": 1, "default": 3}
                }
            })),
        ),
        Tool::new(
            "ask",
            "Asks the client a question during a task (tasks extension only)",
            schema(json!({
                "type": "object",
                "properties": {"question": {"type": "string"}},
                "required": ["question"]
            })),
        ),
        Tool::new(
            "stats",
            "Counters of slow calls in this process, as JSON text",
            schema(json!({"type": "object", "properties": {}})),
        ),
    ]
}

/// How a call is to be served, from what its request (or its legacy session) declared.
enum Era {
    /// A session opened with `initialize` (2025-11-25 or older).
    Legacy,
    /// A 2026-07-28 request; `true` if its `_meta` declared the tasks extension.
    Modern(bool),
}

fn era(context: &RequestContext<RoleServer>) -> Era {
    let modern = context.protocol_version().is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
    if modern { Era::Modern(context.client_capabilities().is_some_and(|c| c.supports_tasks())) } else { Era::Legacy }
}

fn needs_tasks_extension() -> McpError {
    McpError::missing_required_client_capability(ClientCapabilities::builder().enable_tasks().build())
}

fn task_options(status: String) -> TaskOptions {
    TaskOptions::new().with_ttl_ms(TASK_TTL_MS).with_poll_interval_ms(POLL_INTERVAL_MS).with_status_message(status)
}

struct SlowArgs {
    step: Duration,
    steps: u64,
}

fn slow_args(args: &JsonObject) -> Result<SlowArgs, String> {
    let seconds = match args.get("seconds") {
        None => 1.0,
        Some(v) => v.as_f64().filter(|s| s.is_finite()).ok_or("seconds must be a number")?,
    };
    let steps = match args.get("steps") {
        None => 3,
        Some(v) => v.as_f64().filter(|s| s.is_finite()).ok_or("steps must be a number")?.max(1.0) as u64,
    };
    Ok(SlowArgs { step: Duration::from_secs_f64(seconds.max(0.0) / steps as f64), steps })
}

impl InteropServer {
    async fn slow(&self, args: &JsonObject, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        match era(&context) {
            Era::Legacy => return Ok(self.slow_plain(args, context).await.into()),
            Era::Modern(false) => return Err(needs_tasks_extension()),
            Era::Modern(true) => {}
        }
        let SlowArgs { step, steps } = match slow_args(args) {
            Ok(a) => a,
            Err(e) => return Ok(tool_error(e).into()),
        };
        let stats = self.stats.clone();
        stats.slow_started.fetch_add(1, Ordering::SeqCst);
        let task = self.tasks.spawn(task_options(format!("step 0 of {steps}")), move |ctx| {
            Box::pin(async move {
                for i in 1..=steps {
                    tokio::select! {
                        _ = ctx.cancelled() => {
                            stats.slow_cancelled.fetch_add(1, Ordering::SeqCst);
                            eprintln!("rmcp_server: slow task {} cancelled at step {i}", ctx.task_id());
                            return Err(TaskExit::Cancelled);
                        }
                        _ = tokio::time::sleep(step) => {}
                    }
                    ctx.set_status_message(format!("step {i} of {steps}"));
                }
                stats.slow_finished.fetch_add(1, Ordering::SeqCst);
                Ok(text(format!("slow done after {steps} steps")))
            })
        });
        Ok(CreateTaskResult::new(task).into())
    }

    /// `slow` in a legacy session: a plain call with progress per step.
    async fn slow_plain(&self, args: &JsonObject, context: RequestContext<RoleServer>) -> CallToolResult {
        let SlowArgs { step, steps } = match slow_args(args) {
            Ok(a) => a,
            Err(e) => return tool_error(e),
        };
        self.stats.slow_started.fetch_add(1, Ordering::SeqCst);
        let token = context.meta.get_progress_token();
        for i in 1..=steps {
            tokio::select! {
                _ = context.ct.cancelled() => {
                    self.stats.slow_cancelled.fetch_add(1, Ordering::SeqCst);
                    eprintln!("rmcp_server: plain slow cancelled at step {i}");
                    return tool_error("cancelled");
                }
                _ = tokio::time::sleep(step) => {}
            }
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), i as f64)
                    .with_total(steps as f64)
                    .with_message(format!("step {i} of {steps}"));
                let _ = context.peer.notify_progress(progress).await;
            }
        }
        self.stats.slow_finished.fetch_add(1, Ordering::SeqCst);
        text(format!("slow done after {steps} steps"))
    }

    fn ask(&self, args: &JsonObject, context: RequestContext<RoleServer>) -> Result<CallToolResponse, McpError> {
        match era(&context) {
            Era::Modern(false) => return Err(needs_tasks_extension()),
            Era::Legacy => {
                return Ok(
                    tool_error("ask needs the tasks extension (io.modelcontextprotocol/tasks, 2026-07-28)").into()
                );
            }
            Era::Modern(true) => {}
        }
        let Some(question) = args.get("question").and_then(Value::as_str) else {
            return Ok(tool_error("question must be a string").into());
        };
        let request: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": question,
                "requestedSchema": {
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"]
                }
            }
        }))
        .map_err(|e| McpError::internal_error(format!("building the input request: {e}"), None))?;
        let task = self.tasks.spawn(task_options("waiting for an answer".into()), move |ctx| {
            Box::pin(async move {
                let response = ctx.request_input("answer", request).await?;
                ctx.set_status_message("answered");
                let action = response.get("action").and_then(Value::as_str).unwrap_or("");
                let answer = response.pointer("/content/answer").and_then(Value::as_str);
                Ok(match (action, answer) {
                    ("accept", Some(answer)) => text(format!("answer: {answer}")),
                    _ => text(format!("ask: {action}")),
                })
            })
        });
        Ok(CreateTaskResult::new(task).into())
    }
}

impl ServerHandler for InteropServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
            .with_server_info(Implementation::new("taskgate-interop-rmcp-server", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "echo" => Ok(match args.get("text").and_then(Value::as_str) {
                Some(t) => text(t),
                None => tool_error("text must be a string"),
            }
            .into()),
            "slow" => self.slow(&args, context).await,
            "ask" => self.ask(&args, context),
            "stats" => Ok(text(self.stats.to_json()).into()),
            other => Err(McpError::invalid_params(format!("unknown tool: {other}"), None)),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }
}

async fn serve_stdio(server: InteropServer) -> Result<(), String> {
    use rmcp::service::ServerInitializeError;
    let running = match server.serve(rmcp::transport::stdio_pipes()).await {
        Ok(running) => running,
        // stdin closed before any lifecycle began (e.g. after only server/discover).
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => return Err(format!("serving stdio: {e}")),
    };
    running.waiting().await.map(|_| ()).map_err(|e| format!("stdio service: {e}"))
}

/// Streamable HTTP on 127.0.0.1 at `/mcp`: rmcp's tower service on a hyper HTTP/1 server.
/// rmcp serves `initialize` sessions (legacy, `Mcp-Session-Id`) and stateless 2026-07-28
/// POSTs on the same endpoint.
async fn serve_http(server: InteropServer, port: u16) -> Result<(), String> {
    use http_body_util::BodyExt;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    use std::io::Write;

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|e| format!("binding 127.0.0.1:{port}: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    println!("listening {port}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    loop {
        let (stream, _) = listener.accept().await.map_err(|e| format!("accept: {e}"))?;
        let mcp = mcp.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut mcp = mcp.clone();
                async move {
                    if req.uri().path() == "/mcp" {
                        tower_service::Service::call(&mut mcp, req).await
                    } else {
                        let body = http_body_util::Full::new(bytes::Bytes::from_static(b"not found")).boxed();
                        let mut response = hyper::Response::new(body);
                        *response.status_mut() = hyper::StatusCode::NOT_FOUND;
                        Ok(response)
                    }
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, handler).await {
                eprintln!("rmcp_server: connection: {e}");
            }
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let server = InteropServer::default();
    let result = match args.as_slice() {
        [] => serve_stdio(server).await,
        [flag, port] if flag == "--http" && port.parse::<u16>().is_ok() => {
            serve_http(server, port.parse().unwrap()).await
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmcp_server: {e}");
            ExitCode::FAILURE
        }
    }
}
