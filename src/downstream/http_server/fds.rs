//! The open-file limit the HTTP front lives within. At start the soft limit is raised to the
//! hard one, as servers commonly do, with a warning when `max_connections` and the upstream
//! links cannot fit in it. At the limit, `accept` fails (EMFILE) and the connection waits in
//! the backlog, where its client cannot tell it from a slow server: a reserve descriptor,
//! given up for a moment, lets the accept loop take such a connection and refuse it at once
//! (a 503, then close), as it refuses one past `max_connections`.

use std::io::{Read, Write};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// Descriptors the process needs besides its connections and links: the runtime, the
/// listener, the log, the task store, a few pipes.
const BASE_FDS: u64 = 64;
/// The most connections refused in one go, so that accepting goes on meanwhile.
const MAX_SHED: usize = 256;
/// At most one warning about refused connections per interval.
pub(super) const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// The answer to a connection refused for want of room (connection or descriptor).
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
content-length: 26\r\nretry-after: 1\r\nconnection: close\r\n\r\ntoo many open connections\n";

/// The soft and hard open-file limits (`RLIMIT_NOFILE`), after raising the soft one to the
/// hard one; a warning if `max_connections` plus `max_links` (and the process's own
/// descriptors) cannot fit. `None` if the limits cannot be read.
pub fn raise_open_file_limit(max_connections: usize, max_links: usize) -> Option<(u64, u64)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit write to and read from a struct of ours only.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        tracing::warn!("cannot read the open-file limit: {}", std::io::Error::last_os_error());
        return None;
    }
    // An unlimited hard limit still stops at the kernel's most descriptors per process.
    let target = match lim.rlim_max {
        libc::RLIM_INFINITY => {
            std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(1 << 20)
        }
        hard => hard,
    };
    if lim.rlim_cur < target {
        let raised = libc::rlimit { rlim_cur: target, rlim_max: lim.rlim_max };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::debug!("raised the open-file limit from {} to {target}", lim.rlim_cur);
            lim.rlim_cur = target;
        } else {
            let e = std::io::Error::last_os_error();
            tracing::warn!("cannot raise the open-file limit from {} to {target}: {e}", lim.rlim_cur);
        }
    }
    let (soft, hard) = (lim.rlim_cur, lim.rlim_max);
    let needed = (max_connections as u64).saturating_add(max_links as u64).saturating_add(BASE_FDS);
    if soft < needed {
        tracing::warn!(
            "the open-file limit is {soft} (hard limit {hard}), less than server.max_connections ({max_connections}) \
             plus server.max_links ({max_links}) plus {BASE_FDS} of the gateway's own need: past it, new connections \
             are refused with 503; raise the limit (ulimit -n, systemd LimitNOFILE=) or lower server.max_connections"
        );
    }
    Some((soft, hard))
}

/// Whether `accept` failed for want of descriptors (the process's or the system's).
pub(super) fn out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// The most bytes of a refused client's request read before the close.
const DRAIN_BYTES: usize = 64 * 1024;

/// Answers `tcp` with a 503 if its send buffer takes it at once, and closes it.
pub(super) fn refuse(tcp: TcpStream) {
    if let Ok(mut s) = tcp.into_std() {
        // Non-blocking: a fresh connection's send buffer takes these few bytes, or nothing.
        let _ = s.write(REFUSAL);
        // A client that wrote its request while it waited in the backlog: closing with that
        // request unread would send a reset, which may reach the client before it reads the
        // 503. What has arrived is read (without waiting), so the close is an orderly one.
        let mut buf = [0u8; 4096];
        let mut read = 0;
        while read < DRAIN_BYTES {
            match s.read(&mut buf) {
                Ok(n) if n > 0 => read += n,
                _ => break,
            }
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
}

/// One descriptor held in reserve, given up to refuse a connection when there is none left.
pub(super) struct Reserve(Option<std::fs::File>);

impl Reserve {
    pub(super) fn new() -> Reserve {
        Reserve(open_reserve())
    }

    /// Refuses the connections waiting on `listener` (up to [`MAX_SHED`]), each through the
    /// reserve descriptor; how many. None without a reserve (it could not be had again).
    pub(super) fn shed(&mut self, listener: &TcpListener) -> usize {
        use futures_util::FutureExt;
        let mut refused = 0;
        while refused < MAX_SHED {
            if self.0.is_none() {
                self.0 = open_reserve();
                if self.0.is_none() {
                    break;
                }
            }
            self.0 = None;
            let waiting = listener.accept().now_or_never();
            match waiting {
                Some(Ok((tcp, _))) => {
                    refuse(tcp);
                    refused += 1;
                }
                _ => break,
            }
        }
        if self.0.is_none() {
            self.0 = open_reserve();
        }
        refused
    }
}

fn open_reserve() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_response() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())), "{text}");
    }

    #[test]
    fn descriptor_exhaustion_is_told_apart() {
        assert!(out_of_fds(&std::io::Error::from_raw_os_error(libc::EMFILE)));
        assert!(out_of_fds(&std::io::Error::from_raw_os_error(libc::ENFILE)));
        assert!(!out_of_fds(&std::io::Error::from_raw_os_error(libc::ECONNABORTED)));
    }
}
