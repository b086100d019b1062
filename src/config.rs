//! The TOML configuration: parsed, defaulted and validated with messages that name the key.
//!
//! `${VAR}` in an upstream's `url`, `args`, `env` and `headers` values is read from the
//! gateway's environment at load time; such values are redacted whenever the config is
//! printed, and so are a URL's user-info and query.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod expand;

pub use expand::{Secret, redact_url};
use expand::{expand, expand_map};

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
    /// All retained outcomes together; when full, new tasks are refused.
    pub max_store_bytes: usize,
}

impl Default for TasksConfig {
    fn default() -> Self {
        TasksConfig {
            max_tasks: 10_000,
            list_page_size: 50,
            max_result_bytes: 4 * 1024 * 1024,
            max_store_bytes: 256 * 1024 * 1024,
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

/// What old clients get for a tool the upstream requires to be called as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequiredMode {
    /// The gateway runs a plain call as an upstream task and answers with its result.
    Bridge,
    /// Clients without tasks do not see the tool.
    Hide,
}

#[derive(Debug, Clone)]
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
        }
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
            tasks: UpstreamTasks { hosted: HostedMode::Never, ..UpstreamTasks::default() },
        }
    }
}

impl UpstreamTasks {
    pub fn offers_tool(&self, name: &str) -> bool {
        self.hosted_tools.iter().any(|p| glob_match(p, name))
    }
}

/// `*` matches any run of characters, `?` any one character.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
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
    /// Progress notifications for one token are forwarded at most this often; bursts are
    /// coalesced to the latest value, which always gets through before the result.
    pub progress_min_interval: Duration,
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
}

#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    pub name: String,
    pub transport: Transport,
    /// Time allowed to connect and initialize the upstream.
    pub connect_timeout: Duration,
    /// A forwarded request fails when neither its result nor progress came for this long.
    pub request_timeout: Duration,
    /// A forwarded request fails after this long in all, progress or not.
    pub max_request_time: Duration,
    pub tasks: UpstreamTasks,
}

#[derive(Debug, Clone)]
pub enum Transport {
    Stdio { command: String, args: Vec<Secret>, env: Vec<(String, Secret)>, cwd: Option<PathBuf> },
    Http { url: Secret, headers: Vec<(String, Secret)> },
    Builtin(Builtin),
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
            drain_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            event_buffer_bytes: 8 * 1024 * 1024,
            max_batch: 64,
        }
    }
}

