//! Nodes follow pods: Karpenter v1 with its KWOK cloud provider (real Karpenter, a real API
//! server, scheduler and controller-manager; kwok plays the nodes it launches and their pods).
//! Pods beyond the kwok nodes' room get NodeClaims and Nodes and run; scaled down, empty nodes
//! are consolidated; a `karpenter.sh/do-not-disrupt` pod and a PodDisruptionBudget each hold a
//! node Karpenter would otherwise consolidate, until the hold is lifted.
//!
//! Each test has its own NodePool whose nodes are tainted for it, so tests running side by side
//! never share nodes. Figures (seconds) are printed, not asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use renderpool_tests::cluster::karpenter::{
    DO_NOT_DISRUPT, NODE_POOL_LABEL, node_pool, pool_toleration,
};
use renderpool_tests::cluster::{Cluster, run, run_with_input};
use renderpool_tests::wait_for;
use serde_json::{Value, json};

/// How long a consolidation may take here before a test gives up: consolidateAfter, Karpenter's
/// 10 s disruption poll, draining and kwok's node removal, on a loaded machine.
const CONSOLIDATION_TIMEOUT: Duration = Duration::from_secs(180);

/// A test NodePool, deleted (with its NodeClaims and nodes) when dropped.
struct TestPool {
    cluster: &'static Cluster,
    name: String,
}

impl TestPool {
    fn create(cluster: &'static Cluster, name: &str, cpus: &[&str]) -> TestPool {
        apply(cluster, "", &node_pool(name, cpus, "5s"));
        TestPool { cluster, name: name.to_string() }
    }

    /// The pool's nodes (by name) with the pods of `namespace` on each.
    async fn nodes(&self, namespace: &str) -> BTreeMap<String, Vec<String>> {
        let client = self.cluster.client().await;
        let nodes: Api<Node> = Api::all(client.clone());
        let selector = format!("{NODE_POOL_LABEL}={}", self.name);
        let nodes = nodes.list(&ListParams::default().labels(&selector)).await.unwrap();
        let mut by_node: BTreeMap<String, Vec<String>> =
            nodes.items.into_iter().map(|n| (n.metadata.name.unwrap(), Vec::new())).collect();
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        for pod in pods.list(&ListParams::default()).await.unwrap().items {
            let node = pod.spec.and_then(|s| s.node_name);
            if let Some(list) = node.and_then(|n| by_node.get_mut(&n)) {
                list.push(pod.metadata.name.unwrap());
            }
        }
        by_node
    }

    /// The pool's NodeClaims: name to its `Consolidatable` condition status.
    fn node_claims(&self) -> BTreeMap<String, String> {
        let selector = format!("{NODE_POOL_LABEL}={}", self.name);
        let out =
            run(self.cluster.kubectl().args(["get", "nodeclaims", "-l", &selector, "-o", "json"]))
                .unwrap();
        let list: Value = serde_json::from_str(&out).unwrap();
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|claim| {
                let consolidatable = claim["status"]["conditions"]
                    .as_array()
                    .and_then(|all| all.iter().find(|c| c["type"] == "Consolidatable"))
                    .map(|c| c["status"].as_str().unwrap_or_default().to_string())
                    .unwrap_or_default();
                (claim["metadata"]["name"].as_str().unwrap().to_string(), consolidatable)
            })
            .collect()
    }
}

impl Drop for TestPool {
    fn drop(&mut self) {
        let _ = run(self.cluster.kubectl().args([
            "delete",
            "nodepool",
            &self.name,
            "--ignore-not-found",
            "--wait=false",
        ]));
    }
}

fn apply(cluster: &Cluster, namespace: &str, object: &Value) {
    let mut command = cluster.kubectl();
    command.args(["apply", "-f", "-"]);
    if !namespace.is_empty() {
        command.args(["-n", namespace]);
    }
    run_with_input(&mut command, object.to_string().as_bytes()).unwrap();
}

