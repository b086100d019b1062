//! The effective settings, after defaults and validation: what the rest of the gateway
//! reads. Their defaults are here too.

use super::auth::AuthConfig;
use super::expand::Secret;
use super::glob::glob_match;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Config {
    pub server: ServerConfig,
    pub tasks: TasksConfig,
    pub upstreams: Vec<UpstreamConfig>,
}

/// The gateway-wide task store (`[tasks]`).
#[derive(Debug, Clone)]
pub struct TasksConfig {
    /// Tasks kept at once, running and finished. Finished tasks are evicted least recently
    /// used first to make room; running tasks never are.
    pub max_tasks: usize,
    /// Tasks per `tasks/list` page.
    pub list_page_size: usize,
    /// The largest outcome (result or error) one task may keep; a larger one fails the task.
    pub max_result_bytes: usize,
    /// All kept task records together, outcomes included (`TaskRecord::stored_len`); a new
    /// task that would not fit is refused.
    pub max_store_bytes: usize,
    /// The longest tool name a task-augmented call may name (-32602 past it, before any
    /// task is made).
    pub max_tool_name_bytes: usize,
    /// The longest task id of an upstream's the gateway keeps (extension tasks it follows for
    /// 2025-11-25 clients, tasks it binds to a principal): a longer one is refused.
    pub max_task_id_bytes: usize,
    /// The longest status or progress message kept or shown for a task: longer ones from an
    /// upstream are cut, with a marker saying so.
    pub max_status_message_bytes: usize,
    /// The most bytes of tasks one `tasks/list` page carries: past it the page ends early,
    /// with a cursor to the rest (always at least one task).
    pub max_list_page_bytes: usize,
    /// Extension tasks followed in the background at once (all sessions together), so
    /// that their 2025-11-25 clients get status notifications without waiting in
    /// `tasks/result`; 0: none followed.
    pub max_followed: usize,
    /// The questions upstreams asked during tasks that wait for a client (elicitation,
    /// sampling, roots), all together, in bytes of their JSON: past it, an upstream's next
    /// question is refused (JSON-RPC -32603 to the upstream), and nothing else changes.
    pub max_held_input_bytes: usize,
    /// Where the task store keeps tasks (`store`, `path`).
    pub store: StoreKind,
    /// `store` was named in the config (not a default): `taskgate stdio` keeps a defaulted
    /// store in memory, as nothing could reach a stdio session's tasks after a restart
    /// (they belong to the session, which is the process) and several clients may each
    /// start a stdio gateway with one config (a data directory takes one gateway).
    pub store_chosen: bool,
    /// The `file` store makes at most one durable commit (one fsync) per this long, shared by
    /// whatever queued meanwhile; zero: one as soon as a write is waited for, a new task's
    /// included (see `tasks::file_store`).
    pub sync_interval: Duration,
    /// When the `file` store acknowledges a task's end (`[tasks] durability`).
    pub durability: Durability,
    /// How long a `tasks/result` waits for a task's end the store did not take at first (a
    /// store outage, a disk that cannot commit), before answering -32603 naming the store.
    /// The end itself is kept and written again until the store takes it.
    pub store_outage_wait: Duration,
}

/// When the `file` store acknowledges a task's end (`[tasks] durability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Once it is on disk: its status notification, `tasks/result` and `tasks/get` wait for
    /// the commit that carries it (at most `sync_interval`). A crash loses no acknowledged end.
    #[default]
    End,
    /// At once: the end is on disk within `sync_interval`, as a new task is. A crash within
    /// that window may lose ends already answered (their tasks come back `failed`), for one
    /// fsync per interval rather than per end when tasks come one at a time.
    Interval,
}

/// The task store's backend (`[tasks] store`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreKind {
    /// In this process only: a restart loses every task. The default for a config that was
    /// not read from a file (`Config::parse`, tests).
    Memory,
    /// A redb database in this directory: finished tasks survive a restart. The default
    /// for a config read from a file, in [`DEFAULT_DATA_DIR`] beside it.
    File(PathBuf),
    /// Redis or Valkey, shared by several gateway replicas (`redis_url`, `redis_prefix`).
    Redis(RedisSettings),
}

/// Where a `redis` store lives.
#[derive(Clone)]
pub struct RedisSettings {
    /// `redis://[user:password@]host:port[/db]`, `${VAR}` expanded.
    pub url: super::expand::Secret,
    /// Every key and channel the store uses starts with it (`taskgate:` by default), so
    /// that several deployments may share one server.
    pub prefix: String,
}