// ---- raw, as written in TOML ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    server: Option<RawServer>,
    tasks: Option<RawTasks>,
    #[serde(default)]
    upstream: Vec<RawUpstream>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    listen: Option<String>,
    allowed_origins: Option<Vec<String>>,
    allowed_hosts: Option<Vec<String>>,
    max_body_bytes: Option<u64>,
    max_sessions: Option<u64>,
    max_links: Option<u64>,
    session_idle_timeout: Option<String>,
    event_buffer: Option<u64>,
    max_in_flight: Option<u64>,
    sse_keepalive: Option<String>,
    json_response_window: Option<String>,
    progress_min_interval: Option<String>,
    drain_timeout: Option<String>,
    header_read_timeout: Option<String>,
    body_read_timeout: Option<String>,
    max_connections: Option<u64>,
    event_buffer_bytes: Option<u64>,
    max_batch: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTasks {
    max_tasks: Option<u64>,
    list_page_size: Option<u64>,
    max_result_bytes: Option<u64>,
    max_store_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstreamTasks {
    hosted: Option<String>,
    required: Option<String>,
    hosted_tools: Option<Vec<String>>,
    ttl: Option<String>,
    max_ttl: Option<String>,
    min_ttl: Option<String>,
    poll_interval: Option<String>,
    max_tasks_per_owner: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: Option<String>,
    command: Option<String>,
    args: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    headers: Option<BTreeMap<String, String>>,
    builtin: Option<String>,
    connect_timeout: Option<String>,
    request_timeout: Option<String>,
    max_request_time: Option<String>,
    tasks: Option<RawUpstreamTasks>,
}

/// A config error: what is wrong, naming the key.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError(msg.into()))
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Config::parse(&text, &|k| std::env::var(k).ok())
            .map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Parses config text; `env` looks up `${VAR}` references.
    pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string().trim_end().to_string()))?;
        let server = match raw.server {
            None => ServerConfig::default(),
            Some(s) => server_config(s)?,
        };
        if raw.upstream.is_empty() {
            return err(
                "no [[upstream]] configured: add at least one, e.g. `[[upstream]] name = \"demo\" builtin = \"demo\"`",
            );
        }
        let mut upstreams: Vec<UpstreamConfig> = Vec::new();
        for (i, u) in raw.upstream.into_iter().enumerate() {
            let up = upstream_config(i, u, env)?;
            if upstreams.iter().any(|o| o.name == up.name) {
                return err(format!("upstream[{i}].name: \"{}\" is used by more than one upstream", up.name));
            }
            upstreams.push(up);
        }
        let tasks = match raw.tasks {
            None => TasksConfig::default(),
            Some(t) => {
                let d = TasksConfig::default();
                TasksConfig {
                    max_tasks: positive("tasks.max_tasks", t.max_tasks, d.max_tasks)?,
                    list_page_size: positive("tasks.list_page_size", t.list_page_size, d.list_page_size)?,
                    max_result_bytes: positive("tasks.max_result_bytes", t.max_result_bytes, d.max_result_bytes)?,
                    max_store_bytes: positive("tasks.max_store_bytes", t.max_store_bytes, d.max_store_bytes)?,
                }
            }
        };
        Ok(Config { server, tasks, upstreams })
    }

    pub fn upstream(&self, name: &str) -> Option<&UpstreamConfig> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// The effective configuration, as `taskgate check` prints it (secrets redacted).
    pub fn describe(&self) -> String {
        let s = &self.server;
        let mut out = String::new();
        let _ = writeln!(out, "[server]");
        let _ = writeln!(out, "listen = \"{}\"", s.listen);
        let _ = writeln!(out, "allowed_origins = {:?}", s.allowed_origins);
        let _ = writeln!(out, "allowed_hosts = {:?}", s.allowed_hosts);
        let _ = writeln!(out, "max_body_bytes = {}", s.max_body_bytes);
        let _ = writeln!(out, "max_sessions = {}", s.max_sessions);
        let _ = writeln!(out, "max_links = {}", s.max_links);
        let _ = writeln!(out, "max_connections = {}", s.max_connections);
        let _ = writeln!(out, "header_read_timeout = \"{}\"", fmt_duration(s.header_read_timeout));
        let _ = writeln!(out, "body_read_timeout = \"{}\"", fmt_duration(s.body_read_timeout));
        let _ = writeln!(out, "session_idle_timeout = \"{}\"", fmt_duration(s.session_idle_timeout));
        let _ = writeln!(out, "event_buffer = {}", s.event_buffer);
        let _ = writeln!(out, "event_buffer_bytes = {}", s.event_buffer_bytes);
        let _ = writeln!(out, "max_in_flight = {}", s.max_in_flight);
        let _ = writeln!(out, "max_batch = {}", s.max_batch);
        let _ = writeln!(out, "sse_keepalive = \"{}\"", fmt_duration(s.sse_keepalive));
        let _ = writeln!(out, "json_response_window = \"{}\"", fmt_duration(s.json_response_window));
        let _ = writeln!(out, "progress_min_interval = \"{}\"", fmt_duration(s.progress_min_interval));
        let _ = writeln!(out, "drain_timeout = \"{}\"", fmt_duration(s.drain_timeout));
        let _ = writeln!(out, "\n[tasks]");
        let _ = writeln!(out, "max_tasks = {}", self.tasks.max_tasks);
        let _ = writeln!(out, "list_page_size = {}", self.tasks.list_page_size);
        let _ = writeln!(out, "max_result_bytes = {}", self.tasks.max_result_bytes);
        let _ = writeln!(out, "max_store_bytes = {}", self.tasks.max_store_bytes);
        for u in &self.upstreams {
            let _ = writeln!(out, "\n[[upstream]]  # served at /mcp/{}", u.name);
            let _ = writeln!(out, "name = \"{}\"", u.name);
            match &u.transport {
                Transport::Stdio { command, args, env, cwd } => {
                    let _ = writeln!(out, "command = {command:?}");
                    let args: Vec<&str> = args.iter().map(|a| a.written.as_str()).collect();
                    let _ = writeln!(out, "args = {args:?}");
                    for (k, v) in env {
                        let _ = writeln!(out, "env.{k} = {v:?}");
                    }
                    if let Some(c) = cwd {
                        let _ = writeln!(out, "cwd = {:?}", c.display().to_string());
                    }
                }
                Transport::Http { url, headers } => {
                    let _ = writeln!(out, "url = {:?}", redact_url(&url.written));
                    for (k, v) in headers {
                        let _ = writeln!(out, "headers.{k} = {v:?}");
                    }
                }
                Transport::Builtin(Builtin::Demo) => {
                    let _ = writeln!(out, "builtin = \"demo\"");
                }
            }
            let _ = writeln!(out, "connect_timeout = \"{}\"", fmt_duration(u.connect_timeout));
            let _ = writeln!(out, "request_timeout = \"{}\"", fmt_duration(u.request_timeout));
            let _ = writeln!(out, "max_request_time = \"{}\"", fmt_duration(u.max_request_time));
            let t = &u.tasks;
            let _ = writeln!(out, "[upstream.tasks]");
            let mode = match t.hosted {
                HostedMode::Auto => "auto",
                HostedMode::Always => "always",
                HostedMode::Never => "never",
            };
            let _ = writeln!(out, "hosted = \"{mode}\"");
            let required = match t.required {
                RequiredMode::Bridge => "bridge",
                RequiredMode::Hide => "hide",
            };
            let _ = writeln!(out, "required = \"{required}\"");
            let _ = writeln!(out, "hosted_tools = {:?}", t.hosted_tools);
            let _ = writeln!(out, "ttl = \"{}\"", fmt_duration(t.ttl));
            let _ = writeln!(out, "max_ttl = \"{}\"", fmt_duration(t.max_ttl));
            let _ = writeln!(out, "min_ttl = \"{}\"", fmt_duration(t.min_ttl));
            let _ = writeln!(out, "poll_interval = \"{}\"", fmt_duration(t.poll_interval));
            let _ = writeln!(out, "max_tasks_per_owner = {}", t.max_tasks_per_owner);
        }
        out
    }
}

