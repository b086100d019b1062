//! Line framing for JSON-RPC over byte streams (stdio): lines are read as bytes, bounded in
//! length, and read as one [`Message`] or a batch of them. A line that cannot be used (not
//! UTF-8, not JSON, over the limit) is reported and skipped; it never ends the stream. What can
//! still be read of such a line, its top-level `"id"` and whether it has a `"method"`, comes
//! with the report, so that the request it answered can be failed alone.

use crate::jsonrpc::{self, Id, Message, PARSE_ERROR, Refused};
use bytes::Bytes;
use std::fmt;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// A line that is JSON: one message or a batch of them, each read (or why it is not a
/// JSON-RPC message, with its id if one could be read).
#[derive(Debug)]
pub struct Line {
    pub is_batch: bool,
    pub messages: Vec<Result<Message, Refused>>,
}

/// Why a line was skipped.
#[derive(Debug, Clone, PartialEq)]
pub enum BadKind {
    /// Longer than the limit (the limit, in bytes).
    TooLong(usize),
    /// More JSON values than the limit (the limit; see `jsonrpc::within_values`).
    TooManyValues(usize),
    InvalidUtf8,
    NotJson(String),
}

/// A skipped line, with what a scan of it could read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub kind: BadKind,
    /// The message's top-level `"id"`, if it could be read.
    pub id: Option<Id>,
    /// Whether the message has a top-level `"method"` (a request or a notification).
    pub has_method: bool,
}

impl BadLine {
    /// The id of the request this line was the response to, if that can be told.
    pub fn answers(&self) -> Option<&Id> {
        if self.has_method { None } else { self.id.as_ref() }
    }
}

impl fmt::Display for BadKind {
    /// Completes "the line …" / "the response …".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadKind::TooLong(limit) => write!(f, "exceeds max_body_bytes ({limit} bytes)"),
            BadKind::TooManyValues(limit) => write!(f, "holds more than {limit} JSON values (max_body_values)"),
            BadKind::InvalidUtf8 => f.write_str("is not valid UTF-8"),
            BadKind::NotJson(e) => write!(f, "is not JSON ({e})"),
        }
    }
}

impl fmt::Display for BadLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.kind)?;
        if let Some(id) = &self.id {
            write!(f, " (id {id})")?;
        }
        Ok(())
    }
}

/// Reads lines from `reader` until end of input or a read error, handing each non-blank line
/// to `on_line` parsed (a batch line arrives as one array value), or as a [`BadLine`].
/// At most `max_line` bytes of a line are held; the rest of a longer one is only scanned.
#[cfg(test)]
pub async fn read_messages<R: AsyncRead + Unpin>(
    reader: R,
    max_line: usize,
    mut on_line: impl FnMut(Result<Line, BadLine>),
) {
    let mut lines = LineReader::new(reader, max_line);
    while let Some(line) = lines.next().await {
        on_line(line);
    }
}

/// The messages of a byte stream, one line at a time, for a reader that awaits between
/// lines (to apply backpressure).
pub struct LineReader<R> {
    r: BufReader<R>,
    max_line: usize,
    /// The most JSON values a line may hold (a client's; unbounded for an upstream's).
    max_values: usize,
    line: Vec<u8>,
    /// Some while the rest of an over-long line goes by.
    overflow: Option<IdScan>,
    ended: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(reader: R, max_line: usize) -> LineReader<R> {
        LineReader {
            r: BufReader::with_capacity(64 * 1024, reader),
            max_line,
            max_values: usize::MAX,
            line: Vec::new(),
            overflow: None,
            ended: false,
        }
    }

    /// Lines holding more than `max` JSON values are reported, not parsed (a client's lines:
    /// what parsing costs grows with them).
    pub fn with_max_values(mut self, max: usize) -> LineReader<R> {
        self.max_values = max;
        self
    }

    /// The next non-blank line, parsed or reported; None at end of input or a read error.
    /// Cancel-safe: the only await is the buffer's fill, and the state lives in `self`.
    pub async fn next(&mut self) -> Option<Result<Line, BadLine>> {
        while !self.ended {
            let buf = match self.r.fill_buf().await {
                Ok(b) => b,
                Err(e) => {
                    tracing::debug!("read error: {e}");
                    self.ended = true;
                    return None;
                }
            };
            if buf.is_empty() {
                self.ended = true;
                return match self.overflow.take() {
                    Some(scan) => Some(Err(scan.into_bad(BadKind::TooLong(self.max_line)))),
                    None => parse_line(std::mem::take(&mut self.line), self.max_values),
                };
            }
            let newline = buf.iter().position(|&b| b == b'\n');
            let part = &buf[..newline.unwrap_or(buf.len())];
            match &mut self.overflow {
                Some(scan) => scan.feed(part),
                None if self.line.len() + part.len() > self.max_line => {
                    let mut scan = IdScan::default();
                    scan.feed(&self.line);
                    scan.feed(part);
                    self.line.clear();
                    self.line.shrink_to(64 * 1024);
                    self.overflow = Some(scan);
                }
                None => self.line.extend_from_slice(part),
            }
            let used = part.len() + usize::from(newline.is_some());
            self.r.consume(used);
            if newline.is_some() {
                let out = match self.overflow.take() {
                    Some(scan) => Some(Err(scan.into_bad(BadKind::TooLong(self.max_line)))),
                    None => parse_line(std::mem::take(&mut self.line), self.max_values),
                };
                if out.is_some() {
                    return out;
                }
            }
        }
        None
    }
}

