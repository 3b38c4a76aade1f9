//! An extension API server on the host, registered with the API server's aggregation layer.
//!
//! The API server refuses loopback endpoint addresses, so such a server listens on the real
//! node's bridge address (as CoreDNS does): its APIService names a Service without a selector
//! whose EndpointSlice the harness writes, and the API server dials that address directly
//! (`--enable-aggregator-routing`).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::addresses::BRIDGE_IP;
use super::components::wait_until;
use super::{Cluster, ClusterError, run};

/// Where an aggregated API is served from.
pub(super) struct AggregatedApi {
    /// The API group, e.g. `external.metrics.k8s.io`.
    pub group: &'static str,
    /// The version registered.
    pub version: &'static str,
    /// Namespace of its Service and EndpointSlice.
    pub namespace: &'static str,
    /// The Service the APIService names.
    pub service: &'static str,
}

impl AggregatedApi {
    /// The APIService's name.
    pub fn api_service_name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }

    /// The DNS name the API server checks the server's certificate against.
    pub fn service_dns_name(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }

    /// Waits until the API server reached `component` (whose log is in `dir`) through the
    /// aggregation layer and it answered: the APIService is Available.
    pub fn wait_available(
        &self,
        cluster: &Cluster,
        dir: &Path,
        component: &'static str,
    ) -> Result<(), ClusterError> {
        let jsonpath = r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#;
        let name = self.api_service_name();
        wait_until(dir, component, Duration::from_secs(90), || {
            run(cluster.kubectl().args(["get", "apiservice", &name, "-o", jsonpath]))
                .is_ok_and(|status| status.trim() == "True")
        })
    }

    /// The namespace, the Service without a selector, its EndpointSlice at the bridge address
    /// and `port`, and the APIService. `ca_bundle` is the base64 of the CA that signed the
    /// server's certificate.
    pub fn objects(&self, ca_bundle: &Value, port: u16) -> [Value; 4] {
        let ports = json!([{ "name": "https", "protocol": "TCP", "port": port }]);
        [
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": { "name": self.namespace },
            }),
            json!({
                // No selector: the endpoint controllers leave its EndpointSlice to us.
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": { "name": self.service, "namespace": self.namespace },
                "spec": { "ports": [{ "name": "https", "protocol": "TCP", "port": 443,
                                      "targetPort": port }] },
            }),
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{}-host", self.service),
                    "namespace": self.namespace,
                    "labels": {
                        "kubernetes.io/service-name": self.service,
                        "endpointslice.kubernetes.io/managed-by": "renderpool-tests",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{ "addresses": [BRIDGE_IP], "conditions": { "ready": true } }],
                "ports": ports,
            }),
            json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": { "name": self.api_service_name() },
                "spec": {
                    "group": self.group,
                    "version": self.version,
                    "service": { "namespace": self.namespace, "name": self.service, "port": 443 },
                    "caBundle": ca_bundle,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 200,
                },
            }),
        ]
    }
}
