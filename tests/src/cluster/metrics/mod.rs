//! The autoscaling metrics pipeline: Prometheus scraping render pods on the real node, and
//! prometheus-adapter serving what it scraped as `custom.metrics.k8s.io`, so an HPA's `Pods`
//! metric (`renderpod_busy_slot_ratio`, `renderpod_queue_depth`) reads what the pods export.
//! Started by [`Cluster::metrics`], with the real node; both stop when the test process exits.
//!
//! Both run with what the product ships in `deploy/autoscaling/`: Prometheus with its scrape
//! job ([`scrape_config_path`]), the adapter with its rules ([`rules_path`]), so the tested
//! pipeline is the documented one. A test may also have Prometheus scrape an operator process
//! ([`MetricsPipeline::scrape_operator`]) and evaluate alerting rules
//! ([`MetricsPipeline::load_rules`], [`MetricsPipeline::alerts`]).

mod adapter;
mod prometheus;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use renderpool_sizing::parse_decimal_si;

pub use adapter::{RELIST_SECONDS, rules_path};
pub use prometheus::{OPERATOR_JOB, SCRAPE_SECONDS, operator_job, scrape_config_path};

use super::components::{spawn, wait_until};
use super::{Cluster, ClusterError, run_with_input};
use crate::free_port;

