//! An MCP client on `taskgate stdio` as a child process, and [`Mcp`], either client.

use super::{HttpMcp, Outcome, STEP, answer, bin, init_params, is_server_request};
use serde_json::{Value, json};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

pub struct StdioMcp {
    pub child: tokio::process::Child,
    /// `None` once the client's input has ended ([`StdioMcp::end_input`]).
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    next_id: i64,
    /// Messages read while waiting for something else.
    pub backlog: Vec<Value>,
    _dir: tempfile::TempDir,
}

impl StdioMcp {
    /// Runs `taskgate stdio` with `config` in front of `upstream`.
    pub async fn start(config: &str, upstream: &str) -> StdioMcp {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = tokio::process::Command::new(bin())
            .args(["stdio", "--config", path.to_str().unwrap(), "--upstream", upstream])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        StdioMcp { child, stdin, lines, next_id: 1, backlog: vec![], _dir: dir }
    }

    pub async fn send(&mut self, msg: &Value) {
        self.send_line(&serde_json::to_string(msg).unwrap()).await;
    }

    pub async fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes()).await;
    }

    /// One line of raw bytes (need not be UTF-8).
    pub async fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("the client's input has ended");
        stdin.write_all(line).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// Ends the client's input (EOF on the gateway's stdin), as a client that goes away
    /// does, and waits (at most [`STEP`]) for the gateway to exit.
    pub async fn end_input(&mut self) -> std::process::ExitStatus {
        self.stdin = None;
        tokio::time::timeout(STEP, self.child.wait()).await.expect("the gateway did not exit at EOF").unwrap()
    }

    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(STEP, self.lines.next_line())
            .await
            .expect("stdout timed out")
            .unwrap()
            .expect("stdout closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"))
    }

    pub async fn initialize(&mut self, version: &str) -> Value {
        self.initialize_with(init_params(version)).await
    }

    /// [`StdioMcp::initialize`] with these `initialize` params.
    pub async fn initialize_with(&mut self, params: Value) -> Value {
        let out = self.request("initialize", params).await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        out.result().clone()
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        self.wait_response(id).await
    }

    pub async fn wait_response(&mut self, id: i64) -> Outcome {
        if let Some(out) = Outcome::from_backlog(&mut self.backlog, id) {
            return out;
        }
        let mut out = Outcome::default();
        loop {
            let m = self.recv().await;
            if is_server_request(&m) {
                self.send(&answer(&m)).await;
            }
            if out.receive(m, id, &mut self.backlog) {
                return out;
            }
        }
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Either client, for tests that run over both downstream transports.
pub enum Mcp {
    Http(HttpMcp),
    Stdio(StdioMcp),
}

impl Mcp {
    pub async fn initialize(&mut self, version: &str) -> Value {
        match self {
            Mcp::Http(c) => c.initialize(version).await,
            Mcp::Stdio(c) => c.initialize(version).await,
        }
    }

    pub async fn request(&mut self, method: &str, params: Value) -> Outcome {
        match self {
            Mcp::Http(c) => c.request(method, params).await,
            Mcp::Stdio(c) => c.request(method, params).await,
        }
    }
}
