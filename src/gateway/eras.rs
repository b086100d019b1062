//! What era each upstream was found to speak under `era = "auto"`, and why: remembered for
//! the life of the process and, where the task store outlives it (`file`, `redis`), in the
//! store (one short record per upstream), so that finding out costs a legacy server at most
//! once, not once per session.
//!
//! An upstream found to speak only `initialize` is opened without the `server/discover`
//! probe from then on. One whose connection closed after the probe (a server that exits when
//! its first message is not `initialize`) is started again at once and initialized
//! ([`open_detecting`]): that restart is the whole cost. A stored answer names the
//! upstream's command or URL (a hash of it): one found for another server is ignored. An
//! answer that stops holding (the remembered legacy server refuses to initialize) is
//! forgotten, and the next link probes again.

use crate::config::{Era, Transport, UpstreamConfig};
use crate::jsonrpc::RpcError;
use crate::locks::Mutex;
use crate::tasks::store::TaskStore;
use crate::upstream::link::{HandshakeError, Link, Negotiated};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

/// What was found of one upstream.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Found {
    /// It speaks 2026-07-28 (`server/discover`); else a legacy version (`initialize`).
    pub modern: bool,
    /// A modern one answers `initialize` as well (`Some(true)`: a legacy client's link is
    /// initialized without the probe, a modern client's uses 2026-07-28), or refused it
    /// (`Some(false)`: every client's uses 2026-07-28); `None`: not asked yet.
    #[serde(default)]
    pub legacy_too: Option<bool>,
    /// The protocol version it negotiated.
    pub version: String,
    /// Why it was taken for that era.
    pub why: String,
    /// A hash of its command and arguments, or its URL: what the answer was found for.
    pub target: String,
}

impl Found {
    /// How the log and `taskgate check` say it, e.g. `legacy (2025-06-18): the server closed
    /// the connection when its first message was server/discover`.
    pub fn describe(&self) -> String {
        let era = match (self.modern, self.legacy_too) {
            (true, Some(true)) => "dual: modern, and legacy for legacy clients",
            (true, _) => "modern",
            (false, _) => "legacy",
        };
        format!("{era} ({}): {}", self.version, self.why)
    }
}

/// The answers found so far, one per configured upstream at most.
pub struct Eras {
    found: Mutex<HashMap<String, Found>>,
    /// Upstreams whose stored answer was looked up already.
    looked_up: Mutex<std::collections::HashSet<String>>,
    /// Per upstream, held while its era is being found (nothing is known yet): links opened
    /// meanwhile wait for the answer rather than each probing (and each restarting a server
    /// the probe stops).
    finding: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    store: Arc<dyn TaskStore>,
}

impl Eras {
    pub fn new(store: Arc<dyn TaskStore>) -> Eras {
        Eras { found: Default::default(), looked_up: Default::default(), finding: Default::default(), store }
    }

    /// What was found of upstream `cfg`, in this process or (once looked up) the store.
    pub async fn found(&self, cfg: &UpstreamConfig) -> Option<Found> {
        // An answer found for another command or URL (a reload changed it) does not hold.
        if let Some(f) = self.found.lock().unwrap().get(&cfg.name) {
            return (f.target == target(cfg)).then(|| f.clone());
        }
        if !self.looked_up.lock().unwrap().insert(cfg.name.clone()) {
            return None;
        }
        let text = self.store.get_era(&cfg.name).await?;
        let found: Found = serde_json::from_str(&text).ok().filter(|f: &Found| f.target == target(cfg))?;
        tracing::info!(upstream = %cfg.name, "era remembered by the task store: {}", found.describe());
        self.found.lock().unwrap().entry(cfg.name.clone()).or_insert(found.clone());
        Some(found)
    }

    /// The era the next link to `cfg` is opened with: the configured one, except that under
    /// `auto` an upstream found to be legacy, or found to speak both eras when the link is
    /// for a legacy client, is not probed again. `true` when that answer was remembered.
    pub async fn era_for(&self, cfg: &UpstreamConfig, legacy_client: bool) -> (Era, bool) {
        if cfg.era != Era::Auto {
            return (cfg.era, false);
        }
        match self.found(cfg).await {
            Some(f) if !f.modern || (f.legacy_too == Some(true) && legacy_client) => (Era::Legacy, true),
            _ => (Era::Auto, false),
        }
    }

    /// Whether a legacy client's link may try `initialize` on an upstream whose discover
    /// lists legacy versions: not once it refused one.
    async fn may_initialize_dual(&self, cfg: &UpstreamConfig) -> bool {
        !matches!(self.found(cfg).await, Some(f) if f.modern && f.legacy_too == Some(false))
    }

    /// Remembers what a handshake under `auto` found (logged when it is new or changed).
    pub async fn note(&self, cfg: &UpstreamConfig, negotiated: &Negotiated) {
        let Some(why) = negotiated.probed.clone() else { return };
        let found = Found {
            modern: negotiated.modern || negotiated.legacy_too == Some(true),
            // What a modern client's probe cannot tell is kept from what was found before.
            legacy_too: negotiated.legacy_too.or_else(|| {
                let before = self.found.lock().unwrap().get(&cfg.name).cloned();
                before.filter(|f| f.modern).and_then(|f| f.legacy_too)
            }),
            version: negotiated.version.to_string(),
            why,
            target: target(cfg),
        };
        let before = self.found.lock().unwrap().insert(cfg.name.clone(), found.clone());
        if before.as_ref() != Some(&found) {
            tracing::info!(upstream = %cfg.name, "era found: {}", found.describe());
            let text = serde_json::to_string(&found).expect("records serialize");
            self.store.put_era(&cfg.name, text).await;
        }
    }

