//! Loading: TOML text to [`Config`], each value defaulted, bounded and checked, with an
//! error that names its key.

use super::duration::{fmt_duration, parse_duration};
use super::error::{ConfigError, err};
use super::expand::{expand, expand_map, redact_url};
use super::raw::*;
use super::record_bounds;
use super::settings::*;
use super::store_kind::{default_store, durability, store_kind, store_outage_wait};
use std::path::Path;
use std::time::Duration;

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Config::load_text(path, &text)
    }

    /// The config of `text`, read from the file at `path` (a reload reads the text once,
    /// and keeps it to compare with the next).
    pub fn load_text(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let base = path.parent().unwrap_or(Path::new(""));
        Config::parse_at(text, &|k| std::env::var(k).ok(), Some(base))
            .map_err(|e| ConfigError(format!("{}: {}", path.display(), e.0)))
    }

    /// Parses config text; `env` looks up `${VAR}` references. With no file to sit beside,
    /// the task store is `memory` unless the text says otherwise (and a `file` store then
    /// needs its `path`).
    pub fn parse(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        Config::parse_at(text, env, None)
    }

    /// Parses config text read from a file in directory `base` (where a relative
    /// `[tasks] path`, and the default data directory, are).
    pub fn parse_at(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
        base: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError(e.to_string().trim_end().to_string()))?;
        let server = match raw.server {
            None => ServerConfig::default(),
            Some(mut s) => {
                let auth = super::auth::auth_config(s.auth.take(), env, base)?;
                let anonymous = matches!(auth.mode, super::auth::AuthMode::None);
                ServerConfig { auth, ..server_config(s, base, anonymous)? }
            }
        };
        if raw.upstream.is_empty() {
            return err(
                "no [[upstream]] configured: add at least one, e.g. `[[upstream]] name = \"demo\" builtin = \"demo\"`",
            );
        }
        let mut upstreams: Vec<UpstreamConfig> = Vec::new();
        for (i, u) in raw.upstream.into_iter().enumerate() {
            let up = upstream_config(i, u, env)?;
            if let Some(n) = up.max_in_flight_per_client.filter(|n| *n > server.max_in_flight) {
                return err(format!(
                    "upstream {:?}.max_in_flight_per_client: {n} is more than server.max_in_flight ({})",
                    up.name, server.max_in_flight
                ));
            }
            if upstreams.iter().any(|o| o.name == up.name) {
                return err(format!("upstream[{i}].name: \"{}\" is used by more than one upstream", up.name));
            }
            upstreams.push(up);
        }
        let tasks = match raw.tasks {
            None => TasksConfig { store: default_store(base), ..TasksConfig::default() },
            Some(t) => {
                let d = TasksConfig::default();
                let (max_tool_name_bytes, max_status_message_bytes, max_list_page_bytes) = record_bounds::of(&t, &d)?;
                let max_task_id_bytes = record_bounds::bytes_within(
                    "tasks.max_task_id_bytes",
                    t.max_task_id_bytes,
                    d.max_task_id_bytes,
                    record_bounds::TASK_ID_RANGE,
                )?;
                TasksConfig {
                    max_tasks: positive("tasks.max_tasks", t.max_tasks, d.max_tasks)?,
                    list_page_size: positive("tasks.list_page_size", t.list_page_size, d.list_page_size)?,
                    max_result_bytes: positive("tasks.max_result_bytes", t.max_result_bytes, d.max_result_bytes)?,
                    max_store_bytes: positive("tasks.max_store_bytes", t.max_store_bytes, d.max_store_bytes)?,
                    max_tool_name_bytes,
                    max_task_id_bytes,
                    max_status_message_bytes,
                    max_list_page_bytes,
                    max_followed: count("tasks.max_followed", t.max_followed, d.max_followed)?,
                    max_held_input_bytes: positive(
                        "tasks.max_held_input_bytes",
                        t.max_held_input_bytes,
                        d.max_held_input_bytes,
                    )?,
                    store: store_kind(&t, base, env)?,
                    store_chosen: t.store.is_some() || t.path.is_some(),
                    durability: durability(&t)?,
                    store_outage_wait: store_outage_wait(&t)?,
                    sync_interval: match duration_or_zero("tasks.sync_interval", t.sync_interval, d.sync_interval)? {
                        i if i > Duration::from_secs(1) => return err("tasks.sync_interval: at most \"1s\""),
                        i => i,
                    },
                }
            }
        };
        Ok(Config { server, tasks, upstreams })
    }
}

