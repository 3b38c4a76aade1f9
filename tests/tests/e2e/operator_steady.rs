//! A pool at rest costs nothing: no object changes and the operator sends no writes.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use renderpool_operator::crd::RenderPool;
use serde_json::json;

use super::operator_support::{is_settled, kubectl_apply, pool_manifest, setup, wait_pool};

async fn versions(client: &kube::Client, ns: &str) -> BTreeMap<String, String> {
    let labels = ListParams::default().labels("app.kubernetes.io/instance=calm");
    let mut out = BTreeMap::new();
    let pool = Api::<RenderPool>::namespaced(client.clone(), ns).get("calm").await.unwrap();
    out.insert("RenderPool/calm".into(), pool.resource_version().unwrap());
    for d in Api::<Deployment>::namespaced(client.clone(), ns).list(&labels).await.unwrap() {
        out.insert(format!("Deployment/{}", d.name_any()), d.resource_version().unwrap());
    }
    for s in Api::<Service>::namespaced(client.clone(), ns).list(&labels).await.unwrap() {
        out.insert(format!("Service/{}", s.name_any()), s.resource_version().unwrap());
    }
    for p in Api::<PodDisruptionBudget>::namespaced(client.clone(), ns).list(&labels).await.unwrap()
    {
        out.insert(format!("PodDisruptionBudget/{}", p.name_any()), p.resource_version().unwrap());
    }
    out
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
    // Let the last status updates of the Deployment controller land.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = versions(&client, ns.name()).await;
    assert_eq!(before.len(), 7, "the pool and its six children: {before:?}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = versions(&client, ns.name()).await;
    assert_eq!(before, after, "nothing was written while the pool was at rest");
}
