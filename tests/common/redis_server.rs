//! A `redis-server` of the test's own, on a free 127.0.0.1 port, without persistence unless asked,
//! stopped by its pid when dropped. The binary must be on PATH (`scripts/setup-redis`
//! installs it; `scripts/test` runs that): without it the test fails, saying so.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
}

impl RedisServer {
    /// Starts one and waits (bounded) until it answers.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port())
    }

    /// [`RedisServer::start_persistent_on`] a free port.
    #[allow(dead_code)] // Not by the lib's tests, which include this file too.
    pub fn start_persistent(dir: &std::path::Path) -> RedisServer {
        RedisServer::start_persistent_on(free_port(), dir)
    }

    /// Starts one on `port` (a restart on the port a stopped one had).
    pub fn start_on(port: u16) -> RedisServer {
        RedisServer::spawn(port, &["--save", "", "--appendonly", "no"])
    }

    /// Starts one that keeps its data in `dir` (every write fsynced to its append-only file),
    /// so that one started again on the same `dir` and port after a stop has it all.
    #[allow(dead_code)] // Not by the lib's tests, which include this file too.
    pub fn start_persistent_on(port: u16, dir: &std::path::Path) -> RedisServer {
        let dir = dir.to_str().expect("a UTF-8 path");
        RedisServer::spawn(port, &["--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always"])
    }

    fn spawn(port: u16, extra: &[&str]) -> RedisServer {
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start redis-server ({e}): the redis store's tests need it on PATH; run scripts/setup-redis"
                )
            });
        // It logs to stdout that it listens; the rest of its log is read and dropped.
        let (ready, listening) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                if line.contains("Ready to accept connections") {
                    let _ = ready.send(());
                }
            }
        });
        let listening = listening.recv_timeout(Duration::from_secs(10));
        assert!(listening.is_ok(), "redis-server did not listen on 127.0.0.1:{port} within 10 s");
        RedisServer { child: Some(child), port }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops it by its pid and waits for it to exit.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
