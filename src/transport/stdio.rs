//! stdio upstreams: line-delimited JSON-RPC over the pipes of a child process. The gateway's
//! own stdin/stdout are in [`own_stdio`](super::own_stdio); the client front that uses them
//! is `downstream::stdio`.

use crate::jsonrpc::Message;
use crate::transport::lines::LineReader;
use crate::transport::lines::read_log_lines;
use crate::transport::own_stdio::client_output;
use crate::transport::{Error, Exit, InboundSink, deliver, readable};
use bytes::Bytes;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};

/// Messages queued for a child's stdin before senders wait.
const WRITE_QUEUE: usize = 1024;
/// How long a child gets to exit after its stdin closes, and again after SIGTERM.
const GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// A writer task for a child's stdin: each queued message becomes one line. Ends (closing
/// the pipe) when all senders are gone, the pipe breaks or `stop` fires.
fn spawn_writer_until<W: AsyncWrite + Unpin + Send + 'static>(
    mut w: W,
    capacity: usize,
    stop: Option<oneshot::Receiver<()>>,
) -> mpsc::Sender<Bytes> {
    let (tx, mut rx) = mpsc::channel::<Bytes>(capacity);
    tokio::spawn(async move {
        let stop = async {
            match stop {
                Some(s) => {
                    let _ = s.await;
                }
                None => std::future::pending().await,
            }
        };
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
            if w.write_all(&buf).await.is_err() || w.flush().await.is_err() {
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

/// Waits until every child process started by [`StdioChild::spawn`] has exited and been
/// reaped (after [`StdioChild::close`], within about two seconds).
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

/// An upstream server running as a child process.
pub struct StdioChild {
    tx: mpsc::Sender<Bytes>,
    kill: std::sync::Mutex<Option<oneshot::Sender<()>>>,
}

impl StdioChild {
    pub fn spawn(
        name: &str,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&Path>,
        max_line: usize,
        sink: Arc<dyn InboundSink>,
    ) -> Result<StdioChild, Error> {
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

        let reader_name = name.clone();
        tokio::spawn(async move {
            let mut lines = LineReader::new(stdout, max_line);
            loop {
                // While our own client has not read what it was sent, the child is not read
                // either: its pipe fills and it waits, instead of our queue growing.
                if let Some(out) = client_output() {
                    out.room().await;
                }
                let Some(line) = lines.next().await else { break };
                match line {
                    // A 2025-03-26 server may send a batch: each message is delivered on its own.
                    Ok(line) => line
                        .messages
                        .into_iter()
                        .filter_map(|m| readable(&reader_name, m))
                        .for_each(|m| deliver(&*sink, m, None)),
                    Err(bad) => {
                        tracing::warn!(upstream = %reader_name, "skipping a stdout {bad}");
                        // The request it answered fails now rather than at its timeout.
                        if let Some(id) = bad.answers() {
                            sink.request_failed(id.clone(), bad.kind.into());
                        }
                    }
                }
            }
            // stdout closed: the child has exited or is about to. Report its status, waiting
            // only briefly for it (a child may close stdout and linger).
            let exit = tokio::time::timeout(std::time::Duration::from_millis(500), exit_rx)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(Exit::Unknown);
            sink.closed(Error::Exited { pid, exit });
        });

        Ok(StdioChild {
            tx: spawn_writer_until(stdin, WRITE_QUEUE, Some(stdin_rx)),
            kill: std::sync::Mutex::new(Some(kill_tx)),
        })
    }

    pub async fn send(&self, msg: Message) -> Result<(), Error> {
        self.tx.send(msg.into_bytes()).await.map_err(|_| Error::NotRunning)
    }

    /// Stops the child: stdin closed, then SIGTERM, then SIGKILL, a second apart.
    pub fn close(&self) {
        if let Some(k) = self.kill.lock().unwrap().take() {
            let _ = k.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Id;
    use std::sync::Mutex;

    /// Keeps what the child's reader reports.
    #[derive(Default)]
    struct Record {
        failed: Mutex<Vec<(Id, Error)>>,
        closed: Mutex<Option<Error>>,
        done: tokio::sync::Notify,
    }

    impl InboundSink for Record {
        fn message(&self, _: Message, _: Option<Id>) {}
        fn request_failed(&self, id: Id, why: Error) {
            self.failed.lock().unwrap().push((id, why));
        }
        fn closed(&self, reason: Error) {
            *self.closed.lock().unwrap() = Some(reason);
            self.done.notify_one();
        }
    }

    fn spawn(script: &str, sink: Arc<Record>) -> Result<StdioChild, Error> {
        StdioChild::spawn("up", "sh", &["-c".into(), script.into()], &[], None, 1024, sink)
    }

    #[tokio::test]
    async fn a_command_that_cannot_start_says_which() {
        let sink = Arc::new(Record::default());
        let Err(e) = StdioChild::spawn("up", "/nonexistent/server", &[], &[], None, 1024, sink) else {
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
}
