//! The configuration reference (docs/configuration.md), written by the code: every key
//! from the raw types (`schema`), its default from the effective settings of a minimal
//! config (what `taskgate check` prints), and its bounds and meaning from `keys`.

mod keys;
mod tables;

use super::schema::{self, Kind};
use super::settings::Config;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The configuration reference as Markdown: one section per table, one row per key.
pub fn markdown() -> String {
    let keys = schema::keys();
    let defaults = defaults();
    let mut out = String::new();
    for (table, kind) in keys.iter().filter(|(_, k)| matches!(k, Kind::Table | Kind::Tables)) {
        let heading = match kind {
            Kind::Tables => format!("[[{table}]]"),
            _ => format!("[{table}]"),
        };
        let _ = writeln!(out, "### `{heading}`\n");
        if let Some((_, intro)) = tables::TABLES.iter().find(|(t, _)| t == table) {
            let _ = writeln!(out, "{intro}\n");
        }
        out.push_str("| key | type | default | bounds | what it does |\n|---|---|---|---|---|\n");
        let children = keys.iter().filter(|(k, kind)| {
            k.strip_prefix(table.as_str()).and_then(|r| r.strip_prefix('.')).is_some_and(|r| !r.contains('.'))
                && !matches!(kind, Kind::Table)
        });
        for (key, kind) in children {
            let name = &key[table.len() + 1..];
            let doc = keys::KEYS.iter().find(|d| d.key == key);
            let default = match doc.and_then(|d| d.default) {
                Some(d) => d.to_string(),
                None => defaults.get(key.as_str()).map(|v| format!("`{v}`")).unwrap_or_else(|| "none".into()),
            };
            let (bounds, meaning) = match doc {
                Some(d) => (d.bounds, d.meaning),
                None => ("", "*not described yet: add it to `src/config/reference/keys.rs`*"),
            };
            let _ = writeln!(out, "| `{name}` | {} | {default} | {bounds} | {meaning} |", kind.describe());
        }
        out.push('\n');
    }
    out
}

/// The keys `schema::keys` finds that have no entry in the reference's table (but for the
/// tables, and `[[upstream]]`, which have their sections), and the entries that name no key
/// (a key renamed or removed).
pub fn undescribed() -> (Vec<String>, Vec<&'static str>) {
    let keys = schema::keys();
    let missing = keys
        .iter()
        .filter(|(k, kind)| !matches!(kind, Kind::Table) && k.contains('.') && !keys::KEYS.iter().any(|d| d.key == k))
        .map(|(k, _)| k.clone())
        .collect();
    let stale = keys::KEYS.iter().map(|d| d.key).filter(|d| !keys.iter().any(|(k, _)| k == d)).collect();
    (missing, stale)
}

/// Each key's value in the effective settings of a config file with one stdio upstream and
/// nothing else, read from `describe` (dotted keys, as `schema::keys` names them).
fn defaults() -> BTreeMap<String, String> {
    let text = "[[upstream]]\nname = \"example\"\ncommand = \"example-server\"\n";
    let config = Config::parse_at(text, &|_| None, Some(std::path::Path::new("."))).expect("a minimal config parses");
    let mut out = BTreeMap::new();
    let mut table = String::new();
    for line in config.describe().lines() {
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.trim_start_matches('[');
            table = name[..name.find(']').unwrap_or(name.len())].to_string();
        } else if let Some((key, value)) = line.split_once(" = ") {
            out.insert(format!("{table}.{key}"), value.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_come_from_the_effective_settings() {
        let d = super::defaults();
        assert_eq!(d.get("server.listen").map(String::as_str), Some("\"127.0.0.1:8700\""));
        assert_eq!(d.get("upstream.tasks.ttl").map(String::as_str), Some("\"10m\""));
        assert_eq!(d.get("server.task_page.max_viewers_per_principal").map(String::as_str), Some("4"));
    }
}
