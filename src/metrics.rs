//! The process's metrics, in the Prometheus text format at `GET /metrics`: one registry for
//! the process, its families registered once. Label sets are bounded: methods are the MCP
//! requests [`COUNTED_METHODS`] names (the rest count as `other`), upstream names come from the
//! config (past [`MAX_UPSTREAMS`] they count as `other`), and every other label has a fixed
//! set of values.
//!
//! The hot path pays an index and an atomic add: each upstream's counters and histograms
//! are resolved once, when its first session or link asks ([`Metrics::upstream`]), and
//! kept as handles; nothing is formatted or allocated per message. Knows nothing of the
//! rest of the crate but [`Method`], whose requests it counts by name: callers pass
//! methods, names and codes.

use crate::jsonrpc::Method;
use crate::locks::Mutex;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// How many request methods are counted by name: every request a client sends its server
/// in some version ([`Method::is_client_request`]), then `other` for the rest.
pub const COUNTED_METHODS: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < Method::ALL.len() {
        n += Method::ALL[i].is_client_request() as usize;
        i += 1;
    }
    n + 1
};

/// [`method_index`] for each method by [`Method::index`], [`Method::Other`] last.
const METHOD_INDEX: [u8; Method::ALL.len() + 1] = {
    let mut t = [(COUNTED_METHODS - 1) as u8; Method::ALL.len() + 1];
    let (mut i, mut k) = (0, 0);
    while i < Method::ALL.len() {
        if Method::ALL[i].is_client_request() {
            t[i] = k;
            k += 1;
        }
        i += 1;
    }
    t
};

/// The `method` label of each counted index: the method's name, `other` for the last.
pub fn method_labels() -> impl Iterator<Item = &'static str> {
    Method::ALL.into_iter().filter(|m| m.is_client_request()).map(Method::as_str).chain(["other"])
}

/// How a request ended, by JSON-RPC error code class.
pub const OUTCOMES: [&str; 5] = ["ok", "invalid", "internal", "server_error", "other_error"];

/// Upstreams with labels of their own; more count as `other`.
pub const MAX_UPSTREAMS: usize = 256;

/// Task states counted as tasks enter them.
pub const TASK_STATES: [&str; 5] = ["working", "input_required", "completed", "failed", "cancelled"];

/// The downstream transports sessions are counted by.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    StreamableHttp,
    LegacySse,
    Stdio,
}

impl Transport {
    fn label(self) -> &'static str {
        match self {
            Transport::StreamableHttp => "streamable_http",
            Transport::LegacySse => "legacy_sse",
            Transport::Stdio => "stdio",
        }
    }
}

/// The counted index of `method` (see [`COUNTED_METHODS`]): a table lookup.
pub fn method_index(method: Method) -> u8 {
    METHOD_INDEX[method.index()]
}

/// The index in [`OUTCOMES`] of a response: `None` for a result, else its error code.
pub fn outcome_index(error_code: Option<i64>) -> usize {
    match error_code {
        None => 0,
        Some(-32700 | -32600 | -32601 | -32602) => 1,
        Some(-32603) => 2,
        Some(-32099..=-32000) => 3,
        Some(_) => 4,
    }
}

/// The metrics of one process.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    latency: Family<Labels, Histogram, fn() -> Histogram>,
    connects: Family<Labels, Counter>,
    sessions: [Gauge; 3],
    tasks: [Counter; TASK_STATES.len()],
    bytes_in: Counter,
    bytes_out: Counter,
    task_page_listings: Counter,
    task_page_dropped: Counter,
    long_calls_deferred: Counter,
    policy_refusals: Family<Labels, Counter>,
    reloads: Family<Labels, Counter>,
    upstreams: Mutex<HashMap<String, Arc<UpstreamMetrics>>>,
}

/// The handles of one upstream's series, resolved once.
pub struct UpstreamMetrics {
    requests: Vec<[Counter; OUTCOMES.len()]>,
    latency: Vec<Histogram>,
    connects: [Counter; 2],
}

