//! Which upstream a request's path names: `<prefix><name>` for each upstream of the
//! gateway's live config (a reload adds and removes them; a request is routed by the config
//! in effect when it arrives), or a fixed table (the demo server's `/mcp`).

use crate::config::UpstreamConfig;
use crate::gateway::Gateway;
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) enum Routes {
    /// Every upstream of the live config, at `prefix` + its name.
    Live(&'static str),
    Fixed(HashMap<String, Arc<UpstreamConfig>>),
}

impl Routes {
    /// The upstream served at `path` (without a trailing `/`).
    pub(crate) fn get(&self, gateway: &Gateway, path: &str) -> Option<Arc<UpstreamConfig>> {
        match self {
            Routes::Live(prefix) => gateway.live().upstream(path.strip_prefix(prefix)?).cloned(),
            Routes::Fixed(table) => table.get(path).cloned(),
        }
    }
}
