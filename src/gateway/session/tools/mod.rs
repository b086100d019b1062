//! What a session learned of its upstream's tools: each one's `execution.taskSupport`, from
//! the listings that pass to its client or that it reads itself when a call needs to know
//! (`listing`), and whether any listing marked a tool for tasks. Forgotten when the upstream
//! says its list changed (the marks stay) and when a new link negotiates (all of it). At
//! most `MAX_CACHED_TOOLS` tools are kept.
//!
//! Its lock is its own, taken for a moment: never across an `.await`, and after the
//! session's `state` where both are held.

use crate::locks::Mutex;
use crate::mcp::task_messages::TaskSupport;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) mod listing;

/// Tools listed by a session's upstream, by name (see the module doc).
#[derive(Default)]
pub(super) struct ToolSupport {
    known: Mutex<Known>,
    /// A listing marked a tool optional or required: read by every call, without the lock.
    marks_tasks: AtomicBool,
}

#[derive(Default)]
struct Known {
    support: HashMap<String, TaskSupport>,
    /// The tools listed with an `outputSchema` (their results are checked against it).
    schema_bound: std::collections::HashSet<String>,
    /// `support` holds the upstream's whole listing: a tool not in it has no task support.
    whole: bool,
}

impl ToolSupport {
    /// What is known of `tool` without a listing: `None` when only one can tell.
    pub(super) fn known(&self, tool: &str) -> Option<TaskSupport> {
        let k = self.known.lock().unwrap();
        k.support.get(tool).copied().or(k.whole.then_some(TaskSupport::Forbidden))
    }

    /// `tool`'s support as listed; `Forbidden` for a tool no listing showed.
    pub(super) fn listed(&self, tool: &str) -> TaskSupport {
        self.known.lock().unwrap().support.get(tool).copied().unwrap_or(TaskSupport::Forbidden)
    }

    /// Whether a listing showed `tool`.
    pub(super) fn lists(&self, tool: &str) -> bool {
        self.known.lock().unwrap().support.contains_key(tool)
    }

    /// Whether `tool` was listed with an `outputSchema`.
    pub(super) fn has_output_schema(&self, tool: &str) -> bool {
        self.known.lock().unwrap().schema_bound.contains(tool)
    }

    /// Every tool listed so far, and its support.
    pub(super) fn all(&self) -> HashMap<String, TaskSupport> {
        self.known.lock().unwrap().support.clone()
    }

    /// Whether a listing marked a tool optional or required: the upstream runs tasks, whatever
    /// its capabilities say.
    pub(super) fn marks_tasks(&self) -> bool {
        self.marks_tasks.load(Ordering::Acquire)
    }

    /// Learns each tool of a listing page. An upstream whose version has no tasks
    /// (`upstream_has_tasks` false) has none to declare: its tools count as forbidden,
    /// whatever they are marked.
    pub(super) fn learn(&self, result: &Value, upstream_has_tasks: bool, max_tools: usize) {
        let Some(tools) = result.get("tools").and_then(Value::as_array) else { return };
        let mut k = self.known.lock().unwrap();
        for t in tools {
            let support = if upstream_has_tasks { TaskSupport::of_tool(t) } else { TaskSupport::Forbidden };
            if support != TaskSupport::Forbidden {
                self.marks_tasks.store(true, Ordering::Release);
            }
            if k.support.len() >= max_tools {
                continue;
            }
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                k.support.insert(name.to_string(), support);
                if t.get("outputSchema").is_some_and(Value::is_object) {
                    k.schema_bound.insert(name.to_string());
                }
            }
        }
    }

    /// The listing's last page was learned.
    pub(super) fn learned_whole(&self) {
        self.known.lock().unwrap().whole = true;
    }

    /// The upstream refused `tool` as a plain call: it is to be called as a task from now on.
    pub(super) fn requires_task(&self, tool: String) {
        self.known.lock().unwrap().support.insert(tool, TaskSupport::Required);
    }

    /// The upstream's list changed: each tool's support is to be learned again.
    pub(super) fn list_changed(&self) {
        let mut k = self.known.lock().unwrap();
        k.support.clear();
        k.schema_bound.clear();
        k.whole = false;
    }

    /// A new link: nothing the last one listed holds for it.
    pub(super) fn forget(&self) {
        let mut k = self.known.lock().unwrap();
        *k = Known::default();
        self.marks_tasks.store(false, Ordering::Release);
    }
}
