//! Starting each control-plane process on 127.0.0.1, in dependency order.

use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use renderpool_testkit::wait;

use super::addresses::SERVICE_RANGE;
use super::pki::{self, FRONT_PROXY_CLIENT, Identities, Pki};
use super::{Cluster, ClusterError, kubeconfig};
use crate::{free_port, process, repo_root};

/// Env var naming a folder of prebuilt control-plane binaries (skips `tests/cluster/build.sh`).
const BIN_ENV: &str = "RENDERPOOL_CLUSTER_BIN";

/// How long a kwok node's Lease lasts; kwok renews it every quarter of that.
pub const KWOK_NODE_LEASE_SECONDS: u32 = 40;

/// How often the controller-manager's HPA controller reads metrics and sets replicas (its
/// default is 15 s; shorter lets autoscaling tests see a decision in seconds).
pub const HPA_SYNC_SECONDS: u32 = 5;

/// The folder with the Go-built tools (control plane, real node, Gotenberg, autoscaling): from
/// `$RENDERPOOL_CLUSTER_BIN`, or
/// from `tests/cluster/build.sh`, which is quick once its cache is warm.
pub(crate) fn bin_dir() -> Result<PathBuf, ClusterError> {
    if let Some(dir) = std::env::var_os(BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let script = repo_root().join("tests/cluster/build.sh");
    let stdout = super::run(Command::new("bash").arg(&script).stderr(Stdio::inherit()))?;
    let last = stdout.lines().last().unwrap_or_default().trim();
    if last.is_empty() {
        return Err(ClusterError::Setup(format!("{} printed no bin folder", script.display())));
    }
    Ok(PathBuf::from(last))
}

/// Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
pub(super) fn start_all(bin_dir: PathBuf) -> Result<Cluster, ClusterError> {
    let state_dir = state_dir()?;
    process::remove_on_exit(state_dir.clone());
    let identities = Identities::new();
    let pki = pki::create(&state_dir, &identities)?;
    let Identities { admin, controller_manager, scheduler, .. } = &identities;

    let etcd_url = start_etcd(&bin_dir, &state_dir)?;
    let port = free_port();
    let server = format!("https://127.0.0.1:{port}");
    let admin_kubeconfig = state_dir.join("kubeconfig-admin");
    kubeconfig::write(&admin_kubeconfig, &server, &pki.ca.cert, &admin.token)?;
    start_apiserver(&bin_dir, &state_dir, &pki, &etcd_url, port)?;
    wait_apiserver_ready(&bin_dir, &state_dir, &admin_kubeconfig)?;

    let kcm_kubeconfig = state_dir.join("kubeconfig-controller-manager");
    kubeconfig::write(&kcm_kubeconfig, &server, &pki.ca.cert, &controller_manager.token)?;
    let kcm = path_arg(&kcm_kubeconfig);
    spawn(
        &bin_dir,
        &state_dir,
        "kube-controller-manager",
        &[
            &format!("--kubeconfig={kcm}"),
            &format!("--authentication-kubeconfig={kcm}"),
            &format!("--authorization-kubeconfig={kcm}"),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port()),
            "--leader-elect=false",
            "--use-service-account-credentials=true",
            &format!("--service-account-private-key-file={}", path_arg(&pki.service_account_key)),
            &format!("--root-ca-file={}", path_arg(&pki.ca.cert)),
            "--controllers=*",
            // Its default would create /usr/libexec/kubernetes/... on the host.
            &format!("--flex-volume-plugin-dir={}", path_arg(&state_dir.join("flexvolume"))),
            "--concurrent-deployment-syncs=10",
            "--concurrent-replicaset-syncs=10",
            "--concurrent-gc-syncs=20",
            &format!("--horizontal-pod-autoscaler-sync-period={HPA_SYNC_SECONDS}s"),
        ],
    )?;

    let scheduler_kubeconfig = state_dir.join("kubeconfig-scheduler");
    kubeconfig::write(&scheduler_kubeconfig, &server, &pki.ca.cert, &scheduler.token)?;
    let sched = path_arg(&scheduler_kubeconfig);
    spawn(
        &bin_dir,
        &state_dir,
        "kube-scheduler",
        &[
            &format!("--kubeconfig={sched}"),
            &format!("--authentication-kubeconfig={sched}"),
            &format!("--authorization-kubeconfig={sched}"),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port()),
            "--leader-elect=false",
        ],
    )?;

    spawn(
        &bin_dir,
        &state_dir,
        "kwok",
        &[
            &format!("--kubeconfig={}", path_arg(&admin_kubeconfig)),
            &format!("--config={}", path_arg(&bin_dir.join("kwok-stages.yaml"))),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            // Real heartbeats: a Lease per node renewed every quarter of this (10 s), as a
            // kubelet does, so the controller-manager's default grace period holds. Unset, kwok
            // 0.8 makes no Leases and every node goes NotReady once the grace period ends.
            &format!("--node-lease-duration-seconds={KWOK_NODE_LEASE_SECONDS}"),
            "--node-ip=127.0.0.1",
            &format!("--server-address=127.0.0.1:{}", free_port()),
        ],
    )?;

    Ok(Cluster {
        state_dir,
        bin_dir,
        etcd_url,
        server,
        api_port: port,
        pki,
        identities,
        kubeconfig: admin_kubeconfig,
        real_node: Default::default(),
        metrics: Default::default(),
        karpenter: Default::default(),
        keda: Default::default(),
    })
}