    /// The remembered answer did not hold: the next link probes again.
    pub fn forget(&self, cfg: &UpstreamConfig) {
        if self.found.lock().unwrap().remove(&cfg.name).is_some() {
            tracing::warn!(upstream = %cfg.name, "the upstream remembered as legacy did not initialize; the next link probes its era again");
        }
    }
}

/// Opens a link to `cfg` with `open` (which connects and handshakes with the era given, and
/// whether it may initialize a dual-era upstream for a legacy client) and what the gateway
/// has found of its era: a connection that closed after the probe, or a process that may
/// have settled into 2026-07-28 when a legacy client needs `initialize`, is opened once more,
/// without the probe. The failed connection is closed by `open`. `legacy_client`: the link
/// serves one client of a legacy version.
pub async fn open_detecting<F, Fut>(
    eras: &Eras,
    cfg: &UpstreamConfig,
    legacy_client: bool,
    mut open: F,
) -> Result<(Arc<Link>, Negotiated), RpcError>
where
    F: FnMut(Era, bool) -> Fut,
    Fut: Future<Output = Result<(Arc<Link>, Negotiated), HandshakeError>>,
{
    let (mut era, mut remembered) = eras.era_for(cfg, legacy_client).await;
    let mut _finding = None;
    if era == Era::Auto && eras.found(cfg).await.is_none() {
        let gate = eras.finding.lock().unwrap().entry(cfg.name.clone()).or_default().clone();
        _finding = Some(gate.lock_owned().await);
        (era, remembered) = eras.era_for(cfg, legacy_client).await;
    }
    let legacy_client = legacy_client && eras.may_initialize_dual(cfg).await;
    let (link, negotiated) = match open(era, legacy_client).await {
        Ok(opened) => opened,
        Err(HandshakeError::ProbeClosed(why)) => {
            tracing::warn!(upstream = %cfg.name, "{why}; starting it again without the probe");
            let (link, mut negotiated) = open(Era::Legacy, false).await.map_err(|e| e.into_rpc(&cfg.name))?;
            negotiated.probed = Some(why);
            (link, negotiated)
        }
        Err(HandshakeError::Dual(why)) => {
            tracing::info!(upstream = %cfg.name, "{why}; starting it again without the probe");
            match open(Era::Legacy, false).await {
                Ok((link, mut negotiated)) => {
                    negotiated.probed = Some(why);
                    negotiated.legacy_too = Some(true);
                    (link, negotiated)
                }
                Err(e) => {
                    // 2026-07-28 only: started once more, and used in that era.
                    let refused = e.into_rpc(&cfg.name).message;
                    tracing::info!(upstream = %cfg.name, "it refused initialize ({refused}); using 2026-07-28 for every client");
                    let (link, mut negotiated) = open(Era::Modern, false).await.map_err(|e| e.into_rpc(&cfg.name))?;
                    negotiated.probed = Some(format!("it speaks 2026-07-28, and refused initialize: {refused}"));
                    negotiated.legacy_too = Some(false);
                    (link, negotiated)
                }
            }
        }
        Err(e) => {
            if remembered {
                eras.forget(cfg);
            }
            return Err(e.into_rpc(&cfg.name));
        }
    };
    eras.note(cfg, &negotiated).await;
    Ok((link, negotiated))
}

/// What an answer is found for: a hash (FNV-1a, stable across builds) of the upstream's
/// command and arguments, or its URL, as configured (secrets never leave the process).
fn target(cfg: &UpstreamConfig) -> String {
    let text = match &cfg.transport {
        Transport::Stdio { command, args, .. } => {
            let args: Vec<&str> = args.iter().map(|a| a.written.as_str()).collect();
            format!("stdio\0{command}\0{}", args.join("\0"))
        }
        Transport::Http { url, .. } => format!("http\0{}", url.written),
        Transport::Builtin(b) => format!("builtin\0{b:?}"),
    };
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// What `taskgate check` says of each upstream's era: configured, or (under `auto`) what the
/// configured task store remembers, one line each. A store that cannot be read now (a
/// running gateway holds the file store) is said to be so; nothing is created.
pub async fn report(config: &crate::config::Config) -> String {
    use crate::config::StoreKind;
    let mut out = String::new();
    let store = match &config.tasks.store {
        StoreKind::Memory => None,
        StoreKind::File(dir) if !dir.join(crate::tasks::file_store::DB_FILE).exists() => None,
        _ => Some(crate::tasks::file_store::open_configured(&config.tasks)),
    };
    let eras = match store {
        Some(Ok(store)) => Some(Eras::new(store)),
        Some(Err(e)) => {
            out.push_str(&format!(
                "# eras found: the task store cannot be read now ({e}); the gateway logs each era it finds\n"
            ));
            return out;
        }
        None => None,
    };
    for u in &config.upstreams {
        let line = match (u.era, &eras) {
            (Era::Legacy, _) => "era = \"legacy\": initialized without the server/discover probe".to_string(),
            (Era::Modern, _) => "era = \"modern\": 2026-07-28 only (server/discover)".to_string(),
            (Era::Auto, Some(eras)) if let Some(f) = eras.found(u).await => format!("era found: {}", f.describe()),
            (Era::Auto, _) => "era not found yet: the first link to it finds it (and the gateway logs it)".to_string(),
        };
        out.push_str(&format!("# upstream \"{}\": {line}\n", u.name));
    }
    out
}
