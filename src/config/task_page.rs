//! `[server.task_page]`: the live task page at `/tasks` (`downstream::task_page`): whether it
//! is served, which principals see and cancel every task, how often a viewer's snapshot is
//! looked at again, how many viewers may watch at once, how large a snapshot may be, and how
//! long a viewer that does not read keeps its place. Raw, checked and defaulted here.

use super::duration::parse_duration;
use super::error::{ConfigError, err};
use serde::Deserialize;
use std::time::Duration;

/// `[server.task_page]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTaskPage {
    pub(super) enabled: Option<bool>,
    pub(super) operators: Option<Vec<String>>,
    pub(super) refresh: Option<String>,
    pub(super) max_viewers: Option<u64>,
    pub(super) max_viewers_per_principal: Option<u64>,
    pub(super) max_snapshot_bytes: Option<u64>,
    pub(super) unread_timeout: Option<String>,
}

/// The task page's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPageConfig {
    /// Whether `/tasks` is served at all (404 when not).
    pub enabled: bool,
    /// Principals (with `[server.auth]` on) who see and may cancel every task; any other
    /// principal sees its own.
    pub operators: Vec<String>,
    /// How often a viewer's snapshot is taken again (it is sent when it changed).
    pub refresh: Duration,
    /// Viewers (open `/tasks/events` streams) at once; past it 503.
    pub max_viewers: usize,
    /// Of those, the most one principal may hold (with `[server.auth]` on), so that one
    /// cannot take every place; past it 503.
    pub max_viewers_per_principal: usize,
    /// The most bytes of task rows one snapshot carries: past it the rest are left out and
    /// the snapshot says `truncated`.
    pub max_snapshot_bytes: usize,
    /// A viewer whose stream has taken nothing for this long while a snapshot waited for
    /// it (it does not read) is dropped, and its place given back.
    pub unread_timeout: Duration,
}

impl Default for TaskPageConfig {
    fn default() -> Self {
        TaskPageConfig {
            enabled: true,
            operators: Vec::new(),
            refresh: Duration::from_millis(500),
            max_viewers: 16,
            max_viewers_per_principal: 4,
            max_snapshot_bytes: 4 * 1024 * 1024,
            unread_timeout: Duration::from_secs(30),
        }
    }
}

/// The most entries `operators` may have.
pub const MAX_OPERATORS: usize = 256;
/// The range of `max_snapshot_bytes`.
pub const MIN_SNAPSHOT_BYTES: usize = 4096;
pub const MAX_SNAPSHOT_BYTES: usize = 256 * 1024 * 1024;
/// The most viewers `max_viewers` may allow.
pub const MAX_VIEWERS: usize = 4096;

