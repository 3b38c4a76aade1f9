//! kwok fake nodes: real Node objects whose lifecycle kwok plays, so the real scheduler binds
//! pods to them by their requests and kwok reports those pods Running.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::PostParams;
use renderpool_testkit::wait;

use super::ClusterError;

/// Annotation kwok is started to manage.
const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Creates the missing nodes `prefix-0..count` and waits until all of them are Ready.
pub(super) async fn ensure(
    client: &kube::Client,
    prefix: &str,
    count: u32,
    cpu: &str,
    memory: &str,
) -> Result<(), ClusterError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    for name in &names {
        if nodes.get_opt(name).await?.is_none() {
            match nodes.create(&PostParams::default(), &node(name, cpu, memory)?).await {
                // Tests sharing the cluster may ask for the same nodes at the same moment.
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                created => drop(created?),
            }
        }
    }
    let what = format!("kwok nodes {prefix}-* Ready");
    wait::try_until(&what, Duration::from_secs(60), || async {
        let mut not_ready = Vec::new();
        for name in &names {
            if !nodes.get_opt(name).await.is_ok_and(|node| node.as_ref().is_some_and(is_ready)) {
                not_ready.push(name.as_str());
            }
        }
        if not_ready.is_empty() { Ok(()) } else { Err(format!("not Ready: {not_ready:?}")) }
    })
    .await
    .map_err(|timed_out| ClusterError::Setup(timed_out.to_string()))
}

fn node(name: &str, cpu: &str, memory: &str) -> Result<Node, ClusterError> {
    let capacity = serde_json::json!({ "cpu": cpu, "memory": memory, "pods": "110" });
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": { KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0" },
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": { "architecture": "amd64", "operatingSystem": "linux",
                          "kubeletVersion": "fake", "kubeProxyVersion": "fake",
                          "containerRuntimeVersion": "", "kernelVersion": "", "osImage": "",
                          "bootID": "", "machineID": "", "systemUUID": "" },
        },
    }))
    .map_err(|err| ClusterError::Setup(format!("node {name}: {err}")))
}

fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|status| status.conditions.as_ref());
    conditions.is_some_and(|all| all.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
