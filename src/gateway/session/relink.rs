//! The session's link: opened and initialized on the gateway's behalf when the client
//! initializes (or, `share = true`, the upstream's shared link joined), and replaced by a
//! fresh one on the client's next request when it died (after a backoff that grows while
//! links keep dying). Each link negotiates its own version.
//!
//! A session's identity is kept in the task store, and a session is revived from it after a
//! restart: the same owner (so its tasks are its own again), client and `initialize`
//! params; its link is opened on its first request that needs one, as for a dead link.
//! The identity also carries the upstream's tasks the session follows (`ext::translated`):
//! their ids are the upstream's and need no session there, so a revived session follows them
//! again, and one the upstream no longer knows is `failed`, saying the gateway restarted.

use super::*;
use crate::config::Era;
use crate::gateway::eras::open_detecting;
use crate::tasks::store::SessionRecord;
use crate::upstream::link::{HandshakeError, Negotiated};

impl Session {
    /// The live link, starting a new one if it died.
    pub(super) async fn link(&self) -> Result<Arc<Link>, RpcError> {
        if let Some(l) = self.link.load_full()
            && !l.is_closed()
        {
            return Ok(l);
        }
        // Boxed: the handshake's state is large, and every request's future would carry it.
        Box::pin(self.replace_link()).await
    }

    /// [`Session::link`], with the era the plan took for it (`Plan::upstream`, decided when
    /// the link negotiated): what depends on the upstream's era is read from here, not asked
    /// of the link again.
    pub(super) async fn linked(&self) -> Result<(Arc<Link>, UpstreamSide), RpcError> {
        // A plan is replaced only with the link, and only once the link it was made for has
        // closed: if the link is still live after the plan was read, the plan is its own.
        // Otherwise it died meanwhile, and its replacement (or its error) is asked for again.
        let mut tries = 0;
        loop {
            let link = self.link().await?;
            let upstream = self.plan().upstream;
            tries += 1;
            if !link.is_closed() || tries == 3 {
                return Ok((link, upstream));
            }
        }
    }

    /// [`Session::link`] when the link died: a new one, after the backoff.
    async fn replace_link(&self) -> Result<Arc<Link>, RpcError> {
        let _guard = self.relink.lock().await;
        if let Some(l) = self.link.load_full()
            && !l.is_closed()
        {
            return Ok(l);
        }
        let (closed, backoff) = {
            let st = self.state.lock().unwrap();
            (st.closed, st.restart_backoff)
        };
        let (initialized, before) = {
            let sides = self.sides.now();
            (sides.version.is_some(), sides.upstream_version)
        };
        if !initialized {
            return Err(RpcError::new(INVALID_REQUEST, "session not initialized"));
        }
        if closed {
            // An ended session opens nothing more upstream.
            return Err(RpcError::new(INVALID_REQUEST, "the session has ended"));
        }
        let negotiated = if self.shared {
            // The gateway keeps a shared link's backoff: it is every session's.
            self.join_shared().await?
        } else {
            if let Some((since, delay)) = backoff {
                tokio::time::sleep_until(since + delay).await;
            }
            self.open_link().await?
        };
        let link = self.link.load_full().expect("a session keeps the link it opened or joined");
        if self.modern.is_some() {
            // A modern request's session joins the shared link the first time it needs one.
            return Ok(link);
        }
        if before != Some(negotiated.version) {
            tracing::warn!(upstream = %self.upstream.name, "the restarted upstream negotiated protocol version {} (was {}); messages are translated for it",
                negotiated.version, before.map_or("none", |v| v.as_str()));
        }
        tracing::info!(upstream = %self.upstream.name, generation = link.generation(), "upstream link restarted");
        Ok(link)
    }

