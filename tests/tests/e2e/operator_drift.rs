//! Drift: a child changed behind the operator's back (scaled, an env var edited, its PDB deleted,
//! the Office share rewritten) is put back by the reconcile its own watch event triggers, not by
//! the periodic resync.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::run;
use serde_json::json;

use super::operator_support::{
    container_env, is_settled, kubectl_apply, pool_manifest, setup, wait_pool,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_scaled_and_deleted_children_return_to_the_built_state() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-drift").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns.name());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let spec = json!({"replicas": 2, "cpu": "1", "memory": "1Gi", "queueDepth": 12,
                      "gotenberg": {"replicas": 2, "memory": "1Gi"}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("drifted", spec)).unwrap();
    wait_pool(&pools, "drifted", Duration::from_secs(90), is_settled).await;

    // Four changes at once, as a person with kubectl (or a webhook) would make them.
    let kubectl =
        |args: &[&str]| run(cluster.kubectl().args(args).args(["-n", ns.name()])).unwrap();
    let log_before = operator.log().len();
    kubectl(&["scale", "deployment/drifted-render", "--replicas=5"]);
    kubectl(&["set", "env", "deployment/drifted-render", "RENDERPOD_QUEUE_DEPTH=1"]);
    kubectl(&["delete", "pdb", "drifted-render"]);
    kubectl(&[
        "patch",
        "configmap",
        "drifted-office",
        "--type=merge",
        "-p",
        r#"{"data":{"concurrency":"99"}}"#,
    ]);

    let restored = wait::try_until(
        "the children back in the built state",
        Duration::from_secs(60),
        || async {
            let render = deployments.get("drifted-render").await.ok()?;
            let share =
                config_maps.get("drifted-office").await.ok()?.data?.get("concurrency")?.clone();
            let back = render.spec.replicas == Some(2)
            && container_env(&render)["RENDERPOD_QUEUE_DEPTH"] == "12"
            && pdbs.get_opt("drifted-render").await.ok()?.is_some()
            // 2 Gotenberg replicas over 2 render pods: one conversion each.
            && share == "1";
            back.then_some(render)
        },
    )
    .await;
    let render = restored.unwrap_or_else(|t| panic!("{t}; operator log:\n{}", operator.log()));
    // What brought them back: a reconcile of the pool that a child's watch event started; none
    // came from a requeue (the periodic resync, or a retry).
    let log = operator.log();
    let pool = format!("object.ref=RenderPool.v1beta1.renderpool.dev/drifted.{}", ns.name());
    let triggered: Vec<&str> = log[log_before..]
        .lines()
        .filter(|l| l.contains(&pool) && l.contains("reconciled"))
        .collect();
    let by_watch = triggered.iter().any(|l| l.contains("object.reason=related object updated"));
    let requeued = triggered.iter().any(|l| l.contains("requested retry"));
    assert!(by_watch && !requeued, "reconciles after the changes: {triggered:#?}");
    // The operator owns its fields again: the next scale by hand is reverted as well.
    let owner = |field: &str| {
        render.metadata.managed_fields.clone().unwrap_or_default().into_iter().any(|entry| {
            entry.manager.as_deref() == Some("renderpool-operator")
                && entry.fields_v1.is_some_and(|f| f.0.to_string().contains(field))
        })
    };
    assert!(owner("f:replicas") && owner("RENDERPOD_QUEUE_DEPTH"));
    let pool = wait_pool(&pools, "drifted", Duration::from_secs(90), is_settled).await;
    assert_eq!(pool.status.unwrap().ready_replicas, 2);
}
