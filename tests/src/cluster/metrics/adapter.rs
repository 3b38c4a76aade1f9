//! prometheus-adapter as a host process serving `custom.metrics.k8s.io` to the API server's
//! aggregation layer, with the rules the product ships
//! (`deploy/autoscaling/prometheus-adapter-rules.yaml`).
//!
//! It listens on the real node's bridge address ([`crate::cluster::aggregated`]), authenticates
//! callers by the front-proxy headers and asks the API server who may read what (delegated
//! authentication and authorization).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cluster::addresses::BRIDGE_IP;
use crate::cluster::aggregated::AggregatedApi;
use crate::repo_root;

/// The API the adapter serves: custom metrics, in the version the HPA controller prefers.
pub(super) const API: AggregatedApi = AggregatedApi {
    group: "custom.metrics.k8s.io",
    version: "v1beta2",
    namespace: "renderpool-metrics",
    service: "prometheus-adapter",
};
/// How often the adapter lists Prometheus's series to learn which metrics exist (its default is
/// 10 minutes; a pod's series is served only once a relist has seen it).
pub const RELIST_SECONDS: u32 = 5;

/// The rule file, where the product ships it.
pub fn rules_path() -> PathBuf {
    repo_root().join("deploy/autoscaling/prometheus-adapter-rules.yaml")
}

/// Delegated authentication and authorization for the adapter's identity, read access to what
/// its rules map series to (namespaces, pods), and the APIService with its Service and
/// EndpointSlice, as one `kubectl apply` list. `ca_bundle` is the base64 of the CA that signed
/// the adapter's serving certificate.
pub(super) fn api_objects(user: &str, ca_bundle: &Value, port: u16) -> Value {
    let name = "renderpool-tests:prometheus-adapter";
    let subject =
        json!([{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }]);
    let role_ref = |kind: &str, name: &str| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name });
    let [role, binding] = super::read_access(name, user, &["namespaces", "pods"]);
    let mut items = vec![
        role,
        binding,
        // TokenReviews and SubjectAccessReviews: who is calling, and may they.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": format!("{name}:auth-delegator") },
            "roleRef": role_ref("ClusterRole", "system:auth-delegator"),
            "subjects": subject,
        }),
        // The front-proxy CA and allowed names the API server publishes.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": { "name": format!("{name}:auth-reader"), "namespace": "kube-system" },
            "roleRef": role_ref("Role", "extension-apiserver-authentication-reader"),
            "subjects": subject,
        }),
    ];
    items.extend(API.objects(ca_bundle, port));
    json!({ "apiVersion": "v1", "kind": "List", "items": items })
}

/// What the adapter is started with.
pub(super) struct Settings<'a> {
    pub kubeconfig: &'a Path,
    pub serving_cert: &'a Path,
    pub serving_key: &'a Path,
    pub cert_dir: &'a Path,
    pub prometheus_url: &'a str,
    pub port: u16,
}

/// Command-line arguments: serving on the bridge address, the cluster through `kubeconfig`
/// for listing, authentication and authorization.
pub(super) fn args(settings: &Settings<'_>) -> Vec<String> {
    let kubeconfig = settings.kubeconfig.display();
    vec![
        format!("--bind-address={BRIDGE_IP}"),
        format!("--secure-port={}", settings.port),
        format!("--tls-cert-file={}", settings.serving_cert.display()),
        format!("--tls-private-key-file={}", settings.serving_key.display()),
        format!("--cert-dir={}", settings.cert_dir.display()),
        format!("--lister-kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        format!("--prometheus-url={}", settings.prometheus_url),
        format!("--config={}", rules_path().display()),
        format!("--metrics-relist-interval={RELIST_SECONDS}s"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_service_reaches_the_adapter_on_the_bridge_through_its_service() {
        let objects = api_objects("adapter", &json!("Q0E="), 6443);
        let items = objects["items"].as_array().unwrap_or_else(|| panic!("{objects}"));
        let find = |kind: &str| {
            items.iter().find(|item| item["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"))
        };
        let api_service = find("APIService");
        assert_eq!(api_service["metadata"]["name"], "v1beta2.custom.metrics.k8s.io");
        assert_eq!(api_service["spec"]["service"]["name"], API.service);
        assert_eq!(api_service["spec"]["caBundle"], "Q0E=");
        let service = find("Service");
        assert!(service["spec"]["selector"].is_null(), "the harness writes its endpoints");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 6443);
        let slice = find("EndpointSlice");
        assert_eq!(slice["endpoints"][0]["addresses"][0], BRIDGE_IP);
        // The API server matches the Service's port to the slice's by name.
        assert_eq!(slice["ports"][0]["name"], service["spec"]["ports"][0]["name"]);
        assert_eq!(slice["ports"][0]["port"], 6443);
    }

    #[test]
    fn serves_on_the_bridge_with_the_shipped_rules() {
        let settings = Settings {
            kubeconfig: Path::new("/k"),
            serving_cert: Path::new("/c"),
            serving_key: Path::new("/k.key"),
            cert_dir: Path::new("/certs"),
            prometheus_url: "http://127.0.0.1:9090/",
            port: 6443,
        };
        let args = args(&settings);
        assert!(args.contains(&format!("--bind-address={BRIDGE_IP}")));
        assert!(args.contains(&format!("--config={}", rules_path().display())));
        assert!(rules_path().is_file(), "{} is missing", rules_path().display());
    }
}
