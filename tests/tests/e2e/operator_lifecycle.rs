//! A RenderPool through its life: /scale and an HPA, a spec edit that rolls the pods, deleted
//! children that come back, refused and degraded specs and their recovery, and garbage
//! collection of every child when the pool goes.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::run;
use serde_json::json;

use super::operator_support::{
    condition, is_ready, is_settled, kubectl_apply, pool_manifest, setup, wait_deployment,
    wait_pool,
};

const WAIT: Duration = Duration::from_secs(90);

fn base_spec() -> serde_json::Value {
    json!({"replicas": 2, "cpu": "1", "memory": "1Gi", "gotenberg": {"replicas": 1, "memory": "1Gi"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_subresource_drives_the_deployment_and_an_hpa_can_target_the_pool() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-scale").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    kubectl_apply(cluster, ns.name(), &pool_manifest("scaled", base_spec())).unwrap();
    wait_pool(&pools, "scaled", WAIT, is_settled).await;

    run(cluster.kubectl().args(["scale", "renderpool/scaled", "--replicas=5", "-n", ns.name()]))
        .unwrap();
    wait_deployment(&deployments, "scaled-render", WAIT, |d| d.spec.replicas == Some(5)).await;
    let pool = wait_pool(&pools, "scaled", WAIT, |p| {
        is_settled(p) && p.status.as_ref().is_some_and(|s| s.ready_replicas == 5)
    })
    .await;
    assert_eq!(pool.spec.replicas, 5);
    // One slot per pod (1 CPU), five pods.
    assert_eq!(pool.status.as_ref().unwrap().total_slots, Some(5));

    // The /scale subresource reports the replicas and the string selector an HPA needs.
    let scale = run(cluster.kubectl().args([
        "get",
        "--raw",
        &format!("/apis/renderpool.dev/v1beta1/namespaces/{}/renderpools/scaled/scale", ns.name()),
    ]))
    .unwrap();
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["replicas"], 5);
    assert_eq!(
        scale["status"]["selector"],
        "app.kubernetes.io/component=render,app.kubernetes.io/instance=scaled,\
         app.kubernetes.io/name=renderpool"
    );

    let hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "scaled"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "renderpool.dev/v1beta1", "kind": "RenderPool", "name": "scaled"},
            "minReplicas": 2, "maxReplicas": 8,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70}}}]
        }
    });
    let created = kubectl_apply(cluster, ns.name(), &hpa.to_string()).unwrap();
    assert!(created.contains("horizontalpodautoscaler.autoscaling/scaled created"), "{created}");
    let target = run(cluster.kubectl().args([
        "get",
        "hpa",
        "scaled",
        "-n",
        ns.name(),
        "-o",
        "jsonpath={.spec.scaleTargetRef.kind}/{.spec.scaleTargetRef.name}",
    ]))
    .unwrap();
    assert_eq!(target, "RenderPool/scaled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_edit_rolls_and_deleted_children_come_back() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-edit").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns.name());
    kubectl_apply(cluster, ns.name(), &pool_manifest("edited", base_spec())).unwrap();
    wait_pool(&pools, "edited", WAIT, is_settled).await;
    let before = deployments.get("edited-render").await.unwrap();

    // 1Gi -> 2Gi: the pod template changes, so the Deployment rolls out a new ReplicaSet.
    let mut spec = base_spec();
    spec["memory"] = json!("2Gi");
    spec["queueDepth"] = json!(9);
    kubectl_apply(cluster, ns.name(), &pool_manifest("edited", spec)).unwrap();
    let after = wait_deployment(&deployments, "edited-render", WAIT, |d| {
        d.metadata.generation > before.metadata.generation
    })
    .await;
    let ctr = &after.spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(ctr.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0, "2Gi");
    assert_eq!(super::operator_support::container_env(&after)["RENDERPOD_QUEUE_DEPTH"], "9");
    let pool = wait_pool(&pools, "edited", WAIT, is_settled).await;
    assert_eq!(pool.status.as_ref().unwrap().observed_generation, pool.metadata.generation);
    let sets = replica_sets
        .list(&ListParams::default().labels("app.kubernetes.io/component=render"))
        .await
        .unwrap();
    assert!(sets.items.len() >= 2, "a new ReplicaSet was rolled out");

    // Children deleted by hand are re-created with a new identity.
    deployments.delete("edited-render", &DeleteParams::default()).await.unwrap();
    services.delete("edited-gotenberg", &DeleteParams::default()).await.unwrap();
    let old_uid = after.metadata.uid.clone();
    wait_deployment(&deployments, "edited-render", WAIT, |d| d.metadata.uid != old_uid).await;
    wait::until("the Gotenberg Service back", WAIT, || async {
        services.get_opt("edited-gotenberg").await.ok().flatten()
    })
    .await;
    wait_pool(&pools, "edited", WAIT, |p| {
        is_settled(p) && p.status.as_ref().is_some_and(|s| s.ready_replicas == 2)
    })
    .await;

    // Turning Gotenberg off removes its pool and the render pods' Office settings.
    let mut spec = base_spec();
    spec["memory"] = json!("2Gi");
    spec["queueDepth"] = json!(9);
    spec["gotenberg"] = json!({"enabled": false});
    kubectl_apply(cluster, ns.name(), &pool_manifest("edited", spec)).unwrap();
    wait::until("the Gotenberg Deployment and Service deleted", WAIT, || async {
        let gone = deployments.get_opt("edited-gotenberg").await.ok()?.is_none()
            && services.get_opt("edited-gotenberg").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    let render = wait_deployment(&deployments, "edited-render", WAIT, |d| {
        !super::operator_support::container_env(d).contains_key("RENDERPOD_GOTENBERG_URL")
    })
    .await;
    assert!(
        !super::operator_support::container_env(&render)
            .contains_key("RENDERPOD_OFFICE_SHARE_FILE")
    );
    let pool = wait_pool(&pools, "edited", WAIT, is_settled).await;
    assert_eq!(pool.status.unwrap().gotenberg_replicas, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_specs_are_refused_or_degraded_and_a_fix_recovers() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-invalid").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());

    // The CRD's CEL rules refuse what needs no formula.
    let mut spec = base_spec();
    spec["memoryPerSlot"] = json!("0");
    let refused = kubectl_apply(cluster, ns.name(), &pool_manifest("bad", spec)).unwrap_err();
    assert!(refused.contains("memoryPerSlot 0 is not a positive quantity"), "{refused}");
    let mut spec = base_spec();
    spec["gotenberg"] = json!({"replicas": 2, "officeConcurrency": 3});
    let refused = kubectl_apply(cluster, ns.name(), &pool_manifest("bad", spec)).unwrap_err();
    assert!(
        refused.contains("gotenberg.replicas 2 and gotenberg.officeConcurrency 3 both set"),
        "{refused}"
    );
    let mut spec = base_spec();
    spec["cpu"] = json!("two");
    let refused = kubectl_apply(cluster, ns.name(), &pool_manifest("bad", spec)).unwrap_err();
    assert!(refused.contains("cpu two is not a positive quantity"), "{refused}");

    // Memory too small for one slot needs the sizing formula: Degraded, with an Event.
    kubectl_apply(cluster, ns.name(), &pool_manifest("tight", base_spec())).unwrap();
    wait_pool(&pools, "tight", WAIT, is_settled).await;
    let mut spec = base_spec();
    spec["memory"] = json!("600Mi");
    kubectl_apply(cluster, ns.name(), &pool_manifest("tight", spec)).unwrap();
    let pool = wait_pool(&pools, "tight", WAIT, |p| {
        condition(p, "Degraded").is_some_and(|(s, _, _)| s == "True")
            && p.status.as_ref().and_then(|s| s.observed_generation) == p.metadata.generation
    })
    .await;
    let (_, reason, message) = condition(&pool, "Degraded").unwrap();
    assert_eq!(reason, "MemoryTooSmallForOneSlot");
    assert!(message.contains("needs at least 808 MiB"), "{message}");
    assert!(
        message.contains("raise spec.memory, or lower spec.memoryPerSlot or spec.maxBodySize"),
        "{message}"
    );
    assert_eq!(condition(&pool, "Ready").unwrap().0, "False");
    // The running pods are left alone: the Deployment keeps the last good memory.
    let render = deployments.get("tight-render").await.unwrap();
    let ctr = &render.spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(ctr.resources.as_ref().unwrap().limits.as_ref().unwrap()["memory"].0, "1Gi");
    let events: Api<Event> = Api::namespaced(client.clone(), ns.name());
    let warning = wait::until("a Warning event on the degraded pool", WAIT, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("MemoryTooSmallForOneSlot")
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("tight")
        })
    })
    .await;
    assert!(warning.note.unwrap_or_default().contains("808 MiB"));

    // Fixing the spec recovers.
    let mut spec = base_spec();
    spec["memory"] = json!("1280Mi");
    kubectl_apply(cluster, ns.name(), &pool_manifest("tight", spec)).unwrap();
    let pool = wait_pool(&pools, "tight", WAIT, is_settled).await;
    assert_eq!(condition(&pool, "Degraded").unwrap().0, "False");
    // (1280 - 296) / 512 = 1.9 -> 1 by memory, 1 by CPU: 1 slot.
    assert_eq!(pool.status.unwrap().slots_per_pod, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_pool_lets_the_garbage_collector_remove_every_child() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-gc").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns.name());
    kubectl_apply(cluster, ns.name(), &pool_manifest("doomed", base_spec())).unwrap();
    wait_pool(&pools, "doomed", WAIT, is_ready).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns.name());
    let all = ListParams::default().labels("app.kubernetes.io/instance=doomed");
    assert_eq!(deployments.list(&all).await.unwrap().items.len(), 2);
    assert_eq!(services.list(&all).await.unwrap().items.len(), 2);
    assert_eq!(pdbs.list(&all).await.unwrap().items.len(), 2);
    assert_eq!(config_maps.list(&all).await.unwrap().items.len(), 1);
    assert_eq!(policies.list(&all).await.unwrap().items.len(), 1);

    pools.delete("doomed", &DeleteParams::default()).await.unwrap();
    wait::until("every child removed by the garbage collector", WAIT, || async {
        let counts = (
            deployments.list(&all).await.map(|l| l.items.len()),
            services.list(&all).await.map(|l| l.items.len()),
            pdbs.list(&all).await.map(|l| l.items.len()),
            config_maps.list(&all).await.map(|l| l.items.len()),
            policies.list(&all).await.map(|l| l.items.len()),
        );
        match counts {
            (Ok(0), Ok(0), Ok(0), Ok(0), Ok(0)) => Ok(()),
            left => Err(format!("{left:?}")),
        }
    })
    .await;
}
