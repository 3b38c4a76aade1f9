//! Nodes follow pods: Karpenter v1 with its KWOK cloud provider under RenderPools (real
//! Karpenter, the real operator, a real API server, scheduler and controller-manager; kwok plays
//! the nodes Karpenter launches and the pods on them).
//!
//! Each test has a NodePool of its own whose nodes are tainted for it, and a RenderPool whose
//! `nodeSelector` and `tolerations` take its pods to that pool's nodes only: no kwok node of the
//! cluster fits them, so every render pod needs a node Karpenter launches. Scaled through
//! `/scale` beyond the nodes there are, the pool gets NodeClaims and all its pods run; scaled
//! down, the nodes left empty or underused are consolidated; a user's PodDisruptionBudget and a
//! `karpenter.sh/do-not-disrupt` render pod each hold their node until lifted, as Karpenter's
//! DisruptionBlocked events say; the operator's pods carry the disruption policy Karpenter and
//! cluster-autoscaler read. Figures (seconds) are printed, never asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use renderpool_operator::build::{Component, child_name, selector_labels, selector_string};
use renderpool_testkit::{metrics, wait};
use renderpool_tests::cluster::karpenter::{DO_NOT_DISRUPT, NODE_POOL_LABEL, node_pool, placement};
use renderpool_tests::cluster::{Cluster, TestNamespace, run, run_with_input};
use renderpool_tests::operator::OperatorProcess;
use serde_json::{Value, json};

/// How long a consolidation may take here before a test gives up: consolidateAfter, Karpenter's
/// 10 s disruption poll, draining and the node's removal, on a loaded machine.
const CONSOLIDATION_TIMEOUT: Duration = Duration::from_secs(240);
/// How long launching nodes and running pods on them may take here.
const PROVISIONING_TIMEOUT: Duration = Duration::from_secs(180);
/// cluster-autoscaler's annotation that lets it evict a pod despite local storage.
const SAFE_TO_EVICT: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";
/// The ReplicaSet controller removes the pods with the lowest cost first on scale-in.
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A test's NodePool, RenderPool and namespace; the NodePool (with its nodes) is deleted when
/// dropped, the RenderPool with the namespace.
struct Scenario {
    cluster: &'static Cluster,
    /// Names both the NodePool and the RenderPool.
    name: String,
    ns: TestNamespace,
    pods: Api<Pod>,
}

impl Scenario {
    /// Karpenter and the operator running, a NodePool of 4-CPU instances named `name`, and in a
    /// fresh namespace the RenderPool `pool` (see [`render_pool`]) named `name`; returns once
    /// its render pods run.
    async fn start(name: &str, pool: Pool) -> Scenario {
        let cluster = Cluster::shared();
        cluster.karpenter();
        OperatorProcess::shared().await;
        let ns = cluster.namespace(name).await;
        apply(cluster, "", &node_pool(name, &["4"], "5s"));
        apply(cluster, ns.name(), &render_pool(name, pool));
        let pods = Api::namespaced(cluster.client().await, ns.name());
        let scenario = Scenario { cluster, name: name.to_string(), ns, pods };
        scenario.wait_render_pods(pool.replicas as usize, PROVISIONING_TIMEOUT).await;
        scenario
    }

    /// `kubectl scale renderpool/<name> --replicas=N`: through the `/scale` subresource.
    fn scale(&self, replicas: u32) {
        run(self
            .cluster
            .kubectl()
            .args(["scale", "-n", self.ns.name()])
            .args([format!("renderpool/{}", self.name), format!("--replicas={replicas}")]))
        .unwrap();
    }

