//! The file store on a disk that fills: no task's end is acknowledged that a crash could
//! lose (README: a task's end is on disk before anyone is shown it). While commits fail,
//! new task calls get -32603 naming the store, `/readyz` says why, and a `tasks/result`
//! answers -32603 after `store_outage_wait` rather than with a result that is not on disk;
//! once space is freed the store recovers by itself; after a `kill -9` (taken while the disk
//! is full) and a restart, every result that was acknowledged is there.
//!
//! The disk is a small tmpfs the test mounts (it runs as root). Where mounting is refused,
//! the gateway's file-size limit (RLIMIT_FSIZE, lowered and raised from outside with
//! prlimit) stops the store's file from growing instead: either way the kernel fails the
//! writes, as on a full disk. `TASKGATE_TEST_NO_MOUNT=1` takes that way on purpose.

use crate::common;

use common::gateway_proc::{Proc, listening, readyz, serve_command, signal};
use common::*;
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// How the test makes the store's disk full.
enum Disk {
    /// A tmpfs mounted at `mount`; full while `filler` takes what is left of it.
    Tmpfs { mount: PathBuf, filler: PathBuf },
    /// The gateway's file-size limit, set to the store file's size while "full".
    FileLimit,
}

impl Disk {
    /// A tmpfs of 8 MiB at `at`, or the file-size limit if it cannot be mounted.
    fn new(at: &Path) -> Disk {
        std::fs::create_dir_all(at).unwrap();
        if std::env::var_os("TASKGATE_TEST_NO_MOUNT").is_none() {
            let c = |p: &str| std::ffi::CString::new(p).unwrap();
            let target = c(at.to_str().unwrap());
            // SAFETY: mount(2) with valid NUL-terminated strings; no memory is shared.
            let rc = unsafe {
                libc::mount(c("tmpfs").as_ptr(), target.as_ptr(), c("tmpfs").as_ptr(), 0, c("size=8m").as_ptr().cast())
            };
            if rc == 0 {
                return Disk::Tmpfs { mount: at.to_path_buf(), filler: at.join("filler") };
            }
            eprintln!(
                "full_disk: cannot mount a tmpfs ({}); the gateway's file-size limit fills the disk instead",
                std::io::Error::last_os_error()
            );
        }
        Disk::FileLimit
    }

    /// No more room for the store of the gateway `pid`, whose file is `db`.
    fn fill(&self, pid: u32, db: &Path) {
        match self {
            Disk::Tmpfs { filler, .. } => {
                let mut f = std::fs::File::create(filler).unwrap();
                let chunk = vec![0xa5u8; 64 * 1024];
                // Bounded: the tmpfs holds 8 MiB.
                for _ in 0..1024 {
                    if f.write_all(&chunk).and_then(|()| f.sync_all()).is_err() {
                        return;
                    }
                }
                panic!("the tmpfs did not fill");
            }
            Disk::FileLimit => file_limit(pid, std::fs::metadata(db).unwrap().len()),
        }
    }

