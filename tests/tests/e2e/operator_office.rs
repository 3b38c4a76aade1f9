//! The Office side of a pool: scaling either pool changes the render pods' share in the
//! `<pool>-office` ConfigMap and never their template (one ReplicaSet throughout); Gotenberg runs
//! read-only with the flags of its flavour and the pool's placement, behind a NetworkPolicy; and
//! turning it off removes all of it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::ListParams;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::{Cluster, run};
use serde_json::json;

use super::operator_support::{
    NODE_PREFIX, container_env, is_settled, kubectl_apply, pool_manifest, setup, wait_pool,
};

const WAIT: Duration = Duration::from_secs(90);

/// The share the render pods read, from the ConfigMap.
async fn share(config_maps: &Api<ConfigMap>, pool: &str) -> Option<String> {
    let cm = config_maps.get_opt(&format!("{pool}-office")).await.ok()??;
    cm.data?.get("concurrency").cloned()
}

/// The render ReplicaSets of `pool`, as (name, uid).
async fn render_sets(api: &Api<ReplicaSet>, pool: &str) -> Vec<(String, String)> {
    let labels = format!("app.kubernetes.io/instance={pool},app.kubernetes.io/component=render");
    let sets = api.list(&ListParams::default().labels(&labels)).await.unwrap();
    sets.items
        .into_iter()
        .map(|rs| (rs.metadata.name.unwrap_or_default(), rs.metadata.uid.unwrap_or_default()))
        .collect()
}

