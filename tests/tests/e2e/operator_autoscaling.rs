//! `spec.autoscaling`: the HorizontalPodAutoscaler the operator keeps (its shape, recreated when
//! deleted, updated with the spec, removed when autoscaling is turned off; a person's own HPA and
//! a person's do-not-disrupt on the render pods left alone), bad autoscaling specs refused by the
//! API server, and the real kube-controller-manager's HPA controller driving the pool through
//! /scale while the operator follows and never resets it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use renderpool_operator::build::{BUSY_SLOT_RATIO_METRIC, QUEUE_DEPTH_METRIC};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::run;
use renderpool_tests::operator::OperatorProcess;
use renderpool_tests::repo_root;
use serde_json::{Value, json};

use super::operator_support::{
    container_env, is_settled, kubectl_apply, pool_manifest, setup, wait_deployment, wait_pool,
};

const WAIT: Duration = Duration::from_secs(90);

/// A pool spec without `replicas`, as the rule asks of manifests under an autoscaler.
fn spec(autoscaling: Option<Value>, queue_depth: i32) -> Value {
    let mut spec = json!({"cpu": "1", "memory": "1Gi", "queueDepth": queue_depth,
                          "gotenberg": {"enabled": false}});
    if let Some(autoscaling) = autoscaling {
        spec["autoscaling"] = autoscaling;
    }
    spec
}

/// The autoscaler's spec as the API server stores it.
async fn hpa_spec(api: &Api<HorizontalPodAutoscaler>, name: &str) -> Option<Value> {
    let hpa = api.get_opt(name).await.ok()??;
    serde_json::to_value(hpa.spec).ok()
}

/// Waits until the stored autoscaler's spec satisfies `check`; panics with the last one seen.
async fn wait_hpa(
    api: &Api<HorizontalPodAutoscaler>,
    name: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let what = format!("HorizontalPodAutoscaler {name} in the expected state");
    wait::until(&what, WAIT, || async {
        match hpa_spec(api, name).await {
            Some(spec) if check(&spec) => Ok(spec),
            other => Err(other),
        }
    })
    .await
}

/// A per-pod average target as the HPA holds it.
fn pods_metric(name: &str, average: &str) -> Value {
    json!({"type": "Pods", "pods": {"metric": {"name": name},
                                    "target": {"type": "AverageValue", "averageValue": average}}})
}

