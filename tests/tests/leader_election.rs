//! Two operator processes (the chart's ServiceAccount, one Lease): only the holder reconciles;
//! when it is killed outright (no release), the other takes the lease once it expires and
//! carries on. A separate test binary, so it has its own control plane and its own Lease.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "e2e/operator_support.rs"]
mod operator_support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use operator_support::{is_settled, kubectl_apply, pool_manifest, wait_pool};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::{metrics, wait};
use renderpool_tests::cluster::Cluster;
use renderpool_tests::operator::{ChartInstall, OperatorProcess, RELEASE_NAMESPACE};
use serde_json::json;

const LEASE: &str = "renderpool-operator";

async fn leading(op: &OperatorProcess) -> bool {
    metrics::sum(&op.metrics().await, "renderpool_operator_leader", &[]) == 1.0
}

/// Reconciles finished: the duration histogram's count, a series from the start (the
/// by-outcome counter has none until the first reconcile).
async fn reconciles(op: &OperatorProcess) -> f64 {
    let text = op.metrics().await;
    metrics::sum(&text, "renderpool_operator_reconcile_duration_seconds_count", &[])
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    leases.get_opt(LEASE).await.ok().flatten()?.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_reconciles_and_the_standby_takes_over() {
    let install = ChartInstall::shared().await;
    let cluster = Cluster::shared();
    cluster.ensure_nodes("op-node", 2, "16", "64Gi").await;
    let client = cluster.client().await;
    let ns = cluster.namespace("op-leader").await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let ops = [OperatorProcess::start(install).await, OperatorProcess::start(install).await];

    // Exactly one of the two leads, and the Lease names it.
    let first = wait::until("one operator of two leading", Duration::from_secs(60), || async {
        let (a, b) = (leading(&ops[0]).await, leading(&ops[1]).await);
        if a != b { Ok(if a { 0 } else { 1 }) } else { Err((a, b)) }
    })
    .await;
    let (leader, standby) = (&ops[first], &ops[1 - first]);
    assert_eq!(holder(&client).await.as_deref(), Some(leader.identity()));

    let spec = json!({"replicas": 2, "cpu": "1", "memory": "1Gi", "gotenberg": {"enabled": false}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("first", spec.clone())).unwrap();
    wait_pool(&pools, "first", Duration::from_secs(90), is_settled).await;
    assert!(reconciles(leader).await > 0.0, "the leader reconciled");
    assert_eq!(reconciles(standby).await, 0.0, "the standby never reconciles");
    assert!(!leading(standby).await);

    // SIGKILL: the lease is not released, so the standby waits for it to expire.
    leader.kill();
    wait::try_until("the standby leading", Duration::from_secs(60), || leading(standby))
        .await
        .unwrap_or_else(|t| panic!("{t}; its log:\n{}", standby.log()));
    assert_eq!(holder(&client).await.as_deref(), Some(standby.identity()));
    kubectl_apply(cluster, ns.name(), &pool_manifest("second", spec)).unwrap();
    wait_pool(&pools, "second", Duration::from_secs(90), is_settled).await;
    assert!(reconciles(standby).await > 0.0, "the new leader reconciles");
}

/// A leader whose watches cannot fill its caches (here: the chart's rights less NetworkPolicies)
/// is never ready and reconciles nothing; it must not sit on the lease. It releases it and exits
/// non-zero, naming the cache, so the kubelet restarts it and a standby can lead meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_caches_cannot_fill_releases_the_lease_and_exits_naming_them() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{
        ClusterRole, PolicyRule, Role, RoleBinding, RoleRef, Subject,
    };
    use kube::api::{ObjectMeta, PostParams};
    use renderpool_tests::operator::RELEASE;

    ChartInstall::shared().await;
    let cluster = Cluster::shared();
    let client = cluster.client().await;
    let ns = cluster.namespace("op-blind").await;
    let meta = |name: &str| ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.name().into()),
        ..Default::default()
    };
    let chart_role = Api::<ClusterRole>::all(client.clone()).get(RELEASE).await.unwrap();
    let mut rules: Vec<PolicyRule> = chart_role.rules.unwrap_or_default();
    let before = rules.len();
    rules.retain(|rule| !rule.resources.iter().flatten().any(|r| r == "networkpolicies"));
    assert_eq!(rules.len() + 1, before, "the chart grants NetworkPolicies in one rule");
    rules.push(PolicyRule {
        api_groups: Some(vec!["coordination.k8s.io".into()]),
        resources: Some(vec!["leases".into()]),
        verbs: vec!["create".into(), "get".into(), "patch".into()],
        ..Default::default()
    });
    let post = PostParams::default();
    let name = "blind-operator";
    Api::<ServiceAccount>::namespaced(client.clone(), ns.name())
        .create(&post, &ServiceAccount { metadata: meta(name), ..Default::default() })
        .await
        .unwrap();
    Api::<Role>::namespaced(client.clone(), ns.name())
        .create(&post, &Role { metadata: meta(name), rules: Some(rules) })
        .await
        .unwrap();
    let binding = RoleBinding {
        metadata: meta(name),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
    };
    Api::<RoleBinding>::namespaced(client.clone(), ns.name())
        .create(&post, &binding)
        .await
        .unwrap();
    let token = renderpool_tests::cluster::run(cluster.kubectl().args([
        "create",
        "token",
        name,
        "--namespace",
        ns.name(),
    ]))
    .unwrap();
    let kubeconfig = cluster.kubeconfig_for_token(name, token.trim());

    let op = OperatorProcess::start_as(
        &kubeconfig,
        &[ns.name().to_string()],
        &["--lease-namespace", ns.name(), "--lease-name", name, "--sync-timeout-seconds", "10"],
    )
    .await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let held = wait::try_until(
        "the blind operator holding its lease",
        Duration::from_secs(60),
        || async {
            let lease = leases.get_opt(name).await.ok().flatten();
            let holder = lease.and_then(|l| l.spec?.holder_identity);
            holder.as_deref() == Some(op.identity())
        },
    )
    .await;
    held.unwrap_or_else(|t| panic!("{t}; its log:\n{}", op.log()));
    let status = wait::until("the blind operator to exit", Duration::from_secs(60), || async {
        op.exit_status().ok_or("running")
    })
    .await;
    let log = op.log();
    assert!(!status.success(), "{status}; its log:\n{log}");
    let expected = format!("caches not synced after 10s: NetworkPolicy in {}", ns.name());
    assert!(log.contains(&expected), "no `{expected}` in its log:\n{log}");
    let lease = leases.get(name).await.unwrap();
    let holder = lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "the lease is released; its log:\n{log}");
}
