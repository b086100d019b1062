//! The configuration as written in TOML, before defaults and validation: unknown keys are
//! refused here.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) server: Option<RawServer>,
    pub(super) tasks: Option<RawTasks>,
    #[serde(default)]
    pub(super) upstream: Vec<RawUpstream>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawServer {
    pub(super) listen: Option<String>,
    pub(super) allowed_origins: Option<Vec<String>>,
    pub(super) allowed_hosts: Option<Vec<String>>,
    pub(super) max_body_bytes: Option<u64>,
    pub(super) max_sessions: Option<u64>,
    pub(super) max_links: Option<u64>,
    pub(super) session_idle_timeout: Option<String>,
    pub(super) event_buffer: Option<u64>,
    pub(super) max_in_flight: Option<u64>,
    pub(super) sse_keepalive: Option<String>,
    pub(super) json_response_window: Option<String>,
    pub(super) progress_min_interval: Option<String>,
    pub(super) progress_burst: Option<u64>,
    pub(super) drain_timeout: Option<String>,
    pub(super) header_read_timeout: Option<String>,
    pub(super) body_read_timeout: Option<String>,
    pub(super) max_connections: Option<u64>,
    pub(super) event_buffer_bytes: Option<u64>,
    pub(super) max_batch: Option<u64>,
    pub(super) max_body_values: Option<u64>,
    pub(super) max_initialize_bytes: Option<u64>,
    pub(super) max_sessions_per_client: Option<u64>,
    pub(super) max_links_per_client: Option<u64>,
    pub(super) max_listens_per_client: Option<u64>,
    pub(super) auth: Option<super::auth::RawAuth>,
    pub(super) tls: Option<super::observe::RawTls>,
    pub(super) otlp: Option<super::observe::RawOtlp>,
    pub(super) cors_origins: Option<Vec<String>>,
    pub(super) task_page: Option<super::task_page::RawTaskPage>,
    pub(super) limits: Option<super::rate_limit::RawRateLimit>,
    pub(super) watch_config: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTasks {
    pub(super) max_tasks: Option<u64>,
    pub(super) list_page_size: Option<u64>,
    pub(super) max_result_bytes: Option<u64>,
    pub(super) max_store_bytes: Option<u64>,
    pub(super) max_tool_name_bytes: Option<u64>,
    pub(super) max_task_id_bytes: Option<u64>,
    pub(super) max_status_message_bytes: Option<u64>,
    pub(super) max_held_input_bytes: Option<u64>,
    pub(super) max_list_page_bytes: Option<u64>,
    pub(super) max_followed: Option<u64>,
    pub(super) store: Option<String>,
    pub(super) path: Option<String>,
    pub(super) sync_interval: Option<String>,
    pub(super) durability: Option<String>,
    pub(super) store_outage_wait: Option<String>,
    pub(super) redis_url: Option<String>,
    pub(super) redis_prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstreamTasks {
    pub(super) hosted: Option<String>,
    pub(super) required: Option<String>,
    pub(super) hosted_tools: Option<Vec<String>>,
    pub(super) ttl: Option<String>,
    pub(super) max_ttl: Option<String>,
    pub(super) min_ttl: Option<String>,
    pub(super) poll_interval: Option<String>,
    pub(super) max_tasks_per_owner: Option<u64>,
    pub(super) plain_within: Option<String>,
    pub(super) task_tools: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDialects {
    pub(super) progress_get: Option<bool>,
    pub(super) sep1391: Option<bool>,
    pub(super) retention: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) name: Option<String>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) env: Option<BTreeMap<String, String>>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) url: Option<String>,
    pub(super) headers: Option<BTreeMap<String, String>>,
    pub(super) transport: Option<String>,
    pub(super) builtin: Option<String>,
    pub(super) connect_timeout: Option<String>,
    pub(super) request_timeout: Option<String>,
    pub(super) max_request_time: Option<String>,
    pub(super) client_info: Option<RawClientInfo>,
    pub(super) share: Option<bool>,
    pub(super) max_in_flight_per_client: Option<u64>,
    pub(super) authorization: Option<String>,
    pub(super) era: Option<String>,
    pub(super) probe_timeout: Option<String>,
    pub(super) max_input_rounds: Option<u64>,
    pub(super) max_input_requests: Option<u64>,
    pub(super) tasks: Option<RawUpstreamTasks>,
    pub(super) dialects: Option<RawDialects>,
    pub(super) long_calls: Option<super::long_calls::RawLongCalls>,
    pub(super) tools: Option<super::tool_policy::RawToolPolicy>,
    pub(super) limits: Option<super::rate_limit::RawRateLimit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientInfo {
    pub(super) name: Option<String>,
    pub(super) version: Option<String>,
    pub(super) title: Option<String>,
}
