//! A gateway process of the test's own (`taskgate serve --config`), stopped by its pid
//! when dropped (SIGTERM, a bounded wait, then SIGKILL).

use super::{STEP, bin};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A gateway process this test started, stopped by its pid (SIGTERM, wait, SIGKILL).
pub struct Proc(pub tokio::process::Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id().expect("running")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pid) = self.0.id() {
            signal(pid, libc::SIGTERM);
            if super::pace::until(Duration::from_secs(5), || self.0.try_wait().ok().flatten()).is_none() {
                let _ = self.0.start_kill();
            }
        }
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a process this test started; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// The gateway binary started with `args`, its log (stderr) piped for the caller to read.
pub fn spawn(args: &[&str]) -> tokio::process::Child {
    command(args).spawn().unwrap()
}

/// `taskgate serve --config CONFIG` as [`spawn`] starts it, not started yet: for a test that
/// sets more on it (a limit, a signal's disposition) first.
pub fn serve_command(config: &std::path::Path) -> tokio::process::Command {
    command(&["serve", "--config", config.to_str().unwrap()])
}

fn command(args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(bin());
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).kill_on_drop(true);
    cmd
}

/// Starts `taskgate serve` on `config`, and returns it with its address (HTTP or HTTPS). Its log (stderr)
/// is read on (so that it never blocks) and dropped.
pub async fn start(config: &std::path::Path) -> (Proc, String) {
    start_with(&["serve", "--config", config.to_str().unwrap()]).await
}

/// Starts the gateway binary with `args` (which make it listen), and returns it with its
/// address. Its log is read on and dropped.
pub async fn start_with(args: &[&str]) -> (Proc, String) {
    listening(spawn(args)).await
}

/// Waits until `child` (the gateway binary, its stderr piped) listens, and returns it with
/// its address. Its log is read on and dropped.
pub async fn listening(child: tokio::process::Child) -> (Proc, String) {
    let (proc, addr, mut log) = listening_logged(child).await;
    tokio::spawn(async move { while log.recv().await.is_some() {} });
    (proc, addr)
}

/// [`listening`], with the rest of its log, line by line, as it comes.
pub async fn listening_logged(
    mut child: tokio::process::Child,
) -> (Proc, String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = tokio::time::timeout(STEP, lines.next_line()).await.expect("no listening line").unwrap();
        let line = line.expect("the gateway exited before listening");
        let rest = line.split("listening on ").nth(1);
        if let Some(rest) = rest.and_then(|r| r.strip_prefix("http://").or_else(|| r.strip_prefix("https://"))) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let (tx, log) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    (Proc(child), addr, log)
}

/// `GET /readyz` of the gateway at `addr`: its status and body.
pub async fn readyz(addr: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = hyper::Request::get(format!("http://{addr}/readyz")).body(Default::default()).unwrap();
    let resp =
        tokio::time::timeout(STEP, client.request(req)).await.expect("GET /readyz timed out").expect("GET /readyz");
    let status = resp.status().as_u16();
    let body = tokio::time::timeout(STEP, resp.into_body().collect()).await.unwrap().unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}
