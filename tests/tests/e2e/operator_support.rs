//! Shared steps of the operator tests: the chart's operator, RenderPools by kubectl, and waits
//! on what the real controllers report.
//!
//! Shared by the e2e binary and `leader_election.rs` (through `#[path]`); each uses a part.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Resource};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::{self, Cluster};
use renderpool_tests::operator::OperatorProcess;

/// kwok nodes the operator tests schedule onto: 16 CPU, 64Gi each.
pub const NODE_PREFIX: &str = "op-node";

/// The cluster with the chart installed (CRD, RBAC), kwok nodes, and the shared operator
/// running with the chart's ServiceAccount token.
pub async fn setup() -> (&'static Cluster, &'static OperatorProcess) {
    let cluster = Cluster::shared();
    let operator = OperatorProcess::shared().await;
    cluster.ensure_nodes(NODE_PREFIX, 6, "16", "64Gi").await;
    (cluster, operator)
}

/// `kubectl apply -f -` of a manifest; the error carries kubectl's message.
pub fn kubectl_apply(cluster: &Cluster, namespace: &str, manifest: &str) -> Result<String, String> {
    let mut cmd = cluster.kubectl();
    cmd.args(["apply", "-f", "-"]);
    if !namespace.is_empty() {
        cmd.args(["-n", namespace]);
    }
    cluster::run_with_input(&mut cmd, manifest.as_bytes()).map_err(|e| e.to_string())
}

/// A RenderPool manifest with `spec` (JSON object).
pub fn pool_manifest(name: &str, spec: serde_json::Value) -> String {
    serde_json::json!({
        "apiVersion": RenderPool::api_version(&()),
        "kind": "RenderPool",
        "metadata": {"name": name},
        "spec": spec,
    })
    .to_string()
}

/// Waits until the pool satisfies `check`; panics with the last status seen otherwise.
pub async fn wait_pool(
    api: &Api<RenderPool>,
    name: &str,
    timeout: Duration,
    check: impl Fn(&RenderPool) -> bool,
) -> RenderPool {
    let what = format!("RenderPool {name} in the expected state");
    wait::until(&what, timeout, || async {
        match api.get_opt(name).await {
            Ok(Some(pool)) if check(&pool) => Ok(pool),
            other => Err(other.map(|p| p.map(|p| p.status))),
        }
    })
    .await
}

/// Condition `type_` of the pool: (status, reason, message).
pub fn condition(pool: &RenderPool, type_: &str) -> Option<(String, String, String)> {
    pool.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Ready=True for the pool's current generation.
pub fn is_ready(pool: &RenderPool) -> bool {
    let current =
        pool.status.as_ref().and_then(|s| s.observed_generation) == pool.metadata.generation;
    current && condition(pool, "Ready").is_some_and(|(s, _, _)| s == "True")
}

/// Ready and nothing rolling: the pool is at rest.
pub fn is_settled(pool: &RenderPool) -> bool {
    is_ready(pool) && condition(pool, "Progressing").is_some_and(|(s, _, _)| s == "False")
}

/// Waits for a Deployment to satisfy `check`.
pub async fn wait_deployment(
    api: &Api<Deployment>,
    name: &str,
    timeout: Duration,
    check: impl Fn(&Deployment) -> bool,
) -> Deployment {
    let what = format!("Deployment {name} in the expected state");
    wait::until(&what, timeout, || async {
        match api.get_opt(name).await {
            Ok(Some(deployment)) if check(&deployment) => Ok(deployment),
            other => Err(other.map(|d| d.map(|d| (d.spec.replicas, d.status)))),
        }
    })
    .await
}

/// Environment of the first container of a Deployment, as a map.
pub fn container_env(d: &Deployment) -> std::collections::BTreeMap<String, String> {
    d.spec.template.spec.as_ref().unwrap().containers[0]
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect()
}
