//! The `taskgate` command line: serve (default), stdio, check, versions, demo-server, import.

use clap::{Parser, Subcommand};
use tracing_subscriber::Layer as _;

// A message's life is a burst of small allocations (JSON values, frames, channels) across
// threads; mimalloc serves that pattern with fewer slow paths than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use taskgate::{
    Config, ConfigError, Gateway, HttpServer, McpServers, Reloader, ServerConfig, StdioError, UpstreamConfig,
    serve_stdio,
};

#[derive(Parser)]
#[command(
    name = "taskgate",
    version,
    about = "An MCP gateway that adds task semantics where one side lacks them",
    after_help = "Docs: README.md, then docs/configuration.md (every config key), docs/tasks.md, docs/transports.md, \
                  docs/versions.md and docs/operating.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Config file (for the default `serve`).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Address to listen on, overriding `server.listen` (for `serve` and `demo-server`).
    #[arg(long, global = true)]
    listen: Option<SocketAddr>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway over Streamable HTTP (the default).
    #[command(after_help = "Docs: docs/operating.md (running it), docs/configuration.md (the config file).")]
    Serve {
        /// Serve the servers of a desktop client's `mcpServers` JSON file (as `import` reads
        /// them) with the default settings, instead of a config file.
        #[arg(long, value_name = "FILE", conflicts_with = "config")]
        mcp_servers: Option<PathBuf>,
    },
    /// Serve one client on stdin/stdout in front of one upstream.
    #[command(after_help = "Docs: docs/transports.md#stdio-flow-control.")]
    Stdio {
        /// The upstream to serve, by name.
        #[arg(long)]
        upstream: String,
    },
    /// Validate the config and print the effective settings, and which era each upstream
    /// was found to speak (as the task store remembers it).
    #[command(after_help = "Docs: docs/configuration.md (every key, its default and bounds).")]
    Check,
    /// Print the protocol versions the gateway speaks and the table it translates between
    /// them with (Markdown).
    #[command(after_help = "Docs: docs/versions.md (the table, and what it means).")]
    Versions,
    /// Run the built-in demo MCP server: on stdio, or over Streamable HTTP at /mcp with --listen.
    #[command(after_help = "Docs: docs/testing.md#the-demo-server.")]
    DemoServer,
    /// Print the taskgate config (TOML) equivalent to a desktop client's `mcpServers` JSON
    /// file. Its env values and headers are copied as they are, secrets included.
    #[command(after_help = "Docs: docs/operating.md#importing-an-mcpservers-file.")]
    Import {
        /// The JSON file, e.g. claude_desktop_config.json.
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let cli = Cli::parse();
    taskgate::huge_pages_off();
    idle_purge::purge_at_once();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(idle_purge::on_park)
        .build()
        .expect("tokio runtime");
    // Logs go to stderr: stdout may be an MCP channel.
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(false).with_filter(
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
    );
    // Spans go to the OTLP collector of `serve`'s config, if it names one.
    let otlp = match &cli.command {
        None | Some(Command::Serve { mcp_servers: None }) => load(cli.config.clone()).ok().and_then(|c| c.server.otlp),
        Some(_) => None,
    };
    let (traces, provider) = match otlp.map(|o| {
        let _in_runtime = runtime.enter();
        traces::start(&o)
    }) {
        Some(Ok((layer, provider))) => (Some(layer), Some(provider)),
        Some(Err(e)) => {
            eprintln!("taskgate: server.otlp: {e}");
            return ExitCode::FAILURE;
        }
        None => (None, None),
    };
    tracing_subscriber::registry().with(traces).with(logs).init();
    let outcome = runtime.block_on(run(cli));
    if let Some(p) = provider {
        // What is still batched is sent before the process ends.
        runtime.block_on(traces::stop(p));
    }
    // A blocking read of our stdin (taskgate stdio) never returns on its own: do not wait
    // for it.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("taskgate: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Why the command failed: printed after "taskgate: ", and the exit status is 1.
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Stdio(#[from] StdioError),
    /// The task store could not be opened (its data directory, a second gateway on it).
    #[error("{0}")]
    Store(String),
    #[error(transparent)]
    Tls(#[from] taskgate::TlsError),
    #[error("cannot listen on {addr}: {cause}")]
    Listen { addr: SocketAddr, cause: std::io::Error },
}

fn config_path(path: Option<PathBuf>) -> PathBuf {
    path.unwrap_or_else(|| PathBuf::from("config.toml"))
}

fn load(path: Option<PathBuf>) -> Result<Config, Failure> {
    Ok(Config::load(&config_path(path))?)
}

/// Reads an `mcpServers` file; each warning is `warn`ed.
fn read_mcp_servers(path: &std::path::Path, warn: impl Fn(&str)) -> Result<McpServers, Failure> {
    let at = |e: String| ConfigError(format!("{}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| at(format!("cannot read it: {e}")))?;
    let servers = McpServers::parse(&text).map_err(|e| at(e.0))?;
    for w in &servers.warnings {
        warn(&format!("{}: {w}", path.display()));
    }
    Ok(servers)
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command.unwrap_or(Command::Serve { mcp_servers: None }) {
        Command::Check => {
            let path = config_path(cli.config);
            let config = Config::load(&path)?;
            print!("{}", config.describe());
            print!("\n{}", taskgate::eras_report(&config).await);
            print!("\n{}", taskgate::pending_reload(&path, &config));
            Ok(())
        }
        Command::Versions => {
            print!("{}", taskgate::version_table());
            Ok(())
        }
        Command::Import { file } => {
            let servers = read_mcp_servers(&file, |w| eprintln!("taskgate: warning: {w}"))?;
            print!("{}", servers.to_toml(&file.display().to_string()));
            Ok(())
        }
        Command::Serve { mcp_servers } => {
            // The config file and its text, which a reload reads again.
            let mut source = None;
            let mut config = match mcp_servers {
                None => {
                    let path = config_path(cli.config);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
                    let config = Config::load_text(&path, &text)?;
                    source = Some((path, text));
                    config
                }
                Some(file) => read_mcp_servers(&file, |w| tracing::warn!("{w}"))?
                    .config(&|k| std::env::var(k).ok())
                    .map_err(|e| ConfigError(format!("{}: {}", file.display(), e.0)))?,
            };
            if let Some(l) = cli.listen {
                config.server.listen = l;
            }
            taskgate::raise_open_file_limit(config.server.max_connections, config.server.max_links);
            let names: Vec<String> = config.upstreams.iter().map(|u| format!("/mcp/{}", u.name)).collect();
            let paths = format!("{}, and each at /sse/<name> over legacy HTTP+SSE", names.join(", "));
            let tls = config.server.tls.as_ref().map(taskgate::tls_acceptor).transpose()?;
            let server = HttpServer::new(Gateway::open(config.clone()).map_err(|e| Failure::Store(e.to_string()))?);
            let stop = tokio_util::sync::CancellationToken::new();
            match source {
                Some((path, text)) => {
                    let reloader = Reloader::new(path, text, server.clone(), cli.listen);
                    tokio::spawn(reloader.run(config.server.watch_config, stop.clone()));
                }
                None => drop(tokio::spawn(taskgate::refuse_sighup(stop.clone()))),
            }
            let served = serve_http(server, config.server.listen, &paths, tls).await;
            stop.cancel();
            served
        }
        Command::Stdio { upstream } => {
            let mut config = load(cli.config)?;
            if !config.tasks.store_chosen {
                config.tasks.store = taskgate::StoreKind::Memory;
            }
            let stop = shutdown_signal();
            serve_stdio(Gateway::open(config).map_err(|e| Failure::Store(e.to_string()))?, &upstream, stop).await?;
            children_exited().await;
            Ok(())
        }
        Command::DemoServer => match cli.listen {
            None => {
                taskgate::serve_demo_stdio().await;
                Ok(())
            }
            Some(listen) => {
                let demo = UpstreamConfig::plain_demo();
                let server = ServerConfig { listen, allowed_hosts: vec!["*".into()], ..ServerConfig::default() };
                let config = Config { server, tasks: Default::default(), upstreams: vec![demo.clone()] };
                let routes = HashMap::from([("/mcp".to_string(), Arc::new(demo))]);
                let server = HttpServer::with_routes(Gateway::new(config), routes);
                serve_http(server, listen, "/mcp", None).await
            }
        },
    }
}

async fn serve_http(
    server: Arc<HttpServer>,
    listen: SocketAddr,
    paths: &str,
    tls: Option<taskgate::TlsAcceptor>,
) -> Result<(), Failure> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (addr, mut task) = taskgate::bind_http_with(server.clone(), listen, tls)
        .await
        .map_err(|cause| Failure::Listen { addr: listen, cause })?;
    tracing::info!("listening on {scheme}://{addr} (serving {paths})");
    tokio::select! {
        _ = &mut task => {}
        _ = shutdown_signal() => {
            server.stop_accepting();
            // Once it has ended, the listener is closed.
            let _ = task.await;
            tracing::info!("shutting down: no new connections; draining the requests in flight");
        }
    }
    server.shutdown().await;
    children_exited().await;
    tracing::info!("shut down");
    Ok(())
}

/// SIGTERM or Ctrl-C. The handlers are installed now, before the future is first polled.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
    let ctrl_c = tokio::signal::ctrl_c();
    async move {
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
}

/// Waits for the stdio children, already told to stop (stdin closed, then SIGTERM, then
/// SIGKILL, a second apart), to be gone.
async fn children_exited() {
    let wait = tokio::time::timeout(std::time::Duration::from_secs(4), taskgate::all_children_exited());
    if wait.await.is_err() {
        tracing::warn!("some upstream processes had not exited 4s after being told to stop");
    }
}

// Which span export this build has: the exporter, or the refusal of `[server.otlp]`.
#[cfg(not(feature = "otlp"))]
use no_traces as traces;
#[cfg(feature = "otlp")]
use otlp_traces as traces;

/// Span export over OTLP/HTTP (protobuf), batched on the runtime; with the `otlp` feature.
#[cfg(feature = "otlp")]
mod otlp_traces {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::Layer;

    pub type Traces = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

    /// The layer that exports the gateway's spans (only spans, only the gateway's: its logs
    /// stay on stderr), and the provider to stop at exit. Called within the runtime.
    pub fn start(cfg: &taskgate::OtlpConfig) -> Result<(Traces, SdkTracerProvider), String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(cfg.traces_url())
            .build()
            .map_err(|e| e.to_string())?;
        let processor = opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            exporter,
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
        let resource = opentelemetry_sdk::Resource::builder().with_service_name(cfg.service_name.clone()).build();
        let provider = SdkTracerProvider::builder().with_span_processor(processor).with_resource(resource).build();
        let only_spans = tracing_subscriber::filter::filter_fn(|m| m.is_span() && m.target().starts_with("taskgate"));
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("taskgate")).with_filter(only_spans);
        Ok((Box::new(layer), provider))
    }

    /// Flushes what is batched and stops the exporter, within a few seconds.
    pub async fn stop(provider: SdkTracerProvider) {
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown());
        if tokio::time::timeout(std::time::Duration::from_secs(5), flushed).await.is_err() {
            eprintln!("taskgate: the OTLP collector did not take the last spans within 5s");
        }
    }
}

