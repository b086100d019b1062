//! The lean upstream of the echo cases: the least an MCP server can do and still answer the
//! load generator and the gateway, so that `ratio` measures the gateway and not the demo
//! server (whose own session layer costs about as much as a gateway hop).
//!
//! It runs as its own process, this bench binary started again with [`ARG`]:
//!
//! - `--lean-upstream=http [--listen 127.0.0.1:0]`: a hyper HTTP/1.1 server on a
//!   current-thread tokio runtime (one thread, no wake-ups between threads). It prints
//!   `listening on http://<addr>` on stderr, as taskgate does, and stops on SIGTERM.
//! - `--lean-upstream=stdio`: line in, line out on stdin/stdout, no runtime at all; it
//!   answers a burst of pipelined lines with one write and ends at the end of its input.
//!
//! Each message is scanned, not parsed: [`answer`] finds the raw `id` and `method` among the
//! top-level members, and for `tools/call` the raw `params.arguments.text`, and splices them
//! into a canned answer in plain `application/json`. `tools/call` (whatever the tool) echoes
//! its text as one text content; `initialize` answers the client's protocol version, tools
//! and nothing else; `tools/list` lists `echo`; any other request gets an empty result and a
//! notification (no `id`) or a response (no `method`) gets nothing. Over HTTP, a POST without
//! an answer is `202 Accepted`, `initialize` hands out the one session id `lean` (the load
//! generator insists on one), GET is 405 (no standalone stream) and DELETE 200.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;

/// The argument that makes this binary the lean upstream: `--lean-upstream=http|stdio`.
pub(crate) const ARG: &str = "--lean-upstream";
/// The largest message it reads (HTTP body or line); the echo cases send ~150 bytes.
const MAX_MESSAGE: usize = 1 << 20;
const SESSION: &str = "lean";

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Mode {
    Http,
    Stdio,
}

/// `Some(mode)` when `arg` asks for the lean upstream.
pub(crate) fn mode_of_arg(arg: &str) -> Option<Mode> {
    match arg.strip_prefix(ARG)?.strip_prefix('=')? {
        "http" => Some(Mode::Http),
        "stdio" => Some(Mode::Stdio),
        other => panic!("{ARG}={other}: expected http or stdio"),
    }
}

/// The program to start for the lean upstream: this bench binary.
pub(crate) fn exe() -> String {
    let exe = std::env::current_exe().expect("the path of this bench binary");
    exe.to_str().expect("a UTF-8 path").to_string()
}

/// The arguments of the lean upstream in `mode` (after [`exe`]).
pub(crate) fn args(mode: Mode) -> String {
    match mode {
        Mode::Http => format!("{ARG}=http"),
        Mode::Stdio => format!("{ARG}=stdio"),
    }
}

/// Runs the lean upstream until SIGTERM (HTTP) or the end of stdin (stdio).
pub(crate) fn run(mode: Mode, rest: Vec<String>) {
    match mode {
        Mode::Stdio => serve_stdio(),
        Mode::Http => {
            let listen = match rest.iter().position(|a| a == "--listen") {
                Some(i) => rest.get(i + 1).expect("--listen takes an address").as_str(),
                None => "127.0.0.1:0",
            };
            let addr: SocketAddr = listen.parse().expect("--listen takes an address");
            assert!(addr.ip().is_loopback(), "the lean upstream listens on loopback only, not {addr}");
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime");
            rt.block_on(serve_http(addr));
        }
    }
}

fn serve_stdio() {
    let mut input = BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut output = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        match (&mut input).take(MAX_MESSAGE as u64).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if let Some(a) = answer(&line)
            && output.write_all(&a.body).and_then(|()| output.write_all(b"\n")).is_err()
        {
            return;
        }
        // One write for everything that arrived together.
        if input.buffer().is_empty() && output.flush().is_err() {
            return;
        }
    }
}

async fn serve_http(addr: SocketAddr) {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind the lean upstream");
    let local = listener.local_addr().expect("a bound address");
    eprintln!("lean upstream listening on http://{local} (path: any)");
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors, say: no busy loop while it lasts.
                eprintln!("lean upstream: accept: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        tokio::spawn(async move {
            let io = hyper_util::rt::TokioIo::new(tcp);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, hyper::service::service_fn(handle))
                .await;
        });
    }
}

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let empty = |status| {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = status;
        Ok(r)
    };
    match *req.method() {
        Method::POST => {}
        Method::DELETE => return empty(StatusCode::OK),
        _ => return empty(StatusCode::METHOD_NOT_ALLOWED),
    }
    let Ok(body) = Limited::new(req.into_body(), MAX_MESSAGE).collect().await else {
        return empty(StatusCode::BAD_REQUEST);
    };
    let Some(a) = answer(&body.to_bytes()) else { return empty(StatusCode::ACCEPTED) };
    let mut r = Response::new(Full::new(Bytes::from(a.body)));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if a.initialize {
        r.headers_mut().insert("mcp-session-id", HeaderValue::from_static(SESSION));
    }
    Ok(r)
}

