//! kube-proxy in nftables mode: Services become rules in its own tables; it serves and
//! listens on 127.0.0.1 only and changes no sysctl.

use std::path::Path;

use crate::cluster::addresses::{NODE_NAME, POD_RANGE};

/// Ports kube-proxy serves on 127.0.0.1.
pub(super) struct Ports {
    pub healthz: u16,
    pub metrics: u16,
}

/// The KubeProxyConfiguration.
pub(super) fn config(kubeconfig: &Path, ports: &Ports) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": { "kubeconfig": kubeconfig },
        "hostnameOverride": NODE_NAME,
        "mode": "nftables",
        "bindAddress": "127.0.0.1",
        "healthzBindAddress": format!("127.0.0.1:{}", ports.healthz),
        "metricsBindAddress": format!("127.0.0.1:{}", ports.metrics),
        "clusterCIDR": POD_RANGE,
        "nodePortAddresses": ["127.0.0.1/32"],
        // Zero leaves each conntrack sysctl as the machine has it.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
            "udpTimeout": "0s",
            "udpStreamTimeout": "0s",
        },
        // Lowering it needs CAP_SYS_RESOURCE.
        "oomScoreAdj": 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nftables_mode_on_loopback_without_conntrack_changes() {
        let config =
            config(Path::new("/state/kubeconfig-kube-proxy"), &Ports { healthz: 1, metrics: 2 });
        assert_eq!(config["mode"], "nftables");
        assert_eq!(config["healthzBindAddress"], "127.0.0.1:1");
        assert_eq!(config["metricsBindAddress"], "127.0.0.1:2");
        assert_eq!(config["conntrack"]["maxPerCore"], 0);
        assert_eq!(config["conntrack"]["min"], 0);
        assert_eq!(config["nodePortAddresses"][0], "127.0.0.1/32");
    }
}
