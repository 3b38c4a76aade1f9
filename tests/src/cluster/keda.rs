//! KEDA v2 (its operator and its external-metrics adapter, `tests/cluster/build.sh keda`) as
//! host processes, with KEDA's own CRDs: what scales a job pool from zero in the tests.
//!
//! The operator runs the scalers (it reads NATS's monitoring endpoint and Prometheus from the
//! host) and writes a RenderPool's /scale between 0 and 1 itself; above 1 the HPA it makes
//! reads `external.metrics.k8s.io`, which the adapter serves through the aggregation layer
//! ([`crate::cluster::aggregated`]) by asking the operator over mutual TLS. Both use the admin
//! kubeconfig: this is a test harness, not how a cluster should run KEDA (its Helm chart gives
//! it its own rights). Started by [`Cluster::keda`]; both stop when the test process exits.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::addresses::BRIDGE_IP;
use super::aggregated::AggregatedApi;
use super::components::{path_arg, spawn_command, wait_until};
use super::{Cluster, ClusterError, run, run_with_input};
use crate::free_port;

/// The API KEDA's adapter serves: external metrics, for the HPAs KEDA makes.
const API: AggregatedApi = AggregatedApi {
    group: "external.metrics.k8s.io",
    version: "v1beta1",
    namespace: "keda",
    service: "keda-metrics-apiserver",
};

/// KEDA's operator and adapter, running.
pub struct Keda {
    daemons: Vec<(&'static str, u32)>,
}

impl Keda {
    /// Installs KEDA's CRDs in `cluster` (whose real node is up) and starts the operator, then
    /// the adapter; returns once the API server serves the adapter's API.
    pub(super) fn start(cluster: &Cluster) -> Result<Keda, ClusterError> {
        let dir = cluster.state_dir.join("keda");
        std::fs::create_dir_all(&dir)?;
        cluster.install_keda_crds()?;
        let certs = certificates(cluster, &dir)?;
        let grpc_port = free_port();
        let operator = start_operator(cluster, &dir, &certs, grpc_port)?;
        let adapter = start_adapter(cluster, &dir, &certs, grpc_port)?;
        Ok(Keda { daemons: vec![("keda-operator", operator), ("keda-adapter", adapter)] })
    }

    /// The two daemons by name, with their pids.
    pub fn daemons(&self) -> &[(&'static str, u32)] {
        &self.daemons
    }
}

impl Cluster {
    /// Applies every CRD of KEDA's module (build.sh copies them) and waits until the API
    /// server serves ScaledObjects; KEDA itself is not started ([`Cluster::keda`] does).
    pub fn install_keda_crds(&self) -> Result<(), ClusterError> {
        let folder = self.bin("keda-crds");
        run(self.kubectl().args(["apply", "--server-side", "-f"]).arg(&folder))?;
        // `kubectl wait` fails outright on a CRD with no conditions yet: look until it has.
        let jsonpath = r#"jsonpath={.status.conditions[?(@.type=="Established")].status}"#;
        renderpool_testkit::wait::try_until_blocking(
            "scaledobjects.keda.sh Established",
            Duration::from_secs(60),
            || {
                run(self.kubectl().args(["get", "crd", "scaledobjects.keda.sh", "-o", jsonpath]))
                    .is_ok_and(|status| status.trim() == "True")
            },
        )
        .map_err(|err| ClusterError::Setup(err.to_string()))
    }
}

/// The folder both daemons read their mutual-TLS files from (`ca.crt`, `tls.crt`, `tls.key`,
/// the names KEDA expects): one certificate from the cluster CA, for the adapter's serving
/// name and address and for 127.0.0.1, where the operator's gRPC server listens.
fn certificates(cluster: &Cluster, dir: &Path) -> Result<std::path::PathBuf, ClusterError> {
    let (cert, key) = cluster.pki.ca.issue(
        dir,
        "keda",
        "/CN=keda",
        &format!(
            "subjectAltName=DNS:{},DNS:localhost,IP:{BRIDGE_IP},IP:127.0.0.1\n\
             extendedKeyUsage=serverAuth,clientAuth\n",
            API.service_dns_name()
        ),
    )?;
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs)?;
    std::fs::copy(&cluster.pki.ca.cert, certs.join("ca.crt"))?;
    std::fs::copy(cert, certs.join("tls.crt"))?;
    std::fs::copy(key, certs.join("tls.key"))?;
    Ok(certs)
}

/// A KEDA binary with the admin kubeconfig and KEDA's namespace settings.
fn keda_command(cluster: &Cluster, binary: &str) -> Command {
    let mut command = Command::new(cluster.bin("keda").join(binary));
    command
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("POD_NAMESPACE", API.namespace)
        .env("KEDA_CLUSTER_OBJECT_NAMESPACE", API.namespace)
        .env("WATCH_NAMESPACE", "");
    command
}

fn start_operator(
    cluster: &Cluster,
    dir: &Path,
    certs: &Path,
    grpc_port: u16,
) -> Result<u32, ClusterError> {
    let probe_port = free_port();
    let mut command = keda_command(cluster, "operator");
    command.args([
        "--leader-elect=false".to_string(),
        "--enable-cert-rotation=false".to_string(),
        format!("--cert-dir={}", path_arg(certs)),
        format!("--metrics-bind-address=127.0.0.1:{}", free_port()),
        format!("--health-probe-bind-address=127.0.0.1:{probe_port}"),
        format!("--metrics-service-bind-address=127.0.0.1:{grpc_port}"),
    ]);
    let pid = spawn_command(dir, "keda-operator", command)?;
    wait_until(dir, "keda-operator", Duration::from_secs(90), || {
        super::http_ok(probe_port, "/readyz")
    })?;
    Ok(pid)
}

fn start_adapter(
    cluster: &Cluster,
    dir: &Path,
    certs: &Path,
    grpc_port: u16,
) -> Result<u32, ClusterError> {
    let ca_bundle =
        serde_json::to_value(k8s_openapi::ByteString(std::fs::read(&cluster.pki.ca.cert)?))
            .map_err(|err| ClusterError::Setup(format!("CA bundle: {err}")))?;
    let port = free_port();
    let objects = serde_json::json!({
        "apiVersion": "v1", "kind": "List", "items": API.objects(&ca_bundle, port),
    });
    run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), objects.to_string().as_bytes())?;
    let kubeconfig = path_arg(cluster.kubeconfig());
    let mut command = keda_command(cluster, "adapter");
    command.args([
        format!("--bind-address={BRIDGE_IP}"),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", path_arg(certs)),
        format!("--tls-cert-file={}", path_arg(&certs.join("tls.crt"))),
        format!("--tls-private-key-file={}", path_arg(&certs.join("tls.key"))),
        format!("--lister-kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        format!("--metrics-service-address=127.0.0.1:{grpc_port}"),
        // Its own /metrics, off the default 8080.
        format!("--port={}", free_port()),
    ]);
    let pid = spawn_command(dir, "keda-adapter", command)?;
    API.wait_available(cluster, dir, "keda-adapter")?;
    Ok(pid)
}