    /// Opens a link and initializes it on the gateway's behalf, declaring the client's own
    /// capabilities (so the upstream asks only for what the client can serve); on success it
    /// is the session's link, and what the upstream negotiated is the session's view of it.
    /// Called with `relink` held.
    pub(super) async fn open_link(&self) -> Result<Negotiated, RpcError> {
        let capabilities = self.sides.now().client_capabilities().filter(|c| c.is_object()).cloned();
        // Until this link has negotiated, its version is not the last one's.
        self.sides.change(&self.state.lock().unwrap(), |sides| sides.upstream_version = None);
        let capabilities = capabilities.unwrap_or_else(|| json!({}));
        // A legacy client's own link initializes an upstream that speaks its generation too.
        let legacy_client = self.modern.is_none();
        let opened = open_detecting(&self.gateway.eras, &self.upstream, legacy_client, |era, legacy_client| {
            self.open_once(capabilities.clone(), era, legacy_client)
        });
        let opened = opened.await;
        self.note_readiness(&opened);
        let (link, negotiated) = opened?;
        self.adopt(&negotiated);
        let level = self.state.lock().unwrap().log_level;
        if level.is_some() {
            link.set_log_level(level);
        }
        self.hear_list_changes(&link, &negotiated);
        self.link.store(Some(link));
        Ok(negotiated)
    }

    /// One link started and initialized with `era`, declaring `capabilities`; closed if its
    /// handshake fails.
    async fn open_once(
        &self,
        capabilities: Value,
        era: Era,
        legacy_client: bool,
    ) -> Result<(Arc<Link>, Negotiated), HandshakeError> {
        let link = self.start_link().await;
        if let Err(e) = &link {
            self.note_readiness::<()>(&Err(e.clone()));
        }
        let link = link?;
        let u = &self.upstream;
        let handshake = link.handshake(
            capabilities,
            u.client_info.to_value(),
            era,
            legacy_client,
            u.connect_timeout,
            u.probe_timeout,
        );
        let mut opening = Opening(Some(link.clone()));
        let negotiated = handshake.await;
        opening.0 = None;
        match negotiated {
            Ok(n) => Ok((link, n)),
            Err(e) => {
                link.close().await;
                Err(e)
            }
        }
    }

    /// What a (new) link negotiated becomes the session's view of the upstream.
    pub(super) fn adopt(&self, negotiated: &Negotiated) {
        self.ext.set_limit(self.upstream.tasks.max_tasks_per_owner, ext_bytes(&self.gateway));
        let mut caps = negotiated.capabilities().clone();
        if !caps.is_object() {
            caps = json!({});
        }
        if !negotiated.version.has_tasks()
            && let Some(c) = caps.as_object_mut()
            && c.remove("tasks").is_some()
        {
            tracing::info!(upstream = %self.upstream.name, version = %negotiated.version, "the upstream declares tasks its protocol version lacks; they are not used");
        }
        let upstream = match negotiated.modern {
            true => UpstreamSide::Modern { ext_tasks: negotiated.ext_tasks },
            false => UpstreamSide::Legacy(negotiated.version),
        };
        let declares_ext = self.modern.as_ref().is_some_and(|m| m.declared_extension());
        // Under the session's lock until the tools are forgotten (see `sides`).
        let st = self.state.lock().unwrap();
        self.sides.change(&st, |sides| {
            let client = sides.client_side(self.modern.is_some());
            sides.plan = Some(Plan::new(client, upstream, &caps, &self.upstream, (self.shared, declares_ext)));
            sides.upstream_version = Some(negotiated.version);
            sides.caps = Arc::new(caps);
            sides.init = Arc::new(negotiated.result.clone());
        });
        // What a previous link listed may not hold for this one: forgotten under the session's
        // lock, so that nothing reads the new plan with the old link's tools.
        self.tools.forget();
    }

    /// Tells readiness how a link open ended. On a link that carries the client's own
    /// `Authorization`, a failure may be that client's credential (a 401), not the
    /// upstream's health, and its text the upstream's answer to that client: only a success
    /// is noted (an unreachable upstream is still found by readiness's own probe).
    fn note_readiness<T>(&self, outcome: &Result<T, RpcError>) {
        if self.credential.is_none() || outcome.is_ok() {
            self.gateway.readiness.note_outcome(&self.upstream.name, outcome);
        }
    }

    pub(super) async fn start_link(&self) -> Result<Arc<Link>, RpcError> {
        let generation = {
            let mut st = self.state.lock().unwrap();
            st.generation += 1;
            if self.modern.is_some() {
                // A modern request's own link (its upstream receives the client's token):
                // numbered apart from every other, so that what is known by a link's
                // generation (relayed tasks) is never taken for another request's.
                static PRIVATE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 40);
                st.generation = PRIVATE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            st.generation
        };
        let mut env = self.gateway.link_env();
        env.credential = self.credential.clone();
        env.client = Some(&self.client);
        let link = Link::connect(env, &self.upstream, generation, false).await?;
        let events: Weak<dyn LinkEvents> = self.me.clone();
        link.attach(self.tag, events, self.share_key());
        Ok(link)
    }