impl PartialEq for RedisSettings {
    fn eq(&self, o: &Self) -> bool {
        self.url.value == o.url.value && self.prefix == o.prefix
    }
}

impl Eq for RedisSettings {}

impl std::fmt::Debug for RedisSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "RedisSettings {{ url: {:?}, prefix: {:?} }}",
            super::expand::redact_url(&self.url.written),
            self.prefix
        )
    }
}

/// The key prefix of a `redis` store when `[tasks] redis_prefix` is not set.
pub const DEFAULT_REDIS_PREFIX: &str = "taskgate:";

/// The data directory's name beside the config file, when `[tasks] path` is not set.
pub const DEFAULT_DATA_DIR: &str = "taskgate-data";

impl UpstreamConfig {
    /// What one client may hold of a shared link's `max_in_flight` requests (see
    /// `max_in_flight_per_client`).
    pub fn client_share(&self, max_in_flight: usize) -> usize {
        self.max_in_flight_per_client.unwrap_or(max_in_flight.div_ceil(2)).clamp(1, max_in_flight.max(1))
    }
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            max_tasks: 10_000,
            list_page_size: 50,
            max_result_bytes: 4 * 1024 * 1024,
            max_store_bytes: 256 * 1024 * 1024,
            max_tool_name_bytes: DEFAULT_MAX_TOOL_NAME_BYTES,
            max_task_id_bytes: 1024,
            max_status_message_bytes: DEFAULT_MAX_STATUS_MESSAGE_BYTES,
            max_list_page_bytes: DEFAULT_MAX_LIST_PAGE_BYTES,
            max_followed: 1000,
            max_held_input_bytes: 16 * 1024 * 1024,
            store: StoreKind::Memory,
            store_chosen: false,
            sync_interval: Duration::from_millis(10),
            durability: Durability::End,
            store_outage_wait: Duration::from_secs(30),
        }
    }
}

/// How the gateway hosts tasks for one upstream (`[upstream.tasks]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostedMode {
    /// Host for an upstream without task support, and for tools a task-capable upstream
    /// marks forbidden or leaves unmarked.
    Auto,
    /// Host even where the upstream could run the task itself.
    Always,
    /// Never host: task requests pass through.
    Never,
}

/// How long the `server/discover` probe waits by default (`probe_timeout`), when half of
/// `connect_timeout` is not shorter.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Which era the gateway speaks to an upstream (`era`): see docs/versions.md, "Modern upstreams".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Probe with `server/discover` first; a server that does not answer it as a modern one
    /// does is initialized as today.
    Auto,
    /// Only `initialize`: no probe (for servers that choke on a request before `initialize`).
    Legacy,
    /// Only `server/discover`: a server that does not answer it as a modern one does fails.
    Modern,
}

/// What old clients get for a tool the upstream requires to be called as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequiredMode {
    /// The gateway runs a plain call as an upstream task and answers with its result.
    Bridge,
    /// Clients without tasks do not see the tool.
    Hide,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamTasks {
    pub hosted: HostedMode,
    pub required: RequiredMode,
    /// Glob patterns (`*`, `?`) of the tools offered as hosted tasks.
    pub hosted_tools: Vec<String>,
    /// Retention when the client asks for none.
    pub ttl: Duration,
    /// The longest retention granted; the applied ttl is reported to the client.
    pub max_ttl: Duration,
    /// The shortest retention granted (a requested `ttl: 0` gets this).
    pub min_ttl: Duration,
    pub poll_interval: Duration,
    pub max_tasks_per_owner: usize,
    /// How long a hosted call of a 2026-07-28 client (one that declared the tasks
    /// extension) may run and still be answered as a server of the extension decides: plainly
    /// if it ends within it, with its input round if it asks first; a task only past it.
    /// Zero: a task at once.
    pub plain_within: Duration,
    /// Glob patterns of the hosted tools whose calls become a task at once for such a
    /// client, whatever `plain_within` (tools that always run as a task, as a server of the
    /// extension may decide per tool).
    pub task_tools: Vec<String>,
}

