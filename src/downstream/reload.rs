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

/// The file beside it that holds the config text the gateway started with: what its
/// `[server]` and `[tasks]` values are until a restart.
pub const STARTED: &str = "started-config.toml";

/// How often a watched file is looked at.
pub const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How long a watched file that changed must then stay unchanged before it is read: a file
/// written in place in several writes is read once whole. (A writer that may pause longer
/// mid-write writes another file and renames it over the config.)
pub const SETTLE: Duration = Duration::from_secs(1);

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
        record(&server.gateway().config, STARTED, &text);
        record(&server.gateway().config, APPLIED, &text);
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
                record(&self.server.gateway().config, APPLIED, &text);
                crate::metrics::global().config_reloaded("applied");
                // One line in the log: what changed, each kind after a `;`.
                let what = change.describe().lines().collect::<Vec<_>>().join("; ");
                let took_ms = (took.as_secs_f64() * 1e4).round() / 10.0;
                tracing::info!(cause, took_ms, "config reloaded: {what}");
                Reloaded::Applied(change, took)
            }
            Err(why) => {
                crate::metrics::global().config_reloaded("refused");
                // One line in the log, however many the parser's message has.
                let one_line = why.lines().map(str::trim_end).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" | ");
                tracing::warn!(cause, "config reload refused, the running config stays: {one_line}");
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
        // (Read even when TLS is only to be turned on at the next restart: that start must not fail.)
        let running_tls = self.server.gateway().config.server.tls.is_some();
        let tls = match &config.server.tls {
            Some(files) => Some(crate::downstream::tls::acceptor(files).map_err(|e| e.to_string())?),
            None => None,
        };
        let change = self.server.gateway().apply(&config);
        if let Some(tls) = tls.filter(|_| running_tls) {
            self.server.replace_tls(tls);
        }
        if change.auth {
            self.server.replace_auth(&config.server.auth);
        }
        self.server.end_sessions_of(&change.removed);
        self.server.announce_tool_changes(&change.policy);
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
                    tracing::debug!("config watch: the file changed; read once it stays unchanged for {SETTLE:?}");
                    seen = self.settled(now).await;
                    let unchanged = std::fs::read_to_string(&self.path).ok() == *self.last.lock().await;
                    if unchanged {
                        tracing::debug!("config watch: the file holds the text last read; nothing to reload");
                    } else {
                        self.reload("the config file changed").await;
                    }
                }
            }
        }
    }

    /// Waits until the file has not changed for [`SETTLE`] (a writer writing it in place, in
    /// several writes), for at most ten times as long.
    async fn settled(&self, mut now: Option<Stamp>) -> Option<Stamp> {
        let step = SETTLE / 10;
        let mut still = Duration::ZERO;
        for _ in 0..100 {
            tokio::time::sleep(step).await;
            let again = stamp(&self.path);
            if again == now {
                still += step;
                if still >= SETTLE {
                    break;
                }
            } else {
                (now, still) = (again, Duration::ZERO);
            }
        }
        now
    }
}

/// What tells a file's versions apart: its inode (a rename puts another there), length,
/// and modification and status-change times (the latter moves on `chmod` too, so a file made
/// readable after a failed read is read again).
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.len(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()))
}

/// Where the config text `name` (`APPLIED`, `STARTED`) is recorded: a `file` store's
/// directory; other stores have none.
fn recorded_path(config: &Config, name: &str) -> Option<PathBuf> {
    match &config.tasks.store {
        StoreKind::File(dir) => Some(dir.join(name)),
        _ => None,
    }
}

/// Records `text` as `name` (only its owner may read it: it may hold secrets, as the config
/// file does). A failure is logged; it costs `taskgate check` its answer only.
fn record(config: &Config, name: &str, text: &str) {
    let Some(path) = recorded_path(config, name) else { return };
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
        tracing::warn!("cannot record the config in {}: {e}", path.display());
    }
}

/// What reloading the gateway that runs with `config`'s task store to `config` (read from
/// `path`) would change, as `taskgate check` prints it: the upstreams, policy and limits
/// against the config last applied, the keys that need a restart against the one it started
/// with. (Files the config names, token and certificate files, are read at each reload and
/// not compared here.)
pub fn pending(path: &Path, config: &Config) -> String {
    let (Some(applied), Some(started)) = (recorded_path(config, APPLIED), recorded_path(config, STARTED)) else {
        return "# reload: what a reload would change is known only with a \"file\" task store \
                (the gateway records the config it applied there)\n"
            .into();
    };
    let read = |p: &Path| match std::fs::read_to_string(p) {
        Ok(text) => Config::load_text(path, &text).map_err(|e| format!("it no longer loads: {}", e.0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("not there: no gateway has run with this store yet".into())
        }
        Err(e) => Err(format!("cannot read it: {e}")),
    };
    let (running, start) = match (read(&applied), read(&started)) {
        (Ok(a), Ok(s)) => (a, s),
        (Err(why), _) => return format!("# reload: the config last applied ({}): {why}\n", applied.display()),
        (_, Err(why)) => return format!("# reload: the config started with ({}): {why}\n", started.display()),
    };
    let mut change = ConfigChange::between(&running, config);
    change.restart = ConfigChange::between(&start, config).restart;
    let lines: String = change.describe().lines().map(|l| format!("#   {l}\n")).collect();
    format!("# reload: against the config last applied ({}), a reload would change:\n{lines}", applied.display())
}

/// `taskgate serve` without a config file (`--mcp-servers`): a SIGHUP is logged, not obeyed
/// (and does not end the process). The handler is installed now.
pub fn refuse_sighup(stop: CancellationToken) -> impl Future<Output = ()> + Send {
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    async move {
        let Ok(mut hup) = hup else { return };
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = hup.recv() => tracing::warn!("SIGHUP: nothing to reload (serving an mcpServers file, not a config file)"),
            }
        }
    }
}
