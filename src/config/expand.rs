//! `${VAR}` references in config values, read from the environment at load time, and how
//! values that may hold secrets are shown: a value from the environment never, a URL
//! without its user-info and query.

use super::error::{ConfigError, err};
use std::collections::BTreeMap;

/// A config value that may have come from the environment; printed redacted if so. Two
/// are equal when their values are (what a reload compares).
#[derive(Clone, PartialEq)]
pub struct Secret {
    pub value: String,
    pub from_env: bool,
    /// As written in the config, `${VAR}` references unexpanded.
    pub written: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from_env { f.write_str("\"<from environment>\"") } else { write!(f, "{:?}", self.value) }
    }
}

pub(super) fn expand_map(
    key: &str,
    m: BTreeMap<String, String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, Secret)>, ConfigError> {
    m.into_iter()
        .map(|(k, v)| {
            let s = expand(&format!("{key}.{k}"), &v, env)?;
            Ok((k, s))
        })
        .collect()
}

/// Replaces each `${VAR}` with the environment's value; a missing variable is an error.
pub(super) fn expand(key: &str, v: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Secret, ConfigError> {
    let mut out = String::new();
    let mut rest = v;
    let mut from_env = false;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return err(format!("{key}: unterminated \"${{\" (write ${{VAR}})"));
        };
        let var = &after[..end];
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return err(format!("{key}: \"${{{var}}}\" is not a valid environment variable reference"));
        }
        match env(var) {
            Some(val) => out.push_str(&val),
            None => return err(format!("{key}: environment variable {var} is not set")),
        }
        from_env = true;
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Secret { value: out, from_env, written: v.to_string() })
}

/// A URL as it may be shown (errors, logs, `taskgate check`): scheme, host, port and path;
/// user-info becomes `***@` and a query `?…`, as either may hold a secret. Works on text
/// that is not a valid URL too (a config template), never showing more than that.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(p) => (&url[..p + 3], &url[p + 3..]),
        None => ("", url),
    };
    let rest = rest.split('#').next().unwrap_or("");
    let (before_query, query) = match rest.find('?') {
        Some(p) => (&rest[..p], true),
        None => (rest, false),
    };
    let auth_end = before_query.find('/').unwrap_or(before_query.len());
    let (authority, path) = before_query.split_at(auth_end);
    let mut out = String::from(scheme);
    match authority.rfind('@') {
        Some(at) => {
            out.push_str("***@");
            out.push_str(&authority[at + 1..]);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
    if query {
        out.push_str("?…");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Transport};

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, &|k| (k == "TOKEN").then(|| "s3cret".to_string()))
    }

    #[test]
    fn env_references_in_url_and_args_expand_and_are_redacted() {
        let c = parse(
            "[[upstream]]\nname=\"a\"\nurl=\"https://u:${TOKEN}@h:8443/mcp?api_key=${TOKEN}\"\n\
             [[upstream]]\nname=\"b\"\ncommand=\"srv\"\nargs=[\"--plain\", \"--token=${TOKEN}\"]\n",
        )
        .unwrap();
        let Transport::Http { url, .. } = &c.upstreams[0].transport else { panic!() };
        assert_eq!(url.value, "https://u:s3cret@h:8443/mcp?api_key=s3cret");
        let Transport::Stdio { args, .. } = &c.upstreams[1].transport else { panic!() };
        let args: Vec<&str> = args.iter().map(|a| a.value.as_str()).collect();
        assert_eq!(args, ["--plain", "--token=s3cret"]);
        let shown = c.describe();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("https://***@h:8443/mcp?…"), "{shown}");
        assert!(shown.contains("--plain"), "{shown}");
        for (text, key) in [
            ("url=\"https://h/mcp?k=${NOPE}\"", "upstream \"a\".url: environment variable NOPE is not set"),
            (
                "command=\"x\"\nargs=[\"a\", \"${NOPE}\"]",
                "upstream \"a\".args[1]: environment variable NOPE is not set",
            ),
        ] {
            let e = parse(&format!("[[upstream]]\nname=\"a\"\n{text}")).err().unwrap();
            assert!(e.0.contains(key), "{e}");
        }
    }

    #[test]
    fn literal_user_info_and_queries_are_not_shown() {
        let c = parse("[[upstream]]\nname=\"a\"\nurl=\"http://user:pw@127.0.0.1:9/mcp/x?api_key=k1#f\"").unwrap();
        let shown = c.describe();
        assert!(!shown.contains("pw") && !shown.contains("k1"), "{shown}");
        assert!(shown.contains("http://***@127.0.0.1:9/mcp/x?…"), "{shown}");
        assert_eq!(redact_url("https://h/p"), "https://h/p");
        assert_eq!(redact_url("https://h?q=1"), "https://h?…");
        assert_eq!(redact_url("https://a@b@h/p"), "https://***@h/p");
    }
}
