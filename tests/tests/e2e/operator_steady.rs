//! A pool at rest costs nothing: a reconcile with nothing to change writes no child, and a
//! reconcile at rest writes nothing at all. The judge is the API server's audit log of the
//! operator's own writes in the pool's namespace: the controller-manager also writes these
//! objects (their status), so their resourceVersions cannot tell, and the operator's process-wide
//! write counter is shared with every other test's pools.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::Api;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::{audit, run};
use renderpool_tests::operator::service_account_user;
use serde_json::json;

use super::operator_support::{is_settled, kubectl_apply, pool_manifest, setup, wait_pool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_pool_is_left_untouched() {
    let (cluster, operator) = setup().await;
    let ns = cluster.namespace("op-steady").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let user = service_account_user();
    let writes = || cluster.audited_writes(&user, ns.name());
    let spec = json!({"replicas": 3, "cpu": "2", "memory": "2Gi", "gotenberg": {"replicas": 2}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("calm", spec)).unwrap();
    wait_pool(&pools, "calm", Duration::from_secs(90), is_settled).await;
    // The audit log sees the operator's writes: every child it applied.
    let made = writes();
    let children: BTreeSet<(&str, &str)> = made
        .iter()
        .filter(|w| w.verb == "patch" && w.resource != "renderpools" && w.resource != "events")
        .map(|w| (w.resource.as_str(), w.name.as_str()))
        .collect();
    assert_eq!(
        children.len(),
        8,
        "two Deployments, Services and PDBs, a ConfigMap, a NetworkPolicy: {made:?}"
    );

    // The same pool said another way: a new generation to reconcile, nothing to change.
    let same =
        json!({"replicas": 3, "cpu": "2", "memory": "2Gi", "gotenberg": {"officeConcurrency": 2}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("calm", same)).unwrap();
    wait_pool(&pools, "calm", Duration::from_secs(60), |p| {
        is_settled(p) && p.metadata.generation == Some(2)
    })
    .await;
    let since: Vec<audit::Write> = writes().split_off(made.len());
    // Its status says it saw generation 2; that is the one write.
    let status = |w: &audit::Write| w.resource == "renderpools" && w.subresource == "status";
    assert!(since.iter().any(status), "no status write for generation 2: {since:?}");
    // The conditions' changes also go out as Events.
    let child = |w: &&audit::Write| !status(w) && w.resource != "events";
    let children: Vec<_> = since.iter().filter(child).collect();
    assert!(children.is_empty(), "the reconcile wrote more than its status: {children:?}");

    // A change to a child that is not the operator's (an annotation of someone else's)
    // triggers a reconcile of the pool, which writes no child. It may still rewrite the status
    // once: right after a rollout a condition's transition time can move (a known defect, see
    // docs/operator.md), so the status write (and its Event) is reported, not refused.
    let before = writes().len();
    let log_before = operator.log().len();
    let kubectl = |args: &[&str]| run(cluster.kubectl().args(args).args(["-n", ns.name()]));
    kubectl(&["annotate", "deployment/calm-render", "example.com/touched=yes"]).unwrap();
    let trigger = format!("related object updated: Deployment.v1.apps/calm-render.{}", ns.name());
    let reconciled = wait::try_until(
        "the operator's reconcile of the touched pool",
        Duration::from_secs(30),
        || async {
            let log = operator.log();
            let after = log.get(log_before..).unwrap_or_default();
            let line = after.lines().find(|l| l.contains(&trigger) && l.contains("reconciled"));
            line.map(str::to_string).ok_or_else(|| after.lines().count())
        },
    )
    .await;
    let line =
        reconciled.unwrap_or_else(|t| panic!("{t} (new log lines); log:\n{}", operator.log()));
    assert!(line.contains("unchanged") || line.contains("\"status\""), "{line}");
    if !line.contains("unchanged") {
        eprintln!("the reconcile at rest rewrote the status: {line}");
    }
    let at_rest: Vec<audit::Write> =
        writes().split_off(before).into_iter().filter(|w| child(&w)).collect();
    assert!(at_rest.is_empty(), "a child written at rest: {at_rest:?}");
}