/// Without the `otlp` feature, `[server.otlp]` is refused at start. Compiled in every build,
/// so the test command's build (which has the feature) lints and tests it too.
#[cfg_attr(feature = "otlp", allow(dead_code))]
mod no_traces {
    pub type Traces = tracing_subscriber::layer::Identity;

    pub fn start(_: &taskgate::OtlpConfig) -> Result<(Traces, ()), String> {
        Err("this taskgate was built without the `otlp` feature (cargo build --features otlp)".into())
    }

    pub async fn stop(_: ()) {}

    #[test]
    fn server_otlp_is_refused_naming_the_feature() {
        let cfg = taskgate::OtlpConfig { endpoint: "http://127.0.0.1:4318".into(), service_name: "taskgate".into() };
        let Err(refused) = start(&cfg) else { panic!("a build without the exporter refuses") };
        assert!(refused.contains("--features otlp"), "{refused}");
    }
}

/// Giving back what a worker freed once it goes idle. mimalloc keeps the pages a thread has
/// freed in that thread's own heap until the thread allocates again, so a tokio worker that
/// parks after a burst holds them: in a soak, about 10 MiB of RSS after the load stopped, for
/// about 1 MiB still in use (docs/performance.md, "Memory after load"). A worker that parks
/// returns its free pages to the OS, at most once per [`idle_purge::EVERY`] so that the
/// many parks of a busy worker cost nothing.
///
/// What is freed after a worker's last collection goes back to mimalloc's arenas, which by
/// default return it to the OS a second later (`purge_delay`), but only when some later
/// allocator call gets to it: an idle gateway makes none, and it stayed (+25 % of RSS in a
/// soak). The gateway has it returned at once ([`idle_purge::purge_at_once`]); that costs
/// about one `madvise` and one page fault per 100 calls (docs/performance.md).
mod idle_purge {
    use std::cell::Cell;
    use std::ffi::{c_int, c_long};
    use std::time::{Duration, Instant};

