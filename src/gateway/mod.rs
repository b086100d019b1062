//! The gateway proper: downstream sessions over the upstream side's links, the task
//! strategies beneath them, and what every session of one process shares.
//!
//! Requests go down: a downstream front → [`session`] → `upstream::link` → `upstream::connect`
//! → transport. What the server sends comes back through interfaces the lower layer defines
//! and this one implements: the link's `LinkEvents` (the session) and `ClientSink` (the
//! fronts, through the session). Hosted tasks, bridges and relayed tasks (`tasks/`) sit
//! between: they use the link, and the session uses them.
//!
//! A link serves one session, or every session of its upstream ([`shared`], `share = true`).

pub mod eras;
pub mod live;
pub mod rate_limits;
pub mod readiness;
pub mod session;
pub mod shared;

use crate::config::{Config, ConfigChange, ServerConfig, UpstreamConfig};
use crate::gateway::shared::SharedLinks;
use crate::jsonrpc::RpcError;
use crate::tasks::hosted::Hosted;
use crate::transport::http_client::HttpClient;
use crate::upstream::link::{Link, LinkEnv, Negotiated};
use std::sync::Arc;

/// How often one client's calls of one tool the tool policy refuses are logged at most.
pub const DENIAL_LOG_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// What every session and link of one gateway process shares.
pub struct Gateway {
    /// The config it started with: what a restart alone changes. The upstreams, their
    /// policy and the rate limits a reload replaces are in [`Gateway::live`].
    pub config: Config,
    /// The part of the config a reload replaces (`live`).
    live: arc_swap::ArcSwap<live::Live>,
    pub http: HttpClient,
    /// The task store and the hosted tasks of every session.
    pub hosted: Arc<Hosted>,
    /// One permit per open upstream link (`max_links`): a link outlives its session while
    /// hosted tasks run on it, so sessions alone do not bound upstream processes.
    pub links: Arc<crate::client_slots::ClientSlots>,
    /// The links of upstreams with `share = true`, one each.
    shared: SharedLinks,
    /// Upstream task ids handed to modern clients (the only ones they may ask about).
    pub relayed: Arc<crate::tasks::relayed::RelayedTasks>,
    /// Whose the tasks modern clients of principals made on modern upstreams are.
    pub upstream_owners: crate::tasks::upstream_owners::UpstreamOwners,
    /// One permit per extension task followed in the background (`[tasks] max_followed`).
    pub followers: Arc<tokio::sync::Semaphore>,
    /// What `progress/get` reads, for the upstreams that enable it.
    pub progress_states: crate::tasks::progress_state::ProgressStates,
    /// The denied calls logged lately: one line per client and tool per
    /// [`DENIAL_LOG_WINDOW`], for as many pairs as `max_sessions`.
    pub denials: crate::warn_limit::KeyedWarnLimit<(Arc<str>, Box<str>)>,
    /// The metric handles of each configured upstream.
    metrics: std::collections::HashMap<String, Arc<crate::metrics::UpstreamMetrics>>,
    /// How the last link open of each upstream ended, for `/readyz`.
    pub readiness: readiness::Readiness,
    /// What era each upstream was found to speak (`era = "auto"`).
    pub eras: eras::Eras,
}