fn server_config(r: RawServer) -> Result<ServerConfig, ConfigError> {
    let d = ServerConfig::default();
    let listen = match r.listen {
        None => d.listen,
        Some(s) => s.parse().map_err(|_| {
            ConfigError(format!("server.listen: \"{s}\" is not an address with a port, e.g. \"127.0.0.1:8700\""))
        })?,
    };
    let allowed_hosts = r.allowed_hosts.unwrap_or(d.allowed_hosts);
    if allowed_hosts.is_empty() {
        return err("server.allowed_hosts: must not be empty (use [\"*\"] to accept any Host)");
    }
    let max_sessions = positive("server.max_sessions", r.max_sessions, d.max_sessions)?;
    Ok(ServerConfig {
        listen,
        allowed_origins: r.allowed_origins.unwrap_or(d.allowed_origins),
        allowed_hosts,
        max_body_bytes: positive("server.max_body_bytes", r.max_body_bytes, d.max_body_bytes)?,
        max_sessions,
        max_links: positive("server.max_links", r.max_links, max_sessions)?,
        session_idle_timeout: duration("server.session_idle_timeout", r.session_idle_timeout, d.session_idle_timeout)?,
        event_buffer: positive("server.event_buffer", r.event_buffer, d.event_buffer)?,
        max_in_flight: positive("server.max_in_flight", r.max_in_flight, d.max_in_flight)?,
        sse_keepalive: duration("server.sse_keepalive", r.sse_keepalive, d.sse_keepalive)?,
        json_response_window: duration("server.json_response_window", r.json_response_window, d.json_response_window)?,
        progress_min_interval: duration_or_zero(
            "server.progress_min_interval",
            r.progress_min_interval,
            d.progress_min_interval,
        )?,
        drain_timeout: at_most_a_day("server.drain_timeout", r.drain_timeout, d.drain_timeout)?,
        header_read_timeout: at_most_a_day("server.header_read_timeout", r.header_read_timeout, d.header_read_timeout)?,
        body_read_timeout: at_most_a_day("server.body_read_timeout", r.body_read_timeout, d.body_read_timeout)?,
        max_connections: match positive("server.max_connections", r.max_connections, d.max_connections)? {
            n if n > MAX_CONNECTIONS => {
                return err(format!("server.max_connections: {n} is more than the limit of {MAX_CONNECTIONS}"));
            }
            n => n,
        },
        event_buffer_bytes: positive("server.event_buffer_bytes", r.event_buffer_bytes, d.event_buffer_bytes)?,
        max_batch: positive("server.max_batch", r.max_batch, d.max_batch)?,
    })
}

