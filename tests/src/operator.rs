//! The operator as a cluster would run it: the Helm chart installed (CRD, ServiceAccount,
//! least-privilege RBAC, cluster-wide or namespace-scoped), and the operator binary running as a
//! local process with a token minted for the chart's own ServiceAccount, so its rights are
//! exactly the chart's; or, on the real node, the chart's own operator pods
//! ([`ChartInstall::on_real_node`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube::ResourceExt;
use tokio::sync::OnceCell;

use crate::cluster::{Cluster, run};
use renderpool_testkit::wait;

use crate::{free_port, process, repo_root, workspace_bin};

/// Namespace the chart is installed into.
pub const RELEASE_NAMESPACE: &str = "renderpool-system";
/// Helm release name; the chart names its ServiceAccount and RBAC after it.
pub const RELEASE: &str = "renderpool-operator";

/// The user the operator acts as: the chart's ServiceAccount (for [`Cluster::audited_writes`]).
pub fn service_account_user() -> String {
    format!("system:serviceaccount:{RELEASE_NAMESPACE}:{RELEASE}")
}

/// What the test operators log: the default, plus one debug line per finished reconcile (its
/// outcome, inside the span that names the pool and what triggered it).
const LOG_FILTER: &str = "info,kube_lease_manager=warn,renderpool_operator::controller=debug";

/// The chart installed into the shared cluster, and a kubeconfig holding its ServiceAccount's token.
pub struct ChartInstall {
    kubeconfig: PathBuf,
    /// The namespaces a scoped install watches; empty for a cluster-wide one.
    watch_namespaces: Vec<String>,
}

static INSTALL: OnceCell<ChartInstall> = OnceCell::const_new();
static ON_REAL_NODE: OnceCell<ChartInstall> = OnceCell::const_new();
static SHARED: OnceCell<OperatorProcess> = OnceCell::const_new();
static STARTED: AtomicU32 = AtomicU32::new(0);

