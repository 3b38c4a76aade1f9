//! RenderPools of several sizings: the children carry the derived resources, env, flags and
//! Office share, the scheduler places the pods on kwok nodes that fit them, and the status
//! reaches Ready with the slot figures worked out by hand below.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::Api;
use kube::api::ListParams;
use renderpool_operator::crd::RenderPool;
use renderpool_sizing::{parse_cpu_millis, parse_memory_bytes};
use serde_json::json;

use super::operator_support::{
    condition, container_env, is_settled, kubectl_apply, pool_manifest, setup, wait_pool,
};

/// One sizing and the figures expected from it, computed by hand.
struct Case {
    name: &'static str,
    spec: serde_json::Value,
    cpu: &'static str,
    memory: &'static str,
    replicas: i32,
    slots: i32,
    gotenberg_replicas: i32,
    office_per_pod: &'static str,
}

fn cases() -> Vec<Case> {
    vec![
        // cpu 3 -> 3 slots; memory (4096 - 296) / 512 = 7.4 -> 7; min = 3 per pod, 6 in all.
        Case {
            name: "cpu-bound",
            spec: json!({"replicas": 2, "cpu": "3", "memory": "4Gi"}),
            cpu: "3",
            memory: "4Gi",
            replicas: 2,
            slots: 3,
            gotenberg_replicas: 1,
            office_per_pod: "1",
        },
        // cpu 2 -> 2; memory (1024 - 296) / 512 = 1.4 -> 1; one slot per pod, 3 in all.
        Case {
            name: "memory-bound",
            spec: json!({"replicas": 3, "cpu": "2", "memory": "1Gi", "memoryPerSlot": "512Mi",
                         "gotenberg": {"replicas": 2, "cpu": "2500m", "memory": "3Gi"}}),
            cpu: "2",
            memory: "1Gi",
            replicas: 3,
            slots: 1,
            // 2 Gotenberg replicas over 3 render pods: max(1, 2 / 3) = 1 each.
            gotenberg_replicas: 2,
            office_per_pod: "1",
        },
        // cpu 1500m -> 1 (rounded down); memory (3072 - 296) / 256 = 10.8 -> 10; one slot per pod.
        Case {
            name: "fractional",
            spec: json!({"replicas": 2, "cpu": "1500m", "memory": "3Gi", "memoryPerSlot": "256Mi",
                         "gotenberg": {"officeConcurrency": 4}}),
            cpu: "1500m",
            memory: "3Gi",
            replicas: 2,
            slots: 1,
            // officeConcurrency 4 -> 4 replicas; 4 / 2 render pods = 2 each.
            gotenberg_replicas: 4,
            office_per_pod: "2",
        },
        // cpu 8 -> 8; memory (8192 - 296) / 1024 = 7.7 -> 7: memory decides, 7 slots.
        Case {
            name: "wide",
            spec: json!({"replicas": 1, "cpu": "8", "memory": "8Gi", "memoryPerSlot": "1Gi"}),
            cpu: "8",
            memory: "8Gi",
            replicas: 1,
            slots: 7,
            gotenberg_replicas: 1,
            office_per_pod: "1",
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizings_become_children_with_derived_figures_and_ready_status() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-sizing").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    for case in cases() {
        kubectl_apply(cluster, ns.name(), &pool_manifest(case.name, case.spec.clone())).unwrap();
    }
    for case in cases() {
        let pool = wait_pool(&pools, case.name, Duration::from_secs(90), is_settled).await;
        let status = pool.status.clone().unwrap();
        assert_eq!(status.slots_per_pod, Some(case.slots), "{}", case.name);
        assert_eq!(status.total_slots, Some(case.slots * case.replicas), "{}", case.name);
        assert_eq!((status.replicas, status.ready_replicas), (case.replicas, case.replicas));
        assert_eq!(status.gotenberg_replicas, Some(case.gotenberg_replicas), "{}", case.name);
        assert_eq!(status.gotenberg_ready_replicas, Some(case.gotenberg_replicas));
        assert_eq!(condition(&pool, "Degraded").unwrap().0, "False");

        let render = deployments.get(&format!("{}-render", case.name)).await.unwrap();
        assert_eq!(render.spec.replicas, Some(case.replicas));
        let ctr = &render.spec.template.spec.as_ref().unwrap().containers[0];
        let res = ctr.resources.clone().unwrap();
        assert_eq!(res.requests, res.limits, "{}: requests = limits", case.name);
        let limits = res.limits.unwrap();
        assert_eq!(
            (limits["cpu"].0.as_str(), limits["memory"].0.as_str()),
            (case.cpu, case.memory)
        );
        let env = container_env(&render);
        assert_eq!(env["RENDERPOD_GOTENBERG_URL"], format!("http://{}-gotenberg:3000", case.name));
        let share = config_maps.get(&format!("{}-office", case.name)).await.unwrap();
        assert_eq!(share.data.unwrap()["concurrency"], case.office_per_pod, "{}", case.name);

        let gotenberg = deployments.get(&format!("{}-gotenberg", case.name)).await.unwrap();
        assert_eq!(gotenberg.spec.replicas, Some(case.gotenberg_replicas));
        let g = &gotenberg.spec.template.spec.as_ref().unwrap().containers[0];
        let args = g.args.clone().unwrap();
        // The default job deadline, 30 s, is Gotenberg's timeout.
        assert!(args.contains(&"--api-timeout=30s".to_string()), "{}: {args:?}", case.name);
        // The LibreOffice-only Gotenberg the tests run refuses any Chromium flag.
        assert!(!args.iter().any(|a| a.starts_with("--chromium")), "{}: {args:?}", case.name);
        assert!(g.resources.as_ref().unwrap().limits.is_some(), "gotenberg must be bounded");
    }
    assert_pods_fit_their_nodes(&client, ns.name()).await;
}

/// Every render and Gotenberg pod was bound to a kwok node, and no node holds more requests
/// than it can allocate: the scheduler used the requests the operator wrote.
async fn assert_pods_fit_their_nodes(client: &kube::Client, namespace: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let nodes: Api<Node> = Api::all(client.clone());
    let pods = pods.list(&ListParams::default()).await.unwrap();
    // 2+1, 3+2, 2+4, 1+1 pods.
    assert_eq!(pods.items.len(), 16, "every replica of every pool has a pod");
    for pod in &pods.items {
        let spec = pod.spec.as_ref().unwrap();
        let node_name = spec.node_name.clone().expect("pod is scheduled");
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        assert_eq!(phase.as_deref(), Some("Running"));
        let node = nodes.get(&node_name).await.unwrap();
        let annotations = node.metadata.annotations.clone().unwrap_or_default();
        let kwok = annotations.get("kwok.x-k8s.io/node").map(String::as_str);
        assert_eq!(kwok, Some("fake"), "{node_name} is a kwok node");
        let allocatable = node.status.unwrap().allocatable.unwrap();
        let requests = spec.containers[0].resources.clone().unwrap().requests.unwrap();
        assert!(
            parse_cpu_millis(&requests["cpu"].0).unwrap()
                <= parse_cpu_millis(&allocatable["cpu"].0).unwrap()
        );
        assert!(
            parse_memory_bytes(&requests["memory"].0).unwrap()
                <= parse_memory_bytes(&allocatable["memory"].0).unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_larger_than_any_node_keeps_the_pool_not_ready() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-toobig").await;
    let pools: Api<RenderPool> = Api::namespaced(cluster.client().await, ns.name());
    // 20 CPU per pod; the kwok nodes have 16.
    let spec =
        json!({"replicas": 1, "cpu": "20", "memory": "4Gi", "gotenberg": {"enabled": false}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("huge", spec)).unwrap();
    let pool = wait_pool(&pools, "huge", Duration::from_secs(60), |p| {
        condition(p, "Ready").is_some_and(|(_, reason, _)| reason == "Unschedulable")
    })
    .await;
    // The scheduler's own words, and what to change.
    let (_, _, message) = condition(&pool, "Ready").unwrap();
    assert!(message.starts_with("0 of 1 render pod ready"), "{message}");
    assert!(message.contains("; render pod huge-render-"), "{message}");
    assert!(message.contains(" cannot be scheduled: 0/"), "{message}");
    assert!(message.contains("Insufficient cpu"), "{message}");
    assert!(
        message.ends_with("Make room on a node, or lower spec.replicas, spec.cpu or spec.memory"),
        "{message}"
    );
    assert_eq!(pool.status.as_ref().unwrap().last_error.as_ref().unwrap().reason, "Unschedulable");
    // min(20 cores, (4096 - 296) / 512 = 7) = 7: the figures are known even while pods wait.
    assert_eq!(pool.status.unwrap().slots_per_pod, Some(7));
}
