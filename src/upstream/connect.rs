//! One connection to an upstream server, whatever carries it: line-delimited JSON-RPC (a
//! child process's pipes, or the built-in demo server on an in-memory duplex), Streamable
//! HTTP, the legacy HTTP+SSE transport, or either of the two HTTP ones as the first POST
//! shows (`transport = "auto"`). Links send through this and nothing else.

use crate::config::{Builtin, HttpMode, ServerConfig, Transport, UpstreamConfig};
use crate::demo;
use crate::jsonrpc::Message;
use crate::transport::auto::AutoConn;
use crate::transport::credential::Credential;
use crate::transport::http_client::{HttpClient, HttpConn};
use crate::transport::http_target::HttpSettings;
use crate::transport::sse_client::SseConn;
use crate::transport::stdio::StdioConn;
use crate::transport::{self, InboundSink};
use std::sync::Arc;

pub enum Upstream {
    Stdio(StdioConn),
    Http(HttpConn),
    Sse(SseConn),
    Auto(AutoConn),
}

impl Upstream {
    /// Whether the transport says which request a server message relates to: Streamable
    /// HTTP does (the response stream it came on); a line stream and the legacy HTTP+SSE
    /// stream (one stream for everything) do not, and the link must infer it. `auto` is
    /// taken to be legacy, which it may turn out to be: over Streamable HTTP every message
    /// on a response stream still comes with its request, and only those of the GET stream
    /// (the spec's "unrelated" messages) are then inferred.
    pub fn tells_related(transport: &Transport) -> bool {
        matches!(transport, Transport::Http { mode: HttpMode::StreamableHttp, .. })
    }

    /// [`Upstream::tells_related`] for what the connection turned out to be, once `auto` has
    /// decided (`None`: nothing more is known than the configuration said).
    pub fn tells_related_now(&self) -> Option<bool> {
        match self {
            Upstream::Auto(c) => c.is_streamable(),
            _ => None,
        }
    }

    /// Starts the connection; what the upstream sends goes to `sink`. For the legacy
    /// transport this opens its event stream and waits for its `endpoint` event. An HTTP
    /// upstream's requests carry `credential` (the client's `Authorization`) when given.
    pub async fn connect(
        http: &HttpClient,
        limits: &ServerConfig,
        cfg: &UpstreamConfig,
        credential: Option<Arc<Credential>>,
        sink: Arc<dyn InboundSink>,
    ) -> Result<Upstream, transport::Error> {
        let max_line = limits.max_body_bytes;
        let max_batch = limits.max_batch;
        match &cfg.transport {
            Transport::Stdio { command, args, env, cwd } => {
                let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect();
                let args: Vec<String> = args.iter().map(|a| a.value.clone()).collect();
                StdioConn::spawn(&cfg.name, command, &args, &env, cwd.as_deref(), max_line, max_batch, sink)
                    .map(Upstream::Stdio)
            }
            Transport::Http { url, headers, mode } => {
                let settings = HttpSettings {
                    name: cfg.name.clone(),
                    url: url.value.clone(),
                    headers: headers.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect(),
                    connect_timeout: cfg.connect_timeout,
                    max_request_time: cfg.max_request_time,
                    max_in_flight: limits.max_in_flight,
                    max_batch,
                    credential,
                };
                match mode {
                    HttpMode::StreamableHttp => HttpConn::new(http, &settings, sink).map(Upstream::Http),
                    HttpMode::Sse => SseConn::connect(http, &settings, sink).await.map(Upstream::Sse),
                    HttpMode::Auto => AutoConn::new(http, settings, sink).map(Upstream::Auto),
                }
            }
            // In-process, over the same line transport as a child.
            Transport::Builtin(Builtin::Demo) => {
                // Its answers may be twice its requests (echo returns its text twice): read up
                // to twice the limit, as the in-process demo had no limit of its own before.
                let stream = demo::spawn(max_line);
                Ok(Upstream::Stdio(StdioConn::over(&cfg.name, stream, max_line.saturating_mul(2), max_batch, sink)))
            }
        }
    }

    /// Sends one message. Requests return as soon as they are on their way; their answers
    /// arrive at the sink.
    pub async fn send(&self, msg: Message) -> Result<(), transport::Error> {
        match self {
            Upstream::Stdio(c) => c.send(msg).await,
            Upstream::Http(c) => c.send(msg).await,
            // Boxed: a send that may still probe, or a legacy POST, is large, and every
            // request's future would carry its state; a settled `auto` sends as `Http` does.
            Upstream::Sse(c) => Box::pin(c.send(msg)).await,
            Upstream::Auto(c) => match c.streamable() {
                Some(http) => http.send(msg).await,
                None => Box::pin(c.send(msg)).await,
            },
        }
    }

    /// Sends one message with headers of its own (`name`, `value`), for a transport that has
    /// headers (Streamable HTTP: a stateless POST, without the session's id); the others
    /// send it as [`Upstream::send`] does.
    pub async fn send_headed(
        &self,
        msg: Message,
        headers: &[(std::borrow::Cow<'static, str>, String)],
    ) -> Result<(), transport::Error> {
        match self {
            Upstream::Stdio(c) => c.send(msg).await,
            Upstream::Http(c) => c.send_headed(msg, headers).await,
            Upstream::Sse(c) => c.send(msg).await,
            Upstream::Auto(c) => c.send_headed(msg, headers).await,
        }
    }

    /// The upstream answered a stateless request: under `auto`, it speaks Streamable HTTP.
    pub fn settle_streamable(&self) {
        if let Upstream::Auto(c) = self {
            c.settle_streamable();
        }
    }

    /// Ends the connection: stops the child (or shuts the demo's stream down), deletes the
    /// HTTP session, closes the legacy event stream.
    pub async fn close(&self) {
        match self {
            Upstream::Stdio(c) => c.close(),
            Upstream::Http(c) => c.close().await,
            Upstream::Sse(c) => c.close(),
            Upstream::Auto(c) => c.close().await,
        }
    }
}
