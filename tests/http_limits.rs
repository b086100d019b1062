//! Connection-level limits of the downstream HTTP server: header and body read timeouts,
//! idle keep-alive connections, and the connection cap (slowloris).

use crate::common;

use common::*;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection (or `within` passes: then `None`).
/// Returns what the server sent.
async fn until_closed(tcp: &mut TcpStream, within: Duration) -> Option<String> {
    let mut got = Vec::new();
    let read_all = async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read_all).await.ok()?;
    Some(String::from_utf8_lossy(&got).into_owned())
}

fn limits(extra: &str) -> String {
    format!("[server]\n{extra}\n{}", builtin_upstream("demo"))
}

#[tokio::test]
async fn headers_that_trickle_are_cut_off() {
    let gw = start_gateway(&limits("header_read_timeout = \"300ms\"")).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(b"POST /mcp/demo HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    assert!(until_closed(&mut tcp, Duration::from_secs(3)).await.is_some(), "the connection is closed");
}

#[tokio::test]
async fn a_body_that_does_not_arrive_gets_408() {
    let gw = start_gateway(&limits("body_read_timeout = \"300ms\"")).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(
        b"POST /mcp/demo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\"",
    )
    .await
    .unwrap();
    let got = until_closed(&mut tcp, Duration::from_secs(3)).await.expect("the connection is closed");
    assert!(got.starts_with("HTTP/1.1 408"), "{got:?}");
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let gw = start_gateway(&limits("header_read_timeout = \"300ms\"")).await;
    let mut tcp = TcpStream::connect(gw.addr).await.unwrap();
    tcp.write_all(b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let got = until_closed(&mut tcp, Duration::from_secs(3)).await.expect("the idle connection is closed");
    assert!(got.starts_with("HTTP/1.1 404"), "{got:?}");
}

#[tokio::test]
async fn an_open_event_stream_is_not_cut_by_the_header_timeout() {
    let gw = start_gateway(&limits("header_read_timeout = \"200ms\"\nsse_keepalive = \"100ms\"")).await;
    let mut c = HttpMcp::new(&gw.url("demo"));
    c.initialize("2025-06-18").await;
    let get = c.get_raw(&[]).await;
    assert_eq!(get.status(), 200);
    let mut body = get.into_body();
    let start = tokio::time::Instant::now();
    while start.elapsed() < Duration::from_millis(800) {
        let frame = tokio::time::timeout(Duration::from_secs(2), http_body_util::BodyExt::frame(&mut body))
            .await
            .expect("keep-alives keep coming");
        assert!(matches!(frame, Some(Ok(_))), "the stream is still open");
    }
}

#[tokio::test]
async fn connections_past_max_connections_are_closed_at_once() {
    let gw = start_gateway(&limits("max_connections = 2\nheader_read_timeout = \"10s\"")).await;
    let mut a = TcpStream::connect(gw.addr).await.unwrap();
    let _b = TcpStream::connect(gw.addr).await.unwrap();
    // Connections are accepted in order: a and b hold the two permits before c is seen.
    let mut c = TcpStream::connect(gw.addr).await.unwrap();
    assert!(until_closed(&mut c, Duration::from_secs(2)).await.is_some(), "the third connection is closed");
    // The first two are still served, and a freed slot is usable again.
    a.write_all(b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let got = until_closed(&mut a, Duration::from_secs(2)).await.unwrap();
    assert!(got.starts_with("HTTP/1.1 404"), "{got:?}");
    // a's permit is returned as its connection task ends, just after the close.
    let served = poll("a freed slot serves a new connection", async || {
        let mut d = TcpStream::connect(gw.addr).await.unwrap();
        let _ = d.write_all(b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await;
        Some(until_closed(&mut d, Duration::from_secs(2)).await.unwrap()).filter(|s| !s.is_empty())
    })
    .await;
    assert!(served.starts_with("HTTP/1.1 404"), "{served:?}");
}

/// With an open-file limit of 64 (soft and hard) and the default `max_connections` (1024),
/// the gateway warns at start that they do not fit; once its descriptors are spent, a new
/// client is refused at once (a 503, or the connection closed) instead of waiting in the
/// backlog until it gives up, and the refusals are not one log line each.
#[tokio::test]
async fn past_the_open_file_limit_new_connections_are_refused_at_once() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gw.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nheader_read_timeout = \"60s\"\n[tasks]\nstore = \"memory\"\n{}",
        builtin_upstream("demo")
    );
    std::fs::write(&config, text).unwrap();
    let mut cmd = common::gateway_proc::serve_command(&config);
    // SAFETY: setrlimit(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit { rlim_cur: 64, rlim_max: 64 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let gw = common::gateway_proc::Proc(child);
    let mut log = Vec::new();
    let addr = loop {
        let line = tokio::time::timeout(STEP, lines.next_line()).await.expect("no listening line").unwrap();
        let line = line.expect("the gateway exited before listening");
        log.push(line.clone());
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    assert!(
        log.iter().any(|l| l.contains("WARN") && l.contains("open-file limit is 64") && l.contains("max_connections")),
        "{log:#?}"
    );
    let (log_tx, mut log_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            let _ = log_tx.send(l);
        }
    });

    // More idle connections than descriptors: the gateway holds what it can, the rest wait.
    let mut idle = Vec::new();
    for _ in 0..100 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    for round in 0..3 {
        let mut late = TcpStream::connect(&addr).await.unwrap();
        // A request of some size, written before anything is read (as most clients do).
        let pad = "p".repeat(16 * 1024);
        let _ = late
            .write_all(format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: {pad}\r\n\r\n").as_bytes())
            .await;
        let got = until_closed(&mut late, STEP).await;
        let got = got.unwrap_or_else(|| panic!("round {round}: the new client was left waiting"));
        // It wrote first: what it had sent is read before the close, so it gets the 503 (a
        // reset is still possible for bytes that arrive after the close, hence the empty case).
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 503"), "round {round}: {got:?}");
    }
    drop(idle);
    drop(gw);
    let mut refusals = Vec::new();
    while let Ok(l) = log_rx.try_recv() {
        refusals.extend(l.contains("refused").then_some(l));
    }
    assert!(refusals.len() < 10, "one line per interval, not per connection: {refusals:#?}");
}
