//! A real Kubernetes control plane on 127.0.0.1 for tests: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler and kwok fake nodes, built from pinned Go modules by
//! `tests/cluster/build.sh`; on request also one real node ([`Cluster::real_node`]), the
//! autoscaling metrics pipeline ([`Cluster::metrics`]), Karpenter ([`Cluster::karpenter`]) and
//! KEDA ([`Cluster::keda`]).
//!
//! The API server keeps an audit log of what ServiceAccounts write ([`Cluster::audited_writes`]).
//!
//! One cluster serves a whole test binary ([`Cluster::shared`]); each test takes its own
//! namespace ([`Cluster::namespace`]). Everything stops when the test process exits.

pub mod addresses;
mod aggregated;
pub mod audit;
mod components;
pub mod karpenter;
mod keda;
mod kubeconfig;
pub mod metrics;
mod namespace;
pub mod netns;
mod nodes;
mod pki;
pub mod real_node;
mod relay;
pub mod storage;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub(crate) use components::bin_dir;
pub use components::{HPA_SYNC_SECONDS, KWOK_NODE_LEASE_SECONDS};
pub use karpenter::Karpenter;
pub use keda::Keda;
pub use metrics::MetricsPipeline;
pub use namespace::TestNamespace;
pub use real_node::RealNode;

/// Why the local control plane could not be started or used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A file or process operation failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// A set-up step failed; the message names it.
    #[error("{0}")]
    Setup(String),
    /// A component did not become ready in time.
    #[error("{component} not ready after {seconds}s; last lines of {log}:\n{tail}")]
    NotReady { component: &'static str, seconds: u64, log: String, tail: String },
    /// Another process on this machine runs the one real node it can hold.
    #[error("{0}")]
    RealNodeBusy(String),
    /// The API server refused or failed a request.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// A running local control plane.
pub struct Cluster {
    state_dir: PathBuf,
    bin_dir: PathBuf,
    /// etcd's client URL, `http://127.0.0.1:PORT`.
    etcd_url: String,
    server: String,
    /// The API server's port on 127.0.0.1 (the port of [`Self::server`]).
    api_port: u16,
    pki: pki::Pki,
    identities: pki::Identities,
    kubeconfig: PathBuf,
    real_node: OnceLock<RealNode>,
    metrics: OnceLock<MetricsPipeline>,
    karpenter: OnceLock<Karpenter>,
    keda: OnceLock<Keda>,
}

static SHARED: OnceLock<Cluster> = OnceLock::new();

impl Cluster {
    /// The cluster of this test process, started by the first caller.
    pub fn shared() -> &'static Cluster {
        SHARED.get_or_init(|| {
            Cluster::start().unwrap_or_else(|err| panic!("local control plane failed: {err}"))
        })
    }

    /// [`Self::shared`] with its real node up, images imported from `$RENDERPOOL_IMAGES`.
    pub fn shared_with_real_node() -> &'static Cluster {
        let cluster = Self::shared();
        cluster.real_node();
        cluster
    }

    /// This cluster's real node, started by the first caller with the OCI archives in
    /// `$RENDERPOOL_IMAGES` imported (see [`RealNode`]).
    pub fn real_node(&self) -> &RealNode {
        self.real_node.get_or_init(|| {
            real_node::images_dir()
                .and_then(|images| RealNode::start(self, &images))
                .unwrap_or_else(|err| panic!("real node failed: {err}"))
        })
    }

    /// Starts this cluster's real node with the OCI archives in `images` imported; fails if it
    /// already has one or another process on this machine holds the real node.
    pub fn start_real_node(&self, images: &Path) -> Result<&RealNode, ClusterError> {
        let node = RealNode::start(self, images)?;
        self.real_node
            .set(node)
            .map_err(|_| ClusterError::Setup("this cluster already has its real node".into()))?;
        self.real_node
            .get()
            .ok_or_else(|| ClusterError::Setup("real node vanished after start".into()))
    }

    /// This cluster's metrics pipeline (Prometheus and prometheus-adapter serving
    /// `custom.metrics.k8s.io`), started with the real node by the first caller.
    pub fn metrics(&self) -> &MetricsPipeline {
        self.metrics.get_or_init(|| {
            self.real_node();
            MetricsPipeline::start(self)
                .unwrap_or_else(|err| panic!("metrics pipeline failed: {err}"))
        })
    }

    /// This cluster's KEDA, started by the first caller with the real node (its adapter
    /// listens on the node's bridge).
    pub fn keda(&self) -> &Keda {
        self.keda.get_or_init(|| {
            self.real_node();
            Keda::start(self).unwrap_or_else(|err| panic!("KEDA failed: {err}"))
        })
    }

    /// This cluster's Karpenter (KWOK provider), started by the first caller; it needs no real
    /// node.
    pub fn karpenter(&self) -> &Karpenter {
        self.karpenter.get_or_init(|| {
            Karpenter::start(self).unwrap_or_else(|err| panic!("karpenter failed: {err}"))
        })
    }

    /// Starts a new control plane; it stops when the process exits.
    pub fn start() -> Result<Cluster, ClusterError> {
        let bin_dir = components::bin_dir()?;
        components::start_all(bin_dir)
    }

    /// The admin kubeconfig (group `system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server URL, `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// etcd's client URL (`http://127.0.0.1:PORT`): what the API server stored, read past it
    /// ([`storage`]).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The CA certificate that signed the API server's serving certificate.
    pub fn ca_cert(&self) -> &Path {
        &self.pki.ca.cert
    }

    /// Folder holding this cluster's state, certificates and component logs.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Path of a control-plane tool (`kubectl`, `helm`, `etcd`, ...).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }

    /// A client with admin rights; a new one per call, so each tokio runtime gets its own.
    pub async fn client(&self) -> kube::Client {
        self.client_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|err| panic!("admin client for the local cluster: {err}"))
    }

    /// An admin client that hands every 429 and 503 back to the caller: kube's default client
    /// retries them with backoff, which hides what the API server refused (an eviction a PDB
    /// forbids, say).
    pub async fn client_without_retries(&self) -> kube::Client {
        let mut config = self
            .config_for(&self.kubeconfig)
            .await
            .unwrap_or_else(|err| panic!("admin client for the local cluster: {err}"));
        config.default_retry = false;
        kube::Client::try_from(config)
            .unwrap_or_else(|err| panic!("admin client for the local cluster: {err}"))
    }

    /// A client for another kubeconfig of this cluster (e.g. one from [`Self::kubeconfig_for_token`]).
    pub async fn client_for(&self, kubeconfig: &Path) -> Result<kube::Client, ClusterError> {
        Ok(kube::Client::try_from(self.config_for(kubeconfig).await?)?)
    }

    async fn config_for(&self, kubeconfig: &Path) -> Result<kube::Config, ClusterError> {
        let raw = kube::config::Kubeconfig::read_from(kubeconfig)
            .map_err(|err| ClusterError::Setup(format!("read {}: {err}", kubeconfig.display())))?;
        kube::Config::from_custom_kubeconfig(raw, &Default::default())
            .await
            .map_err(|err| ClusterError::Setup(format!("kubeconfig: {err}")))
    }

    /// Writes a kubeconfig that authenticates with `token` (e.g. a ServiceAccount's) and
    /// returns its path.
    pub fn kubeconfig_for_token(&self, name: &str, token: &str) -> PathBuf {
        let path = self.state_dir.join(format!("kubeconfig-{name}"));
        kubeconfig::write(&path, &self.server, &self.pki.ca.cert, token)
            .unwrap_or_else(|err| panic!("write {}: {err}", path.display()));
        path
    }

    /// `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(self.bin("kubectl"));
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }

    /// `helm` with the admin kubeconfig and its caches inside the cluster's state folder.
    pub fn helm(&self) -> Command {
        let mut command = Command::new(self.bin("helm"));
        let home = self.state_dir.join("helm");
        command
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"));
        command
    }

    /// The writes `user` made in `namespace` so far, from the API server's audit log (which
    /// records every ServiceAccount's writes but the controller-manager's).
    pub fn audited_writes(&self, user: &str, namespace: &str) -> Vec<audit::Write> {
        let log = std::fs::read_to_string(audit::log_path(&self.state_dir)).unwrap_or_default();
        audit::writes(&log, user, namespace)
    }

    /// Makes sure kwok fake nodes `prefix-0..count` exist with this capacity and are Ready.
    pub async fn ensure_nodes(&self, prefix: &str, count: u32, cpu: &str, memory: &str) {
        nodes::ensure(&self.client().await, prefix, count, cpu, memory)
            .await
            .unwrap_or_else(|err| panic!("kwok nodes {prefix}: {err}"))
    }

    /// A fresh namespace whose `default` ServiceAccount exists; deleted when dropped.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        TestNamespace::create(self, prefix)
            .await
            .unwrap_or_else(|err| panic!("namespace {prefix}: {err}"))
    }
}

