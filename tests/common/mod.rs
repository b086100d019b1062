//! Test harness: an in-process gateway on 127.0.0.1, the demo server as stdio child or HTTP
//! upstream, and small MCP clients over Streamable HTTP and stdio that record everything
//! they receive.

#![allow(dead_code)]

mod bearer;
pub mod dialects;
pub mod ext_server;
pub mod gateway_proc;
mod http_client;
pub mod interop;
pub mod modern;
pub mod pace;
pub mod proc_tree;
pub mod redis_server;
mod scripted;
pub mod shared_links;
pub mod spans;
mod stdio_client;
mod stdio_script;
pub mod task_rules;
mod wait;
#[allow(unused_imports)]
pub use {
    bearer::bearer_tokens,
    http_client::*,
    scripted::*,
    stdio_client::*,
    stdio_script::StdioScript,
    wait::{eventually, poll},
};

pub mod modern_client;

use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use taskgate::{Config, Gateway, HttpServer, ServerConfig, TransportError, UpstreamConfig, bind_http};

pub const STEP: Duration = Duration::from_secs(15);

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_taskgate")
}

/// Config text for a stdio upstream running the demo server as a child process.
pub fn stdio_demo_upstream(name: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\ncommand = {:?}\nargs = [\"demo-server\"]\n", bin())
}

pub fn http_upstream(name: &str, url: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\nconnect_timeout = \"3s\"\n")
}

pub fn builtin_upstream(name: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\nbuiltin = \"demo\"\n")
}

pub struct Gw {
    pub addr: SocketAddr,
    pub server: Arc<HttpServer>,
    task: tokio::task::JoinHandle<()>,
}

impl Gw {
    pub fn url(&self, upstream: &str) -> String {
        format!("http://{}/mcp/{upstream}", self.addr)
    }
}

impl Drop for Gw {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn parse_config(text: &str) -> Config {
    Config::parse(text, &|k| std::env::var(k).ok()).unwrap_or_else(|e| panic!("bad test config: {e}\n{text}"))
}

/// A gateway serving `config` (its `[server]` table, if any, plus upstreams) on a free port.
pub async fn start_gateway(config: &str) -> Gw {
    let mut cfg = parse_config(config);
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    let server = HttpServer::new(Gateway::new(cfg));
    let (addr, task) = bind_http(server.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    Gw { addr, server, task }
}

/// The demo server over Streamable HTTP at `/mcp`, in-process.
pub async fn start_demo_http() -> Gw {
    let demo = UpstreamConfig::plain_demo();
    let cfg = Config {
        server: ServerConfig { allowed_hosts: vec!["*".into()], ..Default::default() },
        tasks: Default::default(),
        upstreams: vec![demo.clone()],
    };
    let server = HttpServer::with_routes(Gateway::new(cfg), HashMap::from([("/mcp".to_string(), Arc::new(demo))]));
    let (addr, task) = bind_http(server.clone(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
    Gw { addr, server, task }
}

pub fn init_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"elicitation": {}, "sampling": {}, "roots": {"listChanged": true}},
        "clientInfo": {"name": "taskgate-tests", "version": "0"}
    })
}

/// What a request produced: its response and everything else that came with it.
#[derive(Debug, Default)]
pub struct Outcome {
    pub response: Value,
    pub others: Vec<Value>,
}

impl Outcome {
    pub fn result(&self) -> &Value {
        self.response.get("result").unwrap_or_else(|| panic!("expected a result, got {}", self.response))
    }
    pub fn error_code(&self) -> i64 {
        self.response
            .pointer("/error/code")
            .and_then(Value::as_i64)
            .unwrap_or_else(|| panic!("expected an error, got {}", self.response))
    }
    /// The request failed on its way to or from `upstream` (-32000) because of `cause`: the
    /// error names the upstream and ends with the cause as the transport words it.
    pub fn assert_upstream_failed(&self, upstream: &str, cause: TransportError) {
        assert_eq!(self.error_code(), -32000, "{}", self.response);
        let msg = self.response["error"]["message"].as_str().unwrap();
        assert!(msg.contains(&format!("upstream '{upstream}'")), "the error names the upstream: {msg}");
        assert!(msg.ends_with(&cause.to_string()), "expected {cause:?}: {msg}");
    }
    pub fn progress(&self) -> Vec<f64> {
        self.progress_params().iter().map(|p| p["progress"].as_f64().unwrap()).collect()
    }
    /// The params of every progress notification that came with the response, in order.
    pub fn progress_params(&self) -> Vec<Value> {
        self.others.iter().filter(|m| m["method"] == "notifications/progress").map(|m| m["params"].clone()).collect()
    }
    /// The response to `id` if it came earlier, while a client waited for another.
    pub fn from_backlog(backlog: &mut Vec<Value>, id: i64) -> Option<Outcome> {
        let pos = backlog.iter().position(|m| m.get("method").is_none() && m["id"] == id)?;
        Some(Outcome { response: backlog.remove(pos), others: vec![] })
    }
    /// Takes in a message read while waiting for the response to `id`: a notification or
    /// server request joins `others`, another response waits in `backlog`; true once `id`'s is in.
    pub fn receive(&mut self, m: Value, id: i64, backlog: &mut Vec<Value>) -> bool {
        if m.get("method").is_some() {
            self.others.push(m);
        } else if m["id"] == id {
            self.response = m;
            return true;
        } else {
            backlog.push(m);
        }
        false
    }
}

/// The demo server's count of cancelled calls, from a `resources/read` of `demo://stats`.
pub fn stats_cancelled(stats: &Outcome) -> i64 {
    let text = stats.result()["contents"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text).unwrap()["cancelled"].as_i64().unwrap()
}

/// Whether the client must answer `m`: a request from the server.
pub fn is_server_request(m: &Value) -> bool {
    m.get("method").is_some() && m.get("id").is_some()
}

/// How the test client answers requests from the server.
pub fn answer(req: &Value) -> Value {
    let result = match req["method"].as_str().unwrap_or("") {
        "elicitation/create" => json!({"action": "accept", "content": {"answer": "forty-two"}}),
        "sampling/createMessage" => {
            json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "test"})
        }
        "roots/list" => json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]}),
        _ => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": req["id"].clone(), "result": result})
}
