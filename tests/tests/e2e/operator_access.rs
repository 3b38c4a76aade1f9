//! `spec.clients`, `spec.scrapers` and `spec.auth` on the real API server: an open pool says so
//! (`Restricted=False`, `OpenToAllPods`) and has no policy; with clients the operator keeps the
//! NetworkPolicy `<pool>-render` as the spec says (the API server stores and so accepts it) and
//! mounts the token's Secret into the render pods (`Restricted=True`, `ClientsOnly`); with the
//! clients removed the policy goes and the pool is open again; a NetworkPolicy a person made
//! under the name is left as it was (`NameConflict`). Bad shapes are refused by the CRD.
//!
//! The local control plane runs no network plugin, so nothing enforces the policy here: this
//! checks the objects against the spec (docs/operator.md says what enforces them).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::Api;
use kube::api::DeleteParams;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use serde_json::{Value, json};

use super::operator_support::{
    condition, container_env, kubectl_apply, pool_manifest, setup, wait_deployment, wait_pool,
};

const WAIT: Duration = Duration::from_secs(90);

/// A small pool without Gotenberg, with `access` (clients, scrapers, auth) merged in.
fn spec(access: Value) -> Value {
    let mut spec = json!({"replicas": 1, "cpu": "1", "memory": "1Gi",
                          "gotenberg": {"enabled": false}});
    for (key, value) in access.as_object().unwrap() {
        spec[key] = value.clone();
    }
    spec
}