/// A Deployment of `replicas` pods requesting (and limited to) `cpu` and `memory`, tolerating
/// the pool's taint; with `pinned`, only on that pool's nodes.
fn deployment(
    name: &str,
    replicas: u32,
    cpu: &str,
    memory: &str,
    pool: &str,
    pinned: bool,
) -> Value {
    let resources = json!({ "cpu": cpu, "memory": memory });
    let mut spec = json!({
        "tolerations": [pool_toleration(pool)],
        "terminationGracePeriodSeconds": 0,
        "containers": [{
            "name": "main",
            "image": "renderpool.dev/test/never-pulled:1",
            "resources": { "requests": resources, "limits": resources },
        }],
    });
    if pinned {
        spec["nodeSelector"] = json!({ NODE_POOL_LABEL: pool });
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": { "metadata": { "labels": { "app": name } }, "spec": spec },
        },
    })
}

fn scale(cluster: &Cluster, namespace: &str, name: &str, replicas: u32) {
    run(cluster.kubectl().args([
        "scale",
        "-n",
        namespace,
        &format!("deployment/{name}"),
        &format!("--replicas={replicas}"),
    ]))
    .unwrap();
}

/// The Running pods of `app` in `namespace` with their nodes, once there are exactly `count`.
async fn wait_running(
    pods: &Api<Pod>,
    app: &str,
    count: usize,
    timeout: Duration,
) -> BTreeMap<String, String> {
    let found = wait_for(timeout, || async {
        let list = pods.list(&ListParams::default().labels(&format!("app={app}"))).await.ok()?;
        let live: Vec<&Pod> =
            list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        let running = live
            .iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        (live.len() == count && running).then(|| {
            live.iter()
                .map(|p| {
                    let node =
                        p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                    (p.metadata.name.clone().unwrap(), node)
                })
                .collect()
        })
    })
    .await;
    found.unwrap_or_else(|| {
        let list = run(Cluster::shared().kubectl().args(["get", "pods", "-A", "-o", "wide"]))
            .unwrap_or_default();
        panic!("{count} Running pods of {app} not seen in {timeout:?}:\n{list}")
    })
}

/// DisruptionBlocked events on `node`: their messages.
async fn blocked_events(cluster: &Cluster, node: &str) -> Vec<String> {
    let events: Api<Event> = Api::all(cluster.client().await);
    let selector =
        format!("involvedObject.kind=Node,involvedObject.name={node},reason=DisruptionBlocked");
    let list = events.list(&ListParams::default().fields(&selector)).await.unwrap();
    list.items.into_iter().filter_map(|e| e.message).collect()
}

#[tokio::test]
async fn karpenter_runs_inside_a_network_namespace_of_its_own() {
    let cluster = Cluster::shared();
    let karpenter = cluster.karpenter();
    let own =
        std::fs::metadata("/proc/self/ns/net").map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let its = std::fs::metadata(format!("/proc/{}/ns/net", karpenter.pid()))
        .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    assert_eq!(its.as_ref().ok(), karpenter.netns().inode().as_ref().ok());
    assert_ne!(its.unwrap(), own.unwrap(), "Karpenter must not share the host's network");
    // Its metrics answer inside; its log has no permission problem with the chart's RBAC.
    let mut stream =
        karpenter.netns().connect(renderpool_tests::cluster::karpenter::METRICS_PORT).unwrap();
    use std::io::{Read, Write};
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut metrics = String::new();
    stream.read_to_string(&mut metrics).unwrap();
    assert!(metrics.starts_with("HTTP/1.0 200"), "{}", &metrics[..metrics.len().min(200)]);
    assert!(metrics.contains("karpenter_"), "no karpenter metrics");
    let log = karpenter.log();
    assert!(!log.contains("forbidden"), "Karpenter was refused something:\n{log}");
}

