//! The API versions on the real API server: a pool created as the deprecated `v1alpha1` is read
//! and updated as `v1beta1` (what the operator uses) and back, each seeing the other's change;
//! etcd holds it as `v1beta1` whichever version wrote it; `kubectl get` shows the same columns
//! under both names, and `v1alpha1` comes with its deprecation warning.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use renderpool_operator::crd::RenderPool;
use renderpool_tests::cluster::{Cluster, storage};
use serde_json::json;

use super::operator_support::{is_settled, setup, wait_deployment, wait_pool};

const WAIT: Duration = Duration::from_secs(90);
const ALPHA: &str = "renderpool.dev/v1alpha1";
const BETA: &str = "renderpool.dev/v1beta1";
const DEPRECATION: &str = "Warning: renderpool.dev/v1alpha1 RenderPool is deprecated; use renderpool.dev/v1beta1: the \
     same fields";

/// `kubectl` with `args` (and `input` on stdin): its stdout and stderr; panics if it fails.
fn kubectl(cluster: &Cluster, args: &[&str], input: &str) -> (String, String) {
    let mut child = cluster
        .kubectl()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) =
        (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert!(out.status.success(), "kubectl {args:?}: {stderr}");
    (stdout, stderr)
}

/// The API of pool objects as `api_version` serves them.
fn pools_as(client: &kube::Client, namespace: &str, api_version: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, "RenderPool"),
        "renderpools",
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1alpha1_pool_is_read_and_updated_as_v1beta1_and_back_and_stored_as_v1beta1() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-versions").await;
    let client = cluster.client().await;
    let (alpha, beta) = (pools_as(&client, ns.name(), ALPHA), pools_as(&client, ns.name(), BETA));
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());

    // Created as v1alpha1, the way a manifest written for 0.1.0 is applied.
    let manifest = json!({
        "apiVersion": ALPHA, "kind": "RenderPool", "metadata": {"name": "legacy"},
        "spec": {"replicas": 2, "cpu": "2", "memory": "2Gi", "queueDepth": 16,
                 "gotenberg": {"enabled": false}}
    });
    let (_, warned) =
        kubectl(cluster, &["apply", "-n", ns.name(), "-f", "-"], &manifest.to_string());
    assert!(warned.contains(DEPRECATION), "{warned}");

    // Read as v1beta1, by the operator's own type and by the API: the same object, reconciled.
    let pool = wait_pool(&pools, "legacy", WAIT, is_settled).await;
    assert_eq!((pool.spec.replicas, pool.spec.queue_depth), (2, 16));
    let as_beta = beta.get("legacy").await.unwrap();
    assert_eq!(as_beta.types.as_ref().unwrap().api_version, BETA);
    assert_eq!(as_beta.data["status"]["slotsPerPod"], 2, "{}", as_beta.data);

    // Updated as v1beta1, read back as v1alpha1.
    let patch = Patch::Merge(json!({"spec": {"queueDepth": 32}}));
    beta.patch("legacy", &PatchParams::default(), &patch).await.unwrap();
    let as_alpha = alpha.get("legacy").await.unwrap();
    assert_eq!(as_alpha.types.as_ref().unwrap().api_version, ALPHA);
    assert_eq!(as_alpha.data["spec"]["queueDepth"], 32);
    assert_eq!(as_alpha.data["status"]["selector"], as_beta.data["status"]["selector"]);

    // Updated as v1alpha1 (kubectl, with its warning), read as v1beta1, and acted on.
    let (_, warned) = kubectl(
        cluster,
        &["patch", "renderpools.v1alpha1.renderpool.dev", "legacy", "-n", ns.name()]
            .into_iter()
            .chain(["--type=merge", "-p", r#"{"spec":{"replicas":3}}"#])
            .collect::<Vec<_>>(),
        "",
    );
    assert!(warned.contains(DEPRECATION), "{warned}");
    assert_eq!(pools.get("legacy").await.unwrap().spec.replicas, 3);
    wait_deployment(&deployments, "legacy-render", WAIT, |d| d.spec.replicas == Some(3)).await;
    let pool = wait_pool(&pools, "legacy", WAIT, is_settled).await;
    assert_eq!((pool.spec.replicas, pool.spec.queue_depth), (3, 32));

    // In etcd it is v1beta1, though the last write came through v1alpha1.
    let key = format!("/registry/renderpool.dev/renderpools/{}/legacy", ns.name());
    let stored = storage::stored_json(cluster, &key).await.unwrap().expect("the pool in etcd");
    assert_eq!(stored["apiVersion"], BETA);
    assert_eq!(
        (&stored["spec"]["replicas"], &stored["spec"]["queueDepth"]),
        (&3.into(), &32.into())
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = crds.get("renderpools.renderpool.dev").await.unwrap();
    assert_eq!(crd.status.unwrap().stored_versions, Some(vec!["v1beta1".to_string()]));

    // kubectl get shows the same row under both names (the preferred one is v1beta1).
    let row = |resource: &str| {
        let (table, _) = kubectl(cluster, &["get", resource, "legacy", "-n", ns.name()], "");
        let mut lines = table.lines().map(|l| l.split_whitespace().collect::<Vec<_>>());
        let (header, row) = (lines.next().unwrap(), lines.next().unwrap());
        // AGE last, and the same pool read twice may have aged a second.
        (header[..header.len() - 1].join(" "), row[..row.len() - 1].join(" "))
    };
    let (header, short) = row("rp");
    assert_eq!(
        header,
        "NAME REPLICAS READY SLOTS/POD READY SLOTS TOTAL SLOTS OFFICE STATUS LAST ERROR"
    );
    assert!(short.starts_with("legacy 3 3 2 6 6 0 PoolReady"), "{short}");
    assert_eq!(row("renderpools.v1alpha1.renderpool.dev"), (header, short.clone()));
    assert_eq!(row("renderpools.v1beta1.renderpool.dev").1, short);
    eprintln!(
        "a pool created as v1alpha1, updated as v1beta1 and as v1alpha1, stored as {}: {short}",
        stored["apiVersion"]
    );
}