    /// The NodePool's nodes (by name) with the pods of the namespace on each.
    async fn nodes(&self) -> BTreeMap<String, Vec<String>> {
        let nodes: Api<Node> = Api::all(self.cluster.client().await);
        let selector = format!("{NODE_POOL_LABEL}={}", self.name);
        let nodes = nodes.list(&ListParams::default().labels(&selector)).await.unwrap();
        let mut by_node: BTreeMap<String, Vec<String>> =
            nodes.items.into_iter().map(|n| (n.metadata.name.unwrap(), Vec::new())).collect();
        for pod in self.pods.list(&ListParams::default()).await.unwrap().items {
            let node = pod.spec.and_then(|s| s.node_name);
            if let Some(list) = node.and_then(|n| by_node.get_mut(&n)) {
                list.push(pod.metadata.name.unwrap());
            }
        }
        by_node
    }

    /// The NodePool's NodeClaims, keyed by the name of their node (by their own name until
    /// they have one), with the status of their `Consolidatable` condition.
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
                let node = claim["status"]["nodeName"].as_str();
                let name = node.or(claim["metadata"]["name"].as_str()).unwrap().to_string();
                (name, consolidatable)
            })
            .collect()
    }

    /// Waits until exactly `count` render pods exist, all Running and Ready on the NodePool's
    /// nodes; returns pod name to node name.
    async fn wait_render_pods(&self, count: usize, timeout: Duration) -> BTreeMap<String, String> {
        let selector = selector_string(&self.name, Component::Render);
        let what = format!("{count} Running and Ready render pods on the NodePool's nodes");
        let found = wait::try_until(&what, timeout, || async {
            let list = self.pods.list(&ListParams::default().labels(&selector)).await.ok()?;
            let live: Vec<&Pod> =
                list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
            let nodes = self.nodes().await;
            let placed: BTreeMap<String, String> = live
                .iter()
                .filter(|p| running_and_ready(p))
                .filter_map(|p| {
                    Some((p.metadata.name.clone()?, p.spec.as_ref()?.node_name.clone()?))
                })
                .filter(|(_, node)| nodes.contains_key(node))
                .collect();
            (live.len() == count && placed.len() == count).then_some(placed)
        })
        .await;
        found.unwrap_or_else(|timed_out| {
            let pods =
                run(self.cluster.kubectl().args(["get", "pods,nodeclaims", "-A", "-o", "wide"]))
                    .unwrap_or_default();
            panic!("{timed_out} ({}):\n{pods}\n{}", self.name, karpenter_log_tail())
        })
    }

    /// Waits until the NodePool has exactly `nodes` nodes (and NodeClaims), none empty, holding
    /// `pods` pods between them; returns them.
    async fn wait_nodes_holding(&self, pods: usize, nodes: usize) -> BTreeMap<String, Vec<String>> {
        let what = format!("{nodes} nodes holding {pods} pods");
        let found = wait::try_until(&what, CONSOLIDATION_TIMEOUT, || async {
            let by_node = self.nodes().await;
            let held: usize = by_node.values().map(Vec::len).sum();
            let settled = by_node.len() == nodes
                && held == pods
                && by_node.values().all(|pods| !pods.is_empty())
                && self.node_claims().len() == nodes;
            if settled { Ok(by_node) } else { Err(by_node) }
        })
        .await;
        found.unwrap_or_else(|timed_out| {
            panic!(
                "{timed_out} ({}): nodes {:?}, claims {:?}\n{}",
                self.name,
                self.nodes_now(),
                self.node_claims(),
                karpenter_log_tail()
            )
        })
    }

    /// The nodes as `kubectl get nodes` shows them, for a failure message.
    fn nodes_now(&self) -> String {
        let selector = format!("{NODE_POOL_LABEL}={}", self.name);
        run(self.cluster.kubectl().args(["get", "nodes", "-l", &selector])).unwrap_or_default()
    }
}