/// The answer to one message.
pub(crate) struct Answer {
    pub(crate) body: Vec<u8>,
    /// It answers `initialize` (over HTTP, it carries the session id).
    pub(crate) initialize: bool,
}

const TOOLS: &[u8] = br#"{"tools":[{"name":"echo","description":"Echoes its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}"#;

/// The answer to a request, spliced from its raw `id` (and text); `None` for anything else.
pub(crate) fn answer(msg: &[u8]) -> Option<Answer> {
    let id = member(msg, b"id")?;
    let method = member(msg, b"method")?;
    let mut body = Vec::with_capacity(160 + msg.len());
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(id);
    body.extend_from_slice(br#","result":"#);
    let params = || member(msg, b"params");
    match method {
        br#""tools/call""# => {
            let text = params()
                .and_then(|p| member(p, b"arguments"))
                .and_then(|a| member(a, b"text"))
                .filter(|t| t.first() == Some(&b'"'))
                .unwrap_or(br#""""#);
            body.extend_from_slice(br#"{"content":[{"type":"text","text":"#);
            body.extend_from_slice(text);
            body.extend_from_slice(b"}]}");
        }
        br#""initialize""# => {
            let version = params()
                .and_then(|p| member(p, b"protocolVersion"))
                .filter(|v| v.first() == Some(&b'"'))
                .unwrap_or(br#""2025-06-18""#);
            body.extend_from_slice(br#"{"protocolVersion":"#);
            body.extend_from_slice(version);
            body.extend_from_slice(
                br#","capabilities":{"tools":{}},"serverInfo":{"name":"taskgate-e2e-lean-upstream","version":"0.1.0"}}"#,
            );
        }
        br#""tools/list""# => body.extend_from_slice(TOOLS),
        _ => body.extend_from_slice(b"{}"),
    }
    body.push(b'}');
    Some(Answer { body, initialize: method == br#""initialize""# })
}

/// The raw value of member `key` of the JSON object `obj`, scanning only its top level.
fn member<'a>(obj: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut i = skip_ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(obj, i + 1);
    if obj.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        let key_end = skip_string(obj, i)?;
        let k = &obj[i..key_end];
        i = skip_ws(obj, key_end);
        if obj.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(obj, i + 1);
        let value_end = skip_value(obj, i)?;
        if k.len() == key.len() + 2 && &k[1..k.len() - 1] == key {
            return Some(&obj[i..value_end]);
        }
        i = skip_ws(obj, value_end);
        match obj.get(i)? {
            b',' => i = skip_ws(obj, i + 1),
            _ => return None,
        }
    }
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string that starts at `i` (its closing quote included).
fn skip_string(s: &[u8], i: usize) -> Option<usize> {
    if s.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

/// The end of the JSON value that starts at `i`.
fn skip_value(s: &[u8], i: usize) -> Option<usize> {
    match *s.get(i)? {
        b'"' => skip_string(s, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < s.len() {
                match s[j] {
                    b'"' => {
                        j = skip_string(s, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let end = i + s[i..].iter().position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))?;
            (end > i).then_some(end)
        }
    }
}

/// Checks [`answer`] on the shapes that matter (this bench has no test harness, so `main`
/// runs this before any case): a failure here would make every echo figure meaningless.
pub(crate) fn self_check() {
    let text = |a: Option<Answer>| String::from_utf8(a.expect("an answer").body).expect("UTF-8");
    let json = |s: &str| serde_json::from_str::<serde_json::Value>(s).expect("the answer is JSON");
    // Escapes and braces inside the text are copied as they are.
    let msg =
        br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a \"q\" }"}}}"#;
    let a = text(answer(msg));
    assert_eq!(a, r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a \"q\" }"}]}}"#);
    assert_eq!(json(&a)["result"]["content"][0]["text"], "a \"q\" }");
    // Members in any order and spacing; an `id` nested in the params is not the message's.
    let msg = br#" { "params" : {"arguments":{"id":1,"text":"x"}}, "method":"tools/call" , "id" : "s-1" }"#;
    let a = text(answer(msg));
    assert_eq!(a, r#"{"jsonrpc":"2.0","id":"s-1","result":{"content":[{"type":"text","text":"x"}]}}"#);
    // initialize: the asked version, and the session over HTTP.
    let msg = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}"#;
    let a = answer(msg).expect("an answer");
    assert!(a.initialize);
    let v = json(std::str::from_utf8(&a.body).expect("UTF-8"));
    assert_eq!(v["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        json(&text(answer(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)))["result"]["tools"][0]["name"],
        "echo"
    );
    // Nothing for notifications, responses and non-JSON; an empty result for other requests.
    assert!(answer(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
    assert!(answer(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).is_none());
    assert!(answer(b"not json").is_none());
    assert_eq!(text(answer(br#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#)), r#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
}
