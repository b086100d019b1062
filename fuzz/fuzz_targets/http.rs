//! Streamable HTTP request handling: the input is raw HTTP/1.1 bytes (method, headers, body;
//! several requests may follow each other on the connection), served by the gateway's
//! `HttpServer` in front of the built-in demo over an in-memory duplex.
//!
//! One current-thread runtime serves every input, with its clock paused: when the gateway has
//! nothing left to do, timers (the JSON response window, the demo's `slow` tool, our own
//! bound on the run) fire at once, so an input costs CPU time, never wall-clock time. After
//! each input its sessions are ended, so inputs do not pile up state.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;
use taskgate::config::Config;
use taskgate::gateway::Gateway;
use taskgate::transport::http_server::HttpServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

const CONFIG: &str = r#"
[server]
json_response_window = "20ms"
max_body_bytes = 65536
max_sessions = 8
max_in_flight = 8
event_buffer = 16
sse_keepalive = "1s"

[tasks]
max_tasks = 64

[[upstream]]
name = "demo"
builtin = "demo"
request_timeout = "2s"
max_request_time = "3s"

[upstream.tasks]
ttl = "1s"
max_tasks_per_owner = 16
"#;

/// The virtual time one input may take before its connection is dropped.
const BOUND: Duration = Duration::from_secs(1);

static RUNTIME: LazyLock<Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("runtime")
});
static SERVER: OnceLock<Arc<HttpServer>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    RUNTIME.block_on(async {
        let server = SERVER
            .get_or_init(|| {
                let config = Config::parse(CONFIG, &|_| None).expect("fuzz config");
                HttpServer::new(Gateway::new(config))
            })
            .clone();
        let (client, conn) = tokio::io::duplex(16 * 1024);
        let peer = "127.0.0.1:40000".parse().unwrap();
        let serving = tokio::spawn(server.clone().serve_connection(conn, peer));
        let (mut rd, mut wr) = tokio::io::split(client);
        // The client writes everything, keeps its side open (as a client waiting for a
        // response does) and reads until the server closes or the bound passes.
        let exchange = async {
            let write = async {
                let _ = wr.write_all(data).await;
                let _ = wr.flush().await;
            };
            let read = async {
                let mut out = Vec::new();
                let mut buf = [0u8; 8192];
                while let Ok(n) = rd.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
                out
            };
            let ((), out) = tokio::join!(write, read);
            out
        };
        if let Ok(out) = tokio::time::timeout(BOUND, exchange).await
            && !out.is_empty()
        {
            assert!(out.starts_with(b"HTTP/1."), "not an HTTP response: {:?}", String::from_utf8_lossy(&out));
        }
        serving.abort();
        let _ = serving.await;
        server.shutdown().await;
        assert_eq!(server.session_count(), 0);
    });
});