    /// Joins the shared link of the session's upstream (opened if none is live): what it
    /// negotiated becomes the session's view of the upstream. Called with `relink` held.
    pub(super) async fn join_shared(&self) -> Result<Negotiated, RpcError> {
        let (link, negotiated) = self.gateway.shared_link(&self.upstream).await?;
        let events: Weak<dyn LinkEvents> = self.me.clone();
        link.attach(self.tag, events, self.share_key());
        self.adopt(&negotiated);
        // The upstream tasks its requests created on a link that died are no longer its to
        // ask about: on this one, their ids may be another session's tasks (a restarted
        // server, or a new upstream session, numbers them again).
        self.state.lock().unwrap().known_tasks.clear();
        self.hear_list_changes(&link, &negotiated);
        self.link.store(Some(link));
        Ok(negotiated)
    }

    /// A legacy client on a 2026-07-28 link hears of list changes only if the link listens
    /// for them (its initialize result declares them: `mcp::modern::legacy`).
    fn hear_list_changes(&self, link: &Arc<Link>, negotiated: &Negotiated) {
        if negotiated.modern && self.modern.is_none() {
            link.listen_for_list_changes(negotiated.capabilities());
        }
    }

    /// Whose share of a shared link's requests in flight the session's count against: its
    /// principal's; else, for a 2026-07-28 request over HTTP (a session of its own), its
    /// client's address, the only identity it has; else the session's own (a stdio client
    /// is the only one: its requests are all the process's).
    pub(super) fn share_key(&self) -> Arc<str> {
        if self.client.starts_with(PRINCIPAL_PREFIX) {
            self.client.as_str().into()
        } else if self.modern.is_some() && self.client != self.owner {
            format!("address:{}", self.client).into()
        } else {
            format!("session:{}", self.tag).into()
        }
    }

    /// What the store keeps of this session (`Mcp-Session-Id` `id`, on `path`), once its
    /// client has initialized.
    pub fn identity(&self, id: &str, path: &str) -> Option<SessionRecord> {
        let sides = self.sides.now();
        Some(SessionRecord {
            id: id.into(),
            path: path.into(),
            owner: self.owner.clone(),
            client: self.client.clone(),
            version: sides.version?.as_str().into(),
            init_params: sides.init_params.as_ref()?.to_string(),
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
        let state = SessionState { remembered: Some((rec.id.clone(), rec.path.clone())), ..SessionState::default() };
        let sides = Sides {
            init_params: Some(Arc::new(params)),
            asked: Some(version),
            version: Some(version),
            ..Sides::default()
        };
        let ext_tasks = !rec.upstream_tasks.is_empty();
        let session =
            Self::build(gateway, upstream, sink, Some(rec.client.clone()), rec.owner.clone(), None, (state, sides));
        let open = session.ext.revive(
            session.upstream.tasks.max_tasks_per_owner,
            ext_bytes(&session.gateway),
            &rec.upstream_tasks,
        );
        if ext_tasks {
            // They were made on an extension upstream: so the session takes it to be until
            // its link, opened to ask about them, says otherwise.
            let upstream = UpstreamSide::Modern { ext_tasks: true };
            let plan = Plan::new(
                ClientSide::Legacy(version),
                upstream,
                &Value::Null,
                &session.upstream,
                (session.shared, false),
            );
            session.sides.change(&session.state.lock().unwrap(), |sides| sides.plan = Some(plan));
        }
        for task in open {
            session.ext.follow(&*session, task);
        }
        Some(session)
    }
}

/// A link whose handshake is under way: closed (its child stopped, its upstream session
/// deleted) rather than just dropped if the handshake is cut short (the client hung up).
struct Opening(Option<Arc<Link>>);

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(link) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move { link.close().await });
        }
    }
}

/// What one extension task a session follows may hold, in bytes (`[tasks]`).
fn ext_bytes(gateway: &Gateway) -> super::ext::table::Bytes {
    super::ext::table::Bytes::of(&gateway.config.tasks)
}
