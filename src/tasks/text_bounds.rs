//! Text a peer sends, cut to what the gateway keeps of it: a task's status message (an
//! upstream's error message, a progress message, a canceller's name) is at most
//! `max_status_message_bytes`, ending with [`CUT_MARKER`] when it was cut. An upstream's task
//! id is not cut (it would name another task): one past `max_task_id_bytes` is refused
//! ([`task_id_within`]).

use std::borrow::Cow;

/// What a cut message ends with.
pub const CUT_MARKER: &str = "… [cut by the gateway]";

/// `text` if it has at most `max` bytes; else its start, cut on a character boundary, and
/// [`CUT_MARKER`], `max` bytes at most in all.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(CUT_MARKER.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + CUT_MARKER.len());
    out.push_str(&text[..end]);
    if out.len() + CUT_MARKER.len() <= max {
        out.push_str(CUT_MARKER);
    }
    Cow::Owned(out)
}

/// `id` (an upstream's task id) if it has at most `max` bytes (`[tasks] max_task_id_bytes`);
/// else the error its client gets (the task is not kept).
pub fn task_id_within(id: &str, max: usize) -> Result<&str, crate::jsonrpc::RpcError> {
    if id.len() <= max {
        return Ok(id);
    }
    Err(crate::jsonrpc::RpcError::new(
        crate::jsonrpc::INTERNAL_ERROR,
        format!(
            "the upstream's task id is {} bytes, longer than this gateway keeps ([tasks] max_task_id_bytes = {max})",
            id.len()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_with_a_marker() {
        assert_eq!(bounded("short", 64), "short");
        let long = "é".repeat(1000);
        let cut = bounded(&long, 100);
        assert!(cut.len() <= 100 && cut.ends_with(CUT_MARKER), "{cut}");
        assert!(cut.starts_with("éé"));
        assert_eq!(bounded(&"x".repeat(200), 64).len(), 64);
        assert_eq!(bounded("abcdef", 3), "", "too small a bound for the marker: nothing kept");
    }
}