fn latency_histogram() -> Histogram {
    // 0.5 ms to ~33 s, doubling.
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_requests",
            "Client requests answered, by upstream, method and outcome (ok, or the JSON-RPC error code class)",
            requests.clone(),
        );
        let latency = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registry.register(
            "taskgate_request_duration_seconds",
            "Time from a client request's arrival to its response, by upstream and method",
            latency.clone(),
        );
        let connects = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_upstream_connects",
            "Upstream links opened (a stdio child started, an HTTP upstream connected), by upstream and outcome",
            connects.clone(),
        );
        let sessions = Family::<Labels, Gauge>::default();
        registry.register("taskgate_sessions", "Downstream sessions open now, by transport", sessions.clone());
        let sessions = [Transport::StreamableHttp, Transport::LegacySse, Transport::Stdio]
            .map(|t| sessions.get_or_create(&vec![("transport", t.label().to_string())]).clone());
        let tasks = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_task_transitions",
            "Hosted tasks entering each status (working counts the tasks created)",
            tasks.clone(),
        );
        let tasks = TASK_STATES.map(|s| tasks.get_or_create(&vec![("status", s.to_string())]).clone());
        let bytes = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_http_body_bytes",
            "Bytes of downstream HTTP bodies, requests read (in) and responses sent (out)",
            bytes.clone(),
        );
        let bytes_in = bytes.get_or_create(&vec![("direction", "in".to_string())]).clone();
        let bytes_out = bytes.get_or_create(&vec![("direction", "out".to_string())]).clone();
        let task_page_listings = Counter::default();
        registry.register(
            "taskgate_task_page_listings",
            "Store listings the task page made (one per refresh for all its viewers)",
            task_page_listings.clone(),
        );
        let task_page_dropped = Counter::default();
        registry.register(
            "taskgate_task_page_viewers_dropped",
            "Task page viewers dropped because they did not read their stream (unread_timeout)",
            task_page_dropped.clone(),
        );
        let long_calls_deferred = Counter::default();
        registry.register(
            "taskgate_long_calls_deferred",
            "Plain tool calls answered with a deferred result naming a task (upstream.long_calls)",
            long_calls_deferred.clone(),
        );
        let policy_refusals = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_policy_refusals",
            "Requests the operator's policy refused, by upstream and reason (tool_denied, rate_limited, rate_limited_server)",
            policy_refusals.clone(),
        );
        let reloads = Family::<Labels, Counter>::default();
        registry.register(
            "taskgate_config_reloads",
            "Config reloads (SIGHUP, or the watched file changed), by outcome (applied, refused)",
            reloads.clone(),
        );
        Metrics {
            policy_refusals,
            reloads,
            long_calls_deferred,
            task_page_listings,
            task_page_dropped,
            registry,
            requests,
            latency,
            connects,
            sessions,
            tasks,
            bytes_in,
            bytes_out,
            upstreams: Mutex::new(HashMap::new()),
        }
    }

    /// The handles of upstream `name`'s series (its own, or `other`'s past [`MAX_UPSTREAMS`]).
    pub fn upstream(&self, name: &str) -> Arc<UpstreamMetrics> {
        let mut map = self.upstreams.lock().unwrap();
        if let Some(u) = map.get(name) {
            return u.clone();
        }
        let label = if map.len() < MAX_UPSTREAMS { name } else { "other" };
        if let Some(u) = map.get(label) {
            return u.clone();
        }
        let up = || ("upstream", label.to_string());
        let requests = method_labels()
            .map(|m| {
                OUTCOMES.map(|o| {
                    let labels = vec![up(), ("method", m.to_string()), ("outcome", o.to_string())];
                    self.requests.get_or_create(&labels).clone()
                })
            })
            .collect();
        let latency = method_labels()
            .map(|m| self.latency.get_or_create(&vec![up(), ("method", m.to_string())]).clone())
            .collect();
        let connects =
            ["ok", "error"].map(|o| self.connects.get_or_create(&vec![up(), ("outcome", o.to_string())]).clone());
        let u = Arc::new(UpstreamMetrics { requests, latency, connects });
        map.insert(label.to_string(), u.clone());
        u
    }

    /// Counts a session open until the guard is dropped.
    pub fn session_opened(&self, transport: Transport) -> SessionCount {
        let g = self.sessions[transport as usize].clone();
        g.inc();
        SessionCount(g)
    }

    /// Counts a hosted task entering `status` (as [`TASK_STATES`] names it; others are not counted).
    pub fn task_entered(&self, status: &str) {
        if let Some(i) = TASK_STATES.iter().position(|s| *s == status) {
            self.tasks[i].inc();
        }
    }

    /// A plain call outlasted `defer_after` and was answered with a deferred result.
    pub fn long_call_deferred(&self) {
        self.long_calls_deferred.inc();
    }

    /// The policy refused a request to `upstream` for `reason`. (The upstream label is a
    /// configured name: bounded.)
    pub fn policy_refused(&self, upstream: &str, reason: &'static str) {
        self.policy_refusals
            .get_or_create(&vec![("upstream", upstream.to_string()), ("reason", reason.to_string())])
            .inc();
    }

    /// A reload of the config ended with `outcome` (`applied`, `refused`).
    pub fn config_reloaded(&self, outcome: &'static str) {
        self.reloads.get_or_create(&vec![("outcome", outcome.to_string())]).inc();
    }

    /// The task page listed the tasks (once, for all its viewers).
    pub fn task_page_listed(&self) {
        self.task_page_listings.inc();
    }

    /// The task page dropped a viewer that did not read.
    pub fn task_page_viewer_dropped(&self) {
        self.task_page_dropped.inc();
    }

    pub fn bytes_in(&self, n: usize) {
        self.bytes_in.inc_by(n as u64);
    }

    pub fn bytes_out(&self, n: usize) {
        self.bytes_out.inc_by(n as u64);
    }

    /// Every family, in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String does not fail");
        out
    }
}

