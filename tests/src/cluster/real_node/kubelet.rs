//! The kubelet: registered as `127.0.0.1` (a loopback `--node-ip` is refused, a loopback
//! hostname is not), cgroupfs on the machine's cgroup v1, serving TLS for the API server's
//! client certificate, everything it writes in the node's folder.

use std::path::Path;

use super::layout::Layout;
use super::{NODE_LABEL, NODE_LABEL_VALUE};
use crate::cluster::addresses::{DNS_SERVICE_IP, NODE_NAME};

/// Ports the kubelet serves on 127.0.0.1.
pub(super) struct Ports {
    pub api: u16,
    pub healthz: u16,
}

/// Files the kubelet's TLS uses.
pub(super) struct Tls<'a> {
    pub ca_cert: &'a Path,
    pub serving_cert: &'a Path,
    pub serving_key: &'a Path,
}

/// The KubeletConfiguration.
pub(super) fn config(layout: &Layout, ports: &Ports, tls: &Tls<'_>) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": ports.api,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports.healthz,
        "tlsCertFile": tls.serving_cert,
        "tlsPrivateKeyFile": tls.serving_key,
        "authentication": {
            "anonymous": { "enabled": false },
            "webhook": { "enabled": true },
            "x509": { "clientCAFile": tls.ca_cert },
        },
        "authorization": { "mode": "Webhook" },
        "containerRuntimeEndpoint": format!("unix://{}", layout.containerd_socket.display()),
        "cgroupDriver": "cgroupfs",
        // 1.35+ refuses cgroup v1 unless told; these machines mount v1 controllers.
        "failCgroupV1": false,
        "failSwapOn": false,
        // It checks these instead of changing them; the harness sets them and puts them back.
        "protectKernelDefaults": true,
        "makeIPTablesUtilChains": false,
        // Lowering it needs CAP_SYS_RESOURCE, which these machines do not grant.
        "oomScoreAdj": 0,
        "clusterDNS": [DNS_SERVICE_IP],
        "clusterDomain": "cluster.local",
        "resolvConf": layout.resolv_conf,
        "podLogsDir": layout.pod_logs,
        "volumePluginDir": layout.volume_plugins,
        // A shared, busy machine: evict only when it is truly out of room.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        // Imported images cannot be pulled again: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": false,
        "shutdownGracePeriod": "0s",
        "rotateCertificates": false,
        "serverTLSBootstrap": false,
    })
}

/// The kubelet's command-line flags (what its config file cannot say).
pub(super) fn args(layout: &Layout, kubeconfig: &Path) -> Vec<String> {
    vec![
        format!("--config={}", layout.kubelet_config.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root-dir={}", layout.kubelet_root.display()),
        format!("--cert-dir={}", layout.kubelet_root.join("pki").display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-labels={NODE_LABEL}={NODE_LABEL_VALUE}"),
    ]
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn serves_on_loopback_with_webhook_auth_and_cgroup_v1_allowed() {
        let layout = Layout::new(Path::new("/state/node"));
        let tls = Tls {
            ca_cert: Path::new("/state/ca.crt"),
            serving_cert: Path::new("/state/node/kubelet.crt"),
            serving_key: Path::new("/state/node/kubelet.key"),
        };
        let config = config(&layout, &Ports { api: 1, healthz: 2 }, &tls);
        assert_eq!(config["address"], "127.0.0.1");
        assert_eq!(config["healthzBindAddress"], "127.0.0.1");
        assert_eq!(config["readOnlyPort"], 0);
        assert_eq!(config["authentication"]["anonymous"]["enabled"], false);
        assert_eq!(config["authorization"]["mode"], "Webhook");
        assert_eq!(config["failCgroupV1"], false);
        assert_eq!(config["cgroupDriver"], "cgroupfs");
        assert_eq!(config["protectKernelDefaults"], true);
        for key in ["resolvConf", "podLogsDir", "volumePluginDir"] {
            assert!(config[key].as_str().unwrap().starts_with("/state/node/"), "{key}");
        }
        let flags = args(&layout, Path::new("/state/kubeconfig-node")).join(" ");
        assert!(flags.contains("--hostname-override=127.0.0.1"));
        assert!(flags.contains("--root-dir=/state/node/kubelet"));
    }
}