impl Default for UpstreamTasks {
    fn default() -> Self {
        UpstreamTasks {
            hosted: HostedMode::Auto,
            required: RequiredMode::Bridge,
            hosted_tools: vec!["*".into()],
            ttl: Duration::from_secs(600),
            max_ttl: Duration::from_secs(3600),
            min_ttl: Duration::from_secs(1),
            poll_interval: Duration::from_secs(1),
            max_tasks_per_owner: 100,
            plain_within: Duration::from_millis(500),
            task_tools: Vec::new(),
        }
    }
}

/// The by-token dialects the gateway speaks to this upstream's clients
/// (`[upstream.dialects]`; see docs/tasks.md, "Progress and operations by token"). Off by
/// default: each adds a method the standard does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dialects {
    /// The progress-state proposal: `progress/get`, and `_meta.progress` on results.
    pub progress_get: bool,
    /// SEP-1391 long-running operations: `tools/call` with `operation`, `tools/async/*`.
    pub sep1391: bool,
    /// How long the state of a request that ended stays readable by `progress/get`.
    pub retention: Duration,
}

impl Default for Dialects {
    fn default() -> Self {
        Dialects { progress_get: false, sep1391: false, retention: Duration::from_secs(600) }
    }
}

impl UpstreamConfig {
    /// The demo server as `taskgate demo-server --listen` serves it: in-process, and with no
    /// gateway features on top (it stands for a plain server without tasks).
    pub fn plain_demo() -> UpstreamConfig {
        UpstreamConfig {
            name: "demo".into(),
            transport: Transport::Builtin(Builtin::Demo),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            max_request_time: Duration::from_secs(3600),
            client_info: ClientInfo::default(),
            share: false,
            max_in_flight_per_client: None,
            authorization: ClientAuthorization::Replace,
            era: Era::Legacy,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            max_input_rounds: DEFAULT_INPUT_ROUNDS,
            max_input_requests: DEFAULT_INPUT_REQUESTS,
            tasks: UpstreamTasks { hosted: HostedMode::Never, ..UpstreamTasks::default() },
            dialects: Dialects::default(),
            long_calls: super::long_calls::LongCalls::default(),
            tools: super::tool_policy::ToolPolicy::default(),
            rate_limit: None,
        }
    }
}

impl UpstreamTasks {
    pub fn offers_tool(&self, name: &str) -> bool {
        self.hosted_tools.iter().any(|p| glob_match(p, name))
    }

