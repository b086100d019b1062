//! `[server.limits]` and `[upstream.limits]`: how fast one client may call (token buckets).
//! Parsed and checked here; kept by the gateway (`gateway::rate_limits`).

use super::error::ConfigError;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRateLimit {
    pub(super) calls_per_minute: Option<u64>,
    pub(super) burst: Option<u64>,
}

/// One client's bucket: `calls_per_minute` sustained, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub calls_per_minute: u32,
    pub burst: u32,
}

/// The most calls per minute a bucket takes (a million: far past any upstream).
const MAX_RATE: u64 = 1_000_000;

/// The limits of the table at `at` (`server.limits`, `upstream "x".limits`); `None`: no limit.
pub(super) fn rate_limit(at: &str, raw: Option<RawRateLimit>) -> Result<Option<RateLimit>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let Some(rate) = raw.calls_per_minute else {
        if raw.burst.is_some() {
            return Err(ConfigError(format!("{at}.burst: set calls_per_minute too (absent: no limit)")));
        }
        return Ok(None);
    };
    if rate == 0 || rate > MAX_RATE {
        return Err(ConfigError(format!("{at}.calls_per_minute: {rate} is not between 1 and {MAX_RATE}")));
    }
    let burst = raw.burst.unwrap_or(rate.div_ceil(6).clamp(1, 100));
    if burst == 0 || burst > MAX_RATE {
        return Err(ConfigError(format!("{at}.burst: {burst} is not between 1 and {MAX_RATE}")));
    }
    Ok(Some(RateLimit { calls_per_minute: rate as u32, burst: burst as u32 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<RateLimit>, ConfigError> {
        rate_limit("server.limits", Some(toml::from_str(text).unwrap()))
    }

    #[test]
    fn limits_are_checked() {
        assert_eq!(
            parse("calls_per_minute = 600\nburst = 20").unwrap(),
            Some(RateLimit { calls_per_minute: 600, burst: 20 })
        );
        assert_eq!(parse("calls_per_minute = 60").unwrap().unwrap().burst, 10);
        assert_eq!(parse("").unwrap(), None);
        assert!(parse("burst = 3").unwrap_err().0.contains("server.limits.burst"));
        assert!(parse("calls_per_minute = 0").unwrap_err().0.contains("calls_per_minute"));
    }
}
