//! A desktop client's `mcpServers` JSON file read as taskgate upstreams: for `taskgate
//! import` (printed as TOML config) and `taskgate serve --mcp-servers` (served as it is).
//! Both go through one translation, to the raw `[[upstream]]` the TOML would hold, then the
//! same validation as a config file's.

use super::error::{ConfigError, err};
use super::load::upstream_config;
use super::raw::RawUpstream;
use super::settings::{Config, ServerConfig, TasksConfig, UpstreamConfig};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The servers of an `mcpServers` file, and what was skipped on the way (for stderr).
#[derive(Debug)]
pub struct McpServers {
    servers: Vec<Server>,
    /// Fields not understood, entries disabled, names mapped: one line each.
    pub warnings: Vec<String>,
}

#[derive(Debug)]
struct Server {
    /// A valid upstream name.
    name: String,
    /// The entry's key in the file, if it differs from `name`.
    written: Option<String>,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String>, cwd: Option<String> },
    Http { url: String, headers: BTreeMap<String, String>, transport: Option<&'static str> },
}

/// The fields of an entry that are read; others are warned about and skipped.
const KNOWN: &[&str] = &["command", "args", "env", "cwd", "url", "serverUrl", "headers", "type", "disabled"];

impl McpServers {
    /// Reads the file's text: `{"mcpServers": {name: entry, …}}` (or VS Code's `servers`).
    /// Every entry is checked as its `[[upstream]]` would be (`${VAR}` references are not
    /// looked up here; see [`McpServers::config`]).
    pub fn parse(text: &str) -> Result<McpServers, ConfigError> {
        let doc: Value = serde_json::from_str(text).map_err(|e| {
            ConfigError(format!("not valid JSON at line {}, column {}: {}", e.line(), e.column(), bare(&e)))
        })?;
        let Value::Object(top) = doc else { return err("the top level must be a JSON object with \"mcpServers\"") };
        let (key, entries) = match (top.get("mcpServers"), top.get("servers")) {
            (Some(v), _) => ("mcpServers", v),
            (None, Some(v)) => ("servers", v),
            (None, None) => return err("no \"mcpServers\" object at the top level"),
        };
        let Value::Object(entries) = entries else { return err(format!("\"{key}\" must be an object of servers")) };
        let mut out = McpServers { servers: Vec::new(), warnings: Vec::new() };
        for (written, entry) in entries {
            let at = format!("{key}.{written:?}");
            let Value::Object(entry) = entry else { return err(format!("{at}: must be an object")) };
            if entry.get("disabled") == Some(&Value::Bool(true)) {
                out.warnings.push(format!("{at}: disabled, skipped"));
                continue;
            }
            for k in entry.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
                out.warnings.push(format!("{at}.{k}: not a field taskgate reads, skipped"));
            }
            let name = upstream_name(&at, written)?;
            if let Some(other) = out.servers.iter().find(|s| s.name == name) {
                let first = other.written.as_deref().unwrap_or(&other.name);
                return err(format!("{at}: its name maps to \"{name}\", as {first:?}'s does; rename one of them"));
            }
            if name != *written {
                out.warnings.push(format!("{at}: served as \"{name}\" (/mcp/{name})"));
            }
            let kind = kind(&at, entry)?;
            let server = Server { written: (name != *written).then(|| written.clone()), name, kind };
            // The same checks as the TOML would get; `${VAR}`s stand for any value here.
            upstream_config(out.servers.len(), server.raw(), &|_| Some("x".into()))
                .map_err(|e| ConfigError(format!("{at}: {}", e.0)))?;
            out.servers.push(server);
        }
        if out.servers.is_empty() {
            return err(format!("\"{key}\" holds no server to serve"));
        }
        Ok(out)
    }

    /// The servers as a gateway config: default `[server]` settings and a `memory` task
    /// store (nothing is written beside someone else's file). `env` looks up `${VAR}`.
    pub fn config(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let upstreams = self.upstreams(env)?;
        Ok(Config { server: ServerConfig::default(), tasks: TasksConfig::default(), upstreams })
    }

    /// Each server as the `[[upstream]]` it becomes, validated.
    pub fn upstreams(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<UpstreamConfig>, ConfigError> {
        self.servers.iter().enumerate().map(|(i, s)| upstream_config(i, s.raw(), env)).collect()
    }

    /// The equivalent TOML config; `source` is named in its opening comment.
    pub fn to_toml(&self, source: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# taskgate config, from the mcpServers file {source} (`taskgate import`).");
        let _ = writeln!(out, "# The env values and headers are copied as they are: they may hold secrets.");
        let _ = writeln!(out, "\n[server]\nlisten = {}", quote(&ServerConfig::default().listen.to_string()));
        for s in &self.servers {
            let _ = writeln!(out, "\n[[upstream]]");
            if let Some(w) = &s.written {
                let _ = writeln!(out, "# {} in the mcpServers file", quote(w));
            }
            let _ = writeln!(out, "name = {}", quote(&s.name));
            match &s.kind {
                Kind::Stdio { command, args, env, cwd } => {
                    let _ = writeln!(out, "command = {}", quote(command));
                    if !args.is_empty() {
                        let args: Vec<String> = args.iter().map(|a| quote(a)).collect();
                        let _ = writeln!(out, "args = [{}]", args.join(", "));
                    }
                    if let Some(cwd) = cwd {
                        let _ = writeln!(out, "cwd = {}", quote(cwd));
                    }
                    table(&mut out, "env", env);
                }
                Kind::Http { url, headers, transport } => {
                    let _ = writeln!(out, "url = {}", quote(url));
                    if let Some(t) = transport {
                        let _ = writeln!(out, "transport = {}", quote(t));
                    }
                    table(&mut out, "headers", headers);
                }
            }
        }
        out
    }
}