fn server_config(r: RawServer, base: Option<&Path>, anonymous: bool) -> Result<ServerConfig, ConfigError> {
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
    let max_links = positive("server.max_links", r.max_links, max_sessions)?;
    let max_connections = match positive("server.max_connections", r.max_connections, d.max_connections)? {
        n if n > MAX_CONNECTIONS => {
            return err(format!("server.max_connections: {n} is more than the limit of {MAX_CONNECTIONS}"));
        }
        n => n,
    };
    Ok(ServerConfig {
        listen,
        allowed_origins: r.allowed_origins.unwrap_or(d.allowed_origins),
        allowed_hosts,
        max_body_bytes: positive("server.max_body_bytes", r.max_body_bytes, d.max_body_bytes)?,
        max_sessions,
        max_links,
        max_sessions_per_client: per_client(
            "server.max_sessions_per_client",
            r.max_sessions_per_client,
            max_sessions,
            anonymous,
        )?,
        max_links_per_client: per_client("server.max_links_per_client", r.max_links_per_client, max_links, anonymous)?,
        max_listens_per_client: per_client(
            "server.max_listens_per_client",
            r.max_listens_per_client,
            max_connections,
            anonymous,
        )?,
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
        progress_burst: match positive("server.progress_burst", r.progress_burst, d.progress_burst as usize)? {
            n if n > MAX_PROGRESS_BURST => {
                return err(format!("server.progress_burst: {n} is more than the limit of {MAX_PROGRESS_BURST}"));
            }
            n => n as u32,
        },
        drain_timeout: at_most_a_day("server.drain_timeout", r.drain_timeout, d.drain_timeout)?,
        header_read_timeout: at_most_a_day("server.header_read_timeout", r.header_read_timeout, d.header_read_timeout)?,
        body_read_timeout: at_most_a_day("server.body_read_timeout", r.body_read_timeout, d.body_read_timeout)?,
        max_connections,
        event_buffer_bytes: positive("server.event_buffer_bytes", r.event_buffer_bytes, d.event_buffer_bytes)?,
        max_batch: positive("server.max_batch", r.max_batch, d.max_batch)?,
        max_body_values: positive("server.max_body_values", r.max_body_values, d.max_body_values)?,
        max_initialize_bytes: positive("server.max_initialize_bytes", r.max_initialize_bytes, d.max_initialize_bytes)?,
        auth: super::auth::AuthConfig::default(),
        tls: super::observe::tls(r.tls, base)?,
        otlp: super::observe::otlp(r.otlp)?,
        cors_origins: super::observe::cors_origins(r.cors_origins)?,
        task_page: super::task_page::task_page(r.task_page)?,
        rate_limit: super::rate_limit::rate_limit("server.limits", r.limits)?,
        watch_config: r.watch_config.unwrap_or(false),
    })
}

pub(super) fn upstream_config(
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
            "{at}: set exactly one of `command` (stdio child), `url` (HTTP) or `builtin`; found {}",
            if set.is_empty() { "none".to_string() } else { set.join(" and ") }
        ));
    }
    let has_headers = u.headers.is_some();
    if u.transport.is_some() && u.url.is_none() {
        return err(format!("{at}.transport: only applies to an HTTP upstream (one with `url`)"));
    }
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
            let mode = match u.transport.as_deref() {
                None | Some("auto") => HttpMode::Auto,
                Some("streamable-http") => HttpMode::StreamableHttp,
                Some("sse") => HttpMode::Sse,
                Some(other) => {
                    return err(format!(
                        "{at}.transport: \"{other}\" is not one of \"auto\", \"streamable-http\" or \"sse\""
                    ));
                }
            };
            Transport::Http { url, headers, mode }
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
    let era = match u.era.as_deref() {
        None | Some("auto") => Era::Auto,
        Some("legacy") => Era::Legacy,
        Some("modern") => Era::Modern,
        Some(other) => return err(format!("{at}.era: \"{other}\" is not one of \"auto\", \"legacy\", \"modern\"")),
    };
    let tasks = upstream_tasks(&at, u.tasks)?;
    let authorization =
        super::client_auth::parse(&at, u.authorization.as_deref(), &transport, u.share.unwrap_or(false))?;
    let connect_timeout = duration(&format!("{at}.connect_timeout"), u.connect_timeout, Duration::from_secs(10))?;
    let probe_timeout = match u.probe_timeout {
        None => DEFAULT_PROBE_TIMEOUT.min(connect_timeout / 2),
        Some(s) => {
            let d = duration(&format!("{at}.probe_timeout"), Some(s.clone()), DEFAULT_PROBE_TIMEOUT)?;
            if d > connect_timeout / 2 {
                return err(format!(
                    "{at}.probe_timeout: \"{s}\" is more than half of connect_timeout ({}), which must leave time to initialize",
                    fmt_duration(connect_timeout)
                ));
            }
            d
        }
    };
    Ok(UpstreamConfig {
        name,
        transport,
        authorization,
        connect_timeout,
        request_timeout: duration(&format!("{at}.request_timeout"), u.request_timeout, Duration::from_secs(300))?,
        max_request_time: duration(&format!("{at}.max_request_time"), u.max_request_time, Duration::from_secs(3600))?,
        client_info: client_info(&at, u.client_info)?,
        share: u.share.unwrap_or(false),
        max_in_flight_per_client: match u.max_in_flight_per_client {
            None => None,
            Some(n) => Some(positive(&format!("{at}.max_in_flight_per_client"), Some(n), 0)?),
        },
        era,
        probe_timeout,
        max_input_rounds: input_limit(
            &format!("{at}.max_input_rounds"),
            u.max_input_rounds,
            DEFAULT_INPUT_ROUNDS as usize,
        )? as u32,
        max_input_requests: input_limit(
            &format!("{at}.max_input_requests"),
            u.max_input_requests,
            DEFAULT_INPUT_REQUESTS,
        )?,
        long_calls: super::long_calls::long_calls(&at, u.long_calls, tasks.hosted != HostedMode::Never)?,
        tasks,
        tools: super::tool_policy::tool_policy(&at, u.tools)?,
        rate_limit: super::rate_limit::rate_limit(&format!("{at}.limits"), u.limits)?,
        dialects: dialects(&at, u.dialects)?,
    })
}

