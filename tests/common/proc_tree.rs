//! Process trees, for tests that start real processes: a child started in its own process
//! group is stopped with everything it started (SIGTERM to the group and to every descendant
//! found in /proc, a grace period, then SIGKILL), and what is left afterwards is reported so
//! the test can fail on an orphan.
//!
//! Linux only (/proc).

#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

/// Makes `cmd` start in a new process group whose id is the child's pid.
pub fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// `(pid, ppid)` of every process, read from /proc/<pid>/stat.
fn all_parents() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid))
    })
    .collect()
}

/// Every live descendant of `pid` (children, their children, ...), not `pid` itself.
pub fn descendants(pid: i32) -> Vec<i32> {
    let table = all_parents();
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(c, parent) in &table {
            if parent == p && !found.contains(&c) && alive(c) {
                found.push(c);
                frontier.push(c);
            }
        }
    }
    found
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()).is_some_and(|s| s != "Z"),
        Err(_) => false,
    }
}

/// The command line of `pid`, for messages.
pub fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " ").trim().to_string())
        .unwrap_or_default()
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory effects; a stale pid just gives ESRCH.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Stops `child` (started with [`own_group`]) and every process below it: SIGTERM to its group
/// and to each descendant, up to `grace` for all to exit, then SIGKILL to whatever is left.
/// The child is reaped. Returns the descendants still alive afterwards (with their command
/// lines); a clean stop returns none.
pub fn stop_tree(child: &mut Child, grace: Duration) -> Vec<(i32, String)> {
    let pid = child.id() as i32;
    if child.try_wait().ok().flatten().is_some() {
        // Already exited: its group may still hold children it left behind.
        signal(-pid, libc::SIGKILL);
        return leftovers(&[], pid);
    }
    let tree = descendants(pid);
    signal(-pid, libc::SIGTERM);
    for &d in &tree {
        signal(d, libc::SIGTERM);
    }
    let mut exited = false;
    super::pace::until(grace, || {
        exited = exited || child.try_wait().ok().flatten().is_some();
        (exited && !tree.iter().any(|&d| alive(d))).then_some(())
    });
    // Whatever ignored SIGTERM, and anything started meanwhile.
    let late = descendants(pid);
    signal(-pid, libc::SIGKILL);
    for &d in tree.iter().chain(&late) {
        if alive(d) {
            signal(d, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut all = tree;
    all.extend(late);
    leftovers(&all, pid)
}

/// Waits briefly for `pids` (and members of group `pgid`) to be gone; returns the survivors.
fn leftovers(pids: &[i32], pgid: i32) -> Vec<(i32, String)> {
    let survivors = || {
        let mut left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
        for p in group_members(pgid) {
            if !left.contains(&p) {
                left.push(p);
            }
        }
        left
    };
    let gone = super::pace::until(Duration::from_secs(2), || survivors().is_empty().then_some(()));
    let left = if gone.is_some() { vec![] } else { survivors() };
    left.into_iter().map(|p| (p, cmdline(p))).collect()
}

/// Live processes in process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_parents()
        .into_iter()
        .map(|(p, _)| p)
        .filter(|&p| {
            // SAFETY: getpgid(2) only reads.
            alive(p) && unsafe { libc::getpgid(p) } == pgid
        })
        .collect()
}