impl Drop for Scenario {
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

/// What a test's RenderPool differs in.
#[derive(Clone, Copy)]
struct Pool {
    replicas: u32,
    /// One Gotenberg pod of 1 CPU, else none.
    gotenberg: bool,
    /// The operator's default spread (render pods across nodes, ScheduleAnyway), else none.
    spread: bool,
}

/// A RenderPool whose render pods take 1500m and 1Gi (one slot; a 4-CPU instance holds two) and
/// whose pods go to the nodes of the NodePool `name` only.
fn render_pool(name: &str, pool: Pool) -> Value {
    let (node_selector, tolerations) = placement(name);
    let gotenberg = if pool.gotenberg {
        json!({ "enabled": true, "replicas": 1, "cpu": "1", "memory": "1Gi" })
    } else {
        json!({ "enabled": false })
    };
    let mut spec = json!({
        "replicas": pool.replicas,
        "cpu": "1500m",
        "memory": "1Gi",
        "memoryPerSlot": "512Mi",
        "nodeSelector": node_selector,
        "tolerations": tolerations,
        "gotenberg": gotenberg,
    });
    if !pool.spread {
        spec["topologySpreadConstraints"] = json!([]);
    }
    json!({
        "apiVersion": "renderpool.dev/v1beta1",
        "kind": "RenderPool",
        "metadata": { "name": name },
        "spec": spec,
    })
}

fn running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|all| all.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && status.and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Karpenter's disruption passes so far: its evaluations of single-node consolidation, the last
/// method of each pass that disrupted nothing (a histogram's count, one per evaluation).
fn disruption_passes() -> f64 {
    let text = Cluster::shared().karpenter().metrics().unwrap();
    let name = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count";
    metrics::sum(&text, name, &["consolidation_type=\"single\""])
}

/// The last lines of Karpenter's log, for a failure message.
fn karpenter_log_tail() -> String {
    let log = Cluster::shared().karpenter().log();
    let lines: Vec<&str> = log.lines().rev().take(40).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// Messages of the DisruptionBlocked events Karpenter published on `node`.
async fn blocked_events(cluster: &Cluster, node: &str) -> Vec<String> {
    let events: Api<Event> = Api::all(cluster.client().await);
    let selector =
        format!("involvedObject.kind=Node,involvedObject.name={node},reason=DisruptionBlocked");
    let list = events.list(&ListParams::default().fields(&selector)).await.unwrap();
    list.items.into_iter().filter_map(|e| e.message).collect()
}

/// Inodes of the TCP sockets listening in the network namespace `/proc/<pid>/net` shows.
fn listening_sockets(pid: &str) -> BTreeSet<u64> {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| {
            // Columns: sl local rem st tx:rx tr:when retrnsmt uid timeout inode; 0A is LISTEN.
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    (fields.get(3) == Some(&"0A")).then(|| fields.get(9)?.parse().ok()).flatten()
                })
                .collect::<Vec<u64>>()
        })
        .collect()
}

/// Inodes of the sockets process `pid` holds open.
fn sockets_of(pid: u32) -> BTreeSet<u64> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            target.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

#[tokio::test]
async fn karpenter_listens_only_inside_a_network_namespace_of_its_own() {
    let cluster = Cluster::shared();
    let karpenter = cluster.karpenter();
    let pid = karpenter.pid();
    let inode =
        |path: String| std::fs::metadata(path).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let its = inode(format!("/proc/{pid}/ns/net")).unwrap();
    assert_eq!(its, karpenter.netns().inode().unwrap());
    assert_ne!(
        its,
        inode("/proc/self/ns/net".into()).unwrap(),
        "Karpenter shares the host's network"
    );

    // Its listeners (metrics, health) are sockets of its namespace; none is the host's.
    let own = sockets_of(pid);
    let inside: BTreeSet<u64> =
        listening_sockets(&pid.to_string()).intersection(&own).copied().collect();
    let outside: BTreeSet<u64> = listening_sockets("self").intersection(&own).copied().collect();
    assert!(
        inside.len() >= 2,
        "Karpenter listens on {inside:?} inside, expected metrics and health"
    );
    assert!(outside.is_empty(), "Karpenter listens in the host's namespace: {outside:?}");

    // Its metrics answer inside; the chart's RBAC under its own token refused it nothing.
    let metrics = karpenter.metrics().unwrap();
    assert!(metrics.starts_with("HTTP/1.0 200"), "{}", &metrics[..metrics.len().min(200)]);
    assert!(metrics.contains("karpenter_"), "no karpenter metrics");
    let whoami = run(cluster.kubectl().arg("--kubeconfig").arg(karpenter.kubeconfig()).args([
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]))
    .unwrap();
    assert_eq!(whoami, "system:serviceaccount:karpenter:karpenter");
    // An RBAC refusal reads `... is forbidden: User "..." cannot <verb> resource ...`.
    let log = karpenter.log();
    let refused: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("forbidden") && line.contains(" cannot "))
        .collect();
    assert!(refused.is_empty(), "RBAC refused Karpenter something:\n{}", refused.join("\n"));
}