impl ChartInstall {
    /// Installs the chart cluster-wide once per test process and mints the ServiceAccount token.
    pub async fn shared() -> &'static ChartInstall {
        INSTALL.get_or_init(|| async { Self::install(&[]).await }).await
    }

    /// Installs the chart watching only `namespaces` (which must exist), with Roles in each
    /// instead of the ClusterRole. One install per cluster: the release owns the CRD.
    pub async fn scoped(namespaces: &[&str]) -> ChartInstall {
        Self::install(namespaces).await
    }

    /// Installs `chart` (this checkout's, or a previous release's) cluster-wide once per test
    /// process with its operator pods on the shared cluster's real node
    /// ([`Cluster::shared_with_real_node`]), run from the imported image: the operator there is
    /// a pod with the token the kubelet mounts, not a process. [`Self::upgrade_on_real_node`]
    /// then upgrades it to this checkout's chart.
    pub async fn on_real_node(chart: &Path) -> &'static ChartInstall {
        ON_REAL_NODE
            .get_or_init(|| async {
                Self::helm_install(chart, "install", &[], &Self::real_node_values()).await
            })
            .await
    }

    /// `helm upgrade --wait` of the release [`Self::on_real_node`] installed to this checkout's
    /// chart, with the same values.
    pub async fn upgrade_on_real_node() -> ChartInstall {
        let chart = repo_root().join("charts/renderpool-operator");
        Self::helm_install(&chart, "upgrade", &[], &Self::real_node_values()).await
    }

    /// The chart's operator pods on the real node.
    fn real_node_values() -> Vec<String> {
        let cluster = Cluster::shared_with_real_node();
        vec![format!("nodeSelector={}", cluster.real_node().node_selector())]
    }

    async fn install(namespaces: &[&str]) -> ChartInstall {
        // The chart's own operator pods need somewhere to be scheduled (kwok plays them).
        Cluster::shared().ensure_nodes("system", 2, "4", "8Gi").await;
        let chart = repo_root().join("charts/renderpool-operator");
        Self::helm_install(&chart, "install", namespaces, &[]).await
    }

    /// `helm install` (or `upgrade`) `--wait` of `chart` with `--set-json` for each of
    /// `values`, then a token minted for the chart's ServiceAccount.
    async fn helm_install(
        chart: &Path,
        action: &str,
        namespaces: &[&str],
        values: &[String],
    ) -> ChartInstall {
        let cluster = Cluster::shared();
        let mut helm = cluster.helm();
        helm.args([action, RELEASE])
            .arg(chart)
            .args(["--namespace", RELEASE_NAMESPACE, "--create-namespace", "--wait"])
            .args(["--timeout", "180s"]);
        if !namespaces.is_empty() {
            helm.args(["--set", &format!("watchNamespaces={{{}}}", namespaces.join(","))]);
        }
        for value in values {
            helm.args(["--set-json", value]);
        }
        if let Err(err) = run(&mut helm) {
            let pods = run(cluster
                .kubectl()
                .args(["get", "pods,events", "-o", "wide"])
                .args(["-n", RELEASE_NAMESPACE]));
            // Why a pod is not ready is in its own log.
            let logs = run(cluster
                .kubectl()
                .args(["logs", "--prefix", "--tail=60", "--all-containers"])
                .args(["-l", &format!("app.kubernetes.io/instance={RELEASE}")])
                .args(["-n", RELEASE_NAMESPACE]));
            let show = |out: Result<String, _>| {
                out.unwrap_or_else(|err: crate::cluster::ClusterError| err.to_string())
            };
            panic!("helm {action}: {err}\n{}\n{}", show(pods), show(logs));
        }
        run(cluster.kubectl().args([
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/renderpools.renderpool.dev",
        ]))
        .unwrap_or_else(|err| panic!("RenderPool CRD: {err}"));
        let token = run(cluster.kubectl().args([
            "create",
            "token",
            RELEASE,
            "--namespace",
            RELEASE_NAMESPACE,
            "--duration=6h",
        ]))
        .unwrap_or_else(|err| panic!("token for the chart's ServiceAccount: {err}"));
        ChartInstall {
            kubeconfig: cluster.kubeconfig_for_token("operator-sa", token.trim()),
            watch_namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// A kubeconfig that authenticates as the chart's ServiceAccount.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// `kubectl` acting as the chart's ServiceAccount.
    pub fn kubectl(&self) -> Command {
        let mut command = Command::new(Cluster::shared().bin("kubectl"));
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        command
    }
}

/// A `renderpool-operator run` process with the chart's rights; killed when dropped.
pub struct OperatorProcess {
    pid: u32,
    port: u16,
    identity: String,
    log: PathBuf,
}

impl OperatorProcess {
    /// One operator for the whole test process.
    pub async fn shared() -> &'static OperatorProcess {
        SHARED.get_or_init(|| async { Self::start(ChartInstall::shared().await).await }).await
    }

    /// Starts another operator process competing for the same Lease.
    pub async fn start(install: &ChartInstall) -> OperatorProcess {
        Self::start_binary(install, workspace_bin("renderpool-operator")).await
    }

    /// As [`Self::start`], running `binary` (e.g. a release build for a benchmark).
    pub async fn start_binary(install: &ChartInstall, binary: PathBuf) -> OperatorProcess {
        Self::spawn(binary, &install.kubeconfig, &install.watch_namespaces, &[]).await
    }

    /// An operator acting with `kubeconfig`'s rights (not the chart's) over `namespaces`, with
    /// `args` after the usual ones (a later flag wins).
    pub async fn start_as(
        kubeconfig: &std::path::Path,
        namespaces: &[String],
        args: &[&str],
    ) -> OperatorProcess {
        Self::spawn(workspace_bin("renderpool-operator"), kubeconfig, namespaces, args).await
    }

    async fn spawn(
        binary: PathBuf,
        kubeconfig: &std::path::Path,
        namespaces: &[String],
        args: &[&str],
    ) -> OperatorProcess {
        let cluster = Cluster::shared();
        let identity = format!("test-operator-{}", STARTED.fetch_add(1, Ordering::Relaxed));
        let port = free_port();
        let log = cluster.state_dir().join(format!("{identity}.log"));
        let file =
            std::fs::File::create(&log).unwrap_or_else(|err| panic!("{identity} log: {err}"));
        let mut command = Command::new(binary);
        command
            .args(["run", "--listen", &format!("127.0.0.1:{port}"), "--identity", &identity])
            .args(["--log-format", "text"])
            .args(args)
            .env("RUST_LOG", LOG_FILTER)
            // What the chart's Deployment passes in the same install mode.
            .env("WATCH_NAMESPACES", namespaces.join(","))
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAMESPACE", RELEASE_NAMESPACE)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap_or_else(|err| panic!("{identity} log: {err}")))
            .stderr(file);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start {identity}: {err}"));
        let operator = OperatorProcess { pid, port, identity, log };
        let url = format!("http://127.0.0.1:{port}/healthz");
        let what = format!("{identity}'s /healthz 200", identity = operator.identity);
        let healthy = wait::try_until(&what, Duration::from_secs(30), || async {
            let status = reqwest::get(&url).await.map(|r| r.status());
            status.as_ref().is_ok_and(|s| s.is_success()).then_some(()).ok_or(status)
        })
        .await;
        if let Err(timed_out) = healthy {
            panic!("{timed_out}; its log:\n{}", operator.log());
        }
        operator
    }

    /// The identity it holds the Lease under.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// URL of its Prometheus endpoint.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.listen_address())
    }

    /// `127.0.0.1:PORT`, where it serves `/metrics` (a Prometheus target).
    pub fn listen_address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The current Prometheus text.
    pub async fn metrics(&self) -> String {
        let response = reqwest::get(self.metrics_url()).await;
        match response {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(err) => panic!("{} metrics: {err}\n{}", self.identity, self.log()),
        }
    }

    /// Everything it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How it ended, or `None` while it runs.
    pub fn exit_status(&self) -> Option<std::process::ExitStatus> {
        process::exit_status(self.pid)
    }

    /// Kills it at once (SIGKILL), as a crashed node would.
    pub fn kill(&self) {
        process::signal(self.pid, libc::SIGKILL);
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        process::signal(self.pid, libc::SIGTERM);
    }
}

/// resourceVersion of every object of the kinds a RenderPool owns (Deployments, Services,
/// PodDisruptionBudgets, ConfigMaps, NetworkPolicies, HorizontalPodAutoscalers, whose status the
/// HPA controller also writes) in `namespace` that `list` selects, keyed
/// `Kind/name`: two calls that return the same map saw nothing written in between.
pub async fn child_versions(
    client: &kube::Client,
    namespace: &str,
    list: &kube::api::ListParams,
) -> BTreeMap<String, String> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use k8s_openapi::api::core::v1::{ConfigMap, Service};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let mut out = BTreeMap::new();
    macro_rules! versions {
        ($kind:ty) => {
            let api = kube::Api::<$kind>::namespaced(client.clone(), namespace);
            let objects = api.list(list).await.unwrap_or_else(|err| panic!("list: {err}"));
            for o in objects {
                let key = format!("{}/{}", stringify!($kind), o.name_any());
                out.insert(key, o.resource_version().unwrap_or_default());
            }
        };
    }
    versions!(Deployment);
    versions!(Service);
    versions!(PodDisruptionBudget);
    versions!(ConfigMap);
    versions!(NetworkPolicy);
    versions!(HorizontalPodAutoscaler);
    out
}
