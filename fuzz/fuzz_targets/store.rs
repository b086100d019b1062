//! The file store's open on a damaged file: a real store file (finished tasks with results,
//! made once per process), damaged as the input says, then opened. The first input byte
//! chooses whether the file is cut short (to a multiple of 512 bytes the next two bytes
//! give); the rest are flips, five bytes each: a little-endian offset (taken modulo the
//! file's length) and the byte it is XORed with. Opening must give the store or an error
//! naming the file, and never panic; a zero-length file is damaged, not a new store.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;
use taskgate::{DB_FILE, FileStore, TaskRecord, TaskStatus, TaskStore};

/// This process's data directory (its store file is rewritten by each input).
fn dir() -> PathBuf {
    std::env::temp_dir().join(format!("taskgate-fuzz-store-{}", std::process::id()))
}

/// The undamaged store file's bytes.
fn good() -> &'static [u8] {
    static GOOD: OnceLock<Vec<u8>> = OnceLock::new();
    GOOD.get_or_init(|| {
        let dir = dir();
        let _ = std::fs::remove_dir_all(&dir);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = FileStore::open(&dir, 100, 1 << 20).expect("a new store opens");
            for i in 0..8 {
                let ttl = Duration::from_secs(3600);
                let rec = TaskRecord::new(format!("t{i}"), "o".into(), "c".into(), "u".into(), ttl, ttl);
                let id = s.insert(rec, 100).await.unwrap().id;
                let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"n":"{}"}}}}"#, "x".repeat(i * 40));
                s.update(&id, &mut |r| {
                    r.status = TaskStatus::Completed;
                    r.outcome = Some(text.clone().into());
                })
                .await
                .unwrap();
            }
        });
        std::fs::read(dir.join(DB_FILE)).unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    let good = good();
    let Some((&how, rest)) = data.split_first() else { return };
    let mut bytes = good.to_vec();
    let flips = if how & 1 == 1 && rest.len() >= 2 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])) * 512;
        bytes.truncate(len);
        &rest[2..]
    } else {
        rest
    };
    if !bytes.is_empty() {
        for f in flips.chunks_exact(5) {
            let at = u32::from_le_bytes([f[0], f[1], f[2], f[3]]) as usize % bytes.len();
            bytes[at] ^= f[4];
        }
    }
    let dir = dir();
    let path = dir.join(DB_FILE);
    std::fs::write(&path, &bytes).unwrap();
    match FileStore::open(&dir, 100, 1 << 20) {
        Ok(_store) => assert!(!bytes.is_empty(), "a zero-length store file was taken for a new store"),
        Err(e) => {
            let message = e.to_string();
            assert!(message.contains(path.to_str().unwrap()), "the error names the file: {message}");
        }
    }
});