impl Server {
    fn raw(&self) -> RawUpstream {
        let mut raw = RawUpstream { name: Some(self.name.clone()), ..RawUpstream::default() };
        match &self.kind {
            Kind::Stdio { command, args, env, cwd } => {
                raw.command = Some(command.clone());
                raw.args = (!args.is_empty()).then(|| args.clone());
                raw.env = (!env.is_empty()).then(|| env.clone());
                raw.cwd = cwd.as_ref().map(Into::into);
            }
            Kind::Http { url, headers, transport } => {
                raw.url = Some(url.clone());
                raw.headers = (!headers.is_empty()).then(|| headers.clone());
                raw.transport = transport.map(String::from);
            }
        }
        raw
    }
}

/// The upstream name for an entry's key: as it is if valid; else each run of characters
/// other than ASCII letters, digits, `-` and `_` becomes one `-` (trimmed at the ends), if
/// a letter or digit is left.
fn upstream_name(at: &str, written: &str) -> Result<String, ConfigError> {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if !written.is_empty() && written.chars().all(valid) {
        return Ok(written.to_string());
    }
    let mut name = String::new();
    for c in written.chars() {
        if valid(c) {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name = name.trim_matches('-').to_string();
    if !name.chars().any(|c| c.is_ascii_alphanumeric()) {
        return err(format!(
            "{at}: not usable as an upstream name (letters, digits, '-' and '_'; it becomes the path /mcp/<name>): rename the entry"
        ));
    }
    Ok(name)
}

fn kind(at: &str, e: &Map<String, Value>) -> Result<Kind, ConfigError> {
    let string = |k: &str| -> Result<Option<String>, ConfigError> {
        match e.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => err(format!("{at}.{k}: must be a string")),
        }
    };
    let command = string("command")?;
    let url = match (string("url")?, string("serverUrl")?) {
        (Some(_), Some(_)) => return err(format!("{at}: set \"url\" or \"serverUrl\", not both")),
        (u, s) => u.or(s),
    };
    let ty = string("type")?;
    let transport = match ty.as_deref() {
        None => None,
        Some("stdio") => Some("stdio"),
        Some("http" | "streamable-http" | "streamableHttp") => Some("streamable-http"),
        Some("sse") => Some("sse"),
        Some(other) => {
            return err(format!(
                "{at}.type: \"{other}\" is not one of \"stdio\", \"http\", \"streamable-http\" or \"sse\""
            ));
        }
    };
    let only = |k: &str, what: &str| match e.get(k) {
        Some(_) => err(format!("{at}.{k}: only applies to {what}")),
        None => Ok(()),
    };
    match (command, url) {
        (Some(_), Some(_)) => {
            err(format!("{at}: set \"command\" (a stdio server) or \"url\" (an HTTP server), not both"))
        }
        (None, None) => err(format!("{at}: neither \"command\" (a stdio server) nor \"url\" (an HTTP server) is set")),
        (Some(command), None) => {
            if transport.is_some_and(|t| t != "stdio") {
                return err(format!("{at}.type: \"{}\" needs a \"url\", not a \"command\"", ty.unwrap_or_default()));
            }
            only("headers", "an HTTP server (one with \"url\")")?;
            let args = match e.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_str().map(String::from))
                    .collect::<Option<_>>()
                    .ok_or_else(|| ConfigError(format!("{at}.args: must be an array of strings")))?,
                Some(_) => return err(format!("{at}.args: must be an array of strings")),
            };
            Ok(Kind::Stdio { command, args, env: strings(at, "env", e)?, cwd: string("cwd")? })
        }
        (None, Some(url)) => {
            if transport == Some("stdio") {
                return err(format!("{at}.type: \"stdio\" needs a \"command\", not a \"url\""));
            }
            for k in ["args", "env", "cwd"] {
                only(k, "a stdio server (one with \"command\")")?;
            }
            Ok(Kind::Http { url, headers: strings(at, "headers", e)?, transport })
        }
    }
}

/// An object of strings (`env`, `headers`).
fn strings(at: &str, k: &str, e: &Map<String, Value>) -> Result<BTreeMap<String, String>, ConfigError> {
    match e.get(k) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(n, v)| match v {
                Value::String(s) => Ok((n.clone(), s.clone())),
                _ => err(format!("{at}.{k}.{n}: must be a string")),
            })
            .collect(),
        Some(_) => err(format!("{at}.{k}: must be an object of strings")),
    }
}

/// serde_json's message without its " at line L column C" (said before it).
fn bare(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(p) => s[..p].to_string(),
        None => s,
    }
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `key = { K = "v", … }`, if not empty; a key that is not a bare TOML key is quoted.
fn table(out: &mut String, key: &str, m: &BTreeMap<String, String>) {
    if m.is_empty() {
        return;
    }
    let bare = |k: &str| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let items: Vec<String> =
        m.iter().map(|(k, v)| format!("{} = {}", if bare(k) { k.clone() } else { quote(k) }, quote(v))).collect();
    let _ = writeln!(out, "{key} = {{ {} }}", items.join(", "));
}

#[cfg(test)]
mod tests;
