//! Prometheus as a host process on 127.0.0.1: the scrape job the product ships
//! (`deploy/autoscaling/prometheus-scrape.yaml`), with Kubernetes service discovery under an
//! identity of its own that may only read pods, scraping render pods on the real node directly
//! at their pod IPs, which the host reaches on the node's bridge. Beside it, a job for an
//! operator process on 127.0.0.1 scraped as the chart's ServiceMonitor asks ([`operator_job`],
//! its target written later), and the rule files a test loads (the chart's alerts).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cluster::ClusterError;
use crate::cluster::addresses::NODE_NAME;
use crate::repo_root;

/// How often render pods are scraped (seconds); short, so a test sees a change in seconds.
pub const SCRAPE_SECONDS: u32 = 2;

/// The shipped scrape job, where the product ships it.
pub fn scrape_config_path() -> PathBuf {
    repo_root().join("deploy/autoscaling/prometheus-scrape.yaml")
}

/// Name of the operator's scrape job.
pub const OPERATOR_JOB: &str = "renderpool-operator";

/// Where the test's rule files and the operator's target live.
pub(super) struct Files {
    /// Folder of rule files (`*.yaml`), read at start and at each reload.
    pub rules: PathBuf,
    /// File-discovery target list of the operator job (`[]` until a test sets one).
    pub operator_targets: PathBuf,
}

impl Files {
    pub fn in_dir(dir: &Path) -> Files {
        Files { rules: dir.join("rules"), operator_targets: dir.join("operator-targets.json") }
    }
}

/// The configuration (JSON, which Prometheus reads as the YAML it is): the shipped jobs as they
/// are, each discovery given only what a process outside the cluster needs (the API server, by
/// `kubeconfig`) and the real node as the one place to look; the operator job; the rule files.
pub(super) fn config(kubeconfig: &Path, files: &Files) -> Result<Value, ClusterError> {
    let path = scrape_config_path();
    let text = std::fs::read_to_string(&path)?;
    let shipped: Value = serde_saphyr::from_str(&text)
        .map_err(|err| ClusterError::Setup(format!("{}: {err}", path.display())))?;
    let mut jobs = with_test_discovery(shipped, kubeconfig)
        .map_err(|err| ClusterError::Setup(format!("{}: {err}", path.display())))?;
    if let Value::Array(jobs) = &mut jobs {
        jobs.push(operator_job(&files.operator_targets));
    }
    let interval = format!("{SCRAPE_SECONDS}s");
    Ok(json!({
        "global": { "scrape_interval": interval, "scrape_timeout": interval,
                    "evaluation_interval": interval },
        "scrape_configs": jobs,
        "rule_files": [files.rules.join("*.yaml")],
    }))
}

/// The operator's scrape job: what the chart's ServiceMonitor asks (`/metrics`, the pool
/// gauges' own namespace label honoured), its target a process on 127.0.0.1 that a test names
/// in `targets` (file discovery: Prometheus picks a change up without a reload).
pub fn operator_job(targets: &Path) -> Value {
    json!({
        "job_name": OPERATOR_JOB,
        "metrics_path": "/metrics",
        "honor_labels": true,
        "file_sd_configs": [{ "files": [targets] }],
    })
}

/// The shipped `scrape_configs` with `kubeconfig_file` and a node selector in each
/// `kubernetes_sd_configs` entry. Only pods on the real node: their addresses are on its bridge,
/// while a kwok pod's address leads nowhere, and the host must send nothing towards it.
fn with_test_discovery(shipped: Value, kubeconfig: &Path) -> Result<Value, String> {
    let Some(Value::Array(mut jobs)) = shipped.get("scrape_configs").cloned() else {
        return Err("no scrape_configs list".into());
    };
    for job in &mut jobs {
        let Some(Value::Array(discoveries)) = job.get_mut("kubernetes_sd_configs") else {
            return Err(format!("job without kubernetes_sd_configs: {job}"));
        };
        for discovery in discoveries {
            let role = discovery["role"].clone();
            discovery["kubeconfig_file"] = json!(kubeconfig);
            discovery["selectors"] =
                json!([{ "role": role, "field": format!("spec.nodeName={NODE_NAME}") }]);
        }
    }
    Ok(Value::Array(jobs))
}

/// Read access to pods for Prometheus's identity, as one `kubectl apply` list.
pub(super) fn api_objects(user: &str) -> Value {
    let items = super::read_access("renderpool-tests:prometheus", user, &["pods"]);
    json!({ "apiVersion": "v1", "kind": "List", "items": items })
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
    fn runs_the_shipped_job_on_the_real_node_with_namespace_and_pod_labels() {
        let files = Files::in_dir(Path::new("/state/metrics"));
        let config = config(Path::new("/state/kubeconfig-prometheus"), &files)
            .unwrap_or_else(|err| panic!("{err}"));
        let jobs = config["scrape_configs"].as_array().unwrap_or_else(|| panic!("{config}"));
        assert_eq!(jobs.len(), 2, "{config}");
        assert_eq!(jobs[1], operator_job(Path::new("/state/metrics/operator-targets.json")));
        assert_eq!(config["rule_files"], json!(["/state/metrics/rules/*.yaml"]));
        let job = &jobs[0];
        let sd = &job["kubernetes_sd_configs"][0];
        assert_eq!(sd["role"], "pod");
        assert_eq!(sd["kubeconfig_file"], "/state/kubeconfig-prometheus");
        assert_eq!(sd["selectors"][0]["role"], "pod");
        assert_eq!(sd["selectors"][0]["field"], format!("spec.nodeName={NODE_NAME}"));
        let relabels = job["relabel_configs"].as_array().unwrap_or_else(|| panic!("{job}"));
        let target = |label: &str| {
            relabels
                .iter()
                .find(|r| r["target_label"] == label)
                .map(|r| r["source_labels"][0].clone())
        };
        // What the adapter rules map series to, and the pool-wide label.
        assert_eq!(target("namespace"), Some(json!("__meta_kubernetes_namespace")));
        assert_eq!(target("pod"), Some(json!("__meta_kubernetes_pod_name")));
        assert_eq!(
            target("renderpool"),
            Some(json!("__meta_kubernetes_pod_label_app_kubernetes_io_instance"))
        );
        assert_eq!(config["global"]["scrape_interval"], "2s");
    }

    #[test]
    fn a_job_without_kubernetes_discovery_is_refused() {
        let shipped = json!({ "scrape_configs": [{ "job_name": "x", "static_configs": [] }] });
        assert!(with_test_discovery(shipped, Path::new("/k")).is_err());
        assert!(with_test_discovery(json!({}), Path::new("/k")).is_err());
    }

    #[test]
    fn listens_on_loopback_only() {
        let args = args(Path::new("/c.yml"), Path::new("/data"), 9090);
        assert!(args.contains(&"--web.listen-address=127.0.0.1:9090".to_string()));
    }
}