/// The operator's log lines that record an autoscaler write in namespace `ns`.
fn autoscaler_writes(operator: &OperatorProcess, ns: &str) -> usize {
    let log = operator.log();
    log.lines()
        .filter(|l| l.contains(ns) && l.contains("applied children"))
        .filter(|l| l.contains("HorizontalPodAutoscaler"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_follows_spec_autoscaling_comes_back_and_goes_when_turned_off() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-autoscale").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let apply = |autoscaling: Option<Value>, queue_depth: i32| {
        kubectl_apply(
            cluster,
            ns.name(),
            &pool_manifest("elastic", spec(autoscaling, queue_depth)),
        )
        .unwrap();
    };
    apply(Some(json!({"maxReplicas": 4})), 8);
    let pool = wait_pool(&pools, "elastic", WAIT, is_settled).await;

    // The contract's shape, defaults filled in.
    let hpa = wait::until("the autoscaler the operator creates", WAIT, || async {
        hpas.get_opt("elastic").await.ok().flatten()
    })
    .await;
    let owner = &hpa.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("RenderPool", Some(true)));
    assert_eq!(Some(&owner.uid), pool.metadata.uid.as_ref());
    assert_eq!(hpa.labels()["app.kubernetes.io/managed-by"], "renderpool-operator");
    let stored = serde_json::to_value(&hpa.spec).unwrap();
    assert_eq!(
        stored["scaleTargetRef"],
        json!({"apiVersion": "renderpool.dev/v1beta1", "kind": "RenderPool", "name": "elastic"})
    );
    assert_eq!((&stored["minReplicas"], &stored["maxReplicas"]), (&json!(1), &json!(4)));
    assert_eq!(stored["metrics"], json!([pods_metric(BUSY_SLOT_RATIO_METRIC, "700m")]));
    assert_eq!(stored["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 300);
    // The pool keeps the replicas it was created with: 2, inside [1, 4].
    assert_eq!(pool.spec.replicas, 2);

    // Deleted: the watch brings it back, a new object.
    hpas.delete("elastic", &DeleteParams::default()).await.unwrap();
    let old_uid = hpa.metadata.uid.clone();
    wait::until("the deleted autoscaler recreated", WAIT, || async {
        hpas.get_opt("elastic").await.ok().flatten().filter(|h| h.metadata.uid != old_uid)
    })
    .await;

    // A new generation that changes nothing of the autoscaler writes none.
    let what = "the create and the re-create in the operator's log";
    let writes = wait::until(what, WAIT, || async {
        let n = autoscaler_writes(operator, ns.name());
        if n >= 2 { Ok(n) } else { Err(n) }
    })
    .await;
    apply(Some(json!({"maxReplicas": 4})), 9);
    wait_pool(&pools, "elastic", WAIT, |p| is_settled(p) && p.metadata.generation == Some(2)).await;
    assert_eq!(autoscaler_writes(operator, ns.name()), writes, "no autoscaler write");

    // Edited: a higher ceiling, a lower busy target, a queue target and a shorter window.
    let edited = json!({"maxReplicas": 6, "targetBusyPercent": 50, "targetQueueDepth": 3,
                        "scaleDownStabilizationSeconds": 120});
    apply(Some(edited), 9);
    let stored = wait_hpa(&hpas, "elastic", |s| s["maxReplicas"] == 6).await;
    assert_eq!(
        stored["metrics"],
        json!([pods_metric(BUSY_SLOT_RATIO_METRIC, "500m"), pods_metric(QUEUE_DEPTH_METRIC, "3")])
    );
    assert_eq!(stored["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 120);

    // The queue target dropped: its metric goes.
    apply(Some(json!({"maxReplicas": 6, "targetBusyPercent": 50})), 9);
    let stored =
        wait_hpa(&hpas, "elastic", |s| s["metrics"].as_array().map(Vec::len) == Some(1)).await;
    assert_eq!(stored["metrics"], json!([pods_metric(BUSY_SLOT_RATIO_METRIC, "500m")]));
    assert_eq!(stored["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 300);

    // Turned off: the autoscaler goes, the replicas stay where they were.
    apply(None, 9);
    wait::until("the autoscaler gone with spec.autoscaling", WAIT, || async {
        hpas.get_opt("elastic").await.ok()?.is_none().then_some(())
    })
    .await;
    let pool = wait_pool(&pools, "elastic", WAIT, is_settled).await;
    assert_eq!(pool.spec.replicas, 2);

    // An autoscaler a person made under the pool's name is not the operator's to delete.
    let own = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "elastic"},
        "spec": {"scaleTargetRef": {"apiVersion": "renderpool.dev/v1beta1", "kind": "RenderPool",
                                    "name": "elastic"},
                 "minReplicas": 2, "maxReplicas": 3,
                 "metrics": [pods_metric(BUSY_SLOT_RATIO_METRIC, "800m")]}
    });
    kubectl_apply(cluster, ns.name(), &own.to_string()).unwrap();
    let theirs = hpas.get("elastic").await.unwrap().metadata.uid;
    // So is a person's do-not-disrupt on the render pods' template, through the operator's
    // next apply of that Deployment (the queue depth changes its env).
    let pin = r#"{"spec":{"template":{"metadata":{"annotations":{"karpenter.sh/do-not-disrupt":"true"}}}}}"#;
    run(cluster.kubectl().args(["patch", "deployment", "elastic-render", "-n", ns.name()]).args([
        "--type=merge",
        "-p",
        pin,
    ]))
    .unwrap();
    apply(None, 10);
    let render = wait_deployment(&deployments, "elastic-render", WAIT, |d| {
        container_env(d)["RENDERPOD_QUEUE_DEPTH"] == "10"
    })
    .await;
    let annotations = render.spec.template.metadata.unwrap().annotations.unwrap();
    assert_eq!(annotations["karpenter.sh/do-not-disrupt"], "true", "{annotations:?}");
    assert_eq!(annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true");
    let generation = pools.get("elastic").await.unwrap().metadata.generation;
    wait_pool(&pools, "elastic", WAIT, |p| is_settled(p) && p.metadata.generation == generation)
        .await;
    assert_eq!(hpas.get("elastic").await.unwrap().metadata.uid, theirs, "left alone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_autoscaling_specs_are_refused_with_the_crds_message() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-autoscale-bad").await;
    let pools: Api<RenderPool> = Api::namespaced(cluster.client().await, ns.name());
    for (autoscaling, message) in [
        (
            json!({"minReplicas": 5, "maxReplicas": 4}),
            "autoscaling.minReplicas 5 may not exceed autoscaling.maxReplicas 4",
        ),
        (json!({"maxReplicas": 4, "targetBusyPercent": 0}), "should be greater than or equal to 1"),
        (
            json!({"maxReplicas": 4, "targetBusyPercent": 101}),
            "should be less than or equal to 100",
        ),
        (json!({"maxReplicas": 4, "targetQueueDepth": 0}), "should be greater than or equal to 1"),
        // Zero pods only for a job pool, which a backlog wakes; nothing wakes a sync-only pool.
        (
            json!({"minReplicas": 0, "maxReplicas": 4}),
            "autoscaling.minReplicas 0 needs spec.jobs: a pool at zero pods has no pod to answer \
             a synchronous request",
        ),
        (
            json!({"maxReplicas": 4, "backlog": {"natsMonitoringEndpoint": "nats:8222"}}),
            "without spec.jobs there is no backlog, so leave autoscaling.backlog out",
        ),
        (json!({"minReplicas": 2}), "spec.autoscaling.maxReplicas: Required value"),
        (
            json!({"maxReplicas": 4, "scaleDownStabilizationSeconds": 3601}),
            "should be less than or equal to 3600",
        ),
        (
            json!({"maxReplicas": 4, "targetQueueDepth": 9}),
            "autoscaling.targetQueueDepth 9 may not exceed queueDepth 8",
        ),
    ] {
        let manifest = pool_manifest("refused", spec(Some(autoscaling.clone()), 8));
        let err = kubectl_apply(cluster, ns.name(), &manifest)
            .expect_err(&format!("autoscaling {autoscaling} was accepted"));
        assert!(err.contains(message), "autoscaling {autoscaling}: {err}");
    }
    // A drain longer than cluster-autoscaler waits: 5 preStop + 1 drain + 595 deadline + 5.
    let mut long = spec(None, 8);
    long["jobDeadlineMs"] = json!(595_000);
    let err = kubectl_apply(cluster, ns.name(), &pool_manifest("refused", long)).unwrap_err();
    assert!(
        err.contains("termination grace period of 606 s for the render pods, past the 600 s"),
        "{err}"
    );
    assert!(pools.get_opt("refused").await.unwrap().is_none(), "nothing refused was stored");

    // The example docs/autoscaling.md points to is accepted as written.
    let example = repo_root().join("examples/renderpool-autoscaling.yaml");
    let out = run(cluster
        .kubectl()
        .args(["apply", "--dry-run=server", "-n", ns.name(), "-f"])
        .arg(&example))
    .unwrap();
    assert!(out.contains("created (server dry run)"), "{out}");
}

/// The HPA controller's SuccessfulRescale events about autoscaler `name`, by their note.
async fn rescales(events: &Api<Event>, name: &str) -> Vec<String> {
    let list = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulRescale"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hpa_controller_scales_the_pool_through_scale_and_the_operator_follows() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-autoscale-hpa").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let events: Api<Event> = Api::namespaced(client.clone(), ns.name());
    let apply = |autoscaling: Value, queue_depth: i32| {
        kubectl_apply(
            cluster,
            ns.name(),
            &pool_manifest("driven", spec(Some(autoscaling), queue_depth)),
        )
        .unwrap();
    };
    // Created with the default 2 replicas, below the autoscaler's floor of 3. kwok pods serve no
    // metrics, but the HPA controller enforces its bounds without them.
    apply(json!({"minReplicas": 3, "maxReplicas": 5}), 8);
    let pool = wait_pool(&pools, "driven", WAIT, |p| p.spec.replicas == 3).await;
    let note = wait::until("the HPA controller's rescale event", WAIT, || async {
        rescales(&events, "driven").await.into_iter().next()
    })
    .await;
    assert_eq!(note, "New size: 3; reason: Current number of replicas below Spec.MinReplicas");
    // Written through /scale by the controller-manager; the operator never writes the pool's
    // spec (only its status).
    let managers = pool.managed_fields();
    assert!(
        managers.iter().any(|m| m.subresource.as_deref() == Some("scale")
            && m.manager.as_deref().is_some_and(|n| n.starts_with("kube-controller-manager"))
            && m.fields_v1.as_ref().is_some_and(|f| f.0["f:spec"].get("f:replicas").is_some())),
        "{managers:?}"
    );
    assert!(
        !managers.iter().any(|m| m.manager.as_deref() == Some("renderpool-operator")
            && m.subresource.as_deref() != Some("status")),
        "{managers:?}"
    );
    // The render Deployment follows, and the pods become ready.
    wait_deployment(&deployments, "driven-render", WAIT, |d| d.spec.replicas == Some(3)).await;
    wait_pool(&pools, "driven", WAIT, |p| {
        is_settled(p) && p.status.as_ref().is_some_and(|s| s.ready_replicas == 3)
    })
    .await;

    // The manifest re-applied without replicas (another queue depth): a reconcile of a new
    // generation keeps the autoscaler's count.
    apply(json!({"minReplicas": 3, "maxReplicas": 5}), 9);
    let render = wait_deployment(&deployments, "driven-render", WAIT, |d| {
        container_env(d)["RENDERPOD_QUEUE_DEPTH"] == "9"
    })
    .await;
    assert_eq!(render.spec.replicas, Some(3), "the operator kept the autoscaler's count");
    let pool = wait_pool(&pools, "driven", WAIT, is_settled).await;
    assert_eq!(pool.spec.replicas, 3);

    // A ceiling under the current count: the controller scales the pool down to it.
    apply(json!({"minReplicas": 1, "maxReplicas": 2}), 9);
    wait_pool(&pools, "driven", WAIT, |p| p.spec.replicas == 2).await;
    let down = wait::until("the HPA controller's scale-down event", WAIT, || async {
        let notes = rescales(&events, "driven").await;
        notes.iter().find(|n| n.starts_with("New size: 2")).cloned().ok_or(notes)
    })
    .await;
    assert_eq!(down, "New size: 2; reason: Current number of replicas above Spec.MaxReplicas");
    let render =
        wait_deployment(&deployments, "driven-render", WAIT, |d| d.spec.replicas == Some(2)).await;
    let pool = wait_pool(&pools, "driven", WAIT, |p| {
        is_settled(p) && p.status.as_ref().is_some_and(|s| s.ready_replicas == 2)
    })
    .await;
    assert_eq!((pool.spec.replicas, render.spec.replicas), (2, Some(2)));
    // Under the chart's RBAC (the shared operator runs with its ServiceAccount's token).
    let log = operator.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("horizontalpodautoscalers") && l.contains("cannot"))
        .collect();
    assert!(refused.is_empty(), "RBAC refused the operator an autoscaler verb: {refused:?}");
}