/// Restricted with `status` and `reason`, decided for the pool's current generation.
fn restricted(status: &'static str, reason: &'static str) -> impl Fn(&RenderPool) -> bool {
    move |pool| {
        let current =
            pool.status.as_ref().and_then(|s| s.observed_generation) == pool.metadata.generation;
        current && condition(pool, "Restricted").is_some_and(|(s, r, _)| s == status && r == reason)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_become_the_render_policy_and_restricted_follows_them() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-access").await;
    let client = cluster.client().await;
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());
    let policies: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns.name());
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns.name());
    let apply = |access: Value| {
        kubectl_apply(cluster, ns.name(), &pool_manifest("guarded", spec(access))).unwrap();
    };

    // Open: said in status, and no policy.
    apply(json!({}));
    let pool = wait_pool(&pools, "guarded", WAIT, restricted("False", "OpenToAllPods")).await;
    let (_, _, message) = condition(&pool, "Restricted").unwrap();
    assert!(message.contains("set spec.clients"), "{message}");
    assert!(policies.get_opt("guarded-render").await.unwrap().is_none());

    // The token's Secret, as a person makes it.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "guarded-token"},
                        "stringData": {"bearer": "a-token"}});
    kubectl_apply(cluster, ns.name(), &secret.to_string()).unwrap();

    let clients = json!([
        {"podSelector": {"matchLabels": {"app": "web"}}},
        {"namespaceSelector": {"matchLabels": {"team": "billing"}},
         "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                               "values": ["api"]}]}}
    ]);
    let scrapers = json!([
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]);
    apply(json!({"clients": clients, "scrapers": scrapers,
                 "auth": {"tokenSecretRef": {"name": "guarded-token", "key": "bearer"}}}));
    let pool = wait_pool(&pools, "guarded", WAIT, restricted("True", "ClientsOnly")).await;
    let (_, _, message) = condition(&pool, "Restricted").unwrap();
    assert!(message.starts_with("NetworkPolicy guarded-render admits only"), "{message}");

    // The policy as stored: owned by the pool, selecting the render pods, admitting each list
    // as written to the render port alone.
    let policy = policies.get("guarded-render").await.unwrap();
    let owner = &policy.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("RenderPool", Some(true)));
    assert_eq!(Some(&owner.uid), pool.metadata.uid.as_ref());
    let render = wait_deployment(&deployments, "guarded-render", WAIT, |d| {
        container_env(d).contains_key("RENDERPOD_AUTH_TOKEN_FILE")
    })
    .await;
    let stored = serde_json::to_value(policy.spec.unwrap()).unwrap();
    assert_eq!(stored["podSelector"], serde_json::to_value(&render.spec.selector).unwrap());
    assert_eq!(stored["policyTypes"], json!(["Ingress"]));
    assert_eq!(stored.get("egress"), None);
    let port = json!([{"port": 8080, "protocol": "TCP"}]);
    assert_eq!(
        stored["ingress"],
        json!([{"from": clients, "ports": port}, {"from": scrapers, "ports": port}])
    );

    // The token: the Secret's key mounted read-only as the file the pod is told of.
    assert_eq!(container_env(&render)["RENDERPOD_AUTH_TOKEN_FILE"], "/etc/renderpool/auth/token");
    let pod = render.spec.template.spec.as_ref().unwrap();
    let volume = pod.volumes.iter().flatten().find(|v| v.name == "auth-token").unwrap();
    let source = volume.secret.as_ref().unwrap();
    assert_eq!(source.secret_name.as_deref(), Some("guarded-token"));
    assert_eq!(source.items.as_ref().unwrap()[0].key, "bearer");
    let mounts = pod.containers[0].volume_mounts.as_ref().unwrap();
    let mount = mounts.iter().find(|m| m.name == "auth-token").unwrap();
    assert_eq!(mount.read_only, Some(true));

    // Deleted by hand: the watch brings it back.
    let old_uid = policies.get("guarded-render").await.unwrap().metadata.uid;
    policies.delete("guarded-render", &DeleteParams::default()).await.unwrap();
    wait::until("the deleted policy recreated", WAIT, || async {
        policies
            .get_opt("guarded-render")
            .await
            .ok()
            .flatten()
            .filter(|p| p.metadata.uid != old_uid)
    })
    .await;

    // Clients removed: the policy goes and the pool says it is open again.
    apply(json!({}));
    wait_pool(&pools, "guarded", WAIT, restricted("False", "OpenToAllPods")).await;
    wait::until("the render policy deleted", WAIT, || async {
        match policies.get_opt("guarded-render").await {
            Ok(None) => Ok(()),
            other => Err(other.map(|p| p.map(|p| p.metadata.uid))),
        }
    })
    .await;
    let render = wait_deployment(&deployments, "guarded-render", WAIT, |d| {
        !container_env(d).contains_key("RENDERPOD_AUTH_TOKEN_FILE")
    })
    .await;
    let volumes = render.spec.template.spec.unwrap().volumes.unwrap_or_default();
    assert!(volumes.iter().all(|v| v.secret.is_none()), "{volumes:?}");

    // A person's policy under the name: never applied over, and the pool says why.
    let theirs = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                        "metadata": {"name": "guarded-render"},
                        "spec": {"podSelector": {"matchLabels": {"app": "theirs"}},
                                 "policyTypes": ["Ingress"]}});
    kubectl_apply(cluster, ns.name(), &theirs.to_string()).unwrap();
    let before = serde_json::to_value(policies.get("guarded-render").await.unwrap()).unwrap();
    apply(json!({"clients": [{"podSelector": {}}]}));
    let pool = wait_pool(&pools, "guarded", WAIT, restricted("False", "NameConflict")).await;
    let (_, _, message) = condition(&pool, "Restricted").unwrap();
    assert!(message.starts_with("NetworkPolicy guarded-render already exists"), "{message}");
    let after = serde_json::to_value(policies.get("guarded-render").await.unwrap()).unwrap();
    assert_eq!(after, before, "their policy is left exactly as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_refuses_clients_that_would_not_restrict() {
    let (cluster, _operator) = setup().await;
    let ns = cluster.namespace("op-access-refused").await;
    for (access, says) in [
        (json!({"clients": []}), "spec.clients"),
        (json!({"clients": [{}]}), "give podSelector, namespaceSelector or both"),
        (json!({"scrapers": [{"podSelector": {}}]}), "spec.scrapers needs spec.clients"),
        (
            json!({"clients": [{"podSelector": {}}],
                   "auth": {"tokenSecretRef": {"name": "Not_A_Name", "key": "token"}}}),
            "spec.auth.tokenSecretRef.name",
        ),
    ] {
        let refused =
            kubectl_apply(cluster, ns.name(), &pool_manifest("refused", spec(access.clone())))
                .expect_err(&access.to_string());
        assert!(refused.contains(says), "{access}: {refused}");
    }
}
