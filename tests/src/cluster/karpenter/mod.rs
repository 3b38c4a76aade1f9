//! Karpenter v1 with its KWOK cloud provider, as a host process in a network namespace of the
//! test's own: its metrics and health listeners bind every interface with no flag, so they bind
//! inside a namespace holding only loopback, where a relay hands its 127.0.0.1:<API port> to
//! the API server on the host's. It runs under a ServiceAccount token of its own with the RBAC
//! its chart renders, without leader election. The NodeClaims it launches become Nodes carrying
//! `kwok.x-k8s.io/node=fake`, which the cluster's kwok makes Ready and whose pods it runs.
//! Started by [`Cluster::karpenter`]; stops, namespace and all, when the test process exits.

mod objects;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

pub use objects::{
    DO_NOT_DISRUPT, INSTANCE_CPU_LABEL, NAMESPACE, NODE_CLASS, NODE_POOL_LABEL, POOL_TAINT,
    node_pool, placement,
};

use super::components::{log_path, spawn_command, wait_until};
use super::netns::NetNs;
use super::{Cluster, ClusterError, http_ok_on, relay, run, run_with_input};

/// Karpenter's metrics port, inside its namespace.
pub const METRICS_PORT: u16 = 8080;
/// Karpenter's health probe port (`/healthz`, `/readyz`), inside its namespace.
pub const HEALTH_PORT: u16 = 8081;

/// Karpenter, running; see the module doc.
pub struct Karpenter {
    netns: NetNs,
    pid: u32,
    log: PathBuf,
    kubeconfig: PathBuf,
}

impl Karpenter {
    /// Installs the CRDs, RBAC and KWOKNodeClass into `cluster` and starts Karpenter.
    pub(super) fn start(cluster: &Cluster) -> Result<Karpenter, ClusterError> {
        let files = cluster.bin_dir.join("karpenter-kwok");
        let crds = files.join("crds");
        run(cluster.kubectl().args(["apply", "--server-side", "-f"]).arg(&crds))?;
        run(cluster
            .kubectl()
            .args(["wait", "--for=condition=Established", "--timeout=60s", "-f"])
            .arg(&crds))?;
        let base = objects::base_objects().to_string();
        run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), base.as_bytes())?;
        let mut template = cluster.helm();
        template.args(["template", objects::RELEASE]).arg(files.join("chart"));
        template.args(["--namespace", NAMESPACE]);
        for file in objects::RBAC_TEMPLATES {
            template.args(["--show-only", file]);
        }
        let rbac = run(&mut template)?;
        run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), rbac.as_bytes())?;
        let token = run(cluster.kubectl().args([
            "create",
            "token",
            objects::RELEASE,
            "--namespace",
            NAMESPACE,
            "--duration=48h",
        ]))?;
        let kubeconfig = cluster.kubeconfig_for_token("karpenter", token.trim());

        let netns = NetNs::create()?;
        // Same port inside as outside, so the kubeconfig names the API server as everyone does.
        relay::serve(netns.listen(cluster.api_port)?, "karpenter-api-relay", cluster.api_port)?;
        let mut command = Command::new(cluster.bin("karpenter"));
        command
            .env("KUBECONFIG", &kubeconfig)
            .env("DISABLE_LEADER_ELECTION", "true")
            .env("SYSTEM_NAMESPACE", NAMESPACE)
            .env("METRICS_PORT", METRICS_PORT.to_string())
            .env("HEALTH_PROBE_PORT", HEALTH_PORT.to_string());
        netns.enter_on_exec(&mut command);
        let dir = &cluster.state_dir;
        let pid = spawn_command(dir, "karpenter", command)?;
        wait_until(dir, "karpenter", Duration::from_secs(90), || {
            netns.connect(HEALTH_PORT).is_ok_and(|stream| http_ok_on(stream, "/readyz"))
        })?;
        Ok(Karpenter { netns, pid, log: log_path(dir, "karpenter"), kubeconfig })
    }

    /// Karpenter's pid (for resource figures and checks).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The network namespace it runs in.
    pub fn netns(&self) -> &NetNs {
        &self.netns
    }

    /// The kubeconfig it runs with: its ServiceAccount's token.
    pub fn kubeconfig(&self) -> &std::path::Path {
        &self.kubeconfig
    }

    /// Its `/metrics` answer inside its namespace: the status line, headers and body.
    pub fn metrics(&self) -> Result<String, ClusterError> {
        use std::io::{Read, Write};
        let mut stream = self.netns.connect(METRICS_PORT)?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer)
    }

    /// Its log so far (JSON lines).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}