/// Prometheus and prometheus-adapter, running; see the module doc.
pub struct MetricsPipeline {
    prometheus_url: String,
    daemons: Vec<(&'static str, u32)>,
    files: prometheus::Files,
}

/// One alert Prometheus holds (`/api/v1/alerts`): pending, or firing once its `for:` passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub name: String,
    /// `pending` or `firing`.
    pub state: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// One series of a Prometheus range query: its labels and its points (Unix seconds, value).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSeries {
    pub labels: BTreeMap<String, String>,
    pub points: Vec<(f64, f64)>,
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
        let files = prometheus::Files::in_dir(&dir);
        std::fs::create_dir_all(&files.rules)?;
        std::fs::write(&files.operator_targets, "[]")?;
        daemons.push(("prometheus", start_prometheus(cluster, &dir, &files, prometheus_port)?));
        let prometheus_url = format!("http://127.0.0.1:{prometheus_port}");
        daemons.push(("prometheus-adapter", start_adapter(cluster, &dir, &prometheus_url)?));
        Ok(MetricsPipeline { prometheus_url, daemons, files })
    }

    /// Has Prometheus scrape the operator whose `/metrics` listens at `address` (`host:port`),
    /// as [`OPERATOR_JOB`]; it finds the target within seconds, without a reload.
    pub fn scrape_operator(&self, address: &str) -> Result<(), ClusterError> {
        let targets = serde_json::json!([{ "targets": [address] }]);
        // Written whole, then renamed: the watcher never reads half a file.
        let partial = self.files.operator_targets.with_extension("json.partial");
        std::fs::write(&partial, targets.to_string())?;
        std::fs::rename(&partial, &self.files.operator_targets)?;
        Ok(())
    }

    /// Loads `rules` (a rule file: `{"groups": [...]}`, as a PrometheusRule's spec holds it) as
    /// the rule file `name`, has Prometheus reload (SIGHUP), and waits until its API lists each
    /// of the file's groups with every rule.
    pub async fn load_rules(
        &self,
        name: &str,
        rules: &serde_json::Value,
    ) -> Result<(), ClusterError> {
        let wanted = rule_names(rules)?;
        std::fs::write(self.files.rules.join(format!("{name}.yaml")), rules.to_string())?;
        let pid = self.daemons.iter().find(|(daemon, _)| *daemon == "prometheus").map(|d| d.1);
        let pid = pid.ok_or_else(|| ClusterError::Setup("no prometheus daemon".into()))?;
        crate::process::signal(pid, libc::SIGHUP);
        let what = format!("Prometheus listing the rules of {name}");
        let listed =
            renderpool_testkit::wait::try_until(&what, Duration::from_secs(30), || async {
                let body = self.get("/api/v1/rules", &[]).await;
                let loaded = body.and_then(|body| parse_rule_names(&body));
                match loaded {
                    Ok(loaded) if wanted.iter().all(|rule| loaded.contains(rule)) => Ok(()),
                    other => Err(other),
                }
            })
            .await;
        listed.map_err(|err| ClusterError::Setup(err.to_string()))
    }

    /// The alerts Prometheus holds now, pending and firing.
    pub async fn alerts(&self) -> Result<Vec<Alert>, ClusterError> {
        let body = self.get("/api/v1/alerts", &[]).await;
        body.and_then(|body| parse_alerts(&body))
            .map_err(|err| ClusterError::Setup(format!("/api/v1/alerts: {err}")))
    }

    /// GET `path` of Prometheus's API with `params`, as JSON; errors name what was asked.
    async fn get(
        &self,
        path: &str,
        params: &[(&str, String)],
    ) -> Result<serde_json::Value, String> {
        let url = format!("{}{path}", self.prometheus_url);
        let url = reqwest::Url::parse_with_params(&url, params).map_err(|err| err.to_string())?;
        let response = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|err| err.to_string())?;
        response.json().await.map_err(|err| err.to_string())
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
        let body = self.get("/api/v1/query", &[("query", promql.to_string())]).await;
        body.and_then(|body| parse_vector(&body))
            .map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))
    }

    /// Runs a PromQL range query from `start` to `end` (Unix seconds) every `step` seconds: each
    /// series' labels and points (Unix seconds, value; NaN where the query had none).
    pub async fn query_range(
        &self,
        promql: &str,
        (start, end, step): (f64, f64, f64),
    ) -> Result<Vec<RangeSeries>, ClusterError> {
        let params = [
            ("query", promql.to_string()),
            ("start", start.to_string()),
            ("end", end.to_string()),
            ("step", step.to_string()),
        ];
        let body = self.get("/api/v1/query_range", &params).await;
        body.and_then(|body| parse_matrix(&body))
            .map_err(|err| ClusterError::Setup(format!("query {promql:?}: {err}")))
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
            adapter::API.group,
            adapter::API.version
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

fn start_prometheus(
    cluster: &Cluster,
    dir: &Path,
    files: &prometheus::Files,
    port: u16,
) -> Result<u32, ClusterError> {
    let identity = &cluster.identities.prometheus;
    let objects = prometheus::api_objects(&identity.user).to_string();
    run_with_input(cluster.kubectl().args(["apply", "-f", "-"]), objects.as_bytes())?;
    let kubeconfig = cluster.kubeconfig_for_token("prometheus", &identity.token);
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, prometheus::config(&kubeconfig, files)?.to_string())?;
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
            adapter::API.service_dns_name(),
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
    adapter::API.wait_available(cluster, dir, "prometheus-adapter")?;
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

/// The `result` list of a successful query answer.
fn query_result(body: &serde_json::Value) -> Result<&Vec<serde_json::Value>, String> {
    if body["status"] != "success" {
        return Err(format!("Prometheus answered {body}"));
    }
    body["data"]["result"].as_array().ok_or_else(|| format!("no result in {body}"))
}

/// The samples of an instant query's answer (`resultType` vector).
fn parse_vector(body: &serde_json::Value) -> Result<Vec<Sample>, String> {
    query_result(body)?
        .iter()
        .map(|item| {
            let labels = labels_of(&item["metric"]);
            let value = item["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no value in {item}"))?;
            Ok(Sample { labels, value })
        })
        .collect()
}

/// The series of a range query's answer (`resultType` matrix).
fn parse_matrix(body: &serde_json::Value) -> Result<Vec<RangeSeries>, String> {
    query_result(body)?
        .iter()
        .map(|item| {
            let labels = labels_of(&item["metric"]);
            let values = item["values"].as_array().ok_or_else(|| format!("no values in {item}"))?;
            let points = values
                .iter()
                .map(|pair| {
                    let at = pair[0].as_f64().ok_or_else(|| format!("no time in {pair}"))?;
                    let value = pair[1].as_str().and_then(|v| v.parse().ok());
                    Ok((at, value.ok_or_else(|| format!("no value in {pair}"))?))
                })
                .collect::<Result<_, String>>()?;
            Ok(RangeSeries { labels, points })
        })
        .collect()
}

/// A series' labels (`metric` of a query answer).
fn labels_of(metric: &serde_json::Value) -> BTreeMap<String, String> {
    let object = metric.as_object().cloned().unwrap_or_default();
    object.into_iter().map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string())).collect()
}

