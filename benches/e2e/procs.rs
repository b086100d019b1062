//! The processes a run starts (taskgate, the lean upstream), their logs, and their stopping:
//! each by its own pid, SIGTERM then SIGKILL, and any child it leaves behind the same way.

use crate::TIMEOUT;
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process this bench started; stopped by its pid (SIGTERM, then SIGKILL), and its
/// children with it.
pub(crate) struct Proc {
    pub(crate) name: String,
    pub(crate) child: Child,
}

impl Proc {
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn watch(&self, role: &str) -> (String, u32) {
        (role.to_string(), self.pid())
    }

    /// Waits up to `limit` for the process to exit by itself.
    pub(crate) fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // Its children (a gateway's stdio upstream), read while they are still its own.
        let children = children_of(self.pid());
        // SAFETY: kill(2) on our own child, not yet reaped, so the pid is still ours.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        if !self.wait_exit(Duration::from_secs(5)) {
            eprintln!("{} (pid {}) ignored SIGTERM; killing it", self.name, self.pid());
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        check_gone(&children);
    }

    pub(crate) fn stop(mut self) {
        self.terminate();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn command(program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    // The default level, whatever the caller's environment says.
    cmd.args(args).env("RUST_LOG", "info");
    cmd
}

/// Starts an HTTP server (`taskgate demo-server` or `serve`, or the lean upstream) on
/// 127.0.0.1:0 and waits for the address it reports on stderr.
pub(crate) fn spawn_listening(
    name: &str,
    program: &str,
    args: &[&str],
    dir: &Path,
) -> Result<(Proc, SocketAddr), String> {
    let mut args = args.to_vec();
    args.extend(["--listen", "127.0.0.1:0"]);
    let mut child = command(program, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let stderr = child.stderr.take().expect("piped");
    let proc = Proc { name: name.to_string(), child };
    let mut log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(log, "{line}");
            if let Some(rest) = line.split("listening on http://").nth(1) {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
            }
        }
    });
    let addr = rx.recv_timeout(TIMEOUT).map_err(|_| format!("{name} did not report its address"))?;
    let addr = addr.parse().map_err(|e| format!("{name} reported address {addr:?}: {e}"))?;
    Ok((proc, addr))
}

/// Starts a process that speaks MCP on its stdin/stdout.
pub(crate) fn spawn_stdio(name: &str, program: &str, args: &[&str], dir: &Path) -> Result<Proc, String> {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let child = command(program, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    Ok(Proc { name: name.to_string(), child })
}

pub(crate) fn write_config(dir: &Path, name: &str, transport: &str) -> Result<PathBuf, String> {
    let path = dir.join(format!("gateway-{name}.toml"));
    let text = format!("[[upstream]]\nname = \"demo\"\n{transport}");
    std::fs::write(&path, text).map_err(|e| e.to_string())?;
    Ok(path)
}

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// Says how many warnings and errors a process logged, and shows the first (a refusal or a
/// full buffer would show up there before it showed up as a failure).
pub(crate) fn report_log_warnings(dir: &Path, name: &str) {
    // The thread copying its stderr may still be writing the last lines.
    std::thread::sleep(Duration::from_millis(100));
    let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.log"))) else { return };
    let bad: Vec<&str> = text.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    match bad.first() {
        None => println!("  {name} log: no warnings or errors"),
        Some(first) => println!("  {name} log: {} warnings/errors, the first: {first}", bad.len()),
    }
}

pub(crate) fn dump_logs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log")
            && let Ok(text) = std::fs::read_to_string(&p)
        {
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            println!("  --- {} (last lines)", p.display());
            for l in tail.iter().rev() {
                println!("  {l}");
            }
        }
    }
}

/// The processes whose parent is `pid`.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).ok().is_some_and(|s| {
                s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().nth(1)?.parse::<u32>().ok()) == Some(pid)
            })
        })
        .collect()
}

/// Whether process `p` still runs. A zombie waiting for its (exited) parent's reaper has
/// ended too.
fn alive(p: &u32) -> bool {
    std::fs::read_to_string(format!("/proc/{p}/stat"))
        .is_ok_and(|s| s.rfind(')').and_then(|i| s[i + 1..].split_whitespace().next()) != Some("Z"))
}

/// Upstream processes a gateway started must end with it: says so if one outlives it, and
/// stops it then (SIGTERM, then SIGKILL, by its pid).
pub(crate) fn check_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    for (signal, wait) in [(libc::SIGTERM, Duration::from_secs(2)), (libc::SIGKILL, Duration::from_secs(1))] {
        let left: Vec<u32> = pids.iter().copied().filter(alive).collect();
        if left.is_empty() {
            return;
        }
        for p in &left {
            println!("  WARNING: upstream process {p} outlived its gateway; sending it signal {signal}");
            // SAFETY: kill(2) on a pid read as a child of one of our children a moment ago.
            unsafe { libc::kill(*p as libc::pid_t, signal) };
        }
        let deadline = Instant::now() + wait;
        while left.iter().any(alive) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
