//! The local control plane is a real one: CRDs establish, the scheduler binds pods to kwok
//! nodes by their requests, the garbage collector removes dependents, versions are stamped.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use renderpool_testkit::wait;
use renderpool_tests::cluster::{Cluster, KWOK_NODE_LEASE_SECONDS, run};

const SMOKE_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
  "metadata": {"name": "widgets.smoke.renderpool.dev"},
  "spec": {"group": "smoke.renderpool.dev", "scope": "Namespaced",
    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object",
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}
}"#;

#[test]
fn crd_becomes_established_and_serves_objects() {
    let cluster = Cluster::shared();
    let crd = cluster.state_dir().join("smoke-crd.json");
    std::fs::write(&crd, SMOKE_CRD).unwrap();
    run(cluster.kubectl().args(["apply", "-f"]).arg(&crd)).unwrap();
    run(cluster.kubectl().args([
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/widgets.smoke.renderpool.dev",
    ]))
    .unwrap();
    let widget = cluster.state_dir().join("smoke-widget.json");
    std::fs::write(
        &widget,
        r#"{"apiVersion":"smoke.renderpool.dev/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"size":3}}"#,
    )
    .unwrap();
    run(cluster.kubectl().args(["apply", "-f"]).arg(&widget)).unwrap();
    let size = run(cluster.kubectl().args([
        "get",
        "widget",
        "w",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.size}",
    ]))
    .unwrap();
    assert_eq!(size, "3");
}

#[tokio::test]
async fn deployment_is_scheduled_on_kwok_nodes_and_garbage_collected() {
    let cluster = Cluster::shared();
    // Two 1-CPU nodes and two pods asking 600m each: the scheduler must spread them, one a node.
    cluster.ensure_nodes("smoke", 2, "1", "2Gi").await;
    let ns = cluster.namespace("smoke").await;
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "nodeSelector": {"type": "kwok"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{
                            "key": "kubernetes.io/hostname", "operator": "In",
                            "values": ["smoke-0", "smoke-1"]}]}]}}},
                    "containers": [{"name": "web", "image": "example.invalid/web:1",
                        "resources": {"requests": {"cpu": "600m", "memory": "256Mi"}}}]
                }
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let running = wait::until("two Running pods", Duration::from_secs(90), || async {
        let list = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
        let running: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .collect();
        if running.len() == 2 { Ok(running) } else { Err(running.len()) }
    })
    .await;
    let mut nodes: Vec<String> =
        running.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
    nodes.sort();
    assert_eq!(nodes, ["smoke-0", "smoke-1"], "600m pods on 1-CPU nodes must not share a node");

    wait::until("2 ready replicas of Deployment web", Duration::from_secs(60), || async {
        let ready = deployments.get("web").await.unwrap().status.and_then(|s| s.ready_replicas);
        if ready == Some(2) { Ok(()) } else { Err(ready) }
    })
    .await;

    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns.name());
    assert_eq!(replica_sets.list(&ListParams::default()).await.unwrap().items.len(), 1);
    deployments.delete("web", &DeleteParams::background()).await.unwrap();
    let what = "the garbage collector's removal of the ReplicaSet and pods";
    wait::until(what, Duration::from_secs(90), || async {
        let sets = replica_sets.list(&ListParams::default()).await.unwrap().items.len();
        let left = pods.list(&ListParams::default()).await.unwrap().items.len();
        if sets == 0 && left == 0 {
            Ok(())
        } else {
            Err(format!("{sets} ReplicaSets, {left} pods"))
        }
    })
    .await;
}

/// kwok heartbeats its nodes the way a kubelet does, through a Lease it keeps renewing, so the
/// controller-manager's default node-monitor grace period (50 s) keeps them Ready however long a
/// run lasts. One renewal seen is enough: it comes every quarter of the Lease's duration.
#[tokio::test]
async fn kwok_renews_each_node_lease_well_inside_the_default_grace_period() {
    let cluster = Cluster::shared();
    cluster.ensure_nodes("lease", 1, "1", "1Gi").await;
    let client = cluster.client().await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renew_time = || async {
        let spec = leases.get_opt("lease-0").await.unwrap()?.spec?;
        Some((spec.renew_time?, spec.lease_duration_seconds?))
    };
    let (first, duration) =
        wait::until("kwok's Lease for its node", Duration::from_secs(30), renew_time).await;
    assert_eq!(duration, KWOK_NODE_LEASE_SECONDS as i32);
    let interval = Duration::from_secs(u64::from(KWOK_NODE_LEASE_SECONDS) / 4);
    wait::until("a renewal of the node's Lease", interval * 3, || async {
        renew_time().await.filter(|(time, _)| *time != first).map(|(time, _)| time)
    })
    .await;
    let node: Node = Api::all(client).get("lease-0").await.unwrap();
    let conditions = node.status.unwrap().conditions.unwrap();
    assert!(conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
}

#[test]
fn kubectl_and_helm_report_the_pinned_server_version() {
    let cluster = Cluster::shared();
    let version: serde_json::Value =
        serde_json::from_str(&run(cluster.kubectl().args(["version", "-o", "json"])).unwrap())
            .unwrap();
    let pinned = format!("v{}", renderpool_api::versions::KUBERNETES);
    assert_eq!(version["serverVersion"]["gitVersion"], pinned.as_str());
    assert_eq!(version["clientVersion"]["gitVersion"], pinned.as_str());

    // A chart that prints the Kubernetes version helm sees: offline from its stamped default,
    // and with --validate from the live server.
    let chart = cluster.state_dir().join("smoke-chart");
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    std::fs::write(chart.join("Chart.yaml"), "apiVersion: v2\nname: smoke\nversion: 0.1.0\n")
        .unwrap();
    std::fs::write(
        chart.join("templates/cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: smoke\ndata:\n  kube: \"{{ .Capabilities.KubeVersion.Version }}\"\n",
    )
    .unwrap();
    let offline = run(cluster.helm().arg("template").arg(&chart)).unwrap();
    let minor = pinned.rsplit_once('.').map_or(pinned.as_str(), |(minor, _)| minor);
    assert!(
        offline.contains(&format!("kube: \"{minor}")),
        "offline helm assumes another version:\n{offline}"
    );
    let live = run(cluster.helm().args(["template", "--validate"]).arg(&chart)).unwrap();
    assert!(
        live.contains(&format!("kube: \"{pinned}\"")),
        "helm did not see the server version:\n{live}"
    );
    let helm = run(cluster.helm().args(["version", "--template", "{{.Version}}"])).unwrap();
    assert_eq!(helm, "v3.22.0");
}