/// Runs `command`, returning stdout, or an error carrying its stderr.
pub fn run(command: &mut Command) -> Result<String, ClusterError> {
    run_with_input(command, &[])
}

/// As [`run`], with `input` written to the command's stdin (`kubectl apply -f -`).
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Result<String, ClusterError> {
    let output = output_with_input(command, input)?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(ClusterError::Setup(format!(
            "{:?} failed ({}): {}{}",
            command,
            output.status,
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        )))
    }
}

/// Runs `command` with `input` on its stdin and returns what it exited with and wrote, whatever
/// its exit status (`kubectl diff` exits 1 when it found differences).
pub fn output_with_input(
    command: &mut Command,
    input: &[u8],
) -> Result<std::process::Output, ClusterError> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = command
        .stdin(if input.is_empty() { Stdio::null() } else { Stdio::piped() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input)?;
    }
    Ok(child.wait_with_output()?)
}

/// A system binary from PATH or the sbin folders (root's tools live there).
pub(crate) fn system_tool(name: &str) -> Result<PathBuf, ClusterError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            ClusterError::Setup(format!(
                "`{name}` is not installed; the test harness needs it (scripts/setup.sh --cluster \
                 installs it)"
            ))
        })
}

/// Whether `GET http://127.0.0.1:<port><path>` answers 200.
pub(crate) fn http_ok(port: u16, path: &str) -> bool {
    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|stream| http_ok_on(stream, path))
}

/// Whether `GET <path>` over the connected `stream` answers 200 (plain HTTP/1.0).
pub(crate) fn http_ok_on(mut stream: std::net::TcpStream, path: &str) -> bool {
    use std::io::{Read, Write};
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
}
