//! stdio upstreams: line-delimited JSON-RPC over a byte stream, either the pipes of a child
//! process or one end of an in-memory duplex (the built-in demo server). Both are the same
//! reader and writer ([`StdioConn`]); only a child has a process to start, a stderr to log,
//! a way to be stopped (stdin closed, SIGTERM, SIGKILL) and an exit status. The gateway's
//! own stdin/stdout are in [`own_stdio`](super::own_stdio); the client front that uses them
//! is `downstream::stdio`.

use crate::jsonrpc::Message;
use crate::locks::Mutex;
use crate::transport::lines::LineReader;
use crate::transport::lines::read_log_lines;
use crate::transport::own_stdio::client_output;
use crate::transport::{Error, Exit, InboundSink, deliver, inbound};
use bytes::Bytes;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

/// Messages queued for the server's input before senders wait.
const WRITE_QUEUE: usize = 1024;
/// How long a child gets to exit after its stdin closes, and again after SIGTERM.
const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A writer task for the server's input (a child's stdin): each queued message becomes one
/// line. Ends (shutting the stream down) when all senders are gone, the stream breaks or
/// `stop` fires (or its sender is dropped).
fn spawn_writer_until<W: AsyncWrite + Unpin + Send + 'static>(
    mut w: W,
    capacity: usize,
    stop: oneshot::Receiver<()>,
) -> mpsc::Sender<Bytes> {
    let (tx, mut rx) = mpsc::channel::<Bytes>(capacity);
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            let mut line = tokio::select! {
                l = rx.recv() => match l {
                    Some(l) => l,
                    None => break,
                },
                _ = &mut stop => break,
            };
            // Write everything already queued in one go.
            let mut buf = Vec::with_capacity(line.len() + 1);
            loop {
                buf.extend_from_slice(&line);
                buf.push(b'\n');
                match rx.try_recv() {
                    Ok(next) => line = next,
                    Err(_) => break,
                }
            }
            // A reader that stopped reading must not keep the writer (and the server) past
            // `stop`.
            let written = tokio::select! {
                r = async { w.write_all(&buf).await?; w.flush().await } => r.is_ok(),
                _ = &mut stop => false,
            };
            if !written {
                break;
            }
        }
        let _ = w.shutdown().await;
    });
    tx
}

/// Child processes started and not yet reaped (for a clean shutdown).
static LIVE_CHILDREN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static CHILD_REAPED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Waits until every child process started by [`StdioConn::spawn`] has exited and been
/// reaped (after [`StdioConn::close`], within about two seconds).
pub async fn all_children_exited() {
    use std::sync::atomic::Ordering;
    loop {
        let reaped = CHILD_REAPED.notified();
        tokio::pin!(reaped);
        reaped.as_mut().enable();
        if LIVE_CHILDREN.load(Ordering::SeqCst) == 0 {
            return;
        }
        reaped.await;
    }
}

/// A connection to a server that speaks line-delimited JSON-RPC: a child process on its
/// pipes, or a server on the other end of an in-memory stream.
pub struct StdioConn {
    tx: mpsc::Sender<Bytes>,
    /// Ends the connection: for a child, the task that stops it; for a stream, the writer.
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl StdioConn {
    /// Starts `command` as a child process and connects to its stdin and stdout. A line is
    /// at most `max_line` bytes, a batch at most `max_batch` messages.
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        name: &str,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&Path>,
        max_line: usize,
        max_batch: usize,
        sink: Arc<dyn InboundSink>,
    ) -> Result<StdioConn, Error> {
        let mut cmd = Command::new(command);
        cmd.args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        crate::huge_pages::as_started_for(&mut cmd);
        let mut child = cmd.spawn().map_err(|cause| Error::Spawn { command: command.into(), cause })?;
        LIVE_CHILDREN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let name: Arc<str> = name.into();
        tracing::info!(upstream = %name, pid, "started `{command}`");

        // The child's stderr is its log: it goes to ours, labelled.
        let log_name = name.clone();
        tokio::spawn(async move {
            read_log_lines(stderr, 16 * 1024, |line| tracing::info!(upstream = %log_name, "stderr: {line}")).await;
        });

        // One task owns the child: it waits for the exit, or stops it on request the way
        // stdio servers expect: stdin closed first, then SIGTERM, then SIGKILL.
        let (kill_tx, kill_rx) = oneshot::channel::<()>();
        let (exit_tx, exit_rx) = oneshot::channel::<Exit>();
        let (stdin_tx, stdin_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let status = tokio::select! {
                s = child.wait() => s,
                _ = kill_rx => {
                    let _ = stdin_tx.send(());
                    match tokio::time::timeout(GRACE, child.wait()).await {
                        Ok(s) => s,
                        Err(_) => {
                            if let Some(pid) = child.id() {
                                // SAFETY: kill(2) on our own child's pid; no memory is involved.
                                unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
                            }
                            match tokio::time::timeout(GRACE, child.wait()).await {
                                Ok(s) => s,
                                Err(_) => {
                                    let _ = child.start_kill();
                                    child.wait().await
                                }
                            }
                        }
                    }
                }
            };
            LIVE_CHILDREN.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            CHILD_REAPED.notify_waiters();
            let _ = exit_tx.send(match status {
                Ok(s) => Exit::Status(s),
                Err(e) => Exit::WaitFailed(e),
            });
        });

