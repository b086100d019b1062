//! Micro-benchmarks of the gateway's per-message work (criterion):
//!
//! ```sh
//! cargo bench --bench core               # about a minute
//! cargo bench --bench core -- --quick    # faster, less precise
//! cargo bench --bench core -- classify   # only benchmarks whose id contains "classify"
//! ```
//!
//! Every message a session relays has its envelope read from its bytes, and its id spliced
//! in on the way through a link; these benchmarks time each step on the messages the e2e echo
//! and progress workloads carry (beside the whole-tree parse the gateway used to do), and
//! the task-specific work: shaping a 100-tool listing, the task store with 10 000 tasks
//! retained, progress coalescing.

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::Value;
use std::hint::black_box;
use std::time::Duration;
use taskgate::jsonrpc::{self, Id, Message, Method};

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

/// Reading one message: its envelope only, as the gateway does ([`Message::parse`]), and the
/// whole tree, as it did before (and still does for a message it edits). Both include
/// freeing what they built.
fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    for (name, bytes) in MESSAGES {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        let text = Bytes::from_static(bytes);
        g.bench_function(format!("envelope/{name}"), |b| {
            b.iter(|| Message::parse(black_box(text.clone())).expect("one message"))
        });
        g.bench_function(format!("tree/{name}"), |b| b.iter(|| parse(black_box(bytes))));
    }
    g.finish();
}

/// The relay step of a link (bytes in, read, a new id, bytes out): the new id spliced into
/// the original bytes, and, for comparison, the tree parsed, edited and serialized again.
fn ids(c: &mut Criterion) {
    let mut g = c.benchmark_group("id");
    for (name, bytes) in [("request", REQUEST), ("response", RESPONSE)] {
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        let text = Bytes::from_static(bytes);
        g.bench_function(format!("relay/{name}"), |b| {
            b.iter(|| {
                let m = Message::parse(black_box(text.clone())).expect("valid");
                m.with_id(&Id::Num(42)).into_bytes()
            })
        });
        g.bench_function(format!("relay_tree/{name}"), |b| {
            b.iter(|| {
                let mut v = parse(black_box(bytes));
                jsonrpc::set_id(&mut v, &Id::Num(42));
                serde_json::to_vec(&v).expect("serializes")
            })
        });
    }
    g.finish();
}

