//! The byte bounds of what the gateway keeps of a task and sends in one listing (`[tasks]
//! max_tool_name_bytes`, `max_status_message_bytes`, `max_list_page_bytes`): raw values
//! checked against their ranges here, with errors that name the key.

use super::error::{ConfigError, err};
use super::raw::RawTasks;
use super::settings::TasksConfig;

/// The ranges each key takes.
pub const TOOL_NAME_RANGE: (usize, usize) = (16, 64 * 1024);
pub const STATUS_MESSAGE_RANGE: (usize, usize) = (64, 1024 * 1024);
pub const LIST_PAGE_RANGE: (usize, usize) = (4096, 256 * 1024 * 1024);
pub const TASK_ID_RANGE: (usize, usize) = (64, 64 * 1024);

/// `max_tool_name_bytes`, `max_status_message_bytes` and `max_list_page_bytes` of `[tasks]`
/// `t`, each checked (or `d`'s).
pub(super) fn of(t: &RawTasks, d: &TasksConfig) -> Result<(usize, usize, usize), ConfigError> {
    Ok((
        bytes_within("tasks.max_tool_name_bytes", t.max_tool_name_bytes, d.max_tool_name_bytes, TOOL_NAME_RANGE)?,
        bytes_within(
            "tasks.max_status_message_bytes",
            t.max_status_message_bytes,
            d.max_status_message_bytes,
            STATUS_MESSAGE_RANGE,
        )?,
        bytes_within("tasks.max_list_page_bytes", t.max_list_page_bytes, d.max_list_page_bytes, LIST_PAGE_RANGE)?,
    ))
}

/// `v` (or `default`), within `range` (inclusive); the error names `key`.
pub(super) fn bytes_within(
    key: &str,
    v: Option<u64>,
    default: usize,
    (min, max): (usize, usize),
) -> Result<usize, ConfigError> {
    match v {
        None => Ok(default),
        Some(n) if n < min as u64 || n > max as u64 => err(format!("{key}: {n} is outside {min} ..= {max} (bytes)")),
        Some(n) => Ok(n as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_their_range_are_refused_naming_the_key() {
        assert_eq!(bytes_within("tasks.k", None, 7, (1, 10)).unwrap(), 7);
        assert_eq!(bytes_within("tasks.k", Some(10), 7, (1, 10)).unwrap(), 10);
        for bad in [0, 11, u64::MAX] {
            assert!(bytes_within("tasks.k", Some(bad), 7, (1, 10)).unwrap_err().0.starts_with("tasks.k: "));
        }
        let parse = |t: &str| {
            super::super::Config::parse(&format!("{t}\n[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\n"), &|_| None)
        };
        let c = parse("[tasks]\nmax_tool_name_bytes = 100").unwrap();
        assert_eq!((c.tasks.max_tool_name_bytes, c.tasks.max_status_message_bytes), (100, 4096));
        let e = parse("[tasks]\nmax_status_message_bytes = 10").unwrap_err();
        assert!(e.0.starts_with("tasks.max_status_message_bytes: "), "{}", e.0);
    }

    /// Here as it is checked where the upstreams are: `upstream[].max_in_flight_per_client`.
    #[test]
    fn a_clients_share_is_at_least_one_and_at_most_max_in_flight() {
        let parse = |t: &str| super::super::Config::parse(t, &|_| None);
        let c = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nshare = true\n").unwrap();
        assert_eq!(c.upstreams[0].client_share(c.server.max_in_flight), 128, "half of max_in_flight by default");
        let e = parse("[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nmax_in_flight_per_client = 0\n").unwrap_err();
        assert!(e.0.starts_with("upstream \"d\".max_in_flight_per_client"), "{}", e.0);
        let e = parse("[server]\nmax_in_flight = 4\n[[upstream]]\nname = \"d\"\nbuiltin = \"demo\"\nmax_in_flight_per_client = 5\n")
            .unwrap_err();
        assert!(e.0.starts_with("upstream \"d\".max_in_flight_per_client"), "{}", e.0);
    }
}
