//! Whose a session's tasks are once authentication is on: its principal's, on its upstream,
//! so that every session of the principal sees them and no other session does.

use super::*;

impl Session {
    /// A session of an authenticated principal: its tasks are the principal's on this
    /// upstream (every session of the principal sees them, and no other), and its limits
    /// per client count all the principal's sessions.
    pub fn for_principal(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        principal: &str,
    ) -> Arc<Session> {
        let owner = Self::owner_of(principal, &upstream.name);
        let client = Some(format!("{PRINCIPAL_PREFIX}{principal}"));
        Self::build(gateway, upstream, sink, client, owner, None, SessionState::default())
    }

    /// Whether `owner` is a principal's (see [`Session::owner_of`]).
    pub fn is_principal_owner(owner: &str) -> bool {
        owner.starts_with(PRINCIPAL_PREFIX)
    }

    /// Who owns the tasks principal `principal` makes through `upstream`.
    pub fn owner_of(principal: &str, upstream: &str) -> String {
        format!("{PRINCIPAL_PREFIX}{upstream}:{principal}")
    }
}