pub(super) fn task_page(raw: Option<RawTaskPage>) -> Result<TaskPageConfig, ConfigError> {
    let d = TaskPageConfig::default();
    let Some(raw) = raw else { return Ok(d) };
    let operators = raw.operators.unwrap_or_default();
    if operators.len() > MAX_OPERATORS {
        return err(format!(
            "server.task_page.operators: {} entries, more than the limit of {MAX_OPERATORS}",
            operators.len()
        ));
    }
    if let Some(bad) = operators.iter().find(|o| o.is_empty() || o.chars().any(char::is_control)) {
        return err(format!(
            "server.task_page.operators: {bad:?} is not a principal name (empty, or with control characters)"
        ));
    }
    let refresh = match raw.refresh {
        None => d.refresh,
        Some(s) => match parse_duration(&s) {
            Some(r) if r >= Duration::from_millis(50) && r <= Duration::from_secs(60) => r,
            Some(_) => return err(format!("server.task_page.refresh: \"{s}\" is outside \"50ms\" ..= \"60s\"")),
            None => return err(format!("server.task_page.refresh: \"{s}\" is not a duration (e.g. \"500ms\")")),
        },
    };
    let max_viewers = match raw.max_viewers {
        None => d.max_viewers,
        Some(0) => {
            return err("server.task_page.max_viewers: must be at least 1 (use enabled = false to turn the page off)");
        }
        Some(n) if n as usize > MAX_VIEWERS => {
            return err(format!("server.task_page.max_viewers: {n} is more than the limit of {MAX_VIEWERS}"));
        }
        Some(n) => n as usize,
    };
    let max_viewers_per_principal = match raw.max_viewers_per_principal {
        None => d.max_viewers_per_principal,
        Some(0) => return err("server.task_page.max_viewers_per_principal: must be at least 1"),
        Some(n) if n as usize > MAX_VIEWERS => {
            return err(format!(
                "server.task_page.max_viewers_per_principal: {n} is more than the limit of {MAX_VIEWERS}"
            ));
        }
        Some(n) => n as usize,
    };
    let max_snapshot_bytes = match raw.max_snapshot_bytes {
        None => d.max_snapshot_bytes,
        Some(n) if !(MIN_SNAPSHOT_BYTES as u64..=MAX_SNAPSHOT_BYTES as u64).contains(&n) => {
            return err(format!(
                "server.task_page.max_snapshot_bytes: {n} is outside {MIN_SNAPSHOT_BYTES} ..= {MAX_SNAPSHOT_BYTES}"
            ));
        }
        Some(n) => n as usize,
    };
    let unread_timeout = match raw.unread_timeout {
        None => d.unread_timeout,
        Some(s) => match parse_duration(&s) {
            Some(t) if t >= Duration::from_millis(100) && t <= Duration::from_secs(3600) => t,
            Some(_) => return err(format!("server.task_page.unread_timeout: \"{s}\" is outside \"100ms\" ..= \"1h\"")),
            None => return err(format!("server.task_page.unread_timeout: \"{s}\" is not a duration (e.g. \"30s\")")),
        },
    };
    Ok(TaskPageConfig {
        max_snapshot_bytes,
        unread_timeout,
        enabled: raw.enabled.unwrap_or(d.enabled),
        operators,
        refresh,
        max_viewers,
        max_viewers_per_principal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(refresh: Option<&str>, max_viewers: Option<u64>, operators: Vec<&str>) -> Option<RawTaskPage> {
        Some(RawTaskPage {
            enabled: None,
            operators: Some(operators.into_iter().map(String::from).collect()),
            refresh: refresh.map(String::from),
            max_viewers,
            max_viewers_per_principal: None,
            max_snapshot_bytes: None,
            unread_timeout: None,
        })
    }

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(task_page(None).unwrap(), TaskPageConfig::default());
        let c = task_page(raw(Some("250ms"), Some(2), vec!["alice"])).unwrap();
        assert_eq!((c.refresh, c.max_viewers, c.operators), (Duration::from_millis(250), 2, vec!["alice".to_string()]));
        for (bad, key) in [
            (raw(Some("1ms"), None, vec![]), "server.task_page.refresh"),
            (raw(Some("soon"), None, vec![]), "server.task_page.refresh"),
            (raw(None, Some(0), vec![]), "server.task_page.max_viewers"),
            (raw(None, Some(1 << 20), vec![]), "server.task_page.max_viewers"),
            (
                raw(None, None, vec![]).map(|r| RawTaskPage { max_viewers_per_principal: Some(0), ..r }),
                "server.task_page.max_viewers_per_principal",
            ),
            (raw(None, None, vec![""]), "server.task_page.operators"),
            (
                raw(None, None, vec![]).map(|r| RawTaskPage { max_snapshot_bytes: Some(10), ..r }),
                "server.task_page.max_snapshot_bytes",
            ),
            (
                raw(None, None, vec![]).map(|r| RawTaskPage { unread_timeout: Some("2h".into()), ..r }),
                "server.task_page.unread_timeout",
            ),
            (raw(None, None, vec!["a\nb"]), "server.task_page.operators"),
        ] {
            let e = task_page(bad).unwrap_err();
            assert!(e.0.starts_with(key), "{}", e.0);
        }
    }
}