/// `tools/list` shaping of a 100-tool listing (a third of the tools `required`, a third
/// `optional`), for a 2025-11-25 client (hosting marks, bridge) and a 2025-06-18 client
/// (execution stripped): on a parsed result, as the session does it.
fn shaping(c: &mut Criterion) {
    use taskgate::{ProtocolVersion, shaping};
    let tools: Vec<Value> = (0..100)
        .map(|i| {
            let mut t = serde_json::json!({
                "name": format!("tool_{i}"),
                "description": "A tool of a realistic listing, with a schema and annotations",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["a"]},
                "annotations": {"readOnlyHint": true}
            });
            match i % 3 {
                0 => t["execution"] = serde_json::json!({"taskSupport": "required"}),
                1 => t["execution"] = serde_json::json!({"taskSupport": "optional"}),
                _ => {}
            }
            t
        })
        .collect();
    let listing = serde_json::json!({"tools": tools});
    let mut g = c.benchmark_group("shaping");
    g.throughput(Throughput::Elements(100));
    for (name, version) in [
        ("tools_list_100/2025-11-25", ProtocolVersion::V2025_11_25),
        ("tools_list_100/2025-06-18", ProtocolVersion::V2025_06_18),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || listing.clone(),
                |mut l| {
                    shaping::tools_list(&mut l, version, true, &|n, _| n.ends_with('2'));
                    l
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// Crossing between versions ([`translate::cross`]): between peers of one version (the fast
/// path, which builds nothing), and a newer upstream's answer for an older client (the
/// structured result becomes a text block; a 100-tool listing loses its newer fields).
fn translation(c: &mut Criterion) {
    use taskgate::{ProtocolVersion as V, translate};
    let response = Message::parse(Bytes::from_static(RESPONSE)).expect("valid message");
    let tools: Vec<Value> = (0..100)
        .map(|i| {
            serde_json::json!({
                "name": format!("tool_{i}"), "title": format!("Tool {i}"),
                "description": "A tool of a realistic listing, with a schema and annotations",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true},
                "icons": [{"src": "https://example.com/i.png"}], "execution": {"taskSupport": "optional"}
            })
        })
        .collect();
    let listing = Message::made(jsonrpc::result_response(&Id::Num(3), serde_json::json!({"tools": tools})));
    let mut g = c.benchmark_group("translate");
    for (name, msg, method, from, to) in [
        ("call_result/same_version", &response, Method::ToolsCall, V::V2025_11_25, V::V2025_11_25),
        ("call_result/2025-11-25_to_2025-03-26", &response, Method::ToolsCall, V::V2025_11_25, V::V2025_03_26),
        ("tools_list_100/2025-11-25_to_2024-11-05", &listing, Method::ToolsList, V::V2025_11_25, V::V2024_11_05),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || msg.clone(),
                |m| translate::cross(m, Some(method), from, to).map(|m| m.into_bytes()),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// The task store with 10 000 tasks retained (1 KiB results): insert, get and complete.
fn task_store(c: &mut Criterion) {
    use taskgate::TaskStatus;
    use taskgate::{MemoryStore, TaskRecord};
    let outcome: std::sync::Arc<str> = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}}}",
        "x".repeat(960)
    )
    .into();
    let store = MemoryStore::new(usize::MAX, usize::MAX);
    let rec = |i: usize, ttl: Duration| {
        TaskRecord::new(format!("{i:032x}"), "owner".into(), "owner".into(), "up".into(), ttl, Duration::from_secs(1))
    };
    for i in 0..10_000 {
        store.insert(rec(i, Duration::from_secs(3600)), usize::MAX).unwrap();
        store.update(&format!("{i:032x}"), &mut |r| {
            r.status = TaskStatus::Completed;
            r.outcome = Some(outcome.clone());
        });
    }
    let mut g = c.benchmark_group("task_store");
    g.throughput(Throughput::Elements(1));
    let mut n = 1_000_000usize;
    g.bench_function("insert_complete_with_10k_retained", |b| {
        b.iter(|| {
            n += 1;
            let id = format!("{n:032x}");
            // Tasks of no ttl, each reaped 10 000 tasks later, one at a time as the hosted
            // tasks' clock removes them: the store stays at ~10 000 retained.
            store.insert(rec(n, Duration::ZERO), usize::MAX).unwrap();
            let done = store.update(&id, &mut |r| {
                r.status = TaskStatus::Completed;
                r.outcome = Some(outcome.clone());
            });
            store.remove_if_expired(&format!("{:032x}", n - 10_000), std::time::SystemTime::now());
            done
        })
    });
    let id = format!("{:032x}", 5_000);
    g.bench_function("get_with_10k_retained", |b| b.iter(|| store.get(black_box(&id))));
    g.finish();
}

/// Progress coalescing: a burst for one token through the gate (the first ten, the burst
/// allowance, are sent, the rest held as the latest), then the flush.
fn progress(c: &mut Criterion) {
    use taskgate::{Pace, ProgressGate};
    let pace = Pace { interval: Duration::from_millis(10), burst: 10 };
    let notes: Vec<Message> = (1..=100)
        .map(|i| Message::made(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p", "progress": i, "total": 100}})))
        .collect();
    let mut g = c.benchmark_group("progress");
    g.throughput(Throughput::Elements(100));
    g.bench_function("coalesce_burst_of_100", |b| {
        b.iter_batched(
            || notes.clone(),
            |notes| {
                let mut gate = ProgressGate::default();
                let now = tokio::time::Instant::now();
                for n in notes {
                    black_box(gate.offer(n, pace, now));
                }
                gate.flush(pace, now + Duration::from_millis(10))
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = core;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = frames, ids, shaping, translation, task_store, progress
}
criterion_main!(core);