impl Gateway {
    /// The gateway for `config`; panics if its task store cannot be opened (see [`Gateway::open`]).
    pub fn new(config: Config) -> Arc<Gateway> {
        Gateway::open(config).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The gateway for `config`, its task store opened (blocking I/O, before serving).
    pub fn open(config: Config) -> Result<Arc<Gateway>, crate::tasks::store::StoreError> {
        let connect_timeout =
            config.upstreams.iter().map(|u| u.connect_timeout).max().unwrap_or(std::time::Duration::from_secs(10));
        let store = crate::tasks::file_store::open_configured(&config.tasks)?;
        let eras = eras::Eras::new(store.clone());
        let hosted = Hosted::new(&config.tasks, store);
        let held_bytes = hosted.held_bytes().clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            hosted.start_sweeper();
        }
        Ok(Arc::new(Gateway {
            http: HttpClient::new(config.server.max_body_bytes, connect_timeout),
            hosted,
            links: crate::client_slots::ClientSlots::new(config.server.max_links, config.server.max_links_per_client),
            shared: SharedLinks::default(),
            relayed: crate::tasks::relayed::RelayedTasks::new(
                config.tasks.max_tasks,
                config.server.max_in_flight,
                held_bytes,
            ),
            upstream_owners: crate::tasks::upstream_owners::UpstreamOwners::new(config.tasks.max_tasks),
            followers: Arc::new(tokio::sync::Semaphore::new(config.tasks.max_followed)),
            progress_states: crate::tasks::progress_state::ProgressStates::new(crate::tasks::progress_state::Limits {
                max_states: config.tasks.max_tasks,
                max_result_bytes: config.tasks.max_result_bytes,
                max_bytes: config.tasks.max_store_bytes,
                max_message_bytes: config.tasks.max_status_message_bytes,
                max_token_bytes: config.tasks.max_task_id_bytes,
            }),
            readiness: Default::default(),
            eras,
            live: arc_swap::ArcSwap::from_pointee(live::Live::new(&config)),
            denials: crate::warn_limit::KeyedWarnLimit::new(
                DENIAL_LOG_WINDOW,
                std::num::NonZeroUsize::new(config.server.max_sessions).unwrap_or(std::num::NonZeroUsize::MIN),
            ),
            metrics: config
                .upstreams
                .iter()
                .map(|u| (u.name.clone(), crate::metrics::global().upstream(&u.name)))
                .collect(),
            config,
        }))
    }

    /// What a link it opens needs of it.
    pub fn link_env(&self) -> LinkEnv<'_> {
        LinkEnv {
            http: &self.http,
            permits: &self.links,
            client: None,
            limits: &self.config.server,
            tasks: self.hosted.clone(),
            relayed: self.relayed.clone(),
            credential: None,
        }
    }

    /// The live config: the upstreams served, their tool policy, the rate limits.
    pub fn live(&self) -> arc_swap::Guard<Arc<live::Live>> {
        self.live.load()
    }

    /// A reload: `config`'s upstreams, tool policy and limits replace the live ones, at
    /// once for every request that begins from now on. Shared links of upstreams changed or
    /// removed are retired: new sessions get new ones, running sessions keep theirs. Says
    /// what changed.
    pub fn apply(&self, config: &Config) -> ConfigChange {
        let old = self.live.load_full();
        let change = ConfigChange::between(old.config(), config);
        self.live.store(Arc::new(old.next(config)));
        for name in change.changed.iter().chain(&change.removed) {
            self.shared.retire(name);
        }
        change
    }

    /// The shared link of upstream `cfg` (`share = true`), opened if none is live. A link
    /// opens with the upstream's config in effect: a session made before a reload changed
    /// it is relinked as after an upstream restart.
    pub async fn shared_link(&self, cfg: &UpstreamConfig) -> Result<(Arc<Link>, Negotiated), RpcError> {
        let Some(current) = self.live().upstream(&cfg.name).cloned() else {
            return Err(RpcError::new(
                crate::jsonrpc::UPSTREAM_UNAVAILABLE,
                format!("upstream {:?} is no longer served (the config was reloaded without it)", cfg.name),
            ));
        };
        let opened = self.shared.get(self.link_env(), &current, &self.eras).await;
        self.readiness.note_outcome(&cfg.name, &opened);
        opened
    }

    /// Shutdown: the shared links close, and so do the links hosted tasks still run on
    /// (their children stopped gently); what still runs on them fails saying so.
    pub async fn close_links(&self) {
        self.shared.close_all().await;
        self.hosted.shut_down().await;
    }

    /// The metric handles of upstream `name`.
    pub fn upstream_metrics(&self, name: &str) -> Arc<crate::metrics::UpstreamMetrics> {
        self.metrics.get(name).cloned().unwrap_or_else(|| crate::metrics::global().upstream(name))
    }

    pub fn limits(&self) -> &ServerConfig {
        &self.config.server
    }

    /// Upstream links open now.
    pub fn open_links(&self) -> usize {
        self.links.taken()
    }
}
