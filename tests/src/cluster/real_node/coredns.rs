//! Cluster DNS: CoreDNS as a host process on the bridge's address (pods cannot reach the host's
//! 127.0.0.1), answering cluster names from the API and NXDOMAIN for everything else, so no
//! query leaves the machine. Pods find it at the usual `kube-dns` Service, whose EndpointSlice
//! the harness writes by hand.

use std::path::Path;

use crate::cluster::addresses::{BRIDGE_IP, DNS_SERVICE_IP};

/// Ports CoreDNS serves its health and readiness on, on 127.0.0.1.
pub(super) struct Ports {
    pub health: u16,
    pub ready: u16,
}

/// The Corefile.
pub(super) fn corefile(kubeconfig: &Path, ports: &Ports) -> String {
    format!(
        "cluster.local in-addr.arpa ip6.arpa {{\n\
         \tbind {BRIDGE_IP}\n\
         \thealth 127.0.0.1:{health}\n\
         \tready 127.0.0.1:{ready}\n\
         \tkubernetes cluster.local in-addr.arpa ip6.arpa {{\n\
         \t\tkubeconfig {kubeconfig}\n\
         \t\tpods disabled\n\
         \t}}\n\
         }}\n\
         # Every other name: NXDOMAIN, with no upstream resolver to ask.\n\
         . {{\n\
         \tbind {BRIDGE_IP}\n\
         \ttemplate ANY ANY {{\n\
         \t\trcode NXDOMAIN\n\
         \t}}\n\
         }}\n",
        health = ports.health,
        ready = ports.ready,
        kubeconfig = kubeconfig.display(),
    )
}

/// Read access for CoreDNS's identity, the `kube-dns` Service and its EndpointSlice, as one
/// `kubectl apply` list.
pub(super) fn api_objects(user: &str) -> serde_json::Value {
    let dns_ports = serde_json::json!([
        { "name": "dns", "protocol": "UDP", "port": 53 },
        { "name": "dns-tcp", "protocol": "TCP", "port": 53 },
    ]);
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": { "name": "renderpool-tests:coredns" },
                "rules": [
                    { "apiGroups": [""], "resources": ["services", "endpoints", "namespaces"],
                      "verbs": ["list", "watch"] },
                    { "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                      "verbs": ["list", "watch"] },
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": { "name": "renderpool-tests:coredns" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": "renderpool-tests:coredns" },
                "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                               "name": user }],
            },
            {
                // No selector: the endpoint controllers leave its EndpointSlice to us.
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": { "name": "kube-dns", "namespace": "kube-system",
                              "labels": { "k8s-app": "kube-dns" } },
                "spec": { "clusterIP": DNS_SERVICE_IP, "ports": dns_ports },
            },
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kube-dns-host",
                    "namespace": "kube-system",
                    "labels": {
                        "kubernetes.io/service-name": "kube-dns",
                        "endpointslice.kubernetes.io/managed-by": "renderpool-tests",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{ "addresses": [BRIDGE_IP], "conditions": { "ready": true } }],
                "ports": dns_ports,
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_only_cluster_names_and_never_forwards() {
        let text = corefile(Path::new("/state/kubeconfig-coredns"), &Ports { health: 1, ready: 2 });
        let directives = text.lines().filter_map(|line| line.split_whitespace().next());
        assert!(!directives.clone().any(|d| d == "forward"), "no upstream resolver: {text}");
        assert!(text.contains("rcode NXDOMAIN"));
        assert!(text.contains(&format!("bind {BRIDGE_IP}")));
        assert!(text.contains("health 127.0.0.1:1"));
        assert!(text.contains("ready 127.0.0.1:2"));
    }

    #[test]
    fn the_dns_service_points_at_the_bridge() {
        let objects = api_objects("system:coredns");
        let slice = &objects["items"][3];
        assert_eq!(slice["endpoints"][0]["addresses"][0], BRIDGE_IP);
        assert_eq!(objects["items"][2]["spec"]["clusterIP"], DNS_SERVICE_IP);
        assert_eq!(objects["items"][1]["subjects"][0]["name"], "system:coredns");
    }
}
