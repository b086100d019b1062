//! Reloading the config while serving (`taskgate serve`): on SIGHUP, and, with `[server]
//! watch_config = true`, when its file changes. The file is read and checked whole: an
//! invalid one is refused with a log line naming the key, and the running config stays. A
//! valid one is applied without a restart:
//!
//! - the gateway's live part (`gateway::live`): upstreams added, removed and changed, tool
//!   policy and rate limits, for every request from then on;
//! - the HTTP front: sessions of removed upstreams end once what they have in flight is
//!   answered; new connections take the TLS certificate and key, read again.
//!
//! Every reload is logged with its outcome, what it changed and how long it took, and
//! counted (`taskgate_config_reloads_total{outcome}`). What was applied is recorded in a
//! `file` store's directory ([`APPLIED`]), so that `taskgate check` can say what the next
//! reload would change ([`pending`]).

use crate::config::{Config, ConfigChange, StoreKind};
use crate::downstream::http_server::HttpServer;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The file, in a `file` store's directory, that holds the config text last applied.
pub const APPLIED: &str = "applied-config.toml";

/// How often a watched file is looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How a reload ended.
#[derive(Debug)]
pub enum Reloaded {
    /// Applied (what changed, and how long reading, checking and applying took).
    Applied(ConfigChange, Duration),
    /// Refused: why (naming the key); the running config stays.
    Refused(String),
}

/// Reloads one HTTP front's config from its file.
pub struct Reloader {
    path: PathBuf,
    server: Arc<HttpServer>,
    /// `--listen`, which overrides every reading of the file as it did the first.
    listen: Option<SocketAddr>,
    /// One reload at a time, and the text last read (a watched file rewritten with the same
    /// text is no reload).
    last: tokio::sync::Mutex<Option<String>>,
}

impl Reloader {
    /// The reloader of `server`, which was started from the config at `path` whose text was
    /// `text` (recorded now, for `taskgate check`).
    pub fn new(path: PathBuf, text: String, server: Arc<HttpServer>, listen: Option<SocketAddr>) -> Arc<Reloader> {
        record(&server.gateway().config, &text);
        Arc::new(Reloader { path, server, listen, last: tokio::sync::Mutex::new(Some(text)) })
    }

    /// Reads, checks and applies the config file now; `cause` is logged (`SIGHUP`, ...).
    pub async fn reload(&self, cause: &str) -> Reloaded {
        let mut last = self.last.lock().await;
        let started = std::time::Instant::now();
        let outcome = match std::fs::read_to_string(&self.path) {
            Err(e) => Err(format!("cannot read config {}: {e}", self.path.display())),
            Ok(text) => {
                *last = Some(text.clone());
                self.apply(&text).map(|change| (change, text))
            }
        };
        match outcome {
            Ok((change, text)) => {
                let took = started.elapsed();
                record(&self.server.gateway().config, &text);
                crate::metrics::global().config_reloaded("applied");
                // One line in the log: what changed, each kind after a `;`.
                let what = change.describe().lines().collect::<Vec<_>>().join("; ");
                let took_ms = (took.as_secs_f64() * 1e4).round() / 10.0;
                tracing::info!(cause, took_ms, "config reloaded: {what}");
                Reloaded::Applied(change, took)
            }
            Err(why) => {
                crate::metrics::global().config_reloaded("refused");
                tracing::warn!(cause, "config reload refused, the running config stays: {why}");
                Reloaded::Refused(why)
            }
        }
    }

    fn apply(&self, text: &str) -> Result<ConfigChange, String> {
        let mut config = Config::load_text(&self.path, text).map_err(|e| e.0)?;
        if let Some(l) = self.listen {
            config.server.listen = l;
        }
        // The certificate is read before anything changes: a bad one refuses the reload whole.
        let running_tls = self.server.gateway().config.server.tls.is_some();
        let tls = match &config.server.tls {
            Some(files) if running_tls => Some(crate::downstream::tls::acceptor(files).map_err(|e| e.to_string())?),
            _ => None,
        };
        let change = self.server.gateway().apply(&config);
        if let Some(tls) = tls {
            self.server.replace_tls(tls);
        }
        self.server.end_sessions_of(&change.removed);
        Ok(change)
    }

    /// Reloads on every SIGHUP and, with `watch`, whenever the file changes, until `stop`.
    /// The SIGHUP handler is installed now, before the future is first polled (a SIGHUP
    /// would otherwise end the process).
    pub fn run(self: Arc<Self>, watch: bool, stop: CancellationToken) -> impl Future<Output = ()> + Send {
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        async move {
            match hup {
                Ok(hup) => self.serve(hup, watch, stop).await,
                Err(e) => tracing::warn!("cannot reload on SIGHUP: {e}"),
            }
        }
    }

    async fn serve(&self, mut hup: tokio::signal::unix::Signal, watch: bool, stop: CancellationToken) {
        let mut seen = stamp(&self.path);
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = hup.recv() => {
                    self.reload("SIGHUP").await;
                    seen = stamp(&self.path);
                }
                _ = tick.tick(), if watch => {
                    let now = stamp(&self.path);
                    if now == seen {
                        continue;
                    }
                    seen = self.settled(now).await;
                    let unchanged = std::fs::read_to_string(&self.path).ok() == *self.last.lock().await;
                    if !unchanged {
                        self.reload("the config file changed").await;
                    }
                }
            }
        }
    }

    /// Waits until the file stops changing (an editor writing it in place), briefly.
    async fn settled(&self, mut now: Option<Stamp>) -> Option<Stamp> {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let again = stamp(&self.path);
            if again == now {
                break;
            }
            now = again;
        }
        now
    }
}

/// What tells a file's versions apart: its inode (a rename puts another there), length and
/// modification time.
type Stamp = (u64, u64, u64, Option<std::time::SystemTime>);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.len(), m.modified().ok()))
}

/// Where the config text applied is recorded: a `file` store's directory; other stores
/// have none.
fn applied_path(config: &Config) -> Option<PathBuf> {
    match &config.tasks.store {
        StoreKind::File(dir) => Some(dir.join(APPLIED)),
        _ => None,
    }
}

/// Records `text` as the config applied (only its owner may read it: it may hold secrets,
/// as the config file does). A failure is logged; it costs `taskgate check` its answer only.
fn record(config: &Config, text: &str) {
    let Some(path) = applied_path(config) else { return };
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        tracing::warn!("cannot record the config applied in {}: {e}", path.display());
    }
}

/// What reloading the gateway that runs with `config`'s task store to `config` (read from
/// `path`) would change, as `taskgate check` prints it.
pub fn pending(path: &Path, config: &Config) -> String {
    let Some(applied) = applied_path(config) else {
        return "# reload: what a reload would change is known only with a \"file\" task store \
                (the gateway records the config it applied there)\n"
            .into();
    };
    let Ok(text) = std::fs::read_to_string(&applied) else {
        return format!(
            "# reload: no config applied is recorded in {} (no gateway has run there yet)\n",
            applied.display()
        );
    };
    match Config::load_text(path, &text) {
        Ok(running) => {
            let change = ConfigChange::between(&running, config);
            let lines: String = change.describe().lines().map(|l| format!("#   {l}\n")).collect();
            format!(
                "# reload: against the config last applied ({}), a reload would change:\n{lines}",
                applied.display()
            )
        }
        Err(e) => format!("# reload: the config last applied ({}) no longer loads: {}\n", applied.display(), e.0),
    }
}