fn patch_pool(cluster: &Cluster, ns: &str, pool: &str, patch: serde_json::Value) {
    run(cluster
        .kubectl()
        .args(["patch", "renderpool", pool, "-n", ns, "--type=merge", "-p"])
        .arg(patch.to_string()))
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_moves_the_office_share_without_rolling_the_render_pods() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-office-scale").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let spec = json!({"replicas": 2, "cpu": "1", "memory": "1Gi",
                      "gotenberg": {"replicas": 4, "cpu": "500m", "memory": "1Gi"}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("scaled", spec)).unwrap();
    wait_pool(&pools, "scaled", WAIT, is_settled).await;
    // 4 Gotenberg replicas over 2 render pods: 2 conversions each.
    assert_eq!(share(&config_maps, "scaled").await.as_deref(), Some("2"));
    let sets = render_sets(&replica_sets, "scaled").await;
    assert_eq!(sets.len(), 1, "{sets:?}");
    let render = deployments.get("scaled-render").await.unwrap();
    let env = container_env(&render);
    assert_eq!(env["RENDERPOD_OFFICE_SHARE_FILE"], "/etc/renderpool/office/concurrency");
    assert!(!env.contains_key("RENDERPOD_OFFICE_CONCURRENCY"), "no replica-dependent env");

    // (render replicas, Gotenberg replicas, the share each render pod gets)
    for (render, gotenberg, expected) in
        [(4, 4, "1"), (1, 4, "4"), (1, 6, "6"), (3, 6, "2"), (8, 6, "1")]
    {
        if render != pools.get("scaled").await.unwrap().spec.replicas {
            run(cluster
                .kubectl()
                .args(["scale", "renderpool/scaled", "-n", ns.name()])
                .arg(format!("--replicas={render}")))
            .unwrap();
        } else {
            patch_pool(
                cluster,
                ns.name(),
                "scaled",
                json!({"spec": {"gotenberg": {"replicas": gotenberg}}}),
            );
        }
        let pool = wait_pool(&pools, "scaled", WAIT, |p| {
            is_settled(p)
                && p.spec.replicas == render
                && p.status.as_ref().is_some_and(|s| s.ready_replicas == render)
                && p.status.as_ref().and_then(|s| s.gotenberg_ready_replicas) == Some(gotenberg)
        })
        .await;
        let what =
            format!("a share of {expected}: {render} render pods over {gotenberg} Gotenberg");
        wait::until(&what, WAIT, || async {
            let seen = share(&config_maps, "scaled").await;
            if seen.as_deref() == Some(expected) { Ok(()) } else { Err(seen) }
        })
        .await;
        let status = pool.status.unwrap();
        assert_eq!(
            status.office_concurrency_per_pod.map(|n| n.to_string()).as_deref(),
            Some(expected)
        );
        assert_eq!(
            render_sets(&replica_sets, "scaled").await,
            sets,
            "the render pods were not replaced"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gotenberg_is_fenced_placed_and_flagged_for_its_flavour_and_goes_when_disabled() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-office-pool").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns.name());
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    let services: Api<Service> = Api::namespaced(client.clone(), ns.name());
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let node = format!("{NODE_PREFIX}-1");
    let spec = json!({"replicas": 2, "cpu": "1", "memory": "1Gi", "jobDeadlineMs": 20000,
                      "nodeSelector": {"kubernetes.io/hostname": node},
                      "gotenberg": {"replicas": 2, "cpu": "500m", "memory": "1Gi"}});
    kubectl_apply(cluster, ns.name(), &pool_manifest("fenced", spec.clone())).unwrap();
    wait_pool(&pools, "fenced", WAIT, is_settled).await;

    // The pool's placement holds for both kinds of pods.
    let all = pods
        .list(&ListParams::default().labels("app.kubernetes.io/instance=fenced"))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 4);
    for pod in &all.items {
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(node.as_str()));
    }

    // The default flavour: the LibreOffice-only image and no Chromium flag at all.
    let gotenberg = deployments.get("fenced-gotenberg").await.unwrap();
    let ctr = &gotenberg.spec.template.spec.as_ref().unwrap().containers[0];
    assert_eq!(ctr.image, Some(renderpool_api::gotenberg::image()), "the CRD's default");
    let args = ctr.args.clone().unwrap();
    for flag in ["--api-timeout=20s", "--api-disable-download-from=true", "--webhook-disable=true"]
    {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }
    assert!(!args.iter().any(|a| a.starts_with("--chromium")), "{args:?}");
    assert_eq!(ctr.security_context.clone().unwrap().read_only_root_filesystem, Some(true));
    assert!(ctr.lifecycle.clone().unwrap().pre_stop.is_some());

    // Only the pool's render pods reach Gotenberg's port.
    let policy = policies.get("fenced-gotenberg").await.unwrap().spec.unwrap();
    let peer = policy.ingress.unwrap()[0].from.clone().unwrap()[0].pod_selector.clone().unwrap();
    assert_eq!(peer.match_labels.unwrap()["app.kubernetes.io/component"], "render");
    assert_eq!(policy.policy_types.unwrap(), ["Ingress", "Egress"]);

    // The official image's flavour: its Chromium routes are turned off.
    let mut full = spec.clone();
    full["gotenberg"]["flavor"] = json!("full");
    let official = format!("gotenberg/gotenberg:{}", renderpool_api::versions::GOTENBERG);
    full["gotenberg"]["image"] = json!(official);
    kubectl_apply(cluster, ns.name(), &pool_manifest("fenced", full)).unwrap();
    wait::until("Chromium's routes off in the full flavour", WAIT, || async {
        let d = deployments.get("fenced-gotenberg").await.ok()?;
        let args = d.spec.template.spec?.containers[0].args.clone()?;
        args.contains(&"--chromium-disable-routes=true".to_string()).then_some(())
    })
    .await;

    // Turned off: the Gotenberg pool, its NetworkPolicy and the share are gone.
    let mut off = spec;
    off["gotenberg"] = json!({"enabled": false});
    kubectl_apply(cluster, ns.name(), &pool_manifest("fenced", off)).unwrap();
    wait::until("the Gotenberg children and the share deleted", WAIT, || async {
        let none = deployments.get_opt("fenced-gotenberg").await.ok()?.is_none()
            && services.get_opt("fenced-gotenberg").await.ok()?.is_none()
            && policies.get_opt("fenced-gotenberg").await.ok()?.is_none()
            && config_maps.get_opt("fenced-office").await.ok()?.is_none();
        none.then_some(())
    })
    .await;
    let pool = wait_pool(&pools, "fenced", WAIT, is_settled).await;
    let render = deployments.get("fenced-render").await.unwrap();
    let env = container_env(&render);
    assert!(
        !env.contains_key("RENDERPOD_GOTENBERG_URL")
            && !env.contains_key("RENDERPOD_OFFICE_SHARE_FILE")
    );
    assert_eq!(pool.status.unwrap().gotenberg_replicas, Some(0));
}
