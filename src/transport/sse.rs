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
/// Each event (its data and any one line) is bounded by `max` bytes, a bound on what a
/// server can make us hold: the rest of a larger event is discarded as it arrives and the
/// event is reported as [`Decoded::TooLarge`].
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    current: Event,
    has_data: bool,
    has_fields: bool,
    max: usize,
    /// The current event went over `max`; its data is being discarded.
    oversize: bool,
    /// The current line went over `max`; discarding up to its end.
    drop_line: bool,
}

/// What decoding yields.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    Event(Event),
    /// An event over the limit was dropped; `id` is its id field, if it had one.
    TooLarge {
        id: Option<String>,
    },
}

/// An event over the limit (from [`Decoder::feed`]).
#[derive(Debug, PartialEq)]
pub struct TooLarge;

impl Decoder {
    pub fn new(max: usize) -> Self {
        Decoder {
            buf: Vec::new(),
            current: Event::default(),
            has_data: false,
            has_fields: false,
            max,
            oversize: false,
            drop_line: false,
        }
    }

    /// Adds bytes and returns every event they complete; an event over the limit is an error
    /// (after which the decoder should not be fed more).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        self.decode(chunk)
            .into_iter()
            .map(|d| match d {
                Decoded::Event(e) => Ok(e),
                Decoded::TooLarge { .. } => Err(TooLarge),
            })
            .collect()
    }

    /// Adds bytes and returns every event they complete, and every event dropped for its size.
    pub fn decode(&mut self, chunk: &[u8]) -> Vec<Decoded> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
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
                if std::mem::take(&mut self.drop_line) {
                    // The end of a line already dropped.
                } else if line_end - start + self.current.data.len() > self.max {
                    // The same bound as on a line still arriving (below), so that where the
                    // chunks happen to end never changes what is decoded.
                    self.too_large();
                } else {
                    let line = String::from_utf8_lossy(&self.buf[start..line_end]).into_owned();
                    if let Some(d) = self.line(&line) {
                        out.push(d);
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        self.buf.drain(..start);
        // A '\r' last in the buffer has already ended its line (only a '\n' may still join
        // it): it is not part of the line, and it must outlive a drop, or the line after it
        // (a blank one, say, that dispatches the event) would be taken for the dropped line's end.
        let pending_cr = self.buf.last() == Some(&b'\r');
        let line_len = self.buf.len() - usize::from(pending_cr);
        if !self.drop_line && line_len + self.current.data.len() > self.max {
            self.too_large();
            self.drop_line = true;
        }
        if self.drop_line {
            self.buf.clear();
            if pending_cr {
                self.buf.push(b'\r');
            }
        }
        out
    }

    fn too_large(&mut self) {
        self.oversize = true;
        self.has_fields = true;
        self.current.data = String::new();
    }

    fn line(&mut self, line: &str) -> Option<Decoded> {
        if line.is_empty() {
            let dispatch = self.has_fields;
            let ev = std::mem::take(&mut self.current);
            let had_data = self.has_data;
            self.has_data = false;
            self.has_fields = false;
            if std::mem::take(&mut self.oversize) {
                return Some(Decoded::TooLarge { id: ev.id });
            }
            return (dispatch && (had_data || ev.id.is_some() || ev.retry.is_some())).then_some(Decoded::Event(ev));
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
            "data" if self.oversize => {}
            "data" => {
                if self.current.data.len() + value.len() + 1 > self.max {
                    self.too_large();
                    return None;
                }
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
        assert_eq!(d.feed(b"data: 0123456789\n\n"), Err(TooLarge));
    }

    #[test]
    fn many_short_data_lines_are_bounded_per_event() {
        let mut d = Decoder::new(1000);
        let mut got = d.decode(b"id: 1\n");
        // 100 000 lines of "data: x": each is short, the event is not.
        for _ in 0..10_000 {
            got.extend(
                d.decode(b"data: x\ndata: x\ndata: x\ndata: x\ndata: x\ndata: x\ndata: x\ndata: x\ndata: x\ndata: x\n"),
            );
            assert!(d.current.data.len() <= 1000 && d.buf.len() <= 1000);
        }
        got.extend(d.decode(b"\nid: 2\ndata: ok\n\n"));
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], Decoded::TooLarge { id: Some("1".into()) });
        let Decoded::Event(ev) = &got[1] else { panic!("{got:?}") };
        assert_eq!((ev.id.as_deref(), ev.data.as_str()), (Some("2"), "ok"));
    }

    /// Found by the `sse` fuzz target: with a line ending in a lone '\r' at the end of a chunk,
    /// the limit counted the '\r', the drop lost it, and the blank line after it was taken for
    /// the dropped line's end; a whole feed, checked differently, kept the event.
    #[test]
    fn where_chunks_end_does_not_change_the_events() {
        let stream = b"=\0\x01\x01data: x\rdata: y\r\r$\0\0\n\x07";
        for max in [7, 8, 11, 12, 1 << 20] {
            let whole = Decoder::new(max).decode(stream);
            for size in 1..=stream.len() {
                let mut d = Decoder::new(max);
                let chunked: Vec<Decoded> = stream.chunks(size).flat_map(|c| d.decode(c)).collect();
                assert_eq!(chunked, whole, "max {max}, chunks of {size}");
            }
        }
        // An event dropped for its size is still reported, once, at its blank line.
        let mut d = Decoder::new(8);
        let got: Vec<Decoded> = b"data: 0123456789\r\r\n".chunks(1).flat_map(|c| d.decode(c)).collect();
        assert_eq!(got, vec![Decoded::TooLarge { id: None }]);
    }

    #[test]
    fn one_huge_line_is_dropped_as_it_arrives() {
        let mut d = Decoder::new(100);
        let mut got = d.decode(b"retry: 50\nid: 7\ndata: ");
        for _ in 0..1000 {
            got.extend(d.decode(&[b'z'; 1000]));
            assert!(d.buf.len() <= 1000, "held {}", d.buf.len());
        }
        got.extend(d.decode(b"\r\n\r\ndata: {}\n\n"));
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0], Decoded::TooLarge { id: Some("7".into()) });
        assert_eq!(got[1], Decoded::Event(Event { data: "{}".into(), ..Default::default() }));
    }
}
