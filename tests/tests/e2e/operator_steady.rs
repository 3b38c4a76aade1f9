//! A pool at rest costs nothing: a reconcile with nothing to change writes no child, and at rest
//! no object changes at all.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::ListParams;
use kube::{Api, ResourceExt};
use renderpool_operator::crd::RenderPool;
use renderpool_tests::operator::child_versions;
use serde_json::json;

use super::operator_support::{is_settled, kubectl_apply, pool_manifest, setup, wait_pool};

/// resourceVersion of every child of pool `calm`, by kind and name.
async fn children(client: &kube::Client, ns: &str) -> BTreeMap<String, String> {
    let labels = ListParams::default().labels("app.kubernetes.io/instance=calm");
    child_versions(client, ns, &labels).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_pool_is_left_untouched() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-steady").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let spec = json!({"replicas": 3, "cpu": "2", "memory": "2Gi", "gotenberg": {"replicas": 2}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("calm", spec)).unwrap();
    wait_pool(&pools, "calm", Duration::from_secs(90), is_settled).await;
    // Let the last status updates of the Deployment and disruption controllers land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = children(&client, ns.name()).await;
    assert_eq!(
        before.len(),
        8,
        "two Deployments, Services and PDBs, a ConfigMap, a NetworkPolicy: {before:?}"
    );

    // The same pool said another way: a new generation to reconcile, nothing to change.
    let same =
        json!({"replicas": 3, "cpu": "2", "memory": "2Gi", "gotenberg": {"officeConcurrency": 2}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("calm", same)).unwrap();
    let pool = wait_pool(&pools, "calm", Duration::from_secs(60), |p| {
        is_settled(p) && p.metadata.generation == Some(2)
    })
    .await;
    assert_eq!(pool.status.as_ref().and_then(|s| s.observed_generation), Some(2));
    assert_eq!(children(&client, ns.name()).await, before, "the reconcile wrote no child");

    // At rest: nothing at all changes, the pool included.
    let pool_version = pool.resource_version();
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(children(&client, ns.name()).await, before, "nothing was written at rest");
    assert_eq!(pools.get("calm").await.unwrap().resource_version(), pool_version);
}