#[tokio::test]
async fn a_render_pool_scaled_past_its_nodes_gets_karpenter_nodes_and_scaled_down_gives_them_back()
{
    // Gotenberg off: each node then holds render pods only, so the node count follows them.
    // The operator's default spread, as a user gets it.
    let pool = Pool { replicas: 1, gotenberg: false, spread: true };
    let scenario = Scenario::start("burst", pool).await;
    let before = scenario.node_claims();
    assert_eq!(before.len(), 1, "one render pod, one node: {before:?}");

    let replicas = 8;
    let scaled = Instant::now();
    scenario.scale(replicas);
    let first_claim =
        wait::until("a NodeClaim for the pending render pods", PROVISIONING_TIMEOUT, || async {
            (scenario.node_claims().len() > before.len()).then(Instant::now)
        })
        .await;
    let placed = scenario.wait_render_pods(replicas as usize, PROVISIONING_TIMEOUT).await;
    let all_running = scaled.elapsed();
    let nodes = scenario.nodes().await;
    // 1500m each on 4-CPU instances: two to a node at most, so four nodes at least.
    assert!(nodes.len() >= replicas as usize / 2, "{replicas} pods on {nodes:?}");
    assert!(nodes.values().all(|pods| pods.len() <= 2), "more than two on a node: {nodes:?}");
    assert_eq!(scenario.node_claims().len(), nodes.len(), "one NodeClaim per node");
    eprintln!(
        "karpenter: scaled 1 -> {replicas} render pods (1500m): first new NodeClaim after \
         {:.1}s, all {replicas} Running and Ready after {:.1}s; {} nodes launched in all, the \
         pods on {} of them",
        (first_claim - scaled).as_secs_f64(),
        all_running.as_secs_f64(),
        nodes.len(),
        placed.values().collect::<BTreeSet<_>>().len(),
    );

    // Scaled down to one: every other node is consolidated away.
    let scaled = Instant::now();
    scenario.scale(1);
    let left = scenario.wait_nodes_holding(1, 1).await;
    eprintln!(
        "karpenter: scaled {replicas} -> 1: {} of {} nodes consolidated after {:.1}s",
        nodes.len() - left.len(),
        nodes.len(),
        scaled.elapsed().as_secs_f64()
    );
    let log = Cluster::shared().karpenter().log();
    let disruptions: Vec<&str> =
        log.lines().filter(|line| line.contains("disrupting node(s)")).collect();
    assert!(!disruptions.is_empty(), "Karpenter logged no disruption:\n{log}");
}

