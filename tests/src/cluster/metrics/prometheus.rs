//! Prometheus as a host process on 127.0.0.1: Kubernetes service discovery (pod role) under an
//! identity of its own that may only read pods, scraping render pods on the real node directly
//! at their pod IPs, which the host reaches on the node's bridge.

use std::path::Path;

use serde_json::{Value, json};

use crate::cluster::real_node::NODE_NAME;

/// How often render pods are scraped (seconds); short, so a test sees a change in seconds.
pub const SCRAPE_SECONDS: u32 = 2;

/// Labels every render pod carries (the operator's selector labels); the scrape job keeps
/// these pods only.
pub const RENDER_POD_LABELS: [(&str, &str); 2] =
    [("app.kubernetes.io/name", "renderpool"), ("app.kubernetes.io/component", "render")];

/// The name of the render container's port serving `/metrics` (and the API).
pub const METRICS_PORT_NAME: &str = "http";

/// The scrape job's name, the `job` label of every series it makes.
pub const JOB: &str = "renderpool-render-pods";

/// The configuration (JSON, which Prometheus reads as the YAML it is).
pub(super) fn config(kubeconfig: &Path) -> Value {
    let labels: Vec<String> = RENDER_POD_LABELS.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let interval = format!("{SCRAPE_SECONDS}s");
    json!({
        "global": { "scrape_interval": interval, "scrape_timeout": interval,
                    "evaluation_interval": interval },
        "scrape_configs": [{
            "job_name": JOB,
            "kubernetes_sd_configs": [{
                "role": "pod",
                "kubeconfig_file": kubeconfig,
                // Only pods on the real node: their addresses are on its bridge. A kwok pod's
                // address leads nowhere, and the host must not send anything towards it.
                "selectors": [{ "role": "pod", "label": labels.join(","),
                                "field": format!("spec.nodeName={NODE_NAME}") }],
            }],
            "relabel_configs": [
                // One target per pod: its metrics port (the pod role makes one per port).
                { "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                  "regex": METRICS_PORT_NAME, "action": "keep" },
                { "source_labels": ["__meta_kubernetes_pod_phase"], "regex": "Running",
                  "action": "keep" },
                // What prometheus-adapter maps series to: the namespace and pod resources.
                { "source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace" },
                { "source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod" },
            ],
        }],
    })
}

/// Read access to pods for Prometheus's identity, as one `kubectl apply` list.
pub(super) fn api_objects(user: &str) -> Value {
    let name = "renderpool-tests:prometheus";
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": { "name": name },
                "rules": [{ "apiGroups": [""], "resources": ["pods"],
                            "verbs": ["get", "list", "watch"] }],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": { "name": name },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": name },
                "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                               "name": user }],
            },
        ],
    })
}

/// Command-line arguments: the web listener on 127.0.0.1 only, the data under `data_dir`.
pub(super) fn args(config: &Path, data_dir: &Path, port: u16) -> Vec<String> {
    vec![
        format!("--config.file={}", config.display()),
        format!("--web.listen-address=127.0.0.1:{port}"),
        format!("--storage.tsdb.path={}", data_dir.display()),
        "--storage.tsdb.retention.time=2h".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_render_pods_on_the_real_node_with_namespace_and_pod_labels() {
        let config = config(Path::new("/state/kubeconfig-prometheus"));
        let job = &config["scrape_configs"][0];
        let sd = &job["kubernetes_sd_configs"][0];
        assert_eq!(sd["role"], "pod");
        assert_eq!(sd["kubeconfig_file"], "/state/kubeconfig-prometheus");
        let selector = &sd["selectors"][0];
        assert_eq!(selector["field"], format!("spec.nodeName={NODE_NAME}"));
        assert_eq!(
            selector["label"],
            "app.kubernetes.io/name=renderpool,app.kubernetes.io/component=render"
        );
        let relabels = job["relabel_configs"].as_array().unwrap_or_else(|| panic!("{job}"));
        let target = |label: &str| {
            relabels
                .iter()
                .find(|r| r["target_label"] == label)
                .map(|r| r["source_labels"][0].clone())
        };
        assert_eq!(target("namespace"), Some(json!("__meta_kubernetes_namespace")));
        assert_eq!(target("pod"), Some(json!("__meta_kubernetes_pod_name")));
        assert_eq!(config["global"]["scrape_interval"], "2s");
    }

    #[test]
    fn listens_on_loopback_only() {
        let args = args(Path::new("/c.yml"), Path::new("/data"), 9090);
        assert!(args.contains(&"--web.listen-address=127.0.0.1:9090".to_string()));
    }
}
