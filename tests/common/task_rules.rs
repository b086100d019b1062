//! Helpers of the task-rule tests (tests/task_rules.rs, tests/task_rules_limits.rs): a task
//! record, a scripted task server, the config around it, a session, and reading a GET stream.

#![allow(dead_code)]

use crate::common::*;
use serde_json::{Value, json};
use std::time::Duration;

pub const TASK_CAPS: &str =
    r#"{"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}"#;

pub fn task(id: &str, status: &str, message: Option<&str>) -> Value {
    let mut t = json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 100});
    if let Some(m) = message {
        t["statusMessage"] = m.into();
    }
    t
}

/// A tool of a listing, with `execution.taskSupport` if `task_support` is given.
pub fn tool(name: &str, task_support: Option<&str>) -> Value {
    let mut t = json!({"name": name, "inputSchema": {"type": "object"}});
    if let Some(support) = task_support {
        t["execution"] = json!({"taskSupport": support});
    }
    t
}

/// A scripted server with [`TASK_CAPS`] that lists `tools`; every other method goes to `script`.
pub async fn task_server(tools: Vec<Value>, script: impl Fn(&Value) -> Vec<Step> + Send + Sync + 'static) -> Scripted {
    Scripted::start(move |req| match req["method"].as_str().unwrap() {
        "initialize" => init_result(req, serde_json::from_str(TASK_CAPS).unwrap()),
        "tools/list" => vec![reply(req, json!({"tools": tools}))],
        _ => script(req),
    })
    .await
}

pub fn config(up: &Scripted, upstream_extra: &str, tail: &str) -> String {
    format!("[server]\nprogress_min_interval = \"0ms\"\n{}{upstream_extra}{tail}", http_upstream("up", &up.url()))
}

pub async fn client(gw: &Gw, version: &str) -> HttpMcp {
    let mut c = HttpMcp::new(&gw.url("up"));
    c.initialize(version).await;
    c
}

/// Reads a GET stream until `until` matches or `wait` passes; returns what came.
pub async fn collect(events: &mut SseReader, wait: Duration, until: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut got = vec![];
    let deadline = tokio::time::Instant::now() + wait;
    while let Ok(Some((_, m))) = tokio::time::timeout_at(deadline, events.next()).await {
        let stop = until(&m);
        got.push(m);
        if stop {
            break;
        }
    }
    got
}
