//! The Helm chart: lint, template, values schema, and an install whose RBAC is what the
//! operator really gets.

use std::time::Duration;

use renderpool_testkit::wait;
use renderpool_tests::chart::{self, documents, template};
use renderpool_tests::cluster::{Cluster, run};
use renderpool_tests::operator::{ChartInstall, OperatorProcess, RELEASE, RELEASE_NAMESPACE};
use renderpool_tests::repo_root;

#[test]
fn chart_lints_strictly() {
    let out = run(Cluster::shared().helm().args(["lint", "--strict"]).arg(chart::path())).unwrap();
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn template_renders_a_least_privilege_restricted_operator() {
    let rendered = template(&[]).unwrap();

    let crd = documents(&rendered, "CustomResourceDefinition");
    assert_eq!(crd.len(), 1, "the CRD is templated by default");
    assert!(crd[0].contains("helm.sh/resource-policy: keep"), "CRD must survive uninstall");
    let generated = std::fs::read_to_string(repo_root().join("crds/renderpool.yaml")).unwrap();
    assert!(generated.contains("name: renderpools.renderpool.dev"));
    assert!(crd[0].contains("name: renderpools.renderpool.dev"));

    let deployment = documents(&rendered, "Deployment");
    assert_eq!(deployment.len(), 1);
    for needle in [
        "runAsNonRoot: true",
        "readOnlyRootFilesystem: true",
        "allowPrivilegeEscalation: false",
        "type: RuntimeDefault",
        "- ALL",
        "args: [run, --lease-name, \"renderpool-operator\"]",
        "path: /healthz",
        "path: /readyz",
        "value: \"[::]:8080\"",
        "topologyKey: kubernetes.io/hostname",
    ] {
        assert!(deployment[0].contains(needle), "operator Deployment lacks {needle:?}");
    }
    assert!(!deployment[0].contains("WATCH_NAMESPACES"), "cluster-wide by default");
    let pdb = documents(&rendered, "PodDisruptionBudget");
    assert_eq!(pdb.len(), 1, "two replicas get a PDB");
    assert!(pdb[0].contains("maxUnavailable: 1"), "{}", pdb[0]);
    let single = template(&["--set", "replicaCount=1"]).unwrap();
    assert!(
        documents(&single, "PodDisruptionBudget").is_empty(),
        "one replica: no PDB to block drains"
    );

    let cluster_role = documents(&rendered, "ClusterRole");
    assert_eq!(cluster_role.len(), 1);
    for forbidden in ["secrets", "\"*\"", "- '*'", "pods/", "escalate", "bind", "update", " get"] {
        assert!(!cluster_role[0].contains(forbidden), "ClusterRole grants {forbidden}");
    }
    // What status reads it may only list and watch.
    for read_only in ["resources: [pods]", "resources: [replicasets]"] {
        let verbs = cluster_role[0].split(read_only).nth(1).and_then(|rest| rest.lines().nth(1));
        assert_eq!(verbs.map(str::trim), Some("verbs: [list, watch]"), "{read_only}");
    }
    let role = documents(&rendered, "Role");
    assert_eq!(role.len(), 1);
    assert!(role[0].contains("resourceNames: [\"renderpool-operator\"]"), "{}", role[0]);
    assert!(!role[0].contains("update"), "{}", role[0]);

    assert!(documents(&rendered, "ServiceMonitor").is_empty(), "ServiceMonitor is opt-in");
    assert!(documents(&rendered, "PodMonitor").is_empty(), "PodMonitor is opt-in");
    let with_monitor = template(&["--set", "metrics.serviceMonitor.enabled=true"]).unwrap();
    assert_eq!(documents(&with_monitor, "ServiceMonitor").len(), 1);
    let with_pods = template(&["--set", "renderPods.podMonitor.enabled=true"]).unwrap();
    let monitor = documents(&with_pods, "PodMonitor");
    assert_eq!(monitor.len(), 1);
    for needle in
        ["any: true", "app.kubernetes.io/component: render", "port: http", "path: /metrics"]
    {
        assert!(monitor[0].contains(needle), "PodMonitor lacks {needle:?}:\n{}", monitor[0]);
    }
    let without_crd = template(&["--set", "crds.install=false"]).unwrap();
    assert!(documents(&without_crd, "CustomResourceDefinition").is_empty());

    // `helm test`'s pod runs the operator's own image (it has no shell: its probe command),
    // placed like the operator; tests/tests/product.rs runs it for real.
    let placed = template(&["--set-json", r#"nodeSelector={"disk":"ssd"}"#]).unwrap();
    let hook = documents(&placed, "Pod");
    assert_eq!(hook.len(), 1);
    let image =
        format!("image: \"ghcr.io/renderpool/renderpool-operator:{}\"", env!("CARGO_PKG_VERSION"));
    for needle in [
        "helm.sh/hook: test",
        &image,
        "- renderpool-operator\n        - probe\n",
        "http://rp-renderpool-operator-metrics:8080/readyz",
        "disk: ssd",
        "readOnlyRootFilesystem: true",
    ] {
        assert!(hook[0].contains(needle), "helm test pod lacks {needle:?}:\n{}", hook[0]);
    }
}

#[test]
fn namespace_scoped_template_has_roles_in_each_namespace_and_no_cluster_rights() {
    let rendered = template(&[
        "--set",
        "watchNamespaces={docs,previews}",
        "--set",
        "renderPods.podMonitor.enabled=true",
    ])
    .unwrap();
    assert!(documents(&rendered, "ClusterRole").is_empty());
    assert!(documents(&rendered, "ClusterRoleBinding").is_empty());
    let roles = documents(&rendered, "Role");
    // One per watched namespace, and the leader-election Role.
    assert_eq!(roles.len(), 3);
    for namespace in ["docs", "previews"] {
        assert!(
            roles.iter().any(|r| r.contains(&format!("namespace: {namespace}\n"))
                && r.contains("renderpools/status")),
            "no reconciler Role in {namespace}"
        );
        assert!(
            documents(&rendered, "RoleBinding")
                .iter()
                .any(|b| b.contains(&format!("namespace: {namespace}\n"))),
            "no RoleBinding in {namespace}"
        );
    }
    let deployment = documents(&rendered, "Deployment");
    assert!(deployment[0].contains("value: \"docs,previews\""), "{}", deployment[0]);
    let monitor = documents(&rendered, "PodMonitor");
    assert!(
        monitor[0].contains("matchNames:") && monitor[0].contains("- previews"),
        "{}",
        monitor[0]
    );
}

#[test]
fn values_schema_refuses_bad_values() {
    for (value, complaint) in [
        ("replicaCount=-1", "replicaCount"),
        ("logFormat=xml", "logFormat"),
        ("leaderElection.leaseName=Not_A_Name", "leaseName"),
        ("metrics.port=70000", "port"),
        ("watchNamespaces={Not_A_Namespace}", "watchNamespaces"),
        ("renderPods.podMonitor.interval=soon", "interval"),
        ("unknownKey=1", "unknownKey"),
    ] {
        let err = template(&["--set", value]).unwrap_err();
        assert!(err.contains(complaint), "{value}: {err}");
    }
}

#[test]
fn template_validates_against_the_live_api_server() {
    // The CRD itself is left out: the installed release owns it, and its install proves it.
    let out = template(&["--validate", "--set", "crds.install=false"]).unwrap();
    assert!(out.contains("kind: Deployment"));
}

#[tokio::test]
async fn installed_chart_grants_the_operator_exactly_what_it_needs() {
    let install = ChartInstall::shared().await;
    let can = |args: &[&str]| -> String {
        run(install.kubectl().args(["auth", "can-i"]).args(args))
            .unwrap_or_else(|err| err.to_string())
    };
    // kubectl auth can-i prints "yes"/"no" and exits non-zero on "no".
    for allowed in [
        vec!["watch", "renderpools.renderpool.dev", "-A"],
        vec!["patch", "renderpools.renderpool.dev", "--subresource=status", "-n", "default"],
        vec!["create", "deployments.apps", "-n", "default"],
        vec!["patch", "deployments.apps", "-n", "default"],
        vec!["watch", "configmaps", "-A"],
        vec!["patch", "networkpolicies.networking.k8s.io", "-n", "default"],
        vec!["delete", "poddisruptionbudgets.policy", "-n", "default"],
        vec!["watch", "horizontalpodautoscalers.autoscaling", "-A"],
        vec!["watch", "replicasets.apps", "-A"],
        vec!["watch", "pods", "-A"],
        vec!["patch", "horizontalpodautoscalers.autoscaling", "-n", "default"],
        vec!["delete", "horizontalpodautoscalers.autoscaling", "-n", "default"],
        vec!["create", "events.events.k8s.io", "-n", "default"],
        vec!["patch", "leases.coordination.k8s.io/renderpool-operator", "-n", RELEASE_NAMESPACE],
    ] {
        assert!(can(&allowed).starts_with("yes"), "should be allowed: {allowed:?}");
    }
    for denied in [
        vec!["list", "secrets", "-A"],
        vec!["get", "secrets", "-n", "default"],
        vec!["create", "pods/exec", "-n", "default"],
        vec!["get", "pods", "-n", "default"],
        vec!["create", "pods", "-n", "default"],
        vec!["delete", "pods", "-n", "default"],
        vec!["patch", "replicasets.apps", "-n", "default"],
        // Server-side apply is a patch, every read comes from a watch: no update, no get.
        vec!["update", "deployments.apps", "-n", "default"],
        vec!["get", "deployments.apps", "-n", "default"],
        vec!["update", "horizontalpodautoscalers.autoscaling", "-n", "default"],
        vec!["get", "horizontalpodautoscalers.autoscaling", "-n", "default"],
        vec!["update", "renderpools.renderpool.dev", "-n", "default"],
        vec!["update", "renderpools.renderpool.dev", "--subresource=status", "-n", "default"],
        vec!["update", "leases.coordination.k8s.io/renderpool-operator", "-n", RELEASE_NAMESPACE],
        vec!["patch", "leases.coordination.k8s.io/someone-else", "-n", RELEASE_NAMESPACE],
        vec!["create", "clusterroles.rbac.authorization.k8s.io"],
    ] {
        assert!(!can(&denied).starts_with("yes"), "should be denied: {denied:?}");
    }
}

#[tokio::test]
async fn the_operators_two_replicas_spread_across_nodes_behind_a_pdb() {
    ChartInstall::shared().await;
    let cluster = Cluster::shared();
    let selector =
        format!("app.kubernetes.io/instance={RELEASE},app.kubernetes.io/name=renderpool-operator");
    let nodes = run(cluster
        .kubectl()
        .args(["get", "pods", "-n", RELEASE_NAMESPACE, "-l", &selector])
        .args(["-o", "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}"]))
    .unwrap();
    let mut nodes: Vec<&str> = nodes.lines().collect();
    assert_eq!(nodes.len(), 2, "{nodes:?}");
    nodes.dedup();
    assert_eq!(nodes.len(), 2, "both operator pods on one node: {nodes:?}");
    let pdb = run(cluster
        .kubectl()
        .args(["get", "pdb", RELEASE, "-n", RELEASE_NAMESPACE])
        .args(["-o", "jsonpath={.spec.maxUnavailable} {.status.expectedPods}"]))
    .unwrap();
    assert_eq!(pdb, "1 2");
}

#[tokio::test]
async fn example_renderpool_becomes_ready_under_the_charts_rbac() {
    let cluster = Cluster::shared();
    let operator = OperatorProcess::shared().await;
    cluster.ensure_nodes("example", 3, "4", "8Gi").await;
    let ns = cluster.namespace("example").await;
    let example = repo_root().join("examples/renderpool.yaml");
    run(cluster.kubectl().args(["apply", "-n", ns.name(), "-f"]).arg(&example)).unwrap();
    let ready = wait::try_until("the example pool Ready", Duration::from_secs(120), || async {
        let out = run(cluster.kubectl().args([
            "get",
            "renderpool",
            "previews",
            "-n",
            ns.name(),
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.slotsPerPod} {.status.totalSlots}",
        ]))
        .map_err(|err| err.to_string())?;
        if out.starts_with("True") { Ok(out) } else { Err(out) }
    })
    .await;
    let ready = ready.unwrap_or_else(|t| panic!("{t}; operator log:\n{}", operator.log()));
    // 2.2 CPU / 2Gi at 512Mi per slot: cpu allows 2, memory (2048-296)/512 = 3 -> 2 slots x 3 pods.
    assert_eq!(ready, "True 2 6");
    assert!(
        !operator.log().contains("forbidden"),
        "the chart's RBAC refused the operator something:\n{}",
        operator.log()
    );
}