#[tokio::test]
async fn pods_beyond_the_kwok_nodes_get_karpenter_nodes_and_empty_nodes_are_consolidated() {
    let cluster = Cluster::shared();
    cluster.karpenter();
    // One kwok node with room for one of the pods; the rest must come from Karpenter.
    cluster.ensure_nodes("karpenter-static", 1, "2", "8Gi").await;
    let ns = cluster.namespace("karpenter-burst").await;
    let pool = TestPool::create(cluster, "burst", &["4"]);
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());

    // Render-pod sized: 1500m and 1Gi each; a 4-CPU instance (3900m allocatable) holds two.
    let replicas = 11;
    let started = Instant::now();
    apply(cluster, ns.name(), &deployment("burst", replicas, "1500m", "1Gi", "burst", false));
    let first_claim = wait_for(Duration::from_secs(60), || async {
        (!pool.node_claims().is_empty()).then(Instant::now)
    })
    .await
    .expect("no NodeClaim for the pending pods");
    let placed = wait_running(&pods, "burst", replicas as usize, Duration::from_secs(120)).await;
    let all_running = started.elapsed();
    let nodes = pool.nodes(ns.name()).await;
    let on_static = placed.values().filter(|n| n.starts_with("karpenter-static")).count();
    assert!(on_static <= 1, "the static node holds one such pod: {placed:?}");
    assert!(placed.values().all(|n| n.starts_with("karpenter-static") || nodes.contains_key(n)));
    let needed = (replicas as usize - on_static).div_ceil(2);
    assert!(
        nodes.len() >= needed,
        "{} pods need {needed} nodes: {nodes:?}",
        replicas as usize - on_static
    );
    assert_eq!(pool.node_claims().len(), nodes.len(), "one NodeClaim per node");
    eprintln!(
        "karpenter: {replicas} pods of 1500m: first NodeClaim after {:.1}s, all Running after \
         {:.1}s on {} new nodes (+{on_static} on the kwok node)",
        (first_claim - started).as_secs_f64(),
        all_running.as_secs_f64(),
        nodes.len()
    );

    // Scaled down: every node left without a pod is consolidated away.
    let before = nodes.len();
    let scaled = Instant::now();
    scale(cluster, ns.name(), "burst", 1);
    let left = wait_for(CONSOLIDATION_TIMEOUT, || async {
        let nodes = pool.nodes(ns.name()).await;
        (nodes.values().all(|pods| !pods.is_empty()) && nodes.len() <= 1).then_some(nodes)
    })
    .await;
    let left = left.unwrap_or_else(|| {
        panic!(
            "empty nodes were not consolidated: {:?}\n{}",
            claim_names(&pool),
            cluster.karpenter().log()
        )
    });
    eprintln!(
        "karpenter: scaled to 1: {} of {before} nodes consolidated after {:.1}s",
        before - left.len(),
        scaled.elapsed().as_secs_f64()
    );
    let disrupted = cluster.karpenter().log().matches("disrupting node(s)").count();
    assert!(disrupted >= 1, "Karpenter logged no disruption:\n{}", cluster.karpenter().log());

    // Deleted: the pool's last nodes go with its pods.
    run(cluster.kubectl().args(["delete", "deployment", "burst", "-n", ns.name()])).unwrap();
    let gone = wait_for(CONSOLIDATION_TIMEOUT, || async {
        pool.nodes(ns.name()).await.is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "nodes left: {:?}", pool.nodes(ns.name()).await);
}

/// The pool's NodeClaim names, for a failure message.
fn claim_names(pool: &TestPool) -> Vec<String> {
    pool.node_claims().into_keys().collect()
}

/// What keeps a pod's node from being disrupted.
#[derive(Clone, Copy, Debug)]
enum Hold {
    /// The `karpenter.sh/do-not-disrupt: "true"` annotation on the pod.
    DoNotDisrupt,
    /// A PodDisruptionBudget covering the pod that allows no disruption.
    Budget,
}

impl Hold {
    /// The words Karpenter's DisruptionBlocked event uses for it.
    fn event_words(self) -> &'static str {
        match self {
            Hold::DoNotDisrupt => DO_NOT_DISRUPT,
            Hold::Budget => "pdb prevents pod evictions",
        }
    }
}

