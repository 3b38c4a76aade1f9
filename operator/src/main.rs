//! The renderpool-operator binary: prints the CRD or the children of a pool, or runs the
//! controller.

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use renderpool_operator::controller::Scope;
use renderpool_operator::crd;
use renderpool_operator::leader::{self, LeaseConfig, Readiness};
use renderpool_operator::metrics::Metrics;
use renderpool_operator::requests::CountRequests;
use renderpool_runtime::listen;
use renderpool_runtime::logging::{self, LogFormat};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// Kubernetes operator for renderpool: RenderPool in, sized render and Gotenberg pools out.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the RenderPool CustomResourceDefinition as YAML.
    Crd,
    /// Run the controller (connects with KUBECONFIG or the in-cluster service account).
    Run(RunArgs),
    /// GET a URL and exit non-zero unless it answers 2xx (the chart's `helm test` hook: the
    /// image has no shell or wget).
    Probe(ProbeArgs),
    /// Print, as a YAML stream, the children this operator would apply for RenderPool
    /// manifests: before an upgrade or a spec change, compare them with what runs, e.g.
    /// `kubectl get rp NAME -o yaml | renderpool-operator children - | kubectl diff
    /// --server-side --field-manager=renderpool-operator --force-conflicts -f -`.
    Children(ChildrenArgs),
}

#[derive(clap::Args)]
struct ChildrenArgs {
    /// The manifest: a file, or - for standard input. A pool read from the cluster (kubectl get
    /// -o yaml) gives children with its owner reference; one written by hand, without.
    file: std::path::PathBuf,
    /// Namespace of a pool whose manifest names none.
    #[arg(long, short, default_value = "default")]
    namespace: String,
}

#[derive(clap::Args)]
struct ProbeArgs {
    /// The URL to GET (plain HTTP).
    url: String,
    /// Seconds to wait for the whole answer.
    #[arg(long, default_value_t = 10)]
    timeout_seconds: u64,
}

#[derive(clap::Args)]
struct RunArgs {
    /// Address of the /metrics, /healthz and /readyz endpoints (`[::]` is every interface of both
    /// address families, or of IPv4 alone where the kernel has no IPv6).
    #[arg(long, env = "OPERATOR_LISTEN", default_value = "[::]:8080")]
    listen: SocketAddr,
    /// Namespaces to watch, comma-separated [default: every namespace]. The chart sets it in its
    /// namespace-scoped mode, where Roles in these namespaces are all the operator may use.
    #[arg(long, env = "WATCH_NAMESPACES", value_delimiter = ',')]
    watch_namespaces: Vec<String>,
    /// Namespace of the leader-election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, env = "LEASE_NAME", default_value = "renderpool-operator")]
    lease_name: String,
    /// Seconds the Lease stays valid without renewal; a crashed leader is replaced after this.
    #[arg(long, env = "LEASE_DURATION_SECONDS", default_value_t = 15)]
    lease_duration_seconds: u64,
    /// Seconds a new leader may take to fill its caches (the first list of every watched kind);
    /// past it, the process releases the lease and exits, so it restarts with fresh connections.
    #[arg(long, env = "SYNC_TIMEOUT_SECONDS", default_value_t = 60)]
    sync_timeout_seconds: u64,
    /// Identity in the Lease [default: POD_NAME, else <hostname>-<pid>].
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Json)]
    log_format: LogFormat,
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Crd => {
            let definition = crd::definition().context("building the CRD")?;
            let yaml = serde_saphyr::to_string(&definition).context("rendering the CRD")?;
            print!("{yaml}");
            Ok(())
        }
        Command::Run(args) => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            runtime.block_on(run(args))
        }
        Command::Children(args) => {
            let manifest = if args.file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).context("reading standard input")?
            } else {
                std::fs::read_to_string(&args.file)
                    .with_context(|| format!("reading {}", args.file.display()))?
            };
            let children = renderpool_operator::preview::children_of(&manifest, &args.namespace)?;
            for child in children {
                print!("---\n{}", serde_saphyr::to_string(&child).context("rendering a child")?);
            }
            Ok(())
        }
        Command::Probe(args) => {
            let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
            let timeout = std::time::Duration::from_secs(args.timeout_seconds);
            let body = runtime.block_on(renderpool_operator::probe::get(&args.url, timeout))?;
            println!("{body}");
            Ok(())
        }
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    // kube-lease-manager logs every renewal at info.
    logging::init(args.log_format, "info,kube_lease_manager=warn");
    let metrics = Arc::new(Metrics::default());
    let config = kube::Config::infer()
        .await
        .context("finding the Kubernetes connection (KUBECONFIG or in-cluster service account)")?;
    let client = kube::client::ClientBuilder::try_from(config)
        .context("building the Kubernetes client")?
        .with_layer(&CountRequests(metrics.clone()))
        .build();
    let readiness = Arc::new(Readiness::default());
    let listener =
        listen::bind(args.listen).await.with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr().context("reading the bound address")?;
    tracing::info!(listen = %local, "serving /metrics, /healthz, /readyz");
    let app = renderpool_operator::http::router(metrics.clone(), readiness.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("signal received; shutting down");
        let _ = stop.send(true);
    });
    let namespaces: Vec<String> = args
        .watch_namespaces
        .into_iter()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .collect();
    let scope = if namespaces.is_empty() { Scope::Cluster } else { Scope::Namespaces(namespaces) };
    tracing::info!(?scope, "watching");
    let lease = LeaseConfig {
        namespace: args.lease_namespace,
        name: args.lease_name,
        identity: args.identity.unwrap_or_else(default_identity),
        duration_seconds: args.lease_duration_seconds.max(2),
        scope,
        sync_timeout: std::time::Duration::from_secs(args.sync_timeout_seconds.max(1)),
    };
    let result = leader::run(client, lease, metrics, readiness, stop_rx).await;
    server.abort();
    result.context("leader election")
}

/// Two local processes share a hostname, so the pid keeps their identities apart.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "renderpool-operator".into());
    format!("{host}-{}", std::process::id())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot listen for SIGTERM");
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