#[tokio::test]
async fn the_operators_pods_on_karpenter_nodes_carry_the_disruption_policy() {
    let pool = Pool { replicas: 2, gotenberg: true, spread: true };
    let scenario = Scenario::start("policy", pool).await;
    let name = &scenario.name;
    let gotenberg = selector_string(name, Component::Gotenberg);
    let what = "the Gotenberg pod Running and Ready on a NodePool node";
    let gotenberg_pods = wait::until(what, PROVISIONING_TIMEOUT, || async {
        let list = scenario.pods.list(&ListParams::default().labels(&gotenberg)).await.ok()?;
        let nodes = scenario.nodes().await;
        let placed = list.items.iter().all(|p| {
            running_and_ready(p)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_some_and(|n| nodes.contains_key(n))
        });
        (list.items.len() == 1 && placed).then_some(list.items)
    })
    .await;
    let render = scenario
        .pods
        .list(&ListParams::default().labels(&selector_string(name, Component::Render)))
        .await
        .unwrap()
        .items;
    assert_eq!(render.len(), 2);

    for pod in render.iter().chain(&gotenberg_pods) {
        let pod_name = pod.metadata.name.as_deref().unwrap();
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get(SAFE_TO_EVICT).map(String::as_str), Some("true"), "{pod_name}");
        assert!(!annotations.contains_key(DO_NOT_DISRUPT), "{pod_name} blocks Karpenter");
        let spec = pod.spec.as_ref().unwrap();
        let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
        for container in containers {
            let requests = container.resources.as_ref().and_then(|r| r.requests.clone());
            let requests = requests.unwrap_or_default();
            assert!(
                requests.contains_key("cpu") && requests.contains_key("memory"),
                "{pod_name}/{} has no cpu and memory requests: {requests:?}",
                container.name
            );
        }
    }
    let budgets: Api<PodDisruptionBudget> =
        Api::namespaced(scenario.cluster.client().await, scenario.ns.name());
    for component in [Component::Render, Component::Gotenberg] {
        let budget = budgets.get(&child_name(name, component)).await.unwrap();
        let spec = budget.spec.unwrap();
        assert_eq!(
            serde_json::to_value(&spec.max_unavailable).unwrap(),
            json!(1),
            "{component:?} PDB"
        );
        assert_eq!(spec.selector.unwrap().match_labels.unwrap(), selector_labels(name, component));
    }
}

/// What keeps a render pod's node from being disrupted.
#[derive(Clone, Copy, Debug)]
enum Hold {
    /// The test (as a user would) annotates the pod `karpenter.sh/do-not-disrupt: "true"`.
    DoNotDisrupt,
    /// The user adds a PodDisruptionBudget of maxUnavailable 0 over the render pods.
    Budget,
}

/// The user's PodDisruptionBudget of [`Hold::Budget`].
const USER_BUDGET: &str = "no-render-disruption";

impl Hold {
    /// What Karpenter's DisruptionBlocked event on a held node says.
    fn event_words(self) -> &'static str {
        match self {
            Hold::DoNotDisrupt => DO_NOT_DISRUPT,
            // The render pods are now under two PDBs (the operator's and the user's), which the
            // eviction API refuses outright; Karpenter names both.
            Hold::Budget => USER_BUDGET,
        }
    }
}

