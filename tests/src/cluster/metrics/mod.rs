//! The autoscaling metrics pipeline: Prometheus scraping render pods on the real node, and
//! prometheus-adapter serving what it scraped as `custom.metrics.k8s.io`, so an HPA's `Pods`
//! metric (`renderpod_busy_slot_ratio`, `renderpod_queue_depth`) reads what the pods export.
//! Started by [`Cluster::metrics`], with the real node; both stop when the test process exits.
//!
//! Both run with what the product ships in `deploy/autoscaling/`: Prometheus with its scrape
//! job ([`scrape_config_path`]), the adapter with its rules ([`rules_path`]), so the tested
//! pipeline is the documented one.

mod adapter;
mod prometheus;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use renderpool_sizing::parse_decimal_si;

pub use adapter::{RELIST_SECONDS, rules_path};
pub use prometheus::{SCRAPE_SECONDS, scrape_config_path};

use super::components::{spawn, wait_until};
use super::{Cluster, ClusterError, run, run_with_input};
use crate::free_port;

/// Prometheus and prometheus-adapter, running; see the module doc.
pub struct MetricsPipeline {
    prometheus_url: String,
    daemons: Vec<(&'static str, u32)>,
}

/// One sample of a Prometheus instant query: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl MetricsPipeline {
    /// Starts Prometheus, then the adapter, in `cluster`, whose real node is up.
    pub(super) fn start(cluster: &Cluster) -> Result<MetricsPipeline, ClusterError> {
        let dir = cluster.state_dir.join("metrics");
        std::fs::create_dir_all(&dir)?;
        let mut daemons = Vec::new();
        let prometheus_port = free_port();
        daemons.push(("prometheus", start_prometheus(cluster, &dir, prometheus_port)?));
        let prometheus_url = format!("http://127.0.0.1:{prometheus_port}");
        daemons.push(("prometheus-adapter", start_adapter(cluster, &dir, &prometheus_url)?));
        Ok(MetricsPipeline { prometheus_url, daemons })
    }

    /// Prometheus's base URL, `http://127.0.0.1:PORT` (its API is under `/api/v1/`).
    pub fn prometheus_url(&self) -> &str {
        &self.prometheus_url
    }

    /// The two daemons by name, with their pids (for resource figures).
    pub fn daemons(&self) -> &[(&'static str, u32)] {
        &self.daemons
    }

    /// Runs a PromQL instant query.
    pub async fn query(&self, promql: &str) -> Result<Vec<Sample>, ClusterError> {
        let url = format!("{}/api/v1/query", self.prometheus_url);
        let url = reqwest::Url::parse_with_params(&url, [("query", promql)])
            .map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))?;
        let response = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))?;
        let body: serde_json::Value = response
            .json()
            .await
            .map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))?;
        parse_vector(&body).map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))
    }

    /// `metric` of every pod in `namespace` as the custom metrics API serves it through the
    /// API server's aggregation layer (what an HPA's `Pods` metric reads): pod name to value.
    /// A pod without a value is absent.
    pub async fn pod_metric(
        &self,
        client: &kube::Client,
        namespace: &str,
        metric: &str,
    ) -> Result<BTreeMap<String, f64>, ClusterError> {
        let path = format!(
            "/apis/{}/{}/namespaces/{namespace}/pods/*/{metric}",
            adapter::GROUP,
            adapter::VERSION
        );
        let request = http::Request::get(&path)
            .body(Vec::new())
            .map_err(|err| ClusterError::Setup(format!("{path}: {err}")))?;
        let list: serde_json::Value = client
            .request(request)
            .await
            .map_err(|err| ClusterError::Setup(format!("{path}: {err}")))?;
        parse_metric_values(&list).map_err(|err| ClusterError::Setup(format!("{path}: {err}")))
    }
}

fn start_prometheus(cluster: &Cluster, dir: &Path, port: u16) -> Result<u32, ClusterError> {
    let identity = &cluster.identities.prometheus;
    let objects = prometheus::api_objects(&identity.user).to_string();
    run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), objects.as_bytes())?;
    let kubeconfig = cluster.kubeconfig_for_token("prometheus", &identity.token);
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, prometheus::config(&kubeconfig)?.to_string())?;
    let args = prometheus::args(&config, &dir.join("prometheus-data"), port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pid = spawn(&cluster.bin_dir, dir, "prometheus", &args)?;
    wait_until(dir, "prometheus", Duration::from_secs(60), || super::http_ok(port, "/-/ready"))?;
    Ok(pid)
}

