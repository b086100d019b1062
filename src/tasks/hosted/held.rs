//! The questions held for a hosted task's client (`tasks::held_inputs`): listed for the tasks
//! extension, answered by its `tasks/update`, and counted in bytes with every other task's.

use super::Hosted;
use serde_json::Value;
use std::sync::Arc;

impl Hosted {
    /// The bytes of the questions held for clients, all tasks together.
    pub fn held_bytes(&self) -> &Arc<crate::tasks::held_inputs::HeldBytes> {
        &self.held_bytes
    }

    /// The input requests held for the task, by key, as the tasks extension lists them
    /// (`{method, params}`, without the related-task tag).
    pub fn held_input_requests(&self, task_id: &str) -> serde_json::Map<String, Value> {
        let running = self.running.lock().unwrap();
        running.get(task_id).map(|r| r.held_inputs.listed()).unwrap_or_default()
    }

    /// Answers the held input request `key` of the task with `result` (an extension
    /// client's `tasks/update`): `false` if none is held under that key.
    pub async fn answer_held_input(&self, task_id: &str, key: &str, result: Value) -> bool {
        if !result.is_object() {
            // No answer to any input request is anything but an object.
            return false;
        }
        let held = {
            let mut running = self.running.lock().unwrap();
            let Some(r) = running.get_mut(task_id) else { return false };
            let Some(held) = r.held_inputs.take(key) else { return false };
            (held, r.held_inputs.is_empty())
        };
        let (held, none_left) = held;
        held.answer(result).await;
        if none_left {
            self.input_answered(task_id).await;
        }
        true
    }
}
