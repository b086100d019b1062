//! `[upstream.long_calls]`: a plain call of a client without tasks that outlasts
//! `defer_after` is answered in time with an ordinary result naming a hosted task, and
//! the gateway's own tools (`<tool_prefix>wait|status|cancel`) reach it. Parsed and checked
//! here; the behaviour is the session's (`gateway::session::long_calls`).

use super::duration::{fmt_duration, parse_duration};
use super::error::ConfigError;
use super::glob::glob_match;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLongCalls {
    pub(super) defer_after: Option<String>,
    pub(super) tools: Option<Vec<String>>,
    pub(super) wait_max: Option<String>,
    pub(super) tool_prefix: Option<String>,
    pub(super) keepalive: Option<String>,
}

/// The effective `[upstream.long_calls]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongCalls {
    /// How long a plain call runs before it is answered with a deferred result; `None`:
    /// never (the table's feature is off).
    pub defer_after: Option<Duration>,
    /// Glob patterns (`*`, `?`) of the tools whose calls may be deferred.
    pub tools: Vec<String>,
    /// The longest one call of the wait tool blocks.
    pub wait_max: Duration,
    /// What the gateway's tools' names start with.
    pub tool_prefix: String,
    /// While a deferrable call's upstream is silent, a client that sent a progress token
    /// gets a progress notification this often; `None`: never.
    pub keepalive: Option<Duration>,
}

impl Default for LongCalls {
    fn default() -> Self {
        LongCalls {
            defer_after: None,
            tools: vec!["*".into()],
            wait_max: Duration::from_secs(40),
            tool_prefix: "taskgate_".into(),
            keepalive: Some(Duration::from_secs(10)),
        }
    }
}

/// The longest `defer_after` and `wait_max`: a client waits that long for an answer, and
/// clients' own timeouts are minutes at most.
const MAX_WAIT: Duration = Duration::from_secs(600);

/// The gateway's tools, by what follows the prefix.
pub const LONG_CALL_TOOLS: [&str; 3] = ["wait", "status", "cancel"];

impl LongCalls {
    /// Whether calls may be deferred at all.
    pub fn on(&self) -> bool {
        self.defer_after.is_some()
    }

    /// Whether a call of `tool` may be deferred.
    pub fn covers(&self, tool: &str) -> bool {
        self.on() && self.tools.iter().any(|p| glob_match(p, tool))
    }

    /// The gateway tool `name` is, if it is one (`wait`, `status` or `cancel`).
    pub fn gateway_tool<'a>(&self, name: &'a str) -> Option<&'a str> {
        let rest = name.strip_prefix(self.tool_prefix.as_str())?;
        LONG_CALL_TOOLS.contains(&rest).then_some(rest)
    }

    /// The gateway tool's full name.
    pub fn tool_name(&self, which: &str) -> String {
        format!("{}{which}", self.tool_prefix)
    }
}

fn bounded(key: &str, v: Option<String>, default: Duration, zero_allowed: bool) -> Result<Duration, ConfigError> {
    let Some(s) = v else { return Ok(default) };
    match parse_duration(&s) {
        Some(d) if d > MAX_WAIT => Err(ConfigError(format!(
            "{key}: \"{s}\" is longer than the {} a client is ever kept waiting",
            fmt_duration(MAX_WAIT)
        ))),
        Some(d) if !d.is_zero() || zero_allowed => Ok(d),
        _ => {
            Err(ConfigError(format!("{key}: \"{s}\" is not a positive duration such as \"500ms\", \"45s\" or \"2m\"")))
        }
    }
}