fn upstream_config(
    i: usize,
    u: RawUpstream,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<UpstreamConfig, ConfigError> {
    let Some(name) = u.name else {
        return err(format!("upstream[{i}].name: missing; every upstream needs a name (it is served at /mcp/<name>)"));
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return err(format!(
            "upstream[{i}].name: \"{name}\" must be non-empty and use only letters, digits, '-' and '_' (it becomes the path /mcp/<name>)"
        ));
    }
    let at = format!("upstream \"{name}\"");
    let set: Vec<&str> = [("command", u.command.is_some()), ("url", u.url.is_some()), ("builtin", u.builtin.is_some())]
        .into_iter()
        .filter_map(|(k, present)| present.then_some(k))
        .collect();
    if set.len() != 1 {
        return err(format!(
            "{at}: set exactly one of `command` (stdio child), `url` (Streamable HTTP) or `builtin`; found {}",
            if set.is_empty() { "none".to_string() } else { set.join(" and ") }
        ));
    }
    let has_headers = u.headers.is_some();
    let stdio_only = [("args", u.args.is_some()), ("env", u.env.is_some()), ("cwd", u.cwd.is_some())];
    let transport = if let Some(command) = u.command {
        if command.trim().is_empty() {
            return err(format!("{at}.command: must not be empty"));
        }
        if has_headers {
            return err(format!("{at}.headers: only applies to an HTTP upstream (one with `url`)"));
        }
        Transport::Stdio {
            command,
            args: u
                .args
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(n, a)| expand(&format!("{at}.args[{n}]"), a, env))
                .collect::<Result<_, _>>()?,
            env: expand_map(&format!("{at}.env"), u.env.unwrap_or_default(), env)?,
            cwd: u.cwd,
        }
    } else {
        if let Some((k, _)) = stdio_only.iter().find(|(_, p)| *p) {
            return err(format!("{at}.{k}: only applies to a stdio upstream (one with `command`)"));
        }
        if let Some(url) = u.url {
            let url = expand(&format!("{at}.url"), &url, env)?;
            let parsed: Result<hyper::Uri, _> = url.value.parse();
            match parsed {
                Ok(uri) if matches!(uri.scheme_str(), Some("http") | Some("https")) && uri.host().is_some() => {}
                _ => {
                    return err(format!(
                        "{at}.url: \"{}\" is not an http:// or https:// URL",
                        redact_url(&url.written)
                    ));
                }
            }
            let headers = expand_map(&format!("{at}.headers"), u.headers.unwrap_or_default(), env)?;
            for (k, v) in &headers {
                if hyper::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
                    return err(format!("{at}.headers: \"{k}\" is not a valid header name"));
                }
                if hyper::header::HeaderValue::from_str(&v.value).is_err() {
                    return err(format!("{at}.headers.{k}: value is not a valid header value"));
                }
            }
            Transport::Http { url, headers }
        } else {
            if has_headers {
                return err(format!("{at}.headers: only applies to an HTTP upstream (one with `url`)"));
            }
            match u.builtin.as_deref() {
                Some("demo") => Transport::Builtin(Builtin::Demo),
                Some(other) => {
                    return err(format!("{at}.builtin: unknown builtin \"{other}\"; the only one is \"demo\""));
                }
                None => unreachable!("exactly one transport key is set"),
            }
        }
    };
    Ok(UpstreamConfig {
        name,
        transport,
        connect_timeout: duration(&format!("{at}.connect_timeout"), u.connect_timeout, Duration::from_secs(10))?,
        request_timeout: duration(&format!("{at}.request_timeout"), u.request_timeout, Duration::from_secs(300))?,
        max_request_time: duration(&format!("{at}.max_request_time"), u.max_request_time, Duration::from_secs(3600))?,
        tasks: upstream_tasks(&at, u.tasks)?,
    })
}