fn dialects(at: &str, d: Option<RawDialects>) -> Result<Dialects, ConfigError> {
    let def = Dialects::default();
    let Some(d) = d else { return Ok(def) };
    Ok(Dialects {
        progress_get: d.progress_get.unwrap_or(def.progress_get),
        sep1391: d.sep1391.unwrap_or(def.sep1391),
        retention: at_most_a_day(&format!("{at}.dialects.retention"), d.retention, def.retention)?,
    })
}

fn client_info(at: &str, c: Option<RawClientInfo>) -> Result<ClientInfo, ConfigError> {
    let d = ClientInfo::default();
    let Some(c) = c else { return Ok(d) };
    for (k, v) in [("name", &c.name), ("version", &c.version), ("title", &c.title)] {
        if v.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return err(format!("{at}.client_info.{k}: must not be empty"));
        }
    }
    Ok(ClientInfo { name: c.name.unwrap_or(d.name), version: c.version.unwrap_or(d.version), title: c.title })
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
        plain_within: duration_or_zero(&key("plain_within"), t.plain_within, d.plain_within)?,
        task_tools: t.task_tools.unwrap_or(d.task_tools),
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

/// A count where 0 means none.
fn count(key: &str, v: Option<u64>, default: usize) -> Result<usize, ConfigError> {
    match v {
        None => Ok(default),
        Some(n) => usize::try_from(n).map_err(|_| ConfigError(format!("{key}: {n} is too large"))),
    }
}

fn positive(key: &str, v: Option<u64>, default: usize) -> Result<usize, ConfigError> {
    match v {
        None => Ok(default),
        Some(0) => err(format!("{key}: must be greater than 0")),
        Some(n) => usize::try_from(n).map_err(|_| ConfigError(format!("{key}: {n} is too large"))),
    }
}

/// The most `progress_burst` takes: a burst is forwarded as it comes, so it is bounded like
/// any other flood.
const MAX_PROGRESS_BURST: usize = 10_000;

/// The most `max_input_rounds` and `max_input_requests` take: each round is kept whole
/// (every question out to the client, every answer until the retry), so the product bounds
/// what one request holds.
const MAX_INPUT_LIMIT: u64 = 1024;

fn input_limit(key: &str, v: Option<u64>, default: usize) -> Result<usize, ConfigError> {
    match v {
        Some(n) if n > MAX_INPUT_LIMIT => err(format!("{key}: {n} is more than the {MAX_INPUT_LIMIT} allowed")),
        _ => positive(key, v, default),
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

#[cfg(test)]
mod tests;

/// A per-client cap of `max` places: 1 to `max`. When not set, half of it (rounded up) with
/// authentication; without, all of it: a client is then an address, and every client on one
/// machine or behind one proxy is one.
fn per_client(key: &str, v: Option<u64>, max: usize, anonymous: bool) -> Result<usize, ConfigError> {
    match v {
        None if anonymous => Ok(max),
        None => Ok(max.div_ceil(2)),
        Some(n) if n == 0 || n > max as u64 => {
            err(format!("{key}: {n} is outside 1 ..= {max} (the limit of all clients)"))
        }
        Some(n) => Ok(n as usize),
    }
}
