//! The `taskgate` command line: serve (default), stdio, check, versions, demo-server.

use clap::{Parser, Subcommand};

// A message's life is a burst of small allocations (JSON values, frames, channels) across
// threads; mimalloc serves that pattern with fewer slow paths than the system allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use taskgate::{Config, ConfigError, Gateway, HttpServer, ServerConfig, StdioError, UpstreamConfig, serve_stdio};

#[derive(Parser)]
#[command(name = "taskgate", version, about = "An MCP gateway that adds task semantics where one side lacks them")]
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
    Serve,
    /// Serve one client on stdin/stdout in front of one upstream.
    Stdio {
        /// The upstream to serve, by name.
        #[arg(long)]
        upstream: String,
    },
    /// Validate the config and print the effective settings.
    Check,
    /// Print the protocol versions the gateway speaks and the table it translates between
    /// them with (Markdown).
    Versions,
    /// Run the built-in demo MCP server: on stdio, or over Streamable HTTP at /mcp with --listen.
    DemoServer,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr: stdout may be an MCP channel.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let outcome = runtime.block_on(run(cli));
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

fn load(path: Option<PathBuf>) -> Result<Config, Failure> {
    let path = path.unwrap_or_else(|| PathBuf::from("config.toml"));
    Ok(Config::load(&path)?)
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Check => {
            let config = load(cli.config)?;
            print!("{}", config.describe());
            Ok(())
        }
        Command::Versions => {
            print!("{}", taskgate::version_table());
            Ok(())
        }
        Command::Serve => {
            let mut config = load(cli.config)?;
            if let Some(l) = cli.listen {
                config.server.listen = l;
            }
            let names: Vec<String> = config.upstreams.iter().map(|u| format!("/mcp/{}", u.name)).collect();
            let paths = format!("{}, and each at /sse/<name> over legacy HTTP+SSE", names.join(", "));
            let tls = config.server.tls.as_ref().map(taskgate::tls_acceptor).transpose()?;
            let server = HttpServer::new(Gateway::open(config.clone()).map_err(|e| Failure::Store(e.to_string()))?);
            serve_http(server, config.server.listen, &paths, tls).await
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
    let (addr, task) = taskgate::bind_http_with(server.clone(), listen, tls)
        .await
        .map_err(|cause| Failure::Listen { addr: listen, cause })?;
    tracing::info!("listening on {scheme}://{addr} (serving {paths})");
    tokio::select! {
        _ = task => {}
        _ = shutdown_signal() => tracing::info!("shutting down: no new connections; draining the requests in flight"),
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