    /// How long a hosted call of tool `name` of a 2026-07-28 client may run and still be
    /// answered plainly (zero for `task_tools`).
    pub fn plain_within_for(&self, name: &str) -> Duration {
        match self.task_tools.iter().any(|p| glob_match(p, name)) {
            true => Duration::ZERO,
            false => self.plain_within,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Origins a browser may send; a request whose `Origin` is present and not listed gets 403.
    /// An entry may end in `:*` to allow any port.
    pub allowed_origins: Vec<String>,
    /// Host names (without port) accepted in the `Host` header, against DNS rebinding.
    /// `"*"` accepts any host.
    pub allowed_hosts: Vec<String>,
    pub max_body_bytes: usize,
    pub max_sessions: usize,
    /// Upstream links open at once, across all sessions (a link outlives its session while
    /// hosted tasks run on it). Defaults to `max_sessions`.
    pub max_links: usize,
    pub session_idle_timeout: Duration,
    /// SSE events kept per session for `Last-Event-ID` replay.
    pub event_buffer: usize,
    /// Requests a session may have in flight upstream at once.
    pub max_in_flight: usize,
    /// Interval of SSE comment keep-alives on open streams.
    pub sse_keepalive: Duration,
    /// How long a POST waits for its response before answering with an event stream
    /// instead of a plain JSON body.
    pub json_response_window: Duration,
    /// Progress notifications for one token are forwarded at most this often once the burst
    /// allowance is spent; what comes faster is coalesced to the latest value, which always
    /// gets through before the result.
    pub progress_min_interval: Duration,
    /// Progress notifications for one token forwarded at once, however close together,
    /// before `progress_min_interval` paces them (it grows back by one per interval).
    pub progress_burst: u32,
    /// On SIGTERM or Ctrl-C: how long requests in flight may take to finish before they are
    /// answered with an error and the gateway exits.
    pub drain_timeout: Duration,
    /// Time allowed to receive a request's headers, counted from when the connection is
    /// ready for one: also how long an idle keep-alive connection stays open.
    pub header_read_timeout: Duration,
    /// Time allowed to receive a request's whole body once its headers are in (then 408).
    pub body_read_timeout: Duration,
    /// Downstream connections open at once; past it a new connection is closed at once.
    pub max_connections: usize,
    /// Bytes of SSE events kept per session for replay (the oldest are evicted first); also
    /// the bound on the bytes waiting for a GET stream.
    pub event_buffer_bytes: usize,
    /// Requests in one JSON-RPC batch (2025-03-26 sessions); a longer batch is refused whole.
    pub max_batch: usize,
    /// JSON values (objects, arrays, strings, numbers, ...) one client request body or stdio
    /// line may hold:
    /// what its parsed form costs grows with them, tens of bytes each, whatever its size in
    /// bytes.
    pub max_body_values: usize,
    /// The largest `initialize` a client may send: its params are what a session keeps for
    /// its life (and the store to revive it), so they are bounded apart from other requests.
    pub max_initialize_bytes: usize,
    /// Sessions one client (a principal, else an address) may hold open, both HTTP transports
    /// together: one client cannot take every place of `max_sessions`.
    pub max_sessions_per_client: usize,
    /// Upstream links one client's sessions may hold open (links of ended sessions that
    /// hosted tasks still run on included): one client cannot take every place of
    /// `max_links`.
    pub max_links_per_client: usize,
    /// `subscriptions/listen` streams one client may hold open: each holds a connection
    /// (and its descriptor) for as long as the client wants.
    pub max_listens_per_client: usize,
    /// Who may use the gateway over HTTP (`[server.auth]`).
    pub auth: AuthConfig,
    /// Serve HTTPS with this certificate and key (`[server.tls]`); plain HTTP without.
    pub tls: Option<super::observe::TlsFiles>,
    /// Export spans over OTLP/HTTP (`[server.otlp]`); none are exported without.
    pub otlp: Option<super::observe::OtlpConfig>,
    /// Origins a browser page may call the gateway from (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// The live task page at `/tasks` (`[server.task_page]`).
    pub task_page: super::task_page::TaskPageConfig,
    /// How fast one client may call through any upstream (`[server.limits]`; `None`: no limit).
    pub rate_limit: Option<super::rate_limit::RateLimit>,
    /// Reload the config when its file changes (as on SIGHUP).
    pub watch_config: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamConfig {
    pub name: String,
    pub transport: Transport,
    /// Time allowed to connect and initialize the upstream.
    pub connect_timeout: Duration,
    /// A forwarded request fails when neither its result nor progress came for this long.
    pub request_timeout: Duration,
    /// A forwarded request fails after this long in all, progress or not.
    pub max_request_time: Duration,
    /// Who the gateway says it is in its own `initialize` to this upstream.
    pub client_info: ClientInfo,
    /// One link serves every session of this upstream (`share = true`), instead of a link
    /// per session.
    pub share: bool,
    /// On a shared link, the requests in flight one client (a principal, else a session)
    /// may hold of the link's `server.max_in_flight`, so that one cannot starve the others;
    /// `None`: half of it (rounded up).
    pub max_in_flight_per_client: Option<usize>,
    /// Whether the client's own `Authorization` goes on to it (`authorization`, default
    /// `replace`: never).
    pub authorization: ClientAuthorization,
    /// Which era the gateway speaks to it (`era`, default `auto`).
    pub era: Era,
    /// Under `era = "auto"`, how long the `server/discover` probe waits for an answer before
    /// the upstream is taken for a legacy server (`probe_timeout`, default
    /// [`DEFAULT_PROBE_TIMEOUT`], at most half of `connect_timeout`).
    pub probe_timeout: Duration,
    /// Rounds of input requests (multi round-trip, a 2026-07-28 upstream's
    /// `InputRequiredResult`) one request may be answered with before it fails.
    pub max_input_rounds: u32,
    /// Input requests one such round may carry; a round with more fails its request.
    pub max_input_requests: usize,
    pub tasks: UpstreamTasks,
    pub dialects: Dialects,
    pub long_calls: super::long_calls::LongCalls,
    /// Which of its tools are offered (`[upstream.tools]`).
    pub tools: super::tool_policy::ToolPolicy,
    /// How fast one client may call through it (`[upstream.limits]`; `None`: no limit).
    pub rate_limit: Option<super::rate_limit::RateLimit>,
}

/// What an HTTP upstream receives as `Authorization`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuthorization {
    /// The configured `headers` only (`"replace"`, the default).
    #[default]
    Replace,
    /// The client's own `Authorization`, from its latest request (`"pass"`).
    Pass,
}

impl ClientAuthorization {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuthorization::Replace => "replace",
            ClientAuthorization::Pass => "pass",
        }
    }
}

