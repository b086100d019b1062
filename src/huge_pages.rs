//! Transparent huge pages: off for the gateway's own process, and as they were for the
//! upstream processes it starts.
//!
//! mimalloc marks its arenas for huge pages (`MADV_HUGEPAGE`). The kernel's khugepaged then
//! makes a 2 MiB region resident as soon as one of its 4 KiB pages is in use (the default
//! `max_ptes_none` is 511), and a region a load left sparse cannot be handed back in parts:
//! after a 10-minute soak of large task results the gateway stayed 40 MiB above its warm
//! idle, growing while idle as khugepaged went by (docs/performance.md). A gateway's heap
//! is small and short-lived; it gains nothing from huge pages. An operator who wants them
//! sets `MIMALLOC_ALLOW_THP=1`, which this leaves alone.

use std::sync::atomic::{AtomicBool, Ordering};

// `prctl(2)` options: the process's "THP disable" flag, inherited by children across
// fork and exec.
const PR_SET_THP_DISABLE: libc::c_int = 41;
const PR_GET_THP_DISABLE: libc::c_int = 42;

/// Whether the gateway, started with the flag clear, set it: its children clear it again.
static SET_BY_US: AtomicBool = AtomicBool::new(false);

/// Turns transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP` is set.
/// Call it once, at the start of `main`.
pub fn off_for_the_gateway() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: prctl with integer arguments only (0: clear; 1: set; -1: an error).
    if unsafe { libc::prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) } == 0
        && unsafe { libc::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0
    {
        SET_BY_US.store(true, Ordering::Relaxed);
    }
}

/// An upstream process `cmd` starts gets the flag the gateway was started with, not the
/// gateway's own.
pub(crate) fn as_started_for(cmd: &mut tokio::process::Command) {
    if !SET_BY_US.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: the closure runs in the child between fork and exec, and makes one system
    // call (async-signal-safe); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    /// The process's flag, as a child of it reads it (`/proc/self/status`).
    fn thp_enabled_in_child(cmd: &mut tokio::process::Command) -> String {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let out =
            rt.block_on(async { cmd.arg("-c").arg("grep THP_enabled /proc/self/status").output().await }).unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn children_get_the_flag_the_gateway_started_with() {
        // Started with the flag clear, as on a usual machine; then the test binary's own
        // goes on (as the gateway's does), and a child started through `as_started_for`
        // has it clear again.
        // SAFETY: prctl with integer arguments only.
        assert_eq!(unsafe { libc::prctl(super::PR_SET_THP_DISABLE, 0, 0, 0, 0) }, 0);
        assert!(std::env::var_os("MIMALLOC_ALLOW_THP").is_none(), "run the test without MIMALLOC_ALLOW_THP");
        super::off_for_the_gateway();
        assert!(super::SET_BY_US.load(std::sync::atomic::Ordering::Relaxed), "started with it clear, set");
        let inherited = thp_enabled_in_child(&mut tokio::process::Command::new("sh"));
        assert_eq!(inherited, "THP_enabled:\t0", "a plain child inherits the gateway's flag");
        let mut cmd = tokio::process::Command::new("sh");
        super::as_started_for(&mut cmd);
        assert_eq!(thp_enabled_in_child(&mut cmd), "THP_enabled:\t1");
    }
}
