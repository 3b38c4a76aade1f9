//! A job pool's autoscaler on the real API server: KEDA's ScaledObject instead of the HPA. No
//! KEDA runs here (the real-node jobs test runs it): without KEDA's CRD the pool says so and
//! keeps the HPA it had; with the CRD the operator swaps the HPA for a ScaledObject, and back
//! when the pool drops its jobs.

use std::time::Duration;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Api;
use renderpool_operator::crd::RenderPool;
use renderpool_operator::keda::ScaledObject;
use renderpool_testkit::wait;
use serde_json::{Value, json};

use super::operator_support::{condition, kubectl_apply, pool_manifest, setup, wait_pool};

const WAIT: Duration = Duration::from_secs(90);
const POOL: &str = "nightly";

/// A small pool, autoscaled, with or without jobs (and then the backlog trigger).
fn spec(with_jobs: bool) -> Value {
    let mut spec = json!({
        "cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false},
        "autoscaling": {"minReplicas": 1, "maxReplicas": 3},
    });
    if with_jobs {
        spec["jobs"] = json!({
            "nats": {"url": "nats://nats.nats:4222"},
            "objects": {"endpoint": "http://s3.storage:9000",
                        "credentialsSecretRef": {"name": "s3-keys"},
                        "readBuckets": ["inputs"], "writeBuckets": ["outputs"]},
        });
        spec["autoscaling"]["minReplicas"] = json!(0);
        spec["autoscaling"]["backlog"] = json!({"natsMonitoringEndpoint": "nats.nats:8222"});
    }
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_pool_gets_a_scaled_object_for_its_hpa_and_without_keda_says_so() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-keda").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), ns.name());
    let scaled_objects: Api<ScaledObject> = Api::namespaced(client, ns.name());

    kubectl_apply(cluster, ns.name(), &pool_manifest(POOL, spec(false))).unwrap();
    wait::until("the pool's HPA", WAIT, || async {
        hpas.get_opt(POOL).await.ok().flatten().ok_or("absent")
    })
    .await;

    // Jobs, in a cluster without KEDA: Degraded with the reason, and the HPA stays.
    kubectl_apply(cluster, ns.name(), &pool_manifest(POOL, spec(true))).unwrap();
    let pool = wait_pool(&pools, POOL, WAIT, |pool| {
        condition(pool, "Degraded")
            .is_some_and(|(s, reason, _)| s == "True" && reason == "KedaMissing")
    })
    .await;
    let (_, _, message) = condition(&pool, "Degraded").unwrap();
    assert!(message.contains("install KEDA v2, or remove spec.autoscaling"), "{message}");
    assert!(hpas.get_opt(POOL).await.unwrap().is_some(), "the HPA is kept meanwhile");

    // KEDA's CRD arrives: the HPA goes and the ScaledObject comes, never both at once.
    cluster.install_keda_crds().unwrap();
    let so = wait::until("the pool's ScaledObject", WAIT, || async {
        scaled_objects.get_opt(POOL).await.ok().flatten().ok_or("absent")
    })
    .await;
    assert!(
        hpas.get_opt(POOL).await.unwrap().is_none(),
        "the HPA went before the ScaledObject came"
    );
    assert_eq!((so.spec.min_replica_count, so.spec.max_replica_count), (0, 3));
    assert_eq!(so.spec.scale_target_ref.kind, "RenderPool");
    assert_eq!(so.spec.triggers[0].type_, "nats-jetstream");
    assert_eq!(so.spec.triggers[0].metadata["stream"], "RENDERPOOL_JOBS");
    let owner = &so.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("RenderPool", POOL));
    wait_pool(&pools, POOL, WAIT, |pool| {
        condition(pool, "Degraded").is_some_and(|(_, reason, _)| reason != "KedaMissing")
    })
    .await;

    // The jobs go: the ScaledObject goes first, then the HPA comes back.
    kubectl_apply(cluster, ns.name(), &pool_manifest(POOL, spec(false))).unwrap();
    let hpa = wait::until("the HPA back", WAIT, || async {
        hpas.get_opt(POOL).await.ok().flatten().ok_or("absent")
    })
    .await;
    assert!(scaled_objects.get_opt(POOL).await.unwrap().is_none(), "the ScaledObject went first");
    assert_eq!(hpa.spec.min_replicas, Some(1));
}
