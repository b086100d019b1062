//! A session's identity kept in the task store, and a session revived from it after a
//! restart: the same owner (so its tasks are its own again), client and `initialize`
//! params; its link is opened on its first request that needs one, as for a dead link.

use super::*;
use crate::tasks::store::SessionRecord;

impl Session {
    /// What the store keeps of this session (`Mcp-Session-Id` `id`, on `path`), once its
    /// client has initialized.
    pub fn identity(&self, id: &str, path: &str) -> Option<SessionRecord> {
        let st = self.state.lock().unwrap();
        Some(SessionRecord {
            id: id.into(),
            path: path.into(),
            owner: self.owner.clone(),
            client: self.client.clone(),
            version: st.version?.as_str().into(),
            init_params: st.init_params.as_ref()?.to_string(),
        })
    }

    /// Whose tasks are its own.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The session `rec` describes, initialized as it was; `None` if the record cannot be
    /// read (a version this gateway no longer speaks).
    pub fn revive(
        gateway: Arc<Gateway>,
        upstream: Arc<UpstreamConfig>,
        sink: Arc<dyn ClientSink>,
        rec: &SessionRecord,
    ) -> Option<Arc<Session>> {
        let version = ProtocolVersion::parse(&rec.version)?;
        let params: Value = serde_json::from_str(&rec.init_params).ok()?;
        let state = SessionState {
            init_params: Some(params),
            asked: Some(version),
            version: Some(version),
            ..SessionState::default()
        };
        Some(Self::build(gateway, upstream, sink, Some(rec.client.clone()), rec.owner.clone(), None, state))
    }
}
