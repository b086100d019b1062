//! Micro-benchmarks of the gateway's per-message work (criterion):
//!
//! ```sh
//! cargo bench --bench core               # about a minute
//! cargo bench --bench core -- --quick    # faster, less precise
//! cargo bench --bench core -- classify   # only benchmarks whose id contains "classify"
//! ```
//!
//! Every message a session relays is parsed from bytes, classified, has its id rewritten on
//! the way through a link, and is serialized again; these benchmarks time each step on the
//! messages the e2e echo and progress workloads carry.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;
use std::hint::black_box;
use std::time::Duration;
use taskgate::jsonrpc::{self, Id};

/// A `tools/call` request as a client sends it (the e2e echo workload, with a progress token).
const REQUEST: &[u8] = br#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello from the taskgate load generator"},"_meta":{"progressToken":"p17"}}}"#;

/// The demo's answer to it.
const RESPONSE: &[u8] = br#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"hello from the taskgate load generator"}],"structuredContent":{"arguments":{"text":"hello from the taskgate load generator"}}}}"#;

/// A progress notification as the demo `slow` tool sends it.
const NOTIFICATION: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p17","progress":3,"total":10000,"message":"step 3 of 10000"}}"#;

const MESSAGES: [(&str, &[u8]); 3] = [("request", REQUEST), ("response", RESPONSE), ("notification", NOTIFICATION)];

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("valid JSON")
}

/// `parse_body` alone, `classify` alone (on an already parsed value), and both from bytes.
/// The parsing benchmarks include freeing the parsed value (the gateway pays for that too);
/// `classify` excludes the clone it starts from and the drop of its result.
fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    for (name, bytes) in MESSAGES {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("parse_body/{name}"), |b| {
            b.iter(|| jsonrpc::parse_body(black_box(bytes)).expect("one message"))
        });
        let value = parse(bytes);
        g.bench_function(format!("classify/{name}"), |b| {
            b.iter_batched(|| value.clone(), |v| jsonrpc::classify(black_box(v)).ok(), BatchSize::SmallInput)
        });
        g.bench_function(format!("parse_and_classify/{name}"), |b| {
            b.iter(|| match jsonrpc::parse_body(black_box(bytes)).expect("one message") {
                jsonrpc::Body::Single(v) => jsonrpc::classify(v).is_ok(),
                jsonrpc::Body::Batch(_) => unreachable!(),
            })
        });
    }
    g.finish();
}

/// Id rewriting: in place on a parsed message, and the whole relay step of a link (bytes in,
/// parse, classify, rewrite the id, bytes out).
fn ids(c: &mut Criterion) {
    let mut g = c.benchmark_group("id");
    for (name, bytes) in [("request", REQUEST), ("response", RESPONSE)] {
        let mut value = parse(bytes);
        let mut n = 0i64;
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("set_id/{name}/num"), |b| {
            b.iter(|| {
                n += 1;
                jsonrpc::set_id(black_box(&mut value), &Id::Num(n));
            })
        });
        let id = Id::Str("client-request-0017".into());
        g.bench_function(format!("set_id/{name}/str"), |b| b.iter(|| jsonrpc::set_id(black_box(&mut value), &id)));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("relay/{name}"), |b| {
            b.iter(|| {
                let jsonrpc::Body::Single(v) = jsonrpc::parse_body(black_box(bytes)).expect("one message") else {
                    unreachable!()
                };
                let mut f = jsonrpc::classify(v).expect("valid");
                jsonrpc::set_id(&mut f.msg, &Id::Num(42));
                serde_json::to_vec(&f.msg).expect("serializes")
            })
        });
    }
    g.finish();
}

// ---- To add as the features land (one function each, listed in `criterion_group!` below) ----
//
// TODO(tools/list shaping): shaping a 100-tool `tools/list` result (parse the upstream's
//   listing, apply the shaping, serialize), once the shaping module exists.
// TODO(task store): insert, get and complete on the task store (with ~10 000 tasks retained,
//   1 KiB results), once `taskgate::tasks` exists.
// TODO(progress coalescing): coalescing a burst of `notifications/progress` for one token,
//   once the coalescer exists.

criterion_group! {
    name = core;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = frames, ids
}
criterion_main!(core);