    /// Room again.
    fn free(&self, pid: Option<u32>) {
        match self {
            Disk::Tmpfs { filler, .. } => std::fs::remove_file(filler).unwrap(),
            Disk::FileLimit => {
                if let Some(pid) = pid {
                    file_limit(pid, libc::RLIM_INFINITY)
                }
            }
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        if let Disk::Tmpfs { mount, .. } = self {
            let target = std::ffi::CString::new(mount.to_str().unwrap()).unwrap();
            // SAFETY: umount2(2) of the tmpfs this test mounted.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// Sets process `pid`'s soft file-size limit to `bytes`.
fn file_limit(pid: u32, bytes: u64) {
    let lim = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: prlimit(2) on a process this test started, with a valid struct.
    let rc = unsafe { libc::prlimit(pid as libc::pid_t, libc::RLIMIT_FSIZE, &lim, std::ptr::null_mut()) };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// The gateway on `config`, with SIGXFSZ ignored (so that a write past its file-size limit
/// fails with EFBIG, as a full disk's does with ENOSPC, rather than killing it).
async fn start(config: &Path) -> (Proc, String) {
    let mut cmd = serve_command(config);
    // SAFETY: signal(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    listening(cmd.spawn().unwrap()).await
}

/// What became of one task call.
enum Made {
    /// Refused: the store cannot keep a new task.
    Refused,
    /// Made, and its result acknowledged (`tasks/result` answered it): `(id, text)`.
    Acknowledged(String, String),
    /// Made, but its result not acknowledged.
    Unacknowledged,
}

/// A hosted echo of `text` (16 KiB and more, so that the store's file must grow), and its
/// `tasks/result`. A refusal or an unacknowledged result names the store.
async fn make(c: &mut HttpMcp, text: String) -> Made {
    let call = json!({"name": "echo", "arguments": {"text": text}, "task": {"ttl": 3_600_000}});
    let created = c.request("tools/call", call).await;
    if created.response.get("error").is_some() {
        assert_store_named(&created.response);
        return Made::Refused;
    }
    let id = created.result()["task"]["taskId"].as_str().unwrap().to_string();
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    match result.response["result"]["content"][0]["text"].as_str() {
        Some(got) => {
            assert_eq!(got, text);
            Made::Acknowledged(id, text)
        }
        None => {
            assert_store_named(&result.response);
            Made::Unacknowledged
        }
    }
}

fn assert_store_named(resp: &Value) {
    assert_eq!(resp["error"]["code"], -32603, "{resp}");
    let message = resp["error"]["message"].as_str().unwrap();
    assert!(message.contains("file task store") && message.contains("tasks.redb"), "{message}");
}

/// Calls until one is refused (at most `max`): the acknowledged ones are added to `acked`;
/// returns how many were made but not acknowledged.
async fn until_refused(c: &mut HttpMcp, acked: &mut Vec<(String, String)>, tag: &str, max: usize) -> usize {
    let mut unacked = 0;
    for i in 0..max {
        match make(c, format!("{tag}-{i}-{}", "x".repeat(16 * 1024))).await {
            Made::Refused => return unacked,
            Made::Acknowledged(id, text) => acked.push((id, text)),
            Made::Unacknowledged => unacked += 1,
        }
    }
    panic!("{max} task calls on a full disk and none refused");
}

/// Five calls on a store with room: each acknowledged.
async fn five_kept(c: &mut HttpMcp, acked: &mut Vec<(String, String)>, tag: &str) {
    for i in 0..5 {
        match make(c, format!("{tag}-{i}")).await {
            Made::Acknowledged(id, text) => acked.push((id, text)),
            _ => panic!("the store has room: {tag}-{i} is kept"),
        }
    }
}

#[tokio::test]
async fn a_full_disk_refuses_what_it_cannot_keep_recovers_and_loses_no_acknowledged_result() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::new(&dir.path().join("disk"));
    let data = dir.path().join("disk").join("data");
    let db = data.join("tasks.redb");
    let config = dir.path().join("config.toml");
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[tasks]\npath = {:?}\nstore_outage_wait = \"1s\"\n{}",
        data.to_str().unwrap(),
        builtin_upstream("demo")
    );
    std::fs::write(&config, text).unwrap();
    let (gw, addr) = start(&config).await;
    let mut c = HttpMcp::new(&format!("http://{addr}/mcp/demo"));
    c.initialize("2025-11-25").await;
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut unacked = 0;
    five_kept(&mut c, &mut acked, "before").await;

    disk.fill(gw.pid(), &db);
    unacked += until_refused(&mut c, &mut acked, "full", 400).await;
    // An end not on disk is not listed as one: a crash would undo it.
    let mut cursor = None;
    loop {
        let params = cursor.map_or(json!({}), |c| json!({"cursor": c}));
        let listed = c.request("tasks/list", params).await;
        for t in listed.result()["tasks"].as_array().unwrap() {
            let kept = acked.iter().any(|(id, _)| t["taskId"] == id.as_str());
            assert!(kept || t["status"] != "completed", "listed as ended, not on disk: {t}");
        }
        match listed.result()["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
    }
    let (status, body) = readyz(&addr).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("task store failing") && body.contains("tasks.redb"), "{body}");
    assert!(matches!(make(&mut c, "still full".into()).await, Made::Refused), "refused while commits fail");

    // Room again: the store recovers by itself.
    disk.free(Some(gw.pid()));
    eventually("the store takes tasks again", async || readyz(&addr).await.0 == 200).await;
    five_kept(&mut c, &mut acked, "after").await;

    // Full again, and the gateway killed while it is.
    disk.fill(gw.pid(), &db);
    unacked += until_refused(&mut c, &mut acked, "again", 400).await;
    signal(gw.pid(), libc::SIGKILL);
    drop(gw);
    disk.free(None);

    let (_gw, addr) = start(&config).await;
    c.url = format!("http://{addr}/mcp/demo");
    for (id, text) in &acked {
        let result = c.request("tasks/result", json!({"taskId": id})).await;
        let got = result.response["result"]["content"][0]["text"].as_str();
        assert_eq!(got, Some(text.as_str()), "acknowledged, so kept: {id}");
    }
    eprintln!(
        "figure: {} results acknowledged (10 with room, {} on a full disk as commits still succeeded), all {} kept \
         across the full disk and kill -9; {} ends made while commits failed were not acknowledged",
        acked.len(),
        acked.len() - 10,
        acked.len(),
        unacked
    );
}