        // stdout closed: the child has exited or is about to. Its status is reported, waiting
        // only briefly for it (a child may close stdout and linger).
        let ended = async move {
            let exit = tokio::time::timeout(std::time::Duration::from_millis(500), exit_rx)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(Exit::Unknown);
            Error::Exited { pid, exit }
        };
        spawn_reader(name, stdout, (max_line, max_batch), sink, ended);
        Ok(StdioConn { tx: spawn_writer_until(stdin, WRITE_QUEUE, stdin_rx), stop: Mutex::new(Some(kill_tx)) })
    }

    /// Connects to the server serving the other end of `stream` (an in-memory duplex). When
    /// the connection closes, the stream is shut down, and the server is expected to end
    /// (closing its end) once it reads that; its end closing is the connection's end.
    pub fn over<S: AsyncRead + AsyncWrite + Send + 'static>(
        name: &str,
        stream: S,
        max_line: usize,
        max_batch: usize,
        sink: Arc<dyn InboundSink>,
    ) -> StdioConn {
        let (input, output) = tokio::io::split(stream);
        let (stop_tx, stop_rx) = oneshot::channel();
        let ended = std::future::ready(Error::StreamClosed);
        spawn_reader(name.into(), input, (max_line, max_batch), sink, ended);
        StdioConn { tx: spawn_writer_until(output, WRITE_QUEUE, stop_rx), stop: Mutex::new(Some(stop_tx)) }
    }

    pub async fn send(&self, msg: Message) -> Result<(), Error> {
        self.tx.send(msg.into_bytes()).await.map_err(|_| Error::NotRunning)
    }

    /// Ends the connection. A child is stopped: stdin closed, then SIGTERM, then SIGKILL, a
    /// second apart. A stream is shut down.
    pub fn close(&self) {
        if let Some(k) = self.stop.lock().unwrap().take() {
            let _ = k.send(());
        }
    }
}

