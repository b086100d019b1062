//! Server-sent events framing: encoding events for downstream streams and decoding the
//! event streams that upstream servers send.

use bytes::{Bytes, BytesMut};

/// Encodes one `message` event carrying `data` (a single-line JSON text).
pub fn encode_event(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 48);
    if let Some(id) = id {
        b.extend_from_slice(b"id: ");
        b.extend_from_slice(id.as_bytes());
        b.extend_from_slice(b"\n");
    }
    b.extend_from_slice(b"event: message\ndata: ");
    b.extend_from_slice(data);
    b.extend_from_slice(b"\n\n");
    b.freeze()
}

/// A comment line; keeps idle connections alive and reveals dead ones.
pub const KEEPALIVE: &[u8] = b": keepalive\n\n";

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

/// Incremental decoder: feed it chunks as they arrive, take complete events out.
/// Lines longer than `max_line` bytes are an error (a bound on what a server can make us hold).
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    current: Event,
    has_data: bool,
    has_fields: bool,
    max_line: usize,
}

#[derive(Debug, PartialEq)]
pub struct LineTooLong;

impl Decoder {
    pub fn new(max_line: usize) -> Self {
        Decoder { buf: Vec::new(), current: Event::default(), has_data: false, has_fields: false, max_line }
    }

    /// Adds bytes and returns every event they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, LineTooLong> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < self.buf.len() {
            let c = self.buf[i];
            if c == b'\n' || c == b'\r' {
                let line_end = i;
                // "\r\n" counts as one line ending; a lone '\r' at the end of the buffer may be
                // followed by '\n' in the next chunk, so wait for it.
                if c == b'\r' {
                    if i + 1 == self.buf.len() {
                        break;
                    }
                    if self.buf[i + 1] == b'\n' {
                        i += 1;
                    }
                }
                let line = String::from_utf8_lossy(&self.buf[start..line_end]).into_owned();
                if let Some(ev) = self.line(&line) {
                    events.push(ev);
                }
                start = i + 1;
            }
            i += 1;
        }
        self.buf.drain(..start);
        if self.buf.len() > self.max_line {
            return Err(LineTooLong);
        }
        Ok(events)
    }

    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let dispatch = self.has_fields;
            let ev = std::mem::take(&mut self.current);
            let had_data = self.has_data;
            self.has_data = false;
            self.has_fields = false;
            return (dispatch && (had_data || ev.id.is_some() || ev.retry.is_some())).then_some(ev);
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.find(':') {
            Some(p) => {
                let v = &line[p + 1..];
                (&line[..p], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (line, ""),
        };
        self.has_fields = true;
        match field {
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.current.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.current.id = Some(value.to_string()),
            "retry" => self.current.retry = value.parse().ok(),
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let e = encode_event(Some("3-7"), br#"{"a":1}"#);
        let mut d = Decoder::new(1024);
        let evs = d.feed(&e).unwrap();
        assert_eq!(
            evs,
            vec![Event {
                id: Some("3-7".into()),
                event: Some("message".into()),
                data: r#"{"a":1}"#.into(),
                retry: None
            }]
        );
    }

    #[test]
    fn split_chunks_crlf_comments_and_multiline_data() {
        let text = b": hi\r\nid: 1\r\ndata: a\r\ndata: b\r\n\r\nretry: 50\n\ndata: c\n\n";
        let mut d = Decoder::new(1024);
        let mut all = Vec::new();
        for chunk in text.chunks(3) {
            all.extend(d.feed(chunk).unwrap());
        }
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].data, "a\nb");
        assert_eq!(all[0].id.as_deref(), Some("1"));
        assert_eq!(all[1].retry, Some(50));
        assert_eq!(all[1].data, "");
        assert_eq!(all[2].data, "c");
    }

    #[test]
    fn overlong_line_is_an_error() {
        let mut d = Decoder::new(8);
        assert_eq!(d.feed(b"data: 0123456789"), Err(LineTooLong));
    }
}