/// Default of `max_input_rounds`.
pub const DEFAULT_INPUT_ROUNDS: u32 = 16;
/// Default of `max_input_requests`.
pub const DEFAULT_INPUT_REQUESTS: usize = 16;

/// The `clientInfo` the gateway sends an upstream (`[upstream.client_info]`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
    pub title: Option<String>,
}

impl Default for ClientInfo {
    fn default() -> Self {
        ClientInfo { name: "taskgate".into(), version: env!("CARGO_PKG_VERSION").into(), title: None }
    }
}

impl ClientInfo {
    /// As it goes in `initialize` params.
    pub fn to_value(&self) -> serde_json::Value {
        let mut v = serde_json::json!({"name": self.name, "version": self.version});
        if let Some(t) = &self.title {
            v["title"] = t.as_str().into();
        }
        v
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio { command: String, args: Vec<Secret>, env: Vec<(String, Secret)>, cwd: Option<PathBuf> },
    Http { url: Secret, headers: Vec<(String, Secret)>, mode: HttpMode },
    Builtin(Builtin),
}

/// Which HTTP transport an upstream with a `url` speaks (its `transport` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMode {
    /// Streamable HTTP, unless the first POST is refused as a legacy HTTP+SSE server refuses
    /// it (400, 404, 405): then HTTP+SSE at the same URL.
    Auto,
    /// Streamable HTTP (2025-03-26 and later) only.
    StreamableHttp,
    /// The legacy HTTP+SSE transport (2024-11-05): `url` is the SSE endpoint.
    Sse,
}

impl HttpMode {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMode::Auto => "auto",
            HttpMode::StreamableHttp => "streamable-http",
            HttpMode::Sse => "sse",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Demo,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1:8700".parse().unwrap(),
            allowed_origins: ["http://localhost:*", "http://127.0.0.1:*", "https://localhost:*", "https://127.0.0.1:*"]
                .map(String::from)
                .to_vec(),
            allowed_hosts: ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec(),
            max_body_bytes: 4 * 1024 * 1024,
            max_sessions: 1024,
            max_links: 1024,
            session_idle_timeout: Duration::from_secs(30 * 60),
            event_buffer: 512,
            max_in_flight: 256,
            sse_keepalive: Duration::from_secs(15),
            json_response_window: Duration::from_millis(100),
            progress_min_interval: Duration::from_millis(10),
            progress_burst: 10,
            drain_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            event_buffer_bytes: 8 * 1024 * 1024,
            max_batch: 64,
            max_body_values: 256 * 1024,
            max_initialize_bytes: 64 * 1024,
            // No authentication by default: every place (see `load::per_client`).
            max_sessions_per_client: 1024,
            max_links_per_client: 1024,
            max_listens_per_client: 1024,
            auth: AuthConfig::default(),
            tls: None,
            otlp: None,
            cors_origins: Vec::new(),
            task_page: Default::default(),
            rate_limit: None,
            watch_config: false,
        }
    }
}

impl Config {
    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.name == name)
    }
}

/// `max_tool_name_bytes` when not set: the MCP spec asks for names of at most 128
/// characters; this leaves room for those written in any script.
pub const DEFAULT_MAX_TOOL_NAME_BYTES: usize = 1024;

/// `max_status_message_bytes` when not set.
pub const DEFAULT_MAX_STATUS_MESSAGE_BYTES: usize = 4096;

/// `max_list_page_bytes` when not set.
pub const DEFAULT_MAX_LIST_PAGE_BYTES: usize = 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("slow*", "slow_tool"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(!glob_match("echo", "echo2"));
        assert!(glob_match("read_*", "read_file") && !glob_match("read_*", "rea"));
        assert!(glob_match("*_delete", "x_delete") && !glob_match("*_delete", "x_delete_y"));
        assert!(glob_match("a*b*c", "axxbyybc") && !glob_match("a*b*c", "axxbyyb") && glob_match("*", ""));
        assert!(glob_match("?*", "x") && !glob_match("?*", "") && glob_match("**a", "ba"));
        // A client's name of any length, without a recursion as deep as it.
        let long = "x".repeat(4_000_000);
        assert!(glob_match("*", &long) && !glob_match("*y", &long) && glob_match("x*x", &long));
    }
}