impl UpstreamMetrics {
    /// A request of method `method` ([`method_index`]) answered after `elapsed`, with
    /// outcome `outcome` ([`outcome_index`]).
    pub fn answered(&self, method: u8, outcome: usize, elapsed: Duration) {
        let m = usize::from(method).min(COUNTED_METHODS - 1);
        self.requests[m][outcome.min(OUTCOMES.len() - 1)].inc();
        self.latency[m].observe(elapsed.as_secs_f64());
    }

    /// A link to this upstream opened, or failed to.
    pub fn connected(&self, ok: bool) {
        self.connects[usize::from(!ok)].inc();
    }
}

/// One open session, counted in `taskgate_sessions` until dropped.
pub struct SessionCount(Gauge);

impl Drop for SessionCount {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_and_outcomes_index_their_tables() {
        let labels: Vec<&str> = method_labels().collect();
        assert_eq!(labels.len(), COUNTED_METHODS);
        for (i, m) in labels.iter().enumerate() {
            assert_eq!(usize::from(method_index(Method::parse(m))), i, "{m}");
        }
        assert_eq!(labels[usize::from(method_index(Method::Other))], "other");
        assert_eq!(labels[usize::from(method_index(Method::Progress))], "other");
        // The 23 requests counted before the list was derived, and `other`.
        assert_eq!(COUNTED_METHODS, 24);
        assert_eq!(OUTCOMES[outcome_index(None)], "ok");
        assert_eq!(OUTCOMES[outcome_index(Some(-32601))], "invalid");
        assert_eq!(OUTCOMES[outcome_index(Some(-32000))], "server_error");
        assert_eq!(OUTCOMES[outcome_index(Some(7))], "other_error");
    }

    #[test]
    fn counted_series_show_in_the_text() {
        let m = Metrics::new();
        let u = m.upstream("alpha");
        u.answered(method_index(Method::ToolsCall), 0, Duration::from_millis(3));
        u.connected(true);
        let _s = m.session_opened(Transport::Stdio);
        m.task_entered("completed");
        let text = m.encode();
        assert!(
            text.contains(r#"taskgate_requests_total{upstream="alpha",method="tools/call",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"taskgate_request_duration_seconds_count{upstream="alpha",method="tools/call"} 1"#));
        assert!(text.contains(r#"taskgate_sessions{transport="stdio"} 1"#));
        assert!(text.contains(r#"taskgate_task_transitions_total{status="completed"} 1"#));
        assert!(text.contains(r#"taskgate_upstream_connects_total{upstream="alpha",outcome="ok"} 1"#));
    }
}