/// A fresh folder on tmpfs where there is one (etcd without fsync on tmpfs is fast).
fn state_dir() -> Result<PathBuf, ClusterError> {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() { base.to_path_buf() } else { std::env::temp_dir() };
    let dir = base.join(format!("renderpool-cluster-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

fn start_etcd(bin_dir: &Path, state_dir: &Path) -> Result<String, ClusterError> {
    let client_port = free_port();
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{}", free_port());
    spawn(
        bin_dir,
        state_dir,
        "etcd",
        &[
            &format!("--data-dir={}", path_arg(&state_dir.join("etcd"))),
            &format!("--listen-client-urls={client_url}"),
            &format!("--advertise-client-urls={client_url}"),
            &format!("--listen-peer-urls={peer_url}"),
            &format!("--initial-advertise-peer-urls={peer_url}"),
            &format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ],
    )?;
    wait_until(state_dir, "etcd", Duration::from_secs(30), || {
        TcpStream::connect(("127.0.0.1", client_port)).is_ok()
    })?;
    Ok(client_url)
}

fn start_apiserver(
    bin_dir: &Path,
    state_dir: &Path,
    pki: &Pki,
    etcd_url: &str,
    port: u16,
) -> Result<(), ClusterError> {
    let audit = super::audit::apiserver_flags(state_dir)?;
    let audit: Vec<&str> = audit.iter().map(String::as_str).collect();
    spawn(
        bin_dir,
        state_dir,
        "kube-apiserver",
        &[
            &[
                &format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                &format!("--secure-port={port}"),
                &format!("--tls-cert-file={}", path_arg(&pki.serving_cert)),
                &format!("--tls-private-key-file={}", path_arg(&pki.serving_key)),
                &format!("--client-ca-file={}", path_arg(&pki.ca.cert)),
                &format!("--token-auth-file={}", path_arg(&pki.token_file)),
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                &format!("--service-account-key-file={}", path_arg(&pki.service_account_pub)),
                &format!(
                    "--service-account-signing-key-file={}",
                    path_arg(&pki.service_account_key)
                ),
                &format!("--service-cluster-ip-range={SERVICE_RANGE}"),
                "--allow-privileged=true",
                // Logs, exec and port-forward reach the real node's kubelet on 127.0.0.1.
                &format!("--kubelet-client-certificate={}", path_arg(&pki.kubelet_client_cert)),
                &format!("--kubelet-client-key={}", path_arg(&pki.kubelet_client_key)),
                &format!("--kubelet-certificate-authority={}", path_arg(&pki.ca.cert)),
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                // The aggregation layer (custom.metrics.k8s.io from prometheus-adapter): requests
                // reach an APIService's server with this client certificate and the caller in the
                // X-Remote-* headers, dialled at its endpoint's address rather than its ClusterIP.
                &format!("--requestheader-client-ca-file={}", path_arg(&pki.front_proxy_ca.cert)),
                &format!("--requestheader-allowed-names={FRONT_PROXY_CLIENT}"),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-username-headers=X-Remote-User",
                &format!("--proxy-client-cert-file={}", path_arg(&pki.front_proxy_client_cert)),
                &format!("--proxy-client-key-file={}", path_arg(&pki.front_proxy_client_key)),
                "--enable-aggregator-routing=true",
                "--endpoint-reconciler-type=none",
                "--profiling=false",
            ][..],
            &audit,
        ]
        .concat(),
    )
    .map(drop)
}

fn wait_apiserver_ready(
    bin_dir: &Path,
    state_dir: &Path,
    kubeconfig: &Path,
) -> Result<(), ClusterError> {
    wait_until(state_dir, "kube-apiserver", Duration::from_secs(90), || {
        Command::new(bin_dir.join("kubectl"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["get", "--raw=/readyz"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// Starts `name` from `bin_dir` with its output in `<state_dir>/<name>.log`; returns its pid.
pub(super) fn spawn(
    bin_dir: &Path,
    state_dir: &Path,
    name: &str,
    args: &[&str],
) -> Result<u32, ClusterError> {
    let mut command = Command::new(bin_dir.join(name));
    command.args(args);
    spawn_command(state_dir, name, command)
}

/// As [`spawn`], for a command set up by the caller (environment, namespace).
pub(super) fn spawn_command(
    state_dir: &Path,
    name: &str,
    mut command: Command,
) -> Result<u32, ClusterError> {
    let log = File::create(log_path(state_dir, name))?;
    command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    process::spawn(command).map_err(|err| ClusterError::Setup(format!("start {name}: {err}")))
}

/// Where [`spawn`] writes `name`'s output.
pub(super) fn log_path(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(format!("{name}.log"))
}

/// Waits until `ready`; after `timeout`, fails with the tail of `component`'s log.
pub(super) fn wait_until(
    state_dir: &Path,
    component: &'static str,
    timeout: Duration,
    ready: impl FnMut() -> bool,
) -> Result<(), ClusterError> {
    let what = format!("{component} ready");
    if wait::try_until_blocking(&what, timeout, ready).is_ok() {
        return Ok(());
    }
    let log = log_path(state_dir, component);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    Err(ClusterError::NotReady {
        component,
        seconds: timeout.as_secs(),
        log: log.display().to_string(),
        tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    })
}

/// A path as a command-line argument.
pub(super) fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
