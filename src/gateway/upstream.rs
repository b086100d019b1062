//! One connection to an upstream server, whatever carries it: line-delimited JSON-RPC (a
//! child process's pipes, or the built-in demo server on an in-memory duplex) or Streamable
//! HTTP. Links send through this and nothing else.

use crate::config::{Builtin, Transport, UpstreamConfig};
use crate::demo;
use crate::jsonrpc::Message;
use crate::transport::http_client::{HttpClient, HttpConn};
use crate::transport::stdio::StdioConn;
use crate::transport::{self, InboundSink};
use std::sync::Arc;

pub enum Upstream {
    Stdio(StdioConn),
    Http(HttpConn),
}

impl Upstream {
    /// Whether the transport says which request a server message relates to: Streamable
    /// HTTP does (the response stream it came on); a line stream does not, and the link
    /// must infer it.
    pub fn tells_related(transport: &Transport) -> bool {
        matches!(transport, Transport::Http { .. })
    }

    /// Starts the connection; what the upstream sends goes to `sink`.
    pub async fn connect(
        http: &HttpClient,
        max_line: usize,
        max_in_flight: usize,
        cfg: &UpstreamConfig,
        sink: Arc<dyn InboundSink>,
    ) -> Result<Upstream, transport::Error> {
        match &cfg.transport {
            Transport::Stdio { command, args, env, cwd } => {
                let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
                let args: Vec<String> = args.iter().map(|a| a.value.clone()).collect();
                StdioConn::spawn(&cfg.name, command, &args, &env, cwd.as_deref(), max_line, sink).map(Upstream::Stdio)
            }
            Transport::Http { url, headers } => {
                let headers: Vec<(String, String)> =
                    headers.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
                HttpConn::new(
                    http,
                    &cfg.name,
                    &url.value,
                    &headers,
                    cfg.connect_timeout,
                    cfg.max_request_time,
                    max_in_flight,
                    sink,
                )
                .map(Upstream::Http)
            }
            // In-process, over the same line transport as a child.
            Transport::Builtin(Builtin::Demo) => {
                // Its answers may be twice its requests (echo returns its text twice): read up
                // to twice the limit, as the in-process demo had no limit of its own before.
                Ok(Upstream::Stdio(StdioConn::over(&cfg.name, demo::spawn(max_line), max_line.saturating_mul(2), sink)))
            }
        }
    }

    /// Sends one message. Requests return as soon as they are on their way; their answers
    /// arrive at the sink.
    pub async fn send(&self, msg: Message) -> Result<(), transport::Error> {
        match self {
            Upstream::Stdio(c) => c.send(msg).await,
            Upstream::Http(c) => c.send(msg).await,
        }
    }

    /// Ends the connection: stops the child (or shuts the demo's stream down), deletes the
    /// HTTP session.
    pub async fn close(&self) {
        match self {
            Upstream::Stdio(c) => c.close(),
            Upstream::Http(c) => c.close().await,
        }
    }
}