/// The reader task: each line the server writes goes to `sink`, message by message; at the
/// end of the stream, `ended` says why it ended and the sink is told. `limits` are the
/// longest line (bytes) and the longest batch (messages).
fn spawn_reader<R, E>(name: Arc<str>, output: R, limits: (usize, usize), sink: Arc<dyn InboundSink>, ended: E)
where
    R: AsyncRead + Unpin + Send + 'static,
    E: Future<Output = Error> + Send + 'static,
{
    tokio::spawn(async move {
        let (max_line, max_batch) = limits;
        let mut lines = LineReader::new(output, max_line);
        loop {
            // While our own client has not read what it was sent, the server is not read
            // either: its pipe fills and it waits, instead of our queue growing.
            if let Some(out) = client_output() {
                out.room().await;
            }
            let Some(line) = lines.next().await else { break };
            match line {
                // A 2025-03-26 server may send a batch: each message is delivered on its own.
                Ok(line) => inbound(&name, line.messages, line.is_batch, max_batch)
                    .into_iter()
                    .for_each(|m| deliver(&*sink, m, None)),
                Err(bad) => {
                    crate::warn_limit::warn_limited!(upstream = %name, "skipping a stdout {bad}");
                    // The request it answered fails now rather than at its timeout.
                    if let Some(id) = bad.answers() {
                        sink.request_failed(id.clone(), bad.kind.into());
                    }
                }
            }
        }
        sink.closed(ended.await);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;

    #[tokio::test]
    async fn a_writer_blocked_by_a_reader_that_stopped_reading_ends_at_stop() {
        let (ours, _theirs) = tokio::io::duplex(16);
        let (stop, stopped) = oneshot::channel();
        let tx = spawn_writer_until(ours, 4, stopped);
        tx.send(Bytes::from(vec![b'x'; 1 << 16])).await.unwrap();
        tokio::task::yield_now().await;
        let _ = stop.send(());
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), tx.closed()).await;
        assert!(ended.is_ok(), "the writer is still blocked in its write");
    }

    /// Keeps what the reader reports.
    #[derive(Default)]
    struct Record {
        messages: Mutex<Vec<Message>>,
        failed: Mutex<Vec<(Id, Error)>>,
        closed: Mutex<Option<Error>>,
        done: tokio::sync::Notify,
    }

    impl InboundSink for Record {
        fn message(&self, msg: Message, _: Option<Id>) {
            self.messages.lock().unwrap().push(msg);
        }
        fn request_failed(&self, id: Id, why: Error) {
            self.failed.lock().unwrap().push((id, why));
        }
        fn closed(&self, reason: Error) {
            *self.closed.lock().unwrap() = Some(reason);
            self.done.notify_one();
        }
    }

    fn spawn(script: &str, sink: Arc<Record>) -> Result<StdioConn, Error> {
        StdioConn::spawn("up", "sh", &["-c".into(), script.into()], &[], None, 1024, 4, sink)
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_says_which() {
        let sink = Arc::new(Record::default());
        let Err(e) = StdioConn::spawn("up", "/nonexistent/server", &[], &[], None, 1024, 4, sink) else {
            panic!("a missing command started")
        };
        assert!(matches!(&e, Error::Spawn { command, .. } if command == "/nonexistent/server"), "{e}");
    }

    #[tokio::test]
    async fn an_unreadable_answer_fails_its_request_and_an_exit_closes_the_connection() {
        let sink = Arc::new(Record::default());
        let script = r#"printf '{"jsonrpc":"2.0","id":7,"result":"\377"}\n'; exit 3"#;
        let _child = spawn(script, sink.clone()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), sink.done.notified()).await.expect("closed");
        let failed = std::mem::take(&mut *sink.failed.lock().unwrap());
        assert!(matches!(&failed[..], [(Id::Num(7), Error::NotUtf8)]), "{failed:?}");
        let closed = sink.closed.lock().unwrap().take().unwrap();
        let Error::Exited { exit: Exit::Status(status), .. } = &closed else { panic!("{closed}") };
        assert_eq!(status.code(), Some(3));
    }

    /// Over a stream, the lines are the same as over a child's pipes: messages go out one a
    /// line, lines come back as messages; closing shuts the stream down, and the other end
    /// closing ends the connection.
    #[tokio::test]
    async fn a_stream_carries_lines_both_ways_and_closes_both_ways() {
        use tokio::io::AsyncBufReadExt;
        let sink = Arc::new(Record::default());
        let (ours, theirs) = tokio::io::duplex(64);
        let conn = StdioConn::over("up", ours, 1024, 4, sink.clone());
        let (server_in, mut server_out) = tokio::io::split(theirs);
        let mut server_in = tokio::io::BufReader::new(server_in);
        conn.send(Message::made(crate::jsonrpc::request(
            &Id::Num(1),
            crate::jsonrpc::Method::Ping,
            serde_json::json!({}),
        )))
        .await
        .unwrap();
        let mut line = String::new();
        server_in.read_line(&mut line).await.unwrap();
        assert_eq!(line, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{}}\n");
        server_out.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").await.unwrap();
        conn.close();
        line.clear();
        assert_eq!(server_in.read_line(&mut line).await.unwrap(), 0, "closing shuts the stream down");
        assert!(sink.closed.lock().unwrap().is_none(), "the server's end is still open");
        drop((server_in, server_out));
        tokio::time::timeout(std::time::Duration::from_secs(10), sink.done.notified()).await.expect("closed");
        let got: Vec<_> = sink.messages.lock().unwrap().iter().map(|m| m.value().clone()).collect();
        assert_eq!(got, [serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}})]);
        assert!(matches!(sink.closed.lock().unwrap().take(), Some(Error::StreamClosed)));
    }
}
