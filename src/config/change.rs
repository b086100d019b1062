//! What a reload changes: the difference between the running config and a new one, in the
//! terms the reload applies it (`downstream::reload`) and `taskgate check` shows it.
//!
//! - Upstreams are matched by name: added, removed, changed (anything its links or sessions
//!   are made from), or changed in their operator's policy only (`[upstream.tools]`,
//!   `[upstream.limits]`), which applies to running sessions at once.
//! - `[server.limits]` and `[server.auth]` (its token and key files read again) apply at
//!   once; `[server.tls]` (its files are read again on every reload, so renewed certificates
//!   are taken) applies to new connections.
//! - Every other `[server]` and `[tasks]` key is read once, at start: a change to one is
//!   reported as needing a restart, and the running value stays.

use super::settings::{Config, UpstreamConfig};
use std::fmt::Write as _;

/// How a new config differs from the running one.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ConfigChange {
    /// Upstreams served from now on.
    pub added: Vec<String>,
    /// Upstreams no longer served: their new requests get 404, their sessions end once the
    /// requests in flight are answered, their hosted tasks run to their end.
    pub removed: Vec<String>,
    /// Upstreams whose links or sessions are made differently: new sessions get the new
    /// settings (and new links); running sessions keep theirs until they end.
    pub changed: Vec<String>,
    /// Upstreams whose tool policy or rate limit alone changed: applied to every session at once.
    pub policy: Vec<String>,
    /// `[server.limits]` changed (applied at once).
    pub server_limits: bool,
    /// `[server.auth]` changed, its token and key files included (applied at once).
    pub auth: bool,
    /// `[server.tls]` is set (its certificate and key are read again).
    pub tls: bool,
    /// Keys whose new value takes effect at the next restart only.
    pub restart: Vec<String>,
}

impl ConfigChange {
    pub fn between(old: &Config, new: &Config) -> ConfigChange {
        let mut change = ConfigChange::default();
        for u in &new.upstreams {
            match old.upstream(&u.name) {
                None => change.added.push(u.name.clone()),
                Some(was) if !same_sessions(was, u) => change.changed.push(u.name.clone()),
                Some(was) if was != u => change.policy.push(u.name.clone()),
                Some(_) => {}
            }
        }
        change.removed =
            old.upstreams.iter().filter(|u| new.upstream(&u.name).is_none()).map(|u| u.name.clone()).collect();
        change.server_limits = old.server.rate_limit != new.server.rate_limit;
        change.auth = old.server.auth != new.server.auth;
        change.tls = new.server.tls.is_some();
        // What a reload cannot apply is what differs between the new config and the one it
        // would be in effect.
        let effect = in_effect(old, new);
        change.restart = changed_fields("server", &format!("{:#?}", effect.server), &format!("{:#?}", new.server));
        change.restart.extend(changed_fields("tasks", &format!("{:#?}", old.tasks), &format!("{:#?}", new.tasks)));
        change
    }

    /// Whether the new config changes nothing the reload applies or reports.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.changed.is_empty()
            && self.policy.is_empty()
            && !self.server_limits
            && !self.auth
            && self.restart.is_empty()
    }

    /// One line per kind of change, as the reload logs them and `taskgate check` prints them.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        let names = |v: &[String]| v.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        if !self.added.is_empty() {
            let _ = writeln!(out, "added upstreams: {} (served at once)", names(&self.added));
        }
        if !self.removed.is_empty() {
            let _ = writeln!(
                out,
                "removed upstreams: {} (new requests get 404; their sessions end once what is in flight is answered; \
                 hosted tasks run to their end)",
                names(&self.removed)
            );
        }
        if !self.changed.is_empty() {
            let _ = writeln!(
                out,
                "changed upstreams: {} (new sessions get the new settings and new links; running sessions keep theirs)",
                names(&self.changed)
            );
        }
        if !self.policy.is_empty() {
            let _ = writeln!(
                out,
                "tool policy or limits changed: {} (applied to every session at once)",
                names(&self.policy)
            );
        }
        if self.server_limits {
            let _ = writeln!(out, "server.limits changed (applied at once)");
        }
        if self.auth {
            let _ = writeln!(out, "server.auth changed (applied at once to every request)");
        }
        if self.tls {
            let _ = writeln!(out, "server.tls: the certificate and key read again (new connections get them)");
        }
        if !self.restart.is_empty() {
            let _ = writeln!(out, "needs a restart (the running value stays): {}", self.restart.join(", "));
        }
        if out.is_empty() {
            out.push_str("no change\n");
        }
        out
    }
}

