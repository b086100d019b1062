//! Whether each configured upstream can be reached now, as `/readyz` reports it. Cheap by
//! design, and never an MCP exchange of its own:
//!
//! - an HTTP upstream is reachable when a TCP connection to its URL's host and port opens
//!   within its `connect_timeout` (at most [`MAX_PROBE`]);
//! - a stdio upstream when its command names an executable file (on `PATH` if bare);
//! - the builtin demo always is;
//!
//! and none is while the last attempt to open and initialize a link to it, if it was less
//! than [`REMEMBERED`] ago, failed (a server that accepts connections but cannot initialize
//! is not ready). Outcomes are noted where links open: per session and shared. `/readyz`
//! needs no token, so a failed open shows there as its JSON-RPC code only: what the upstream
//! answered (an error page, perhaps echoing the request) is for the log and the client.

use crate::config::{Transport, UpstreamConfig};
use crate::jsonrpc::{RpcError, UPSTREAM_UNAVAILABLE};
use crate::locks::Mutex;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest one probe may take.
pub const MAX_PROBE: Duration = Duration::from_secs(2);
/// How long a failed link open counts against its upstream.
pub const REMEMBERED: Duration = Duration::from_secs(30);

/// The last link-open failure of each upstream (one entry per configured upstream at most).
#[derive(Default)]
pub struct Readiness {
    failed: Mutex<HashMap<String, (Instant, i64)>>,
}

impl Readiness {
    /// Notes how opening a link to `upstream` ended (with the JSON-RPC code it failed
    /// with, if it did).
    pub fn note(&self, upstream: &str, failed: Option<i64>) {
        let mut map = self.failed.lock().unwrap();
        match failed {
            None => {
                map.remove(upstream);
            }
            Some(code) => {
                map.insert(upstream.to_string(), (Instant::now(), code));
            }
        }
    }

    /// Notes a link open's outcome: a failure to reach or initialize the upstream counts,
    /// the gateway's own limits (`max_links`) do not.
    pub fn note_outcome<T>(&self, upstream: &str, outcome: &Result<T, RpcError>) {
        match outcome {
            Ok(_) => self.note(upstream, None),
            Err(e) if e.code == UPSTREAM_UNAVAILABLE => self.note(upstream, Some(e.code)),
            Err(_) => {}
        }
    }

    /// Each upstream of `upstreams` that cannot be reached now, with why; probed at once.
    pub async fn unreachable(&self, upstreams: &[Arc<UpstreamConfig>]) -> Vec<(String, String)> {
        let probes = upstreams.iter().map(|u| async move { probe(u).await.err().map(|why| (u.name.clone(), why)) });
        let mut down: Vec<_> = futures_util::future::join_all(probes).await.into_iter().flatten().collect();
        let failed = self.failed.lock().unwrap();
        for u in upstreams {
            if let Some((at, code)) = failed.get(&u.name)
                && at.elapsed() < REMEMBERED
                && !down.iter().any(|(n, _)| *n == u.name)
            {
                let why = format!("its last link failed to open (error {code}; the gateway's log says why)");
                down.push((u.name.clone(), why));
            }
        }
        down
    }
}

async fn probe(u: &UpstreamConfig) -> Result<(), String> {
    match &u.transport {
        Transport::Builtin(_) => Ok(()),
        Transport::Stdio { command, .. } => match executable(command) {
            true => Ok(()),
            false => Err(format!("command {command:?} is not an executable file")),
        },
        Transport::Http { url, .. } => {
            let uri: hyper::Uri = url.value.parse().map_err(|_| "its url does not parse".to_string())?;
            let host = uri.host().ok_or("its url has no host")?.trim_start_matches('[').trim_end_matches(']');
            let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
            let within = u.connect_timeout.min(MAX_PROBE);
            match tokio::time::timeout(within, tokio::net::TcpStream::connect((host, port))).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(format!("cannot connect to {host}:{port}: {e}")),
                Err(_) => Err(format!("no connection to {host}:{port} within {within:?}")),
            }
        }
    }
}

fn executable(command: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runs = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if command.contains('/') {
        return runs(Path::new(command));
    }
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| runs(&d.join(command))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Vec<Arc<UpstreamConfig>> {
        crate::config::Config::parse(text, &|_| None).unwrap().upstreams.into_iter().map(Arc::new).collect()
    }

    #[tokio::test]
    async fn a_closed_port_and_a_missing_command_are_unreachable_the_demo_is_not() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let ups = parsed(&format!(
            "[[upstream]]\nname = \"demo\"\nbuiltin = \"demo\"\n\
             [[upstream]]\nname = \"web\"\nurl = \"http://{closed}/mcp\"\n\
             [[upstream]]\nname = \"sh\"\ncommand = \"sh\"\n\
             [[upstream]]\nname = \"gone\"\ncommand = \"/nonexistent/taskgate-test\"\n"
        ));
        let r = Readiness::default();
        let down: Vec<String> = r.unreachable(&ups).await.into_iter().map(|(n, _)| n).collect();
        assert_eq!(down, ["web", "gone"]);
        r.note("demo", Some(UPSTREAM_UNAVAILABLE));
        let down: Vec<String> = r.unreachable(&ups).await.into_iter().map(|(n, _)| n).collect();
        assert_eq!(down, ["web", "gone", "demo"]);
        r.note("demo", None);
        assert_eq!(r.unreachable(&ups[..1]).await, vec![]);
    }
}
