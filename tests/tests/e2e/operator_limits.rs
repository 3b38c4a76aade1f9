//! Spec edge cases: figures that would overflow the sizing arithmetic, absurd CPU, zero or
//! negative durations, an empty queue, a Gotenberg timeout past the job deadline. The API server
//! refuses each with the CRD's message; what only the formula can judge becomes Degraded with a
//! reason in status. The operator stays up through all of it and keeps reconciling. A write the
//! API server refuses (here: a quota) is in status.lastError until a retry succeeds.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::ListParams;
use renderpool_operator::crd::RenderPool;
use renderpool_tests::cluster::run;
use serde_json::json;

use super::operator_support::{
    condition, is_settled, kubectl_apply, pool_manifest, setup, wait_pool,
};

fn base() -> serde_json::Value {
    json!({"replicas": 1, "cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_case_specs_are_refused_up_front_or_degraded_and_nothing_breaks() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-limits").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());

    // (path, value, what the API server must say)
    let refused: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "memoryPerSlot",
            json!("18446744073709551615"),
            "memoryPerSlot 18446744073709551615 is not a positive quantity of at most 1Ti",
        ),
        (
            "memory",
            json!("18446744073709551615"),
            "memory 18446744073709551615 is not a positive quantity of at most 1Ti",
        ),
        ("cpu", json!("5000000"), "cpu 5000000 is not a positive quantity of at most 256"),
        ("cpu", json!("0"), "cpu 0 is not a positive quantity"),
        ("maxBodySize", json!("4Gi"), "maxBodySize 4Gi is not a positive quantity of at most 1Gi"),
        ("memoryPerSlot", json!("2Gi"), "memoryPerSlot 2Gi must be smaller than memory 1Gi"),
        ("jobDeadlineMs", json!(0), "should be greater than or equal to 100"),
        ("jobDeadlineMs", json!(-30000), "should be greater than or equal to 100"),
        ("preStopSeconds", json!(-1), "should be greater than or equal to 0"),
        ("drainDelayMs", json!(-1), "should be greater than or equal to 0"),
        ("queueDepth", json!(0), "should be greater than or equal to 1"),
        ("replicas", json!(-1), "should be greater than or equal to 0"),
    ];
    for (field, value, message) in refused {
        let mut spec = base();
        spec[field] = value.clone();
        let out = kubectl_apply(cluster, ns.name(), &pool_manifest("edge", spec));
        let err = out.expect_err(&format!("{field}: {value} was accepted"));
        assert!(err.contains(message), "{field}: {value}: {err}");
    }
    for (gotenberg, message) in [
        (
            json!({"cpu": "1000000"}),
            "gotenberg.cpu 1000000 is not a positive quantity of at most 64",
        ),
        (json!({"timeoutSeconds": 0}), "should be greater than or equal to 1"),
        (
            json!({"timeoutSeconds": 31}),
            "gotenberg.timeoutSeconds 31 s may not exceed jobDeadlineMs 30000 ms",
        ),
        (json!({"queueSize": 0}), "should be greater than or equal to 1"),
        (json!({"replicas": 0}), "should be greater than or equal to 1"),
    ] {
        let mut spec = base();
        spec["gotenberg"] = gotenberg.clone();
        let err = kubectl_apply(cluster, ns.name(), &pool_manifest("edge", spec))
            .expect_err(&format!("gotenberg {gotenberg} was accepted"));
        assert!(err.contains(message), "gotenberg {gotenberg}: {err}");
    }
    assert!(pools.get_opt("edge").await.unwrap().is_none(), "nothing refused was stored");

    // Needs the formula: memory that cannot hold the supervisor plus one slot is Degraded, with
    // the reason in status for `kubectl get rp -o wide`, and no child is made from it.
    let mut spec = base();
    spec["memory"] = json!("600Mi");
    kubectl_apply(cluster, ns.name(), &pool_manifest("edge", spec)).unwrap();
    let pool = wait_pool(&pools, "edge", Duration::from_secs(60), |p| {
        condition(p, "Degraded").is_some_and(|(s, _, _)| s == "True")
    })
    .await;
    let status = pool.status.unwrap();
    let last = status.last_error.expect("the failure is in status.lastError");
    assert_eq!(last.reason, "MemoryTooSmallForOneSlot");
    assert!(last.message.contains("needs at least 808 MiB"), "{}", last.message);
    let made = deployments.list(&ListParams::default()).await.unwrap();
    assert!(made.items.is_empty(), "no child from a spec that cannot be sized");

    // The operator is up and the pool recovers once fixed; the error goes from status.
    let url = operator.metrics_url().replace("/metrics", "/healthz");
    assert!(reqwest::get(&url).await.unwrap().status().is_success());
    kubectl_apply(cluster, ns.name(), &pool_manifest("edge", base())).unwrap();
    let pool = wait_pool(&pools, "edge", Duration::from_secs(90), is_settled).await;
    let status = pool.status.unwrap();
    assert_eq!(status.last_error, None);
    assert_eq!((status.slots_per_pod, status.ready_slots), (Some(1), Some(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_api_server_refuses_is_in_status_until_it_succeeds() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-refused").await;
    let pools: Api<RenderPool> = Api::namespaced(cluster.client().await, ns.name());
    // A quota that admits no Deployment: the API server answers the apply 403 Forbidden.
    let quota = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "none"},
                       "spec": {"hard": {"count/deployments.apps": "0"}}});
    kubectl_apply(cluster, ns.name(), &quota.to_string()).unwrap();
    kubectl_apply(cluster, ns.name(), &pool_manifest("quota", base())).unwrap();
    let pool = wait_pool(&pools, "quota", Duration::from_secs(60), |p| {
        p.status.as_ref().is_some_and(|s| s.last_error.is_some())
    })
    .await;
    let last = pool.status.unwrap().last_error.unwrap();
    assert_eq!(last.reason, "Forbidden");
    assert!(last.message.starts_with("apply Deployment"), "{}", last.message);
    assert!(last.message.contains("exceeded quota"), "{}", last.message);

    // Lifted: the retry succeeds and the error leaves the status.
    run(cluster.kubectl().args(["delete", "resourcequota", "none", "-n", ns.name()])).unwrap();
    let pool = wait_pool(&pools, "quota", Duration::from_secs(90), is_settled).await;
    assert_eq!(pool.status.unwrap().last_error, None);
}
