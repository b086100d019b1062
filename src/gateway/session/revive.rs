//! A session's identity kept in the task store, and a session revived from it after a
//! restart: the same owner (so its tasks are its own again), client and `initialize`
//! params; its link is opened on its first request that needs one, as for a dead link.
//! The identity also carries the upstream's tasks the session follows (`ext::translated`):
//! their ids are the upstream's and need no session there, so a revived session follows them
//! again, and one the upstream no longer knows is `failed`, saying the gateway restarted.

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
            // The strategy's lock after the session's (see `ext`).
            upstream_tasks: self.ext.followed(),
        })
    }

    /// The store remembers this session as `id` on `path`: what it follows is written there
    /// as it changes ([`Session::remember_followed`]).
    pub fn remembered_as(&self, id: &str, path: &str) {
        self.state.lock().unwrap().remembered = Some((id.into(), path.into()));
    }

    /// The upstream tasks the session follows changed: the store's record of the session
    /// is written again (not awaited durable, as the session's first record).
    pub(super) async fn remember_followed(&self) {
        let Some((id, path)) = self.state.lock().unwrap().remembered.clone() else { return };
        if let Some(rec) = self.identity(&id, &path) {
            self.hosted().store().put_session(rec).await;
        }
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
            remembered: Some((rec.id.clone(), rec.path.clone())),
            ..SessionState::default()
        };
        let ext_tasks = !rec.upstream_tasks.is_empty();
        let session = Self::build(gateway, upstream, sink, Some(rec.client.clone()), rec.owner.clone(), None, state);
        let open = session.ext.revive(session.upstream.tasks.max_tasks_per_owner, &rec.upstream_tasks);
        if ext_tasks {
            // They were made on an extension upstream: so the session takes it to be until
            // its link, opened to ask about them, says otherwise.
            let upstream = UpstreamSide::Modern { ext_tasks: true };
            let plan =
                Plan::new(ClientSide::Legacy(version), upstream, &Value::Null, &session.upstream, session.shared);
            session.state.lock().unwrap().plan = Some(plan);
        }
        for task in open {
            session.ext.follow(&session, task);
        }
        Some(session)
    }
}
