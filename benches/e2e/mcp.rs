//! The MCP messages the load generator sends, the envelope it reads back, and event streams.

use serde::Deserialize;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";
const ECHO_TEXT: &str = "hello from the taskgate load generator";

/// The envelope fields the load generator checks; everything else is skipped unparsed.
#[derive(Deserialize)]
pub(crate) struct Reply {
    #[serde(default)]
    pub(crate) id: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) method: Option<String>,
    #[serde(default)]
    pub(crate) result: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    pub(crate) error: Option<serde_json::Value>,
    #[serde(default)]
    pub(crate) params: Option<Params>,
}

#[derive(Deserialize)]
pub(crate) struct Params {
    #[serde(default)]
    pub(crate) progress: Option<f64>,
}

impl Reply {
    pub(crate) fn parse(data: &[u8]) -> Result<Reply, String> {
        serde_json::from_slice(data).map_err(|e| format!("unreadable message {}: {e}", String::from_utf8_lossy(data)))
    }

    pub(crate) fn answers(&self, id: u64) -> bool {
        self.method.is_none() && self.id.as_ref().and_then(serde_json::Value::as_u64) == Some(id)
    }

    pub(crate) fn ok(&self) -> Result<(), String> {
        match (&self.result, &self.error) {
            (Some(_), None) => Ok(()),
            (_, Some(e)) => Err(format!("error response: {e}")),
            _ => Err("a response with neither result nor error".into()),
        }
    }
}

pub(crate) fn initialize_request(id: u64, version: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"taskgate-e2e-bench","version":"0.1.0"}}}}}}"#
    )
}

pub(crate) const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

pub(crate) fn echo_request(id: u64) -> String {
    echo_text_request(id, ECHO_TEXT)
}

pub(crate) fn echo_text_request(id: u64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
    )
}

/// A task-augmented `tools/call echo` (the client asks for a ttl of 60 s).
pub(crate) fn task_call_request(id: u64, text: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}},"task":{{"ttl":60000}}}}}}"#
    )
}

pub(crate) fn task_request(id: u64, method: &str, task_id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{"taskId":"{task_id}"}}}}"#)
}

pub(crate) fn slow_request(id: u64, steps: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"slow","arguments":{{"duration_ms":0,"steps":{steps}}},"_meta":{{"progressToken":"p{id}"}}}}}}"#
    )
}

/// Splits an event stream into events; hands each event's data to the caller and remembers
/// the last event id (for `Last-Event-ID`).
#[derive(Default)]
pub(crate) struct SseReader {
    pub(crate) buf: Vec<u8>,
    pub(crate) last_id: Option<String>,
}

impl SseReader {
    pub(crate) fn feed(
        &mut self,
        chunk: &[u8],
        mut on_data: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        let mut used = 0;
        while let Some(end) = find(&self.buf[used..], b"\n\n") {
            let event = &self.buf[used..used + end];
            for line in event.split(|b| *b == b'\n') {
                if let Some(d) = line.strip_prefix(b"data: ").or_else(|| line.strip_prefix(b"data:")) {
                    on_data(d)?;
                } else if let Some(id) = line.strip_prefix(b"id: ") {
                    self.last_id = Some(String::from_utf8_lossy(id).into_owned());
                }
            }
            used += end + 2;
        }
        self.buf.drain(..used);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
