//! `[tasks] store` and what each backend needs (`path`, `redis_url`, `redis_prefix`,
//! `durability`), and how long a `tasks/result` rides out a store failure
//! (`store_outage_wait`).

use super::error::{ConfigError, err};
use super::expand::expand;
use super::raw::RawTasks;
use super::settings::*;
use std::path::Path;
use std::time::Duration;

/// The store of a config without a `[tasks]` table: a file beside the config, if it was read
/// from one, else memory.
pub(super) fn default_store(base: Option<&Path>) -> StoreKind {
    match base {
        Some(b) => StoreKind::File(b.join(DEFAULT_DATA_DIR)),
        None => StoreKind::Memory,
    }
}

/// `[tasks] store` and its keys; `base` is the config file's directory, if it was read from one.
pub(super) fn store_kind(
    t: &RawTasks,
    base: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<StoreKind, ConfigError> {
    let (store, path) = (t.store.as_deref(), t.path.as_deref());
    if store != Some("redis") {
        if t.redis_url.is_some() {
            return err("tasks.redis_url: only a \"redis\" store has a redis_url");
        }
        if t.redis_prefix.is_some() {
            return err("tasks.redis_prefix: only a \"redis\" store has a redis_prefix");
        }
    }
    let dir = |p: &str| match base {
        Some(b) if Path::new(p).is_relative() => b.join(p),
        _ => p.into(),
    };
    match (store, path) {
        (Some("memory"), None) => Ok(StoreKind::Memory),
        (Some("memory"), Some(_)) => err("tasks.path: only a \"file\" store has a path (store = \"memory\")"),
        (Some("redis"), Some(_)) => err("tasks.path: only a \"file\" store has a path (store = \"redis\")"),
        (Some("redis"), None) => {
            let Some(url) = t.redis_url.as_deref() else {
                return err("tasks.redis_url: a \"redis\" store needs a redis_url, e.g. \"redis://127.0.0.1:6379\"");
            };
            let url = expand("tasks.redis_url", url, env)?;
            if !(url.value.starts_with("redis://") || url.value.starts_with("valkey://")) {
                return err("tasks.redis_url: must start with redis:// (TLS is not built in)");
            }
            let prefix = t.redis_prefix.clone().unwrap_or_else(|| DEFAULT_REDIS_PREFIX.to_string());
            if prefix.is_empty() {
                return err("tasks.redis_prefix: must not be empty");
            }
            Ok(StoreKind::Redis(RedisSettings { url, prefix }))
        }
        (Some("file") | None, Some("")) => err("tasks.path: must not be empty"),
        (Some("file") | None, Some(p)) => Ok(StoreKind::File(dir(p))),
        (Some("file") | None, None) => match base {
            Some(_) => Ok(StoreKind::File(dir(DEFAULT_DATA_DIR))),
            None if store.is_none() => Ok(StoreKind::Memory),
            None => err("tasks.path: a \"file\" store needs a path when the config is not read from a file"),
        },
        (Some(other), _) => err(format!("tasks.store: \"{other}\" is not one of \"memory\", \"file\", \"redis\"")),
    }
}

/// `[tasks] durability`: `"end"` (the default) or `"interval"`, for a `file` store.
pub(super) fn durability(t: &RawTasks) -> Result<Durability, ConfigError> {
    if let (Some(_), Some(store @ ("memory" | "redis"))) = (&t.durability, t.store.as_deref()) {
        return err(format!("tasks.durability: only a \"file\" store has a durability (store = \"{store}\")"));
    }
    match t.durability.as_deref() {
        None | Some("end") => Ok(Durability::End),
        Some("interval") => Ok(Durability::Interval),
        Some(other) => err(format!("tasks.durability: {other:?} is not \"end\" or \"interval\"")),
    }
}

/// The longest `[tasks] store_outage_wait`.
pub const MAX_STORE_OUTAGE_WAIT: Duration = Duration::from_secs(600);

/// `[tasks] store_outage_wait`: how long a `tasks/result` waits for a task's end the store
/// did not take at first (from "0ms", answer at once, to "10m").
pub(super) fn store_outage_wait(t: &RawTasks) -> Result<Duration, ConfigError> {
    let key = "tasks.store_outage_wait";
    match t.store_outage_wait.as_deref() {
        None => Ok(TasksConfig::default().store_outage_wait),
        Some(s) => match super::duration::parse_duration(s) {
            Some(d) if d <= MAX_STORE_OUTAGE_WAIT => Ok(d),
            Some(_) => err(format!("{key}: \"{s}\" is longer than \"10m\"")),
            None => err(format!("{key}: \"{s}\" is not a duration such as \"0ms\", \"30s\" or \"2m\"")),
        },
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Durability, StoreKind};
    use std::time::Duration;

    const UP: &str = "[[upstream]]\nname=\"a\"\nbuiltin=\"demo\"\n";

    fn parse(tasks: &str) -> Result<Config, crate::config::ConfigError> {
        let env = |k: &str| (k == "REDIS_PW").then(|| "pw".to_string());
        Config::parse(&format!("[tasks]\n{tasks}\n{UP}"), &env)
    }

    #[test]
    fn a_redis_store_needs_its_url_and_takes_a_prefix() {
        let c = parse("store = \"redis\"\nredis_url = \"redis://:${REDIS_PW}@127.0.0.1:6379\"").unwrap();
        let StoreKind::Redis(r) = &c.tasks.store else { panic!("{:?}", c.tasks.store) };
        assert_eq!(r.url.value, "redis://:pw@127.0.0.1:6379");
        assert_eq!(r.prefix, "taskgate:");
        assert!(!format!("{:?}", c.tasks.store).contains("pw@"), "the password is not printed");
        let c = parse("store = \"redis\"\nredis_url = \"redis://h\"\nredis_prefix = \"eu1:\"").unwrap();
        assert!(matches!(&c.tasks.store, StoreKind::Redis(r) if r.prefix == "eu1:"));
        for (text, key) in [
            ("store = \"redis\"", "tasks.redis_url"),
            ("store = \"redis\"\nredis_url = \"http://h\"", "tasks.redis_url"),
            ("store = \"redis\"\nredis_url = \"redis://h\"\nredis_prefix = \"\"", "tasks.redis_prefix"),
            ("store = \"redis\"\nredis_url = \"redis://h\"\npath = \"x\"", "tasks.path"),
            ("store = \"memory\"\nredis_url = \"redis://h\"", "tasks.redis_url"),
            ("store = \"sql\"", "tasks.store"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.0.starts_with(key), "{key}: {e}");
        }
    }

    #[test]
    fn store_outage_wait_is_30s_unless_set_and_at_most_10m() {
        assert_eq!(parse("").unwrap().tasks.store_outage_wait, Duration::from_secs(30));
        assert_eq!(parse("store_outage_wait = \"0ms\"").unwrap().tasks.store_outage_wait, Duration::ZERO);
        assert_eq!(parse("store_outage_wait = \"10m\"").unwrap().tasks.store_outage_wait, Duration::from_secs(600));
        for text in ["store_outage_wait = \"11m\"", "store_outage_wait = \"soon\""] {
            let e = parse(text).unwrap_err();
            assert!(e.0.starts_with("tasks.store_outage_wait"), "{e}");
        }
    }

    #[test]
    fn durability_is_end_unless_interval_is_asked_for() {
        assert_eq!(parse("").unwrap().tasks.durability, Durability::End);
        assert_eq!(parse("durability = \"end\"").unwrap().tasks.durability, Durability::End);
        assert_eq!(parse("durability = \"interval\"").unwrap().tasks.durability, Durability::Interval);
        for text in ["durability = \"never\"", "store = \"memory\"\ndurability = \"end\""] {
            let e = parse(text).unwrap_err();
            assert!(e.0.starts_with("tasks.durability"), "{e}");
        }
    }
}