    pub const EVERY: Duration = Duration::from_secs(1);

    /// `mi_option_purge_delay` in mimalloc's `mi_option_t` (the v3 library the `mimalloc`
    /// crate builds by default); its default is 1000 ms.
    const PURGE_DELAY: c_int = 15;

    // Part of the mimalloc library the global allocator links (`mimalloc.h`): collects the
    // calling thread's heap and, with `force`, returns free memory to the OS at once; reads
    // and sets an option.
    unsafe extern "C" {
        fn mi_collect(force: bool);
        #[cfg(test)]
        fn mi_option_get(option: c_int) -> c_long;
        fn mi_option_set(option: c_int, value: c_long);
    }

    /// Memory freed into mimalloc's arenas goes back to the OS at once, not a second later
    /// (unless the operator set `MIMALLOC_PURGE_DELAY`, which wins).
    pub fn purge_at_once() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: sets an integer option; called once, before any other thread starts.
            unsafe { mi_option_set(PURGE_DELAY, 0) }
        }
    }

    thread_local! {
        static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    /// Whether a collection is due at `now`, given the thread's last one; records it if so.
    pub fn due(last: &Cell<Option<Instant>>, now: Instant) -> bool {
        if last.get().is_some_and(|at| now.saturating_duration_since(at) < EVERY) {
            return false;
        }
        last.set(Some(now));
        true
    }

    pub fn on_park() {
        if LAST.with(|last| due(last, Instant::now())) {
            // SAFETY: mi_collect takes no pointer and may be called on any thread at any time.
            unsafe { mi_collect(true) }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_worker_collects_on_its_first_park_then_at_most_once_per_interval() {
            let last = Cell::new(None);
            let t0 = Instant::now();
            assert!(due(&last, t0), "the first park collects");
            assert!(!due(&last, t0 + EVERY / 2), "a park within the interval does not");
            assert!(!due(&last, t0), "nor one at the same instant");
            assert!(due(&last, t0 + EVERY), "a park once the interval has passed does");
            assert!(!due(&last, t0 + EVERY + EVERY / 2));
        }

        #[test]
        fn the_purge_delay_option_is_the_one_set() {
            // The index is mimalloc's enum order: reading it must give purge_delay's default.
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                // SAFETY: reads an integer option.
                assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, 1000, "not mimalloc v3's purge_delay");
            }
        }

        #[test]
        fn collecting_is_callable_on_any_thread() {
            // Links and runs the allocator's collection (a missing symbol fails the build).
            std::thread::spawn(|| {
                let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![0; 64 + i]).collect();
                drop(v);
                on_park();
            })
            .join()
            .unwrap();
        }
    }
}