fn upstream_tasks(at: &str, t: Option<RawUpstreamTasks>) -> Result<UpstreamTasks, ConfigError> {
    let d = UpstreamTasks::default();
    let Some(t) = t else { return Ok(d) };
    let key = |k: &str| format!("{at}.tasks.{k}");
    let hosted = match t.hosted.as_deref() {
        None | Some("auto") => HostedMode::Auto,
        Some("always") => HostedMode::Always,
        Some("never") => HostedMode::Never,
        Some(other) => {
            return err(format!("{}: \"{other}\" is not one of \"auto\", \"always\", \"never\"", key("hosted")));
        }
    };
    let required = match t.required.as_deref() {
        None | Some("bridge") => RequiredMode::Bridge,
        Some("hide") => RequiredMode::Hide,
        Some(other) => return err(format!("{}: \"{other}\" is not one of \"bridge\", \"hide\"", key("required"))),
    };
    let ttl = duration(&key("ttl"), t.ttl, d.ttl)?;
    let max_ttl = duration(&key("max_ttl"), t.max_ttl, d.max_ttl)?;
    if ttl > max_ttl {
        return err(format!(
            "{}: {} is longer than max_ttl ({})",
            key("ttl"),
            fmt_duration(ttl),
            fmt_duration(max_ttl)
        ));
    }
    let min_ttl = duration(&key("min_ttl"), t.min_ttl, d.min_ttl.min(ttl))?;
    if min_ttl > ttl {
        return err(format!(
            "{}: {} is longer than ttl ({})",
            key("min_ttl"),
            fmt_duration(min_ttl),
            fmt_duration(ttl)
        ));
    }
    Ok(UpstreamTasks {
        hosted,
        required,
        hosted_tools: t.hosted_tools.unwrap_or(d.hosted_tools),
        ttl,
        max_ttl,
        min_ttl,
        poll_interval: duration(&key("poll_interval"), t.poll_interval, d.poll_interval)?,
        max_tasks_per_owner: positive(&key("max_tasks_per_owner"), t.max_tasks_per_owner, d.max_tasks_per_owner)?,
    })
}

/// Like `duration`, but `"0ms"` (off) is allowed.
fn duration_or_zero(key: &str, v: Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) => match parse_duration(&s) {
            Some(d) if d > MAX_DURATION => err(format!("{key}: \"{s}\" is longer than a year (\"8760h\")")),
            Some(d) => Ok(d),
            None => err(format!("{key}: \"{s}\" is not a duration such as \"0ms\", \"10ms\" or \"1s\"")),
        },
    }
}

/// The most connections `server.max_connections` may allow (far above any file limit).
const MAX_CONNECTIONS: usize = 1 << 24;

/// A positive duration of at most 24h: these are added to the current time, which a larger
/// value could overflow.
fn at_most_a_day(key: &str, v: Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    let d = duration(key, v, default)?;
    if d > Duration::from_secs(24 * 3600) {
        return err(format!("{key}: {} is longer than the limit of 24h", fmt_duration(d)));
    }
    Ok(d)
}

fn positive(key: &str, v: Option<u64>, default: usize) -> Result<usize, ConfigError> {
    match v {
        None => Ok(default),
        Some(0) => err(format!("{key}: must be greater than 0")),
        Some(n) => usize::try_from(n).map_err(|_| ConfigError(format!("{key}: {n} is too large"))),
    }
}

/// The longest duration any key takes: durations are added to the current time, and a
/// year is beyond every sensible timeout or retention.
const MAX_DURATION: Duration = Duration::from_secs(8760 * 3600);

fn duration(key: &str, v: Option<String>, default: Duration) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) => match parse_duration(&s) {
            Some(d) if d > MAX_DURATION => err(format!("{key}: \"{s}\" is longer than a year (\"8760h\")")),
            Some(d) if !d.is_zero() => Ok(d),
            _ => err(format!("{key}: \"{s}\" is not a positive duration such as \"500ms\", \"30s\", \"5m\" or \"1h\"")),
        },
    }
}