/// `group/alert` for every alerting rule of a rule file.
fn rule_names(rules: &serde_json::Value) -> Result<Vec<String>, ClusterError> {
    let groups = rules["groups"].as_array();
    let groups = groups.ok_or_else(|| ClusterError::Setup(format!("no groups in {rules}")))?;
    Ok(groups
        .iter()
        .flat_map(|group| {
            let rules = group["rules"].as_array().cloned().unwrap_or_default();
            rules.into_iter().map(move |rule| {
                format!("{}/{}", group["name"].as_str().unwrap_or_default(), rule_name(&rule))
            })
        })
        .collect())
}

/// An alerting rule's `alert`, a recording rule's `record`, or the API's `name`.
fn rule_name(rule: &serde_json::Value) -> &str {
    ["alert", "record", "name"].iter().find_map(|key| rule[*key].as_str()).unwrap_or_default()
}

/// `group/rule` for every rule `/api/v1/rules` lists, the unhealthy ones refused.
fn parse_rule_names(body: &serde_json::Value) -> Result<Vec<String>, String> {
    let groups = body["data"]["groups"].as_array().ok_or_else(|| format!("no groups in {body}"))?;
    let mut names = Vec::new();
    for group in groups {
        for rule in group["rules"].as_array().into_iter().flatten() {
            if rule["health"] == "err" {
                return Err(format!("rule {}: {}", rule_name(rule), rule["lastError"]));
            }
            names.push(format!(
                "{}/{}",
                group["name"].as_str().unwrap_or_default(),
                rule_name(rule)
            ));
        }
    }
    Ok(names)
}

/// The alerts of an `/api/v1/alerts` answer.
fn parse_alerts(body: &serde_json::Value) -> Result<Vec<Alert>, String> {
    let alerts = body["data"]["alerts"].as_array().ok_or_else(|| format!("no alerts in {body}"))?;
    alerts
        .iter()
        .map(|alert| {
            let labels = labels_of(&alert["labels"]);
            let name =
                labels.get("alertname").cloned().ok_or_else(|| format!("no name: {alert}"))?;
            let state = alert["state"].as_str().ok_or_else(|| format!("no state: {alert}"))?;
            Ok(Alert {
                name,
                state: state.to_string(),
                labels,
                annotations: labels_of(&alert["annotations"]),
            })
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
    fn alerts_and_rule_names_are_read_from_the_api_answers() {
        let body = json!({ "status": "success", "data": { "alerts": [
            { "labels": { "alertname": "RenderPoolDegraded", "renderpool": "p" },
              "annotations": { "summary": "s" }, "state": "firing", "value": "1e+00" },
        ]}});
        let alerts = parse_alerts(&body).unwrap_or_default();
        assert_eq!(alerts.len(), 1);
        assert_eq!(
            (alerts[0].name.as_str(), alerts[0].state.as_str()),
            ("RenderPoolDegraded", "firing")
        );
        assert_eq!(alerts[0].labels["renderpool"], "p");
        assert_eq!(alerts[0].annotations["summary"], "s");
        assert!(parse_alerts(&json!({ "data": { "alerts": [{ "state": "firing" }] } })).is_err());

        let file = json!({ "groups": [{ "name": "g", "rules": [{ "alert": "A", "expr": "1" }] }] });
        assert_eq!(rule_names(&file).unwrap_or_default(), ["g/A"]);
        let listed = json!({ "data": { "groups": [{ "name": "g", "rules": [
            { "name": "A", "health": "unknown" } ] }] } });
        assert_eq!(parse_rule_names(&listed).unwrap_or_default(), ["g/A"]);
        let broken = json!({ "data": { "groups": [{ "name": "g", "rules": [
            { "name": "A", "health": "err", "lastError": "bad" } ] }] } });
        assert!(parse_rule_names(&broken).is_err_and(|err| err.contains("bad")));
    }

    #[test]
    fn a_matrix_gives_labels_and_points() {
        let body = json!({ "status": "success", "data": { "resultType": "matrix", "result": [
            { "metric": { "pod": "a" }, "values": [[10.0, "1"], [12.0, "NaN"]] },
        ]}});
        let series = parse_matrix(&body).unwrap_or_default();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].labels["pod"], "a");
        assert_eq!(series[0].points[0], (10.0, 1.0));
        assert!(series[0].points[1].1.is_nan());
        assert!(parse_matrix(&json!({ "status": "error" })).is_err());
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