/// Two nodes of the pool, one render pod each, that Karpenter would merge into one: both stay
/// while held (DisruptionBlocked on both, consolidation passes go by), and one goes once the
/// hold is lifted.
///
/// The RenderPool has no spread: under the operator's default one (a ScheduleAnyway preference
/// by hostname) Karpenter, which respects preferences by default, never merges two nodes that
/// each hold a render pod ("pod(s) have a preferred TopologySpreadConstraint which can prevent
/// consolidation"), so there would be nothing for a hold to block.
async fn held_nodes_stay_until_released(name: &str, hold: Hold) {
    // Four pods of 1500m: two nodes at least.
    let pool = Pool { replicas: 4, gotenberg: false, spread: false };
    let scenario = Scenario::start(name, pool).await;
    let placed = scenario.wait_render_pods(4, PROVISIONING_TIMEOUT).await;
    let mut by_node: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (pod, node) in &placed {
        by_node.entry(node).or_default().push(pod);
    }
    assert!(by_node.len() >= 2, "expected two nodes at least: {by_node:?}");
    // One pod on each of two nodes survives the scale-in and holds its node.
    let keep: Vec<(String, String)> =
        by_node.iter().take(2).map(|(node, pods)| (pods[0].clone(), (*node).clone())).collect();
    let held_nodes: BTreeSet<String> = keep.iter().map(|(_, node)| node.clone()).collect();

    if let Hold::Budget = hold {
        apply(
            scenario.cluster,
            scenario.ns.name(),
            &json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": { "name": USER_BUDGET },
                "spec": {
                    "maxUnavailable": 0,
                    "selector": { "matchLabels": selector_labels(name, Component::Render) },
                },
            }),
        );
    }
    for (pod, _) in &keep {
        let mut annotations = json!({ DELETION_COST: "1000" });
        if let Hold::DoNotDisrupt = hold {
            annotations[DO_NOT_DISRUPT] = json!("true");
        }
        let patch = json!({ "metadata": { "annotations": annotations } });
        scenario.pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }
    scenario.scale(2);
    let kept = scenario.wait_render_pods(2, PROVISIONING_TIMEOUT).await;
    assert_eq!(
        kept.keys().cloned().collect::<BTreeSet<_>>(),
        keep.iter().map(|(p, _)| p.clone()).collect()
    );

    // Every other node empties and goes; the two held ones are half used, Karpenter marks them
    // consolidatable and says why it leaves them.
    let what = format!("DisruptionBlocked ({}) on both held nodes", hold.event_words());
    let blocked = wait::try_until(&what, CONSOLIDATION_TIMEOUT, || async {
        let nodes = scenario.nodes().await;
        let claims = scenario.node_claims();
        let mut messages = Vec::new();
        for node in &held_nodes {
            messages.push(blocked_events(scenario.cluster, node).await);
        }
        let said = messages.iter().all(|m| m.iter().any(|m| m.contains(hold.event_words())));
        let consolidatable =
            held_nodes.iter().all(|node| claims.get(node).map(String::as_str) == Some("True"));
        (nodes.len() == 2 && consolidatable && said).then_some(messages)
    })
    .await;
    let blocked = blocked.unwrap_or_else(|timed_out| {
        panic!(
            "{timed_out}: nodes {:?}, claims {:?}\n{}",
            scenario.nodes_now(),
            scenario.node_claims(),
            karpenter_log_tail()
        )
    });
    eprintln!("karpenter {hold:?}: DisruptionBlocked on both nodes: {blocked:?}");
    // Two more disruption passes (one every 10 s, by Karpenter's own count): still both nodes.
    let passed = disruption_passes();
    wait::until("two more disruption passes", CONSOLIDATION_TIMEOUT, || async {
        let passes = disruption_passes();
        if passes >= passed + 2.0 { Ok(()) } else { Err(passes) }
    })
    .await;
    let nodes = scenario.nodes().await;
    assert_eq!(nodes.keys().cloned().collect::<BTreeSet<_>>(), held_nodes, "a held node went");

    // Lifted: Karpenter merges the two nodes into one.
    let lifted = Instant::now();
    match hold {
        Hold::DoNotDisrupt => {
            let (pod, _) = &keep[0];
            let patch = json!({ "metadata": { "annotations": { DO_NOT_DISRUPT: null } } });
            scenario.pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
        Hold::Budget => {
            run(scenario.cluster.kubectl().args([
                "delete",
                "pdb",
                USER_BUDGET,
                "-n",
                scenario.ns.name(),
            ]))
            .unwrap();
        }
    }
    let merged = scenario.wait_nodes_holding(2, 1).await;
    eprintln!(
        "karpenter {hold:?}: lifted, two nodes consolidated into one after {:.1}s ({merged:?})",
        lifted.elapsed().as_secs_f64()
    );
    if let Hold::DoNotDisrupt = hold {
        // The node that went is the one whose pod lost the annotation; the other still holds.
        let (_, released) = &keep[0];
        let (_, still_held) = &keep[1];
        assert!(!merged.contains_key(released), "{released} was the one free to go: {merged:?}");
        assert!(merged.contains_key(still_held), "{still_held} was held: {merged:?}");
    }
}

#[tokio::test]
async fn a_do_not_disrupt_render_pod_holds_its_node_until_the_annotation_goes() {
    held_nodes_stay_until_released("hold-annotation", Hold::DoNotDisrupt).await;
}

#[tokio::test]
async fn a_users_stricter_pdb_holds_the_render_pods_nodes_until_it_goes() {
    held_nodes_stay_until_released("hold-budget", Hold::Budget).await;
}