fn start_adapter(cluster: &Cluster, dir: &Path, prometheus_url: &str) -> Result<u32, ClusterError> {
    let identity = &cluster.identities.prometheus_adapter;
    let (serving_cert, serving_key) = cluster.pki.ca.issue(
        dir,
        "prometheus-adapter",
        "/CN=prometheus-adapter",
        &format!(
            "subjectAltName=DNS:{},IP:{}\nextendedKeyUsage=serverAuth\n",
            adapter::service_dns_name(),
            super::addresses::BRIDGE_IP
        ),
    )?;
    let ca_bundle =
        serde_json::to_value(k8s_openapi::ByteString(std::fs::read(&cluster.pki.ca.cert)?))
            .map_err(|err| ClusterError::Setup(format!("CA bundle: {err}")))?;
    let port = free_port();
    let objects = adapter::api_objects(&identity.user, &ca_bundle, port).to_string();
    run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), objects.as_bytes())?;
    let kubeconfig = cluster.kubeconfig_for_token("prometheus-adapter", &identity.token);
    let cert_dir = dir.join("prometheus-adapter-certs");
    std::fs::create_dir_all(&cert_dir)?;
    let settings = adapter::Settings {
        kubeconfig: &kubeconfig,
        serving_cert: &serving_cert,
        serving_key: &serving_key,
        cert_dir: &cert_dir,
        prometheus_url,
        port,
    };
    let args = adapter::args(&settings);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pid = spawn(&cluster.bin_dir, dir, "prometheus-adapter", &args)?;
    // Available means the API server reached it through the aggregation layer and it answered.
    let jsonpath = r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#;
    let name = adapter::api_service_name();
    wait_until(dir, "prometheus-adapter", Duration::from_secs(90), || {
        run(cluster.kubectl().args(["get", "apiservice", &name, "-o", jsonpath]))
            .is_ok_and(|status| status.trim() == "True")
    })?;
    Ok(pid)
}

/// A ClusterRole `name` that may get, list and watch the core `resources`, and its binding to
/// `user`: what each daemon of the pipeline reads of the cluster.
fn read_access(name: &str, user: &str, resources: &[&str]) -> [serde_json::Value; 2] {
    [
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": { "name": name },
            "rules": [{ "apiGroups": [""], "resources": resources,
                        "verbs": ["get", "list", "watch"] }],
        }),
        serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": name },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                           "name": user }],
        }),
    ]
}

/// The samples of an instant query's answer (`resultType` vector).
fn parse_vector(body: &serde_json::Value) -> Result<Vec<Sample>, String> {
    if body["status"] != "success" {
        return Err(format!("Prometheus answered {body}"));
    }
    let result = body["data"]["result"].as_array().ok_or_else(|| format!("no result in {body}"))?;
    result
        .iter()
        .map(|item| {
            let labels = item["metric"]
                .as_object()
                .map(|labels| {
                    labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect()
                })
                .unwrap_or_default();
            let value = item["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no value in {item}"))?;
            Ok(Sample { labels, value })
        })
        .collect()
}

/// Pod name to value from a custom metrics `MetricValueList`.
fn parse_metric_values(list: &serde_json::Value) -> Result<BTreeMap<String, f64>, String> {
    let items = list["items"].as_array().ok_or_else(|| format!("no items in {list}"))?;
    items
        .iter()
        .map(|item| {
            let pod = item["describedObject"]["name"]
                .as_str()
                .ok_or_else(|| format!("no describedObject.name in {item}"))?;
            let value = item["value"].as_str().ok_or_else(|| format!("no value in {item}"))?;
            let value = parse_decimal_si(value).map_err(|err| err.to_string())?;
            Ok((pod.to_string(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_metric_value_list_maps_pods_to_values() {
        let list = json!({
            "kind": "MetricValueList",
            "items": [
                { "describedObject": { "kind": "Pod", "name": "a" }, "value": "250m" },
                { "describedObject": { "kind": "Pod", "name": "b" }, "value": "1" },
            ],
        });
        let values = parse_metric_values(&list).unwrap_or_default();
        assert_eq!(values, BTreeMap::from([("a".into(), 0.25), ("b".into(), 1.0)]));
        assert!(parse_metric_values(&json!({ "items": [{ "value": "1" }] })).is_err());
        // The adapter writes milli-quantities: a finer suffix is refused, never read as a guess.
        let micro = json!({ "items": [{ "describedObject": { "name": "a" }, "value": "333u" }] });
        assert!(parse_metric_values(&micro).is_err());
    }

    #[test]
    fn an_instant_vector_gives_labels_and_values() {
        let body = json!({ "status": "success", "data": { "resultType": "vector", "result": [
            { "metric": { "pod": "a" }, "value": [1.0, "0.5"] },
        ]}});
        let samples = parse_vector(&body).unwrap_or_default();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].labels["pod"], "a");
        assert_eq!(samples[0].value, 0.5);
        assert!(parse_vector(&json!({ "status": "error" })).is_err());
    }
}
