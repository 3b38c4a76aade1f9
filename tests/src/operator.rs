//! The operator as a cluster would run it: the Helm chart installed (CRD, ServiceAccount,
//! least-privilege RBAC), and the operator binary running as a local process with a token
//! minted for the chart's own ServiceAccount, so its rights are exactly the chart's.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::cluster::{Cluster, run};
use crate::{free_port, process, repo_root, wait_for, workspace_bin};

/// Namespace the chart is installed into.
pub const RELEASE_NAMESPACE: &str = "renderpool-system";
/// Helm release name; the chart names its ServiceAccount and RBAC after it.
pub const RELEASE: &str = "renderpool-operator";

/// The chart installed into the shared cluster, and a kubeconfig holding its ServiceAccount's token.
pub struct ChartInstall {
    kubeconfig: PathBuf,
}

static INSTALL: OnceCell<ChartInstall> = OnceCell::const_new();
static SHARED: OnceCell<OperatorProcess> = OnceCell::const_new();
static STARTED: AtomicU32 = AtomicU32::new(0);

impl ChartInstall {
    /// Installs the chart once per test process and mints the ServiceAccount token.
    pub async fn shared() -> &'static ChartInstall {
        INSTALL.get_or_init(|| async { Self::install().await }).await
    }

    async fn install() -> ChartInstall {
        let cluster = Cluster::shared();
        // The chart's own operator pods need somewhere to be scheduled (kwok plays them).
        cluster.ensure_nodes("system", 2, "4", "8Gi").await;
        let chart = repo_root().join("charts/renderpool-operator");
        run(cluster
            .helm()
            .args(["install", RELEASE])
            .arg(&chart)
            .args(["--namespace", RELEASE_NAMESPACE, "--create-namespace", "--wait"])
            .args(["--timeout", "120s"]))
        .unwrap_or_else(|err| panic!("helm install: {err}"));
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
        ChartInstall { kubeconfig: cluster.kubeconfig_for_token("operator-sa", token.trim()) }
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
        let cluster = Cluster::shared();
        let identity = format!("test-operator-{}", STARTED.fetch_add(1, Ordering::Relaxed));
        let port = free_port();
        let log = cluster.state_dir().join(format!("{identity}.log"));
        let file =
            std::fs::File::create(&log).unwrap_or_else(|err| panic!("{identity} log: {err}"));
        let mut command = Command::new(workspace_bin("renderpool-operator"));
        command
            .args(["run", "--listen", &format!("127.0.0.1:{port}"), "--identity", &identity])
            .args(["--log-format", "text"])
            .env("KUBECONFIG", &install.kubeconfig)
            .env("POD_NAMESPACE", RELEASE_NAMESPACE)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap_or_else(|err| panic!("{identity} log: {err}")))
            .stderr(file);
        let pid = process::spawn(command).unwrap_or_else(|err| panic!("start {identity}: {err}"));
        let operator = OperatorProcess { pid, port, identity, log };
        let url = format!("http://127.0.0.1:{port}/healthz");
        let healthy = wait_for(Duration::from_secs(30), || async {
            let response = reqwest::get(&url).await.ok()?;
            response.status().is_success().then_some(())
        })
        .await;
        assert!(
            healthy.is_some(),
            "{} never answered /healthz:\n{}",
            operator.identity,
            operator.log()
        );
        operator
    }

    /// The identity it holds the Lease under.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// URL of its Prometheus endpoint.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.port)
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
