//! `tasks/list` of hosted tasks: pages of an owner's tasks (at most `list_page_size` tasks
//! and `max_list_page_bytes` bytes of them), and the cursors that lead from one to the next.

use super::{CURSOR_PREFIX, Hosted};
use crate::jsonrpc::RpcError;
use crate::mcp::paging;
use serde_json::Value;

impl Hosted {
    /// One page of the owner's tasks, after `cursor` (one this gateway issued to that owner;
    /// `None` for the first page), and the cursor of the next page. A page holds at most
    /// `list_page_size` tasks and `max_list_page_bytes` bytes of them (at least one task).
    pub async fn list(&self, owner: &str, cursor: Option<&str>) -> Result<(Vec<Value>, Option<String>), RpcError> {
        let after = match cursor {
            None => 0,
            Some(c) => {
                let last = self.store.last_seq().await;
                self.parse_cursor(owner, c, last).ok_or_else(paging::invalid_cursor)?
            }
        };
        let (page, more) = self.store.list(owner, after, self.page_size).await.map_err(|e| self.store_failed(e))?;
        let (mut tasks, mut bytes, mut last, mut cut) = (Vec::with_capacity(page.len()), 0, None, false);
        for r in page {
            let seq = r.seq;
            let task = Value::Object(self.live(r).to_json());
            let len = serde_json::to_vec(&task).map_or(0, |t| t.len());
            if !tasks.is_empty() && bytes + len > self.max_page_bytes {
                cut = true;
                break;
            }
            bytes += len;
            last = Some(seq);
            tasks.push(task);
        }
        let next = if more || cut { last.map(|seq| self.cursor(owner, seq)) } else { None };
        Ok((tasks, next))
    }

    /// A check value of `seq` for `owner`, so that only cursors the gateway issued to that
    /// owner are accepted. Not secret (a forged one could only skip through the owner's own
    /// tasks): it is the same in every process of one build, so a cursor stays good across a
    /// restart and on every replica sharing a store.
    fn cursor_mac(&self, owner: &str, seq: u64) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        (owner, seq).hash(&mut h);
        h.finish()
    }

    fn cursor(&self, owner: &str, seq: u64) -> String {
        format!("{CURSOR_PREFIX}{seq}.{:016x}", self.cursor_mac(owner, seq))
    }

    fn parse_cursor(&self, owner: &str, cursor: &str, last_seq: u64) -> Option<u64> {
        let (seq, mac) = cursor.strip_prefix(CURSOR_PREFIX)?.split_once('.')?;
        let seq: u64 = seq.parse().ok()?;
        (u64::from_str_radix(mac, 16).ok()? == self.cursor_mac(owner, seq) && seq <= last_seq).then_some(seq)
    }
}
