//! `[upstream.tools]`: which of an upstream's tools are offered, to everyone and per
//! principal. Parsed and checked here; kept by the gateway's live config (`gateway::live`,
//! which a reload replaces) and applied by the session at each request.

use super::error::ConfigError;
use super::glob::glob_match;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolPolicy {
    pub(super) allow: Option<Vec<String>>,
    pub(super) deny: Option<Vec<String>>,
    #[serde(rename = "for")]
    pub(super) for_principals: Option<Vec<RawToolRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolRule {
    pub(super) principals: Vec<String>,
    pub(super) allow: Option<Vec<String>>,
    pub(super) deny: Option<Vec<String>>,
}

/// Which tools a client is offered: those `allow` matches (all, if absent) and `deny` does
/// not; `deny` wins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRule {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

impl ToolRule {
    pub fn permits(&self, tool: &str) -> bool {
        let allowed = self.allow.as_ref().is_none_or(|a| a.iter().any(|p| glob_match(p, tool)));
        allowed && !self.deny.iter().any(|p| glob_match(p, tool))
    }

    /// Whether the rule lets every tool through (then nothing is checked).
    pub fn is_open(&self) -> bool {
        self.allow.as_ref().is_none_or(|a| a.iter().any(|p| p == "*")) && self.deny.is_empty()
    }
}

/// The effective `[upstream.tools]`: the rule for everyone, and the rules of named
/// principals (the first that names a principal is its rule, in place of everyone's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolPolicy {
    pub everyone: ToolRule,
    pub principals: Vec<(Vec<String>, ToolRule)>,
}

impl ToolPolicy {
    /// The rule for a client authenticated as `principal` (`None`: not authenticated);
    /// `None` where it lets every tool through.
    pub fn rule_for(&self, principal: Option<&str>) -> Option<&ToolRule> {
        let named = principal.and_then(|p| self.principals.iter().find(|(names, _)| names.iter().any(|n| n == p)));
        let rule = named.map(|(_, r)| r).unwrap_or(&self.everyone);
        (!rule.is_open()).then_some(rule)
    }
}

fn patterns(key: &str, v: Option<Vec<String>>) -> Result<Option<Vec<String>>, ConfigError> {
    if let Some(list) = &v
        && let Some(bad) = list.iter().find(|p| p.is_empty())
    {
        return Err(ConfigError(format!("{key}: {bad:?} is not a pattern (use \"*\" for every tool)")));
    }
    Ok(v)
}

/// `[upstream.tools]` of the upstream at `at` (`upstream[0]`).
pub(super) fn tool_policy(at: &str, raw: Option<RawToolPolicy>) -> Result<ToolPolicy, ConfigError> {
    let Some(raw) = raw else { return Ok(ToolPolicy::default()) };
    let key = |k: &str| format!("{at}.tools.{k}");
    let everyone = ToolRule {
        allow: patterns(&key("allow"), raw.allow)?,
        deny: patterns(&key("deny"), raw.deny)?.unwrap_or_default(),
    };
    let mut principals = Vec::new();
    for (i, r) in raw.for_principals.unwrap_or_default().into_iter().enumerate() {
        let at = key(&format!("for[{i}]"));
        if r.principals.is_empty() || r.principals.iter().any(|p| p.trim().is_empty()) {
            return Err(ConfigError(format!("{at}.principals: name at least one principal, none empty")));
        }
        let rule = ToolRule {
            allow: patterns(&format!("{at}.allow"), r.allow)?,
            deny: patterns(&format!("{at}.deny"), r.deny)?.unwrap_or_default(),
        };
        principals.push((r.principals, rule));
    }
    Ok(ToolPolicy { everyone, principals })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ToolPolicy, ConfigError> {
        tool_policy("upstream[0]", Some(toml::from_str(text).unwrap()))
    }

    #[test]
    fn deny_wins_and_a_principal_rule_replaces_everyones() {
        let p = parse(
            "allow = [\"read_*\", \"list_*\"]\ndeny = [\"*_secret\"]\n[[for]]\nprincipals = [\"admin@example.com\"]\nallow = [\"*\"]\n",
        )
        .unwrap();
        let anyone = p.rule_for(None).unwrap();
        assert!(anyone.permits("read_file") && anyone.permits("list_dirs"));
        assert!(!anyone.permits("write_file") && !anyone.permits("read_secret"));
        assert_eq!(p.rule_for(Some("bob")), Some(anyone));
        // Every tool for the admin: nothing to check.
        assert_eq!(p.rule_for(Some("admin@example.com")), None);
        assert_eq!(ToolPolicy::default().rule_for(Some("x")), None);
    }

    #[test]
    fn refusals_name_the_key() {
        let e = parse("allow = [\"\"]").unwrap_err().0;
        assert!(e.contains("upstream[0].tools.allow"), "{e}");
        let e = parse("[[for]]\nprincipals = []\n").unwrap_err().0;
        assert!(e.contains("upstream[0].tools.for[0].principals"), "{e}");
    }
}
