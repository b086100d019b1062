//! The effective configuration as `taskgate check` prints it: every setting, secrets
//! redacted.

use super::duration::fmt_duration;
use super::expand::redact_url;
use super::settings::*;
use std::fmt::Write as _;

impl Config {
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
        let _ = writeln!(out, "max_body_values = {}", s.max_body_values);
        let _ = writeln!(out, "max_initialize_bytes = {}", s.max_initialize_bytes);
        let _ = writeln!(out, "max_sessions_per_client = {}", s.max_sessions_per_client);
        let _ = writeln!(out, "max_links_per_client = {}", s.max_links_per_client);
        let _ = writeln!(out, "max_listens_per_client = {}", s.max_listens_per_client);
        let _ = writeln!(out, "sse_keepalive = \"{}\"", fmt_duration(s.sse_keepalive));
        let _ = writeln!(out, "json_response_window = \"{}\"", fmt_duration(s.json_response_window));
        let _ = writeln!(out, "progress_min_interval = \"{}\"", fmt_duration(s.progress_min_interval));
        let _ = writeln!(out, "progress_burst = {}", s.progress_burst);
        let _ = writeln!(out, "drain_timeout = \"{}\"", fmt_duration(s.drain_timeout));
        let _ = writeln!(out, "cors_origins = {:?}", s.cors_origins);
        let _ = writeln!(out, "watch_config = {}", s.watch_config);
        if let Some(t) = &s.tls {
            let _ = writeln!(out, "\n[server.tls]\ncert = {:?}\nkey = {:?}", t.cert.display(), t.key.display());
        }
        if let Some(o) = &s.otlp {
            let _ = writeln!(out, "\n[server.otlp]\nendpoint = {:?}", redact_url(&o.endpoint));
            let _ = writeln!(out, "service_name = {:?}", o.service_name);
        }
        let p = &s.task_page;
        let _ = writeln!(out, "\n[server.task_page]\nenabled = {}\noperators = {:?}", p.enabled, p.operators);
        let _ = writeln!(out, "refresh = \"{}\"\nmax_viewers = {}", fmt_duration(p.refresh), p.max_viewers);
        let _ = writeln!(out, "max_viewers_per_principal = {}", p.max_viewers_per_principal);
        let _ = writeln!(out, "max_snapshot_bytes = {}", p.max_snapshot_bytes);
        let _ = writeln!(out, "unread_timeout = \"{}\"", fmt_duration(p.unread_timeout));
        let _ = writeln!(out, "\n[tasks]");
        let _ = writeln!(out, "max_tasks = {}", self.tasks.max_tasks);
        let _ = writeln!(out, "list_page_size = {}", self.tasks.list_page_size);
        let _ = writeln!(out, "max_result_bytes = {}", self.tasks.max_result_bytes);
        let _ = writeln!(out, "max_store_bytes = {}", self.tasks.max_store_bytes);
        let _ = writeln!(out, "max_tool_name_bytes = {}", self.tasks.max_tool_name_bytes);
        let _ = writeln!(out, "max_task_id_bytes = {}", self.tasks.max_task_id_bytes);
        let _ = writeln!(out, "max_status_message_bytes = {}", self.tasks.max_status_message_bytes);
        let _ = writeln!(out, "max_list_page_bytes = {}", self.tasks.max_list_page_bytes);
        let _ = writeln!(out, "max_followed = {}", self.tasks.max_followed);
        let _ = writeln!(out, "max_held_input_bytes = {}", self.tasks.max_held_input_bytes);
        let _ = writeln!(out, "store_outage_wait = \"{}\"", fmt_duration(self.tasks.store_outage_wait));
        match &self.tasks.store {
            StoreKind::Memory => {
                let _ = writeln!(out, "store = \"memory\"");
            }
            StoreKind::File(dir) => {
                let _ = writeln!(out, "store = \"file\"");
                let _ = writeln!(out, "path = {:?}", dir.display().to_string());
                let _ = writeln!(out, "sync_interval = \"{}\"", fmt_duration(self.tasks.sync_interval));
                let durability = match self.tasks.durability {
                    crate::config::Durability::End => "end",
                    crate::config::Durability::Interval => "interval",
                };
                let _ = writeln!(out, "durability = \"{durability}\"");
            }
            StoreKind::Redis(r) => {
                let _ = writeln!(out, "store = \"redis\"");
                let _ = writeln!(out, "redis_url = {:?}", redact_url(&r.url.written));
                let _ = writeln!(out, "redis_prefix = {:?}", r.prefix);
            }
        }
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
                Transport::Http { url, headers, mode } => {
                    let _ = writeln!(out, "url = {:?}", redact_url(&url.written));
                    let _ = writeln!(out, "transport = \"{}\"", mode.as_str());
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
            let ci = &u.client_info;
            let _ = writeln!(
                out,
                "client_info = {{ name = {:?}, version = {:?}{} }}",
                ci.name,
                ci.version,
                ci.title.as_ref().map(|t| format!(", title = {t:?}")).unwrap_or_default()
            );
            let _ = writeln!(out, "share = {}", u.share);
            let _ = writeln!(out, "max_in_flight_per_client = {}", u.client_share(self.server.max_in_flight));
            let _ = writeln!(out, "authorization = \"{}\"", u.authorization.as_str());
            let era = match u.era {
                Era::Auto => "auto",
                Era::Legacy => "legacy",
                Era::Modern => "modern",
            };
            let _ = writeln!(out, "era = \"{era}\"");
            let _ = writeln!(out, "probe_timeout = \"{}\"", fmt_duration(u.probe_timeout));
            let _ = writeln!(out, "max_input_rounds = {}", u.max_input_rounds);
            let _ = writeln!(out, "max_input_requests = {}", u.max_input_requests);
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
            let _ = writeln!(out, "plain_within = \"{}\"", fmt_duration(t.plain_within));
            let _ = writeln!(out, "task_tools = {:?}", t.task_tools);
            let d = &u.dialects;
            let _ = writeln!(out, "[upstream.dialects]");
            let _ = writeln!(out, "progress_get = {}", d.progress_get);
            let _ = writeln!(out, "sep1391 = {}", d.sep1391);
            let _ = writeln!(out, "retention = \"{}\"", fmt_duration(d.retention));
            let l = &u.long_calls;
            let _ = writeln!(out, "[upstream.long_calls]");
            match l.defer_after {
                Some(d) => {
                    let _ = writeln!(out, "defer_after = \"{}\"", fmt_duration(d));
                }
                None => {
                    let _ = writeln!(out, "# defer_after: off");
                }
            }
            let _ = writeln!(out, "tools = {:?}", l.tools);
            let _ = writeln!(out, "wait_max = \"{}\"", fmt_duration(l.wait_max));
            let _ = writeln!(out, "tool_prefix = {:?}", l.tool_prefix);
            let _ = writeln!(out, "keepalive = \"{}\"", fmt_duration(l.keepalive.unwrap_or_default()));
        }
        out
    }
}
