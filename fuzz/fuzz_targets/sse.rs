//! The SSE decoder, fed the same stream in arbitrary chunkings: the first bytes of the input
//! choose the line limit and the chunk sizes, the rest is the stream. Whatever the chunking,
//! a decoder that did not refuse a line must produce exactly the events of one whole feed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use taskgate::transport::sse::{self, Decoder};

fuzz_target!(|data: &[u8]| {
    let Some((&limit, rest)) = data.split_first() else { return };
    let Some((&n_sizes, rest)) = rest.split_first() else { return };
    let n_sizes = usize::from(n_sizes % 8) + 1;
    if rest.len() < n_sizes {
        return;
    }
    let (sizes, stream) = rest.split_at(n_sizes);
    // Small limits reach the overlong-line path; 0 means "roomy".
    let max_line = if limit == 0 { 1 << 20 } else { usize::from(limit) };

    let mut chunked = Decoder::new(max_line);
    let mut events = Vec::new();
    let mut refused = false;
    let mut at = 0;
    let mut k = 0;
    while at < stream.len() {
        let len = (usize::from(sizes[k % sizes.len()]) % 16 + 1).min(stream.len() - at);
        k += 1;
        match chunked.feed(&stream[at..at + len]) {
            Ok(evs) => events.extend(evs),
            Err(_) => {
                refused = true;
                break;
            }
        }
        at += len;
    }
    if refused {
        return;
    }
    let mut whole = Decoder::new(max_line);
    let whole_events = whole.feed(stream).expect("the whole feed refused what the chunked feeds accepted");
    assert_eq!(events, whole_events, "chunking changed the events");

    // What the encoder writes, the decoder reads back (data without line breaks, as JSON is).
    if let Ok(text) = std::str::from_utf8(stream)
        && !text.contains(['\n', '\r'])
    {
        let mut d = Decoder::new(1 << 20);
        let evs = d.feed(&sse::encode_event(Some("1-2"), text.as_bytes())).unwrap();
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, text);
        assert_eq!(evs[0].id.as_deref(), Some("1-2"));
    }
});
