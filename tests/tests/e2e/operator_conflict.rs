//! Children the pool never steals: an HPA and a Service a person made under the pool's child
//! names stay exactly as they were (resourceVersion and every field) through the pool's creation,
//! a spec change and its deletion, while the pool says `NameConflict` naming them and its other
//! children are created and later garbage-collected.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::DeleteParams;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::run;
use serde_json::{Value, json};

use super::operator_support::{condition, kubectl_apply, pool_manifest, setup, wait_pool};

const WAIT: Duration = Duration::from_secs(90);

/// The pool's spec: autoscaled (so its HPA is named like the pool), no Gotenberg.
fn spec(max_replicas: i32) -> Value {
    json!({"cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false},
           "autoscaling": {"maxReplicas": max_replicas}})
}

/// Degraded with NameConflict, decided for the pool's current generation.
fn conflicted(pool: &RenderPool) -> bool {
    let current =
        pool.status.as_ref().and_then(|s| s.observed_generation) == pool.metadata.generation;
    current
        && condition(pool, "Degraded").is_some_and(|(s, r, _)| s == "True" && r == "NameConflict")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_under_the_pools_child_names_are_never_taken_over_or_deleted() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-conflict").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());

    // A person's Service and HPA, made first, under the names the pool `clash` would use.
    let theirs = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "clash-render"},
         "spec": {"selector": {"app": "theirs"}, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
         "metadata": {"name": "clash"},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "name": "theirs"},
                  "minReplicas": 1, "maxReplicas": 3}}
    ]});
    kubectl_apply(cluster, ns.name(), &theirs.to_string()).unwrap();
    let snapshot = || async {
        let service = serde_json::to_value(services.get("clash-render").await.unwrap()).unwrap();
        let hpa = serde_json::to_value(hpas.get("clash").await.unwrap()).unwrap();
        (service, hpa)
    };
    let before = snapshot().await;
    let untouched = |after: &(Value, Value), when: &str| {
        assert_eq!(after.0["metadata"]["resourceVersion"], before.0["metadata"]["resourceVersion"]);
        assert_eq!(after.1["metadata"]["resourceVersion"], before.1["metadata"]["resourceVersion"]);
        assert_eq!(after.0, before.0, "the Service {when}");
        assert_eq!(after.1, before.1, "the HPA {when}");
    };

    kubectl_apply(cluster, ns.name(), &pool_manifest("clash", spec(4))).unwrap();
    let pool = wait_pool(&pools, "clash", WAIT, conflicted).await;
    let (_, _, message) = condition(&pool, "Degraded").unwrap();
    assert!(
        message.starts_with(
            "Service clash-render and HorizontalPodAutoscaler clash already exist and are not \
             owned by this RenderPool"
        ),
        "{message}"
    );
    let (ready, reason, _) = condition(&pool, "Ready").unwrap();
    assert_eq!((ready.as_str(), reason.as_str()), ("False", "NameConflict"));
    let last_error = pool.status.as_ref().unwrap().last_error.clone().unwrap();
    assert_eq!((last_error.reason.as_str(), last_error.message), ("NameConflict", message));
    // What `kubectl get rp` shows in STATUS and LAST ERROR.
    let wide =
        run(cluster.kubectl().args(["get", "rp", "clash", "-o", "wide", "-n", ns.name()])).unwrap();
    let row = wide.lines().nth(1).unwrap_or_default();
    assert_eq!(row.matches("NameConflict").count(), 2, "{wide}");
    // The children whose names are free are the pool's as usual.
    let render = deployments.get("clash-render").await.unwrap();
    assert_eq!(render.metadata.owner_references.unwrap()[0].uid, pool.metadata.uid.unwrap());
    untouched(&snapshot().await, "after the pool was created");

    // A spec change that changes the HPA the operator would build: still not applied.
    kubectl_apply(cluster, ns.name(), &pool_manifest("clash", spec(5))).unwrap();
    wait_pool(&pools, "clash", WAIT, |p| p.metadata.generation == Some(2) && conflicted(p)).await;
    untouched(&snapshot().await, "after a spec change");

    // Deleting the pool lets the garbage collector remove its own children only.
    pools.delete("clash", &DeleteParams::default()).await.unwrap();
    wait::until("the pool and its render Deployment gone", WAIT, || async {
        let pool = pools.get_opt("clash").await.ok()?;
        let render = deployments.get_opt("clash-render").await.ok()?;
        (pool.is_none() && render.is_none()).then_some(())
    })
    .await;
    untouched(&snapshot().await, "after the pool was deleted");
    let log = operator.log();
    let writes: Vec<&str> =
        log.lines().filter(|l| l.contains(ns.name()) && l.contains("applied children")).collect();
    assert!(
        writes
            .iter()
            .all(|l| !l.contains("Service clash-render") && !l.contains("Autoscaler clash")),
        "the operator's writes: {writes:#?}"
    );
    // Each line of a reconcile names the pool, namespace and trace id once, in its span.
    let span = format!("reconcile{{pool=clash namespace={} trace_id=", ns.name());
    let pool_lines: Vec<&str> = log.lines().filter(|l| l.contains(&span)).collect();
    assert!(
        pool_lines.iter().any(|l| l.contains("child names held by objects")),
        "{pool_lines:#?}"
    );
    for line in &pool_lines {
        let id = line.split_once(&span).unwrap().1.split_once('}').unwrap().0;
        assert!(id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()), "{line}");
        assert_eq!(line.matches("namespace=").count(), 1, "not repeated: {line}");
    }
    assert!(!writes.is_empty() && writes.iter().all(|l| l.contains(&span)), "{writes:#?}");
}
