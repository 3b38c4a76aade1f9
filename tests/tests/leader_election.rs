//! Two operator processes (the chart's ServiceAccount, one Lease): only the holder reconciles;
//! when it is killed outright (no release), the other takes the lease once it expires and
//! carries on. A separate test binary, so it has its own control plane and its own Lease.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/operator_support.rs"]
mod operator_support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use operator_support::{is_settled, kubectl_apply, pool_manifest, wait_pool};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::{metrics, wait};
use renderpool_tests::cluster::Cluster;
use renderpool_tests::operator::{ChartInstall, OperatorProcess, RELEASE_NAMESPACE};
use serde_json::json;

const LEASE: &str = "renderpool-operator";

async fn leading(op: &OperatorProcess) -> bool {
    metrics::sum(&op.metrics().await, "renderpool_operator_leader", &[]) == 1.0
}

/// Reconciles finished: the duration histogram's count, a series from the start (the
/// by-outcome counter has none until the first reconcile).
async fn reconciles(op: &OperatorProcess) -> f64 {
    let text = op.metrics().await;
    metrics::sum(&text, "renderpool_operator_reconcile_duration_seconds_count", &[])
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    leases.get_opt(LEASE).await.ok().flatten()?.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_reconciles_and_the_standby_takes_over() {
    let install = ChartInstall::shared().await;
    let cluster = Cluster::shared();
    cluster.ensure_nodes("op-node", 2, "16", "64Gi").await;
    let client = cluster.client().await;
    let ns = cluster.namespace("op-leader").await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let ops = [OperatorProcess::start(install).await, OperatorProcess::start(install).await];

    // Exactly one of the two leads, and the Lease names it.
    let first = wait::until("one operator of two leading", Duration::from_secs(60), || async {
        let (a, b) = (leading(&ops[0]).await, leading(&ops[1]).await);
        if a != b { Ok(if a { 0 } else { 1 }) } else { Err((a, b)) }
    })
    .await;
    let (leader, standby) = (&ops[first], &ops[1 - first]);
    assert_eq!(holder(&client).await.as_deref(), Some(leader.identity()));

    let spec = json!({"replicas": 2, "cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("first", spec.clone())).unwrap();
    wait_pool(&pools, "first", Duration::from_secs(90), is_settled).await;
    assert!(reconciles(leader).await > 0.0, "the leader reconciled");
    assert_eq!(reconciles(standby).await, 0.0, "the standby never reconciles");
    assert!(!leading(standby).await);

    // SIGKILL: the lease is not released, so the standby waits for it to expire.
    leader.kill();
    wait::try_until("the standby leading", Duration::from_secs(60), || leading(standby))
        .await
        .unwrap_or_else(|t| panic!("{t}; its log:\n{}", standby.log()));
    assert_eq!(holder(&client).await.as_deref(), Some(standby.identity()));
    kubectl_apply(cluster, ns.name(), &pool_manifest("second", spec)).unwrap();
    wait_pool(&pools, "second", Duration::from_secs(90), is_settled).await;
    assert!(reconciles(standby).await > 0.0, "the new leader reconciles");
}
