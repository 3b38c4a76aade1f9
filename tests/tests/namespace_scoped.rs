//! The chart's namespace-scoped mode: Roles in the watched namespaces and no cluster-wide right.
//! The operator runs under that ServiceAccount's token, reconciles pools in both watched
//! namespaces, leaves a pool elsewhere alone, and `kubectl auth can-i` confirms what it may not
//! do. A separate test binary: its own control plane, where this release owns the CRD.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/operator_support.rs"]
mod operator_support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::ListParams;
use operator_support::{NODE_PREFIX, is_settled, kubectl_apply, pool_manifest, wait_pool};
use renderpool_operator::crd::RenderPool;
use renderpool_tests::cluster::{Cluster, run};
use renderpool_tests::operator::{ChartInstall, OperatorProcess, RELEASE, RELEASE_NAMESPACE};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_install_reconciles_its_namespaces_and_nothing_else() {
    let cluster = Cluster::shared();
    let (first, second) =
        (cluster.namespace("scoped-a").await, cluster.namespace("scoped-b").await);
    let outside = cluster.namespace("unwatched").await;
    let install = ChartInstall::scoped(&[first.name(), second.name()]).await;
    let can = |args: &[&str]| -> bool {
        run(install.kubectl().args(["auth", "can-i"]).args(args))
            .is_ok_and(|out| out.starts_with("yes"))
    };
    for allowed in [
        vec!["watch", "renderpools.renderpool.dev", "-n", first.name()],
        vec!["patch", "renderpools.renderpool.dev", "--subresource=status", "-n", second.name()],
        vec!["create", "deployments.apps", "-n", first.name()],
        vec!["delete", "networkpolicies.networking.k8s.io", "-n", second.name()],
        vec!["patch", "horizontalpodautoscalers.autoscaling", "-n", first.name()],
        vec!["patch", "leases.coordination.k8s.io/renderpool-operator", "-n", RELEASE_NAMESPACE],
    ] {
        assert!(can(&allowed), "should be allowed: {allowed:?}");
    }
    for denied in [
        // Nothing cluster-wide, and nothing in a namespace it does not watch.
        vec!["list", "renderpools.renderpool.dev", "-A"],
        vec!["watch", "deployments.apps", "-A"],
        vec!["watch", "renderpools.renderpool.dev", "-n", outside.name()],
        vec!["create", "deployments.apps", "-n", outside.name()],
        vec!["watch", "horizontalpodautoscalers.autoscaling", "-A"],
        vec!["patch", "horizontalpodautoscalers.autoscaling", "-n", outside.name()],
        vec!["list", "configmaps", "-n", outside.name()],
        vec!["create", "deployments.apps", "-n", RELEASE_NAMESPACE],
        // Nor, where it does watch, anything it never uses.
        vec!["list", "secrets", "-n", first.name()],
        vec!["get", "secrets", "-n", first.name()],
        vec!["create", "pods/exec", "-n", first.name()],
        vec!["get", "pods", "-n", first.name()],
        vec!["update", "deployments.apps", "-n", first.name()],
        vec!["create", "clusterroles.rbac.authorization.k8s.io"],
    ] {
        assert!(!can(&denied), "should be denied: {denied:?}");
    }
    let bindings =
        run(cluster.kubectl().args(["get", "clusterrolebindings", "-o", "name"])).unwrap();
    assert!(!bindings.contains(&format!("/{RELEASE}\n")), "no ClusterRoleBinding:\n{bindings}");

    let operator = OperatorProcess::start(&install).await;
    cluster.ensure_nodes(NODE_PREFIX, 2, "16", "64Gi").await;
    let client = cluster.client().await;
    let spec = json!({"replicas": 1, "cpu": "1", "memory": "1Gi", "gotenberg": {"replicas": 1, "memory": "1Gi"}});
    for ns in [&first, &second, &outside] {
        kubectl_apply(cluster, ns.name(), &pool_manifest("scoped", spec.clone())).unwrap();
    }
    for ns in [&first, &second] {
        let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
        let pool = wait_pool(&pools, "scoped", Duration::from_secs(90), is_settled).await;
        assert_eq!(pool.status.unwrap().ready_replicas, 1, "{}", ns.name());
    }
    // Created with the others, the pool outside got nothing while they became Ready.
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), outside.name());
    assert_eq!(pools.get("scoped").await.unwrap().status, None);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), outside.name());
    assert!(deployments.list(&ListParams::default()).await.unwrap().items.is_empty());
    let log = operator.log();
    assert!(!log.contains("forbidden"), "the scoped Roles refused the operator something:\n{log}");
}
