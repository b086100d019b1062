//! What a reload replaces while the gateway serves: the upstreams it routes to, their tool
//! policy, and the rate limits. Read on every call without a lock (`arc-swap`) and swapped
//! whole ([`Gateway::apply`](super::Gateway::apply)), so a request sees one config or the
//! next, never a mix.
//!
//! An upstream whose sessions are made as before (`config::same_sessions`: only its tool
//! policy or limits changed) keeps its `Arc<UpstreamConfig>`, which is what its sessions
//! and shared link are keyed by; the policy is read from here, never from that config. A
//! bucket whose quota is unchanged is kept, so a reload gives no client a fresh burst.

use crate::config::{Config, ToolPolicy, ToolRule, UpstreamConfig, in_effect, same_sessions};
use crate::gateway::rate_limits::RateLimits;
use std::collections::HashMap;
use std::sync::Arc;

/// One generation of the live config.
pub struct Live {
    /// The config it was made from, with the `[server]` and `[tasks]` values in effect
    /// (those a restart applies stay as they were at start).
    config: Config,
    upstreams: Vec<Arc<UpstreamConfig>>,
    /// The upstreams with a tool rule for someone.
    tools: HashMap<String, ToolPolicy>,
    pub rate_limits: RateLimits,
}

impl Live {
    pub fn new(config: &Config) -> Live {
        Live::made(config.clone(), config.upstreams.iter().map(|u| Arc::new(u.clone())).collect(), None)
    }

    /// The next generation, for `config`: what applies live taken from it, the rest kept.
    pub fn next(&self, config: &Config) -> Live {
        let upstreams = config
            .upstreams
            .iter()
            .map(|u| match self.upstream(&u.name) {
                Some(was) if same_sessions(was, u) => was.clone(),
                _ => Arc::new(u.clone()),
            })
            .collect();
        Live::made(in_effect(&self.config, config), upstreams, Some(&self.rate_limits))
    }

    fn made(config: Config, upstreams: Vec<Arc<UpstreamConfig>>, was: Option<&RateLimits>) -> Live {
        let tools = config
            .upstreams
            .iter()
            .filter(|u| u.tools != ToolPolicy::default())
            .map(|u| (u.name.clone(), u.tools.clone()))
            .collect();
        let rate_limits = RateLimits::new(&config, was);
        Live { config, upstreams, tools, rate_limits }
    }

    /// The config in effect (see the field).
    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn upstream(&self, name: &str) -> Option<&Arc<UpstreamConfig>> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    pub fn upstreams(&self) -> &[Arc<UpstreamConfig>] {
        &self.upstreams
    }

    /// The tools a client of `upstream` authenticated as `principal` is offered; `None`:
    /// every tool (nothing to check).
    pub fn tool_rule(&self, upstream: &str, principal: Option<&str>) -> Option<&ToolRule> {
        if self.tools.is_empty() {
            return None;
        }
        self.tools.get(upstream)?.rule_for(principal)
    }
}