/// `"500ms"`, `"30s"`, `"5m"`, `"1h"`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" => Some(Duration::from_secs(n)),
        "m" => Some(Duration::from_secs(n.checked_mul(60)?)),
        "h" => Some(Duration::from_secs(n.checked_mul(3600)?)),
        _ => None,
    }
}

pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0ms".into();
    }
    if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, &|k| (k == "TOKEN").then(|| "s3cret".to_string()))
    }

    #[test]
    fn the_shipped_config_is_valid() {
        let c = parse(include_str!("../config.toml")).unwrap();
        assert!(c.upstream("demo").is_some());
        assert!(c.server.listen.ip().is_loopback());
    }

    #[test]
    fn defaults_are_bounded_and_local() {
        let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\n").unwrap();
        assert!(c.server.listen.ip().is_loopback());
        assert!(c.server.max_sessions > 0 && c.server.event_buffer > 0 && c.server.max_body_bytes > 0);
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("[server]\nlisten = \"nope\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.listen"),
            ("[server]\nmax_sessions = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_sessions"),
            (
                "[server]\nsession_idle_timeout = \"soon\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.session_idle_timeout",
            ),
            ("[[upstream]]\nbuiltin=\"demo\"", "upstream[0].name"),
            ("[[upstream]]\nname=\"a b\"\nbuiltin=\"demo\"", "upstream[0].name"),
            ("[[upstream]]\nname=\"a\"\ncommand=\"x\"\nurl=\"http://h/\"", "exactly one"),
            ("[[upstream]]\nname=\"a\"", "exactly one"),
            ("[[upstream]]\nname=\"a\"\nurl=\"ftp://h/\"", "upstream \"a\".url"),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"other\"", "upstream \"a\".builtin"),
            ("[[upstream]]\nname=\"a\"\nurl=\"http://h/\"\nargs=[\"x\"]", "upstream \"a\".args"),
            ("[[upstream]]\nname=\"a\"\ncommand=\"x\"\nenv={K=\"${MISSING}\"}", "MISSING is not set"),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "more than one"),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nbogus=1", "bogus"),
            ("", "no [[upstream]]"),
            (
                "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nhosted=\"sometimes\"",
                "upstream \"a\".tasks.hosted",
            ),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nttl=\"2h\"", "upstream \"a\".tasks.ttl"),
            (
                "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n[upstream.tasks]\nrequired=\"maybe\"",
                "upstream \"a\".tasks.required",
            ),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nrequest_timeout=\"0s\"", "upstream \"a\".request_timeout"),
            ("[tasks]\nmax_tasks=0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "tasks.max_tasks"),
            ("[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\nmax_request_time=\"9000000h\"", "max_request_time"),
            ("[server]\nmax_batch = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_batch"),
            (
                "[server]\nevent_buffer_bytes = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.event_buffer_bytes",
            ),
            ("[server]\nmax_connections = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.max_connections"),
            (
                "[server]\nmax_connections = 99999999999\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.max_connections",
            ),
            (
                "[server]\nheader_read_timeout = \"0s\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.header_read_timeout",
            ),
            (
                "[server]\nbody_read_timeout = \"x\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.body_read_timeout",
            ),
            ("[server]\ndrain_timeout = \"0ms\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.drain_timeout"),
            ("[server]\ndrain_timeout = \"25h\"\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"", "server.drain_timeout"),
            (
                "[server]\nevent_buffer_bytes = 0\n[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"",
                "server.event_buffer_bytes",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).err().unwrap_or_else(|| panic!("accepted: {text}"));
            assert!(e.0.contains(want), "error {:?} should mention {want:?}", e.0);
        }
    }

    #[test]
    fn env_references_expand_and_are_redacted() {
        let c = parse("[[upstream]]\nname=\"a\"\nurl=\"https://h/mcp\"\nheaders={Authorization=\"Bearer ${TOKEN}\"}")
            .unwrap();
        let Transport::Http { headers, .. } = &c.upstreams[0].transport else { panic!() };
        assert_eq!(headers[0].1.value, "Bearer s3cret");
        let shown = c.describe();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("<from environment>"));
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "anything"));
        assert!(glob_match("slow*", "slow_tool"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(!glob_match("echo", "echo2"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(fmt_duration(Duration::from_secs(1800)), "30m");
    }
}