/// `[upstream.long_calls]` of the upstream at `at` (`upstream[0]`); `hosting` says whether
/// the upstream hosts tasks at all (deferred calls run as hosted tasks).
pub(super) fn long_calls(at: &str, raw: Option<RawLongCalls>, hosting: bool) -> Result<LongCalls, ConfigError> {
    let d = LongCalls::default();
    let Some(raw) = raw else { return Ok(d) };
    let key = |k: &str| format!("{at}.long_calls.{k}");
    let defer_after = match raw.defer_after {
        None => None,
        Some(s) => Some(bounded(&key("defer_after"), Some(s), Duration::ZERO, false)?),
    };
    let tool_prefix = raw.tool_prefix.unwrap_or(d.tool_prefix);
    // A tool name is 1 to 128 of these (2025-11-25 `Tool.name`); the longest suffix is 6.
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if tool_prefix.is_empty() || tool_prefix.len() > 120 || !tool_prefix.chars().all(valid) {
        return Err(ConfigError(format!(
            "{}: \"{tool_prefix}\" must be 1 to 120 of A-Z, a-z, 0-9, '_', '-' and '.' (tool names are made from it)",
            key("tool_prefix")
        )));
    }
    let tools = raw.tools.unwrap_or(d.tools);
    let keepalive = bounded(&key("keepalive"), raw.keepalive, d.keepalive.unwrap_or_default(), true)?;
    let c = LongCalls {
        defer_after,
        tools,
        wait_max: bounded(&key("wait_max"), raw.wait_max, d.wait_max, false)?,
        tool_prefix,
        keepalive: (!keepalive.is_zero()).then_some(keepalive),
    };
    if c.on() && !hosting {
        return Err(ConfigError(format!(
            "{}: deferred calls run as hosted tasks, and this upstream's tasks.hosted is \"never\"",
            key("defer_after")
        )));
    }
    // The gateway's tools must not be deferrable calls themselves: a pattern naming one
    // exactly is a mistake worth refusing.
    for t in LONG_CALL_TOOLS {
        let name = c.tool_name(t);
        if c.tools.iter().any(|p| p == &name) {
            return Err(ConfigError(format!("{}: \"{name}\" is the gateway's own tool", key("tools"))));
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str, hosting: bool) -> Result<LongCalls, ConfigError> {
        let raw: RawLongCalls = toml::from_str(toml_text).unwrap();
        long_calls("upstream[0]", Some(raw), hosting)
    }

    #[test]
    fn off_unless_defer_after_is_given() {
        assert!(!LongCalls::default().on());
        let c = parse("tools = [\"slow\"]", true).unwrap();
        assert!(!c.on() && !c.covers("slow"));
        let c = parse("defer_after = \"45s\"\ntools = [\"slow*\"]", true).unwrap();
        assert_eq!(c.defer_after, Some(Duration::from_secs(45)));
        assert!(c.covers("slower") && !c.covers("echo"));
        assert_eq!(c.gateway_tool("taskgate_wait"), Some("wait"));
        assert_eq!(c.gateway_tool("taskgate_waiting"), None);
        assert_eq!(c.gateway_tool("wait"), None);
    }

    #[test]
    fn refusals_name_the_key() {
        let e = parse("defer_after = \"0s\"", true).unwrap_err().0;
        assert!(e.contains("upstream[0].long_calls.defer_after"), "{e}");
        let e = parse("defer_after = \"1h\"", true).unwrap_err().0;
        assert!(e.contains("defer_after") && e.contains("longer"), "{e}");
        let e = parse("defer_after = \"1s\"", false).unwrap_err().0;
        assert!(e.contains("never"), "{e}");
        let e = parse("tool_prefix = \"tg wait\"", true).unwrap_err().0;
        assert!(e.contains("tool_prefix"), "{e}");
        assert!(parse("tool_prefix = \"\"", true).is_err());
        let e = parse("defer_after = \"1s\"\ntools = [\"taskgate_wait\"]", true).unwrap_err().0;
        assert!(e.contains("gateway's own tool"), "{e}");
        assert_eq!(parse("keepalive = \"0s\"", true).unwrap().keepalive, None);
        assert!(parse("wait_max = \"0s\"", true).is_err());
    }
}