/// The config in effect after reloading `running` to `new`: `new`'s upstreams and what applies
/// live (`[server.limits]`, `[server.auth]`, `[server.tls]` unless it is turned on or off),
/// `running`'s values for everything a restart alone changes.
pub fn in_effect(running: &Config, new: &Config) -> Config {
    let mut effect = running.clone();
    effect.upstreams = new.upstreams.clone();
    effect.server.rate_limit = new.server.rate_limit;
    effect.server.auth = new.server.auth.clone();
    if effect.server.tls.is_some() == new.server.tls.is_some() {
        effect.server.tls = new.server.tls.clone();
    }
    effect
}

/// Whether sessions and links of `a` and `b` are made alike: all but the operator's policy
/// (tools, limits), which running sessions read at each call.
pub fn same_sessions(a: &UpstreamConfig, b: &UpstreamConfig) -> bool {
    let mut b = b.clone();
    b.tools = a.tools.clone();
    b.rate_limit = a.rate_limit;
    *a == b
}

/// The top-level fields of two pretty-printed (`{:#?}`) structs that differ, as
/// `table.field`: every field is compared, new ones included, with no list to keep.
fn changed_fields(table: &str, old: &str, new: &str) -> Vec<String> {
    let (old, new) = (fields(old), fields(new));
    let mut out: Vec<String> = new
        .iter()
        .filter(|(k, v)| old.iter().find(|(o, _)| o == k).is_none_or(|(_, w)| w != v))
        .map(|(k, _)| format!("{table}.{k}"))
        .collect();
    out.extend(old.iter().filter(|(k, _)| !new.iter().any(|(n, _)| n == k)).map(|(k, _)| format!("{table}.{k}")));
    out
}

/// `{:#?}` output split into its top-level fields (four spaces in) and their text.
fn fields(pretty: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in pretty.lines() {
        let top = line.strip_prefix("    ").filter(|l| !l.starts_with(' '));
        match top.and_then(|l| l.split_once(": ")) {
            Some((name, rest)) => out.push((name.to_string(), rest.to_string())),
            None => {
                if let Some((_, text)) = out.last_mut() {
                    text.push_str(line);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, &|_| None).unwrap()
    }

    const BASE: &str = r#"
[server]
max_sessions = 10
[[upstream]]
name = "a"
builtin = "demo"
[[upstream]]
name = "b"
builtin = "demo"
[[upstream]]
name = "c"
builtin = "demo"
"#;

    #[test]
    fn upstreams_are_added_removed_changed_or_changed_in_policy_only() {
        let old = parse(BASE);
        let new = parse(
            r#"
[server]
max_sessions = 20
[server.limits]
calls_per_minute = 60
[[upstream]]
name = "a"
builtin = "demo"
request_timeout = "7s"
[[upstream]]
name = "b"
builtin = "demo"
[upstream.tools]
deny = ["x"]
[[upstream]]
name = "d"
builtin = "demo"
"#,
        );
        let c = ConfigChange::between(&old, &new);
        assert_eq!(c.added, ["d"]);
        assert_eq!(c.removed, ["c"]);
        assert_eq!(c.changed, ["a"]);
        assert_eq!(c.policy, ["b"]);
        assert!(c.server_limits);
        assert_eq!(
            c.restart,
            [
                "server.max_sessions",
                "server.max_links",
                "server.max_sessions_per_client",
                "server.max_links_per_client"
            ],
            "max_links follows max_sessions, and the per-client caps both"
        );
        let text = c.describe();
        for want in
            ["added upstreams: \"d\"", "removed upstreams: \"c\"", "changed upstreams: \"a\"", "needs a restart"]
        {
            assert!(text.contains(want), "{text}");
        }
    }

    #[test]
    fn the_same_config_changes_nothing() {
        let c = ConfigChange::between(&parse(BASE), &parse(BASE));
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(c.describe(), "no change\n");
    }

    #[test]
    fn a_nested_server_key_is_named_by_its_table_field() {
        let new = BASE.replace("[server]\n", "[server]\nsession_idle_timeout = \"5m\"\n");
        let new = format!("{new}\n[tasks]\nmax_tasks = 7\n");
        let c = ConfigChange::between(&parse(BASE), &parse(&new));
        assert_eq!(c.restart, ["server.session_idle_timeout", "tasks.max_tasks"]);
    }
}