/// Two nodes of the pool, one held pod each, that Karpenter would merge into one: both stay
/// while held (DisruptionBlocked events on both), and one goes once the hold is lifted.
async fn held_nodes_stay_until_released(pool_name: &str, hold: Hold) {
    let cluster = Cluster::shared();
    cluster.karpenter();
    let ns = cluster.namespace(pool_name).await;
    let pool = TestPool::create(cluster, pool_name, &["4"]);
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());

    // Six pods of 1000m fill two 4-CPU nodes, three each.
    apply(cluster, ns.name(), &deployment("held", 6, "1000m", "512Mi", pool_name, true));
    let placed = wait_running(&pods, "held", 6, Duration::from_secs(120)).await;
    let mut by_node: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (pod, node) in &placed {
        by_node.entry(node).or_default().push(pod);
    }
    assert!(by_node.len() >= 2, "expected two nodes at least: {by_node:?}");
    let keep: Vec<(String, String)> =
        by_node.iter().take(2).map(|(node, pods)| (pods[0].clone(), (*node).clone())).collect();
    let held_nodes: BTreeSet<String> = keep.iter().map(|(_, node)| node.clone()).collect();

    // The two kept pods go last on scale-down, and each is held.
    if let Hold::Budget = hold {
        apply(
            cluster,
            ns.name(),
            &json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": { "name": "held" },
                "spec": { "maxUnavailable": 0, "selector": { "matchLabels": { "guard": "held" } } },
            }),
        );
    }
    for (pod, _) in &keep {
        let mut patch = json!({ "metadata": {
            "annotations": { "controller.kubernetes.io/pod-deletion-cost": "1000" },
        }});
        match hold {
            Hold::DoNotDisrupt => patch["metadata"]["annotations"][DO_NOT_DISRUPT] = json!("true"),
            Hold::Budget => patch["metadata"]["labels"] = json!({ "guard": "held" }),
        }
        pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    scale(cluster, ns.name(), "held", 2);
    let kept = wait_running(&pods, "held", 2, Duration::from_secs(60)).await;
    assert_eq!(
        kept.keys().cloned().collect::<BTreeSet<_>>(),
        keep.iter().map(|(p, _)| p.clone()).collect()
    );

    // Every other node empties and goes; the two held ones are each half used, and Karpenter
    // marks them consolidatable and says why it will not disrupt them.
    let blocked = wait_for(CONSOLIDATION_TIMEOUT, || async {
        let nodes = pool.nodes(ns.name()).await;
        let claims = pool.node_claims();
        let mut messages = Vec::new();
        for node in &held_nodes {
            messages.push(blocked_events(cluster, node).await);
        }
        let said = messages.iter().all(|m| m.iter().any(|m| m.contains(hold.event_words())));
        let consolidatable =
            held_nodes.iter().all(|node| claims.get(node).map(String::as_str) == Some("True"));
        let ready = nodes.len() == 2 && consolidatable && said;
        ready.then_some(messages)
    })
    .await;
    let blocked = blocked.unwrap_or_else(|| {
        panic!(
            "no DisruptionBlocked ({}) on both held nodes: nodes {:?}, claims {:?}\n{}",
            hold.event_words(),
            claim_names(&pool),
            pool.node_claims(),
            cluster.karpenter().log()
        )
    });
    eprintln!("karpenter {hold:?}: DisruptionBlocked on both nodes: {blocked:?}");
    // Two more disruption passes (every 10 s): still both nodes.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let nodes = pool.nodes(ns.name()).await;
    assert_eq!(
        nodes.keys().cloned().collect::<BTreeSet<_>>(),
        held_nodes,
        "a held node was disrupted"
    );

    // Lifted: Karpenter merges the two nodes into one.
    let lifted = Instant::now();
    match hold {
        Hold::DoNotDisrupt => {
            let (pod, _) = &keep[0];
            let patch = json!({ "metadata": { "annotations": { DO_NOT_DISRUPT: null } } });
            pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
        Hold::Budget => {
            run(cluster.kubectl().args(["delete", "pdb", "held", "-n", ns.name()])).unwrap();
        }
    }
    let merged = wait_for(CONSOLIDATION_TIMEOUT, || async {
        let nodes = pool.nodes(ns.name()).await;
        (nodes.len() == 1 && nodes.values().all(|pods| pods.len() == 2)).then_some(nodes)
    })
    .await;
    let merged = merged.unwrap_or_else(|| {
        panic!("the nodes were not merged once the hold was lifted: {:?}", claim_names(&pool))
    });
    eprintln!(
        "karpenter {hold:?}: lifted, two nodes consolidated into one after {:.1}s ({merged:?})",
        lifted.elapsed().as_secs_f64()
    );
    if let Hold::DoNotDisrupt = hold {
        // The node that went is the one whose pod lost the annotation.
        let (_, released) = &keep[0];
        assert!(!merged.contains_key(released), "{released} was the one free to go: {merged:?}");
    }
}

#[tokio::test]
async fn a_do_not_disrupt_pod_holds_its_node_until_the_annotation_goes() {
    held_nodes_stay_until_released("held-annotation", Hold::DoNotDisrupt).await;
}

#[tokio::test]
async fn a_pod_disruption_budget_holds_its_nodes_until_it_goes() {
    held_nodes_stay_until_released("held-budget", Hold::Budget).await;
}