/// Reads text lines (a log) until end of input, handing each to `on_line` decoded lossily and
/// cut to `max_line` bytes. Bad bytes and long lines never stop it: a pipe that is no longer
/// read blocks, or kills, the process writing it.
pub async fn read_log_lines<R: AsyncRead + Unpin>(reader: R, max_line: usize, mut on_line: impl FnMut(&str)) {
    let mut r = BufReader::new(reader);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let buf = match r.fill_buf().await {
            Ok(b) if !b.is_empty() => b,
            _ => break,
        };
        let newline = buf.iter().position(|&b| b == b'\n');
        let part = &buf[..newline.unwrap_or(buf.len())];
        let room = max_line.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        let used = part.len() + usize::from(newline.is_some());
        r.consume(used);
        if newline.is_some() {
            on_line(String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(&line)).as_ref());
            line.clear();
        }
    }
    if !line.is_empty() {
        on_line(String::from_utf8_lossy(&line).as_ref());
    }
}

fn parse_line(line: Vec<u8>, max_values: usize) -> Option<Result<Line, BadLine>> {
    let mut line = Bytes::from(line);
    if line.last() == Some(&b'\r') {
        line.truncate(line.len() - 1);
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    if !jsonrpc::within_values(&line, max_values) {
        let mut scan = IdScan::default();
        scan.feed(&line);
        return Some(Err(scan.into_bad(BadKind::TooManyValues(max_values))));
    }
    let bad = |line: &[u8], e: &str| {
        let kind = if std::str::from_utf8(line).is_err() { BadKind::InvalidUtf8 } else { BadKind::NotJson(e.into()) };
        let mut scan = IdScan::default();
        scan.feed(line);
        scan.into_bad(kind)
    };
    let one = |m| Ok(Line { is_batch: false, messages: vec![m] });
    Some(match jsonrpc::parse_body(line.clone()) {
        Ok(jsonrpc::Body::Single(text)) => match Message::parse(text) {
            Err(r) if r.error.code == PARSE_ERROR => {
                Err(bad(&line, r.error.message.trim_start_matches("parse error: ")))
            }
            m => one(m),
        },
        Ok(jsonrpc::Body::Batch(items)) => {
            Ok(Line { is_batch: true, messages: items.into_iter().map(Message::parse).collect() })
        }
        Err(e) if e.code == PARSE_ERROR => Err(bad(&line, e.message.trim_start_matches("parse error: "))),
        Err(error) => one(Err(Refused::new(None, false, error))),
    })
}

/// The longest `"id"` value text kept.
const MAX_ID: usize = 256;

/// A one-pass scan of JSON text (which may be broken or cut) for the top-level `"id"` and
/// `"method"` members of an object. It holds a few bytes of state, whatever the input size.
#[derive(Default)]
struct IdScan {
    depth: u32,
    in_str: bool,
    escaped: bool,
    expect_key: bool,
    in_key: bool,
    key: Vec<u8>,
    /// Collecting the text of the `"id"` value.
    capturing: bool,
    value: Vec<u8>,
    id: Option<Id>,
    id_seen: bool,
    has_method: bool,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_str {
            if self.capturing {
                self.push(b);
            }
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_str = false;
                if self.in_key {
                    self.in_key = false;
                    if self.key == b"method" {
                        self.has_method = true;
                    }
                }
            } else if self.in_key && self.key.len() <= 8 {
                self.key.push(b);
            }
            return;
        }
        let top = self.depth == 1;
        match b {
            b',' | b'}' | b']' if top => self.end_value(),
            b':' if top => {
                if self.key == b"id" && !self.id_seen {
                    self.capturing = true;
                    self.value.clear();
                }
                return;
            }
            _ => {}
        }
        if self.capturing {
            self.push(b);
        }
        match b {
            b'"' => {
                self.in_str = true;
                if top && self.expect_key {
                    self.in_key = true;
                    self.expect_key = false;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = b == b'{';
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if top => self.expect_key = true,
            _ => {}
        }
    }

    fn push(&mut self, b: u8) {
        if self.value.len() <= MAX_ID {
            self.value.push(b);
        }
    }

    fn end_value(&mut self) {
        if self.capturing {
            self.capturing = false;
            self.id_seen = true;
            if self.value.len() <= MAX_ID {
                self.id = std::str::from_utf8(&self.value).ok().and_then(|raw| Id::from_raw(raw.trim()));
            }
        }
    }

    fn into_bad(self, kind: BadKind) -> BadLine {
        BadLine { kind, id: self.id, has_method: self.has_method }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &[u8]) -> (Option<Id>, bool) {
        let mut s = IdScan::default();
        // Byte by byte and in one go must agree.
        for b in text {
            s.byte(*b);
        }
        let mut whole = IdScan::default();
        whole.feed(text);
        assert_eq!(whole.id, s.id);
        (s.id, s.has_method)
    }

    #[test]
    fn the_scan_finds_only_the_top_level_id() {
        assert_eq!(scan(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#), (Some(Id::Num(7)), false));
        assert_eq!(scan(br#"{"result":{"id":1,"x":[{"id":2}]},"id":"a\"b"}"#), (Some(Id::Str("a\"b".into())), false));
        assert_eq!(scan(br#"{"method":"x","params":{"id":3},"id" : 4 }"#), (Some(Id::Num(4)), true));
        assert_eq!(scan(br#"{"text":"\"id\":5","result":1}"#), (None, false));
        assert_eq!(scan(br#"[{"id":6}]"#), (None, false));
        // Cut off, or broken after the id.
        assert_eq!(scan(b"{\"id\":8,\"result\":{\"t\":\"\xff\xfe aaaa"), (Some(Id::Num(8)), false));
        assert_eq!(scan(b"{\"jsonrpc\":\"2.0\",\"result\":\"\xff\",\"id\":9}"), (Some(Id::Num(9)), false));
        assert_eq!(scan(br#"{"id":null,"error":{}}"#), (None, false));
    }

    async fn read_all(input: &[u8], max: usize) -> Vec<Result<Line, BadLine>> {
        let mut out = Vec::new();
        read_messages(input, max, |l| out.push(l)).await;
        out
    }

    #[tokio::test]
    async fn bad_lines_are_reported_and_reading_goes_on() {
        let long = format!("{{\"id\":3,\"result\":\"{}\"}}\n", "x".repeat(100));
        let input = [
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n".as_slice(),
            b"\n  \r\n",
            b"{\"id\":2,\"r\":\"\xff\"}\n",
            long.as_bytes(),
            b"not json\r\n",
            b"[{\"id\":4}]\n",
            b"{\"id\":5}",
        ]
        .concat();
        let mut got = read_all(&input, 64).await;
        assert_eq!(got.len(), 6, "{got:?}");
        let bad = |l: &Result<Line, BadLine>| l.as_ref().err().cloned();
        let first = got.remove(0).unwrap();
        assert!(!first.is_batch && matches!(&first.messages[..], [Ok(m)] if m.id() == Some(&Id::Num(1))));
        assert_eq!(bad(&got[0]), Some(BadLine { kind: BadKind::InvalidUtf8, id: Some(Id::Num(2)), has_method: false }));
        assert_eq!(bad(&got[1]), Some(BadLine { kind: BadKind::TooLong(64), id: Some(Id::Num(3)), has_method: false }));
        assert!(matches!(&got[2], Err(BadLine { kind: BadKind::NotJson(_), id: None, .. })));
        assert!(matches!(&got[3], Ok(Line { is_batch: true, messages }) if messages.len() == 1));
        // JSON, but not JSON-RPC: what the envelope says is wrong, with the id it has.
        assert!(
            matches!(&got[4], Ok(Line { messages, .. }) if matches!(&messages[..], [Err(Refused { id: Some(Id::Num(5)), is_response: true, .. })]))
        );
    }

    #[tokio::test]
    async fn an_over_long_last_line_is_reported_at_the_end() {
        let input = format!("{{\"method\":\"m\",\"id\":1,\"p\":\"{}\"", "y".repeat(200_000));
        let got = read_all(input.as_bytes(), 1000).await;
        let want = BadLine { kind: BadKind::TooLong(1000), id: Some(Id::Num(1)), has_method: true };
        assert!(matches!(&got[..], [Err(b)] if *b == want));
    }

    #[tokio::test]
    async fn log_lines_are_lossy_and_cut() {
        let mut got = Vec::new();
        read_log_lines(b"a\xffb\r\n0123456789\nlast".as_slice(), 4, |l| got.push(l.to_string())).await;
        assert_eq!(got, vec!["a\u{fffd}b", "0123", "last"]);
    }
}
