//! The Kubernetes objects Karpenter runs with and the NodePools tests give it: pure builders.

use serde_json::{Value, json};

/// Namespace of Karpenter's ServiceAccount and namespaced RBAC (its `SYSTEM_NAMESPACE`).
pub const NAMESPACE: &str = "karpenter";
/// The Helm release name the RBAC is rendered under; also its ServiceAccount's name.
pub const RELEASE: &str = "karpenter";
/// The KWOKNodeClass every test NodePool refers to.
pub const NODE_CLASS: &str = "default";
/// The taint a test NodePool puts on its nodes, valued with the pool's name, so only pods that
/// tolerate it ([`placement`]) land there and pools of parallel tests stay apart.
pub const POOL_TAINT: &str = "renderpool.dev/node-pool";
/// The label Karpenter gives every node of a NodePool, valued with the pool's name.
pub const NODE_POOL_LABEL: &str = "karpenter.sh/nodepool";
/// The label kwok's instance types carry their CPU count in.
pub const INSTANCE_CPU_LABEL: &str = "karpenter.kwok.sh/instance-cpu";
/// The pod annotation that keeps Karpenter from disrupting the pod's node voluntarily.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// The chart templates holding Karpenter's ServiceAccount and RBAC (the rest is its Deployment,
/// Service and monitoring, which a host process does not need).
pub const RBAC_TEMPLATES: [&str; 5] = [
    "templates/serviceaccount.yaml",
    "templates/clusterrole.yaml",
    "templates/clusterrole-kwok.yaml",
    "templates/role.yaml",
    "templates/rolebinding.yaml",
];

/// The namespace and the KWOKNodeClass, as one `kubectl apply` list.
pub(super) fn base_objects() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            { "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": NAMESPACE } },
            { "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
              "metadata": { "name": NODE_CLASS } },
        ],
    })
}

/// A NodePool of on-demand KWOK instances with one of `cpus` CPUs each (e.g. `["4"]`), whose
/// nodes carry [`POOL_TAINT`]`=name:NoSchedule`. Empty and underused nodes are consolidated
/// `consolidate_after` (e.g. `"5s"`) after their last pod change, every node at once if need
/// be (the default budget allows 10% of nodes at a time).
pub fn node_pool(name: &str, cpus: &[&str], consolidate_after: &str) -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": { "name": name },
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        { "key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"] },
                        { "key": "kubernetes.io/os", "operator": "In", "values": ["linux"] },
                        { "key": "karpenter.sh/capacity-type", "operator": "In",
                          "values": ["on-demand"] },
                        { "key": INSTANCE_CPU_LABEL, "operator": "In", "values": cpus },
                    ],
                    "taints": [{ "key": POOL_TAINT, "value": name, "effect": "NoSchedule" }],
                    "nodeClassRef": { "group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                      "name": NODE_CLASS },
                    "expireAfter": "Never",
                },
            },
            "limits": { "cpu": "1000" },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": consolidate_after,
                "budgets": [{ "nodes": "100%" }],
            },
        },
    })
}

/// The node selector and tolerations (as in a pod or RenderPool spec) that take pods to the
/// nodes of the test NodePool `name` and nowhere else.
pub fn placement(name: &str) -> (Value, Value) {
    let toleration =
        json!({ "key": POOL_TAINT, "operator": "Equal", "value": name, "effect": "NoSchedule" });
    (json!({ NODE_POOL_LABEL: name }), json!([toleration]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_pool_taints_its_nodes_and_placement_takes_pods_there_only() {
        let pool = node_pool("burst", &["4"], "5s");
        let spec = &pool["spec"]["template"]["spec"];
        assert_eq!(spec["taints"][0]["key"], POOL_TAINT);
        assert_eq!(spec["taints"][0]["value"], "burst");
        let (selector, tolerations) = placement("burst");
        assert_eq!(selector, json!({ NODE_POOL_LABEL: "burst" }));
        let toleration = &tolerations[0];
        assert_eq!(toleration["key"], spec["taints"][0]["key"]);
        assert_eq!(toleration["value"], spec["taints"][0]["value"]);
        assert_eq!(toleration["effect"], spec["taints"][0]["effect"]);
        let cpu = spec["requirements"]
            .as_array()
            .and_then(|all| all.iter().find(|r| r["key"] == INSTANCE_CPU_LABEL).cloned());
        assert_eq!(cpu.map(|r| r["values"].clone()), Some(json!(["4"])));
        assert_eq!(spec["nodeClassRef"]["name"], NODE_CLASS);
        assert_eq!(pool["spec"]["disruption"]["consolidateAfter"], "5s");
    }
}
