#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::test_fixtures::pool_from_yaml;
use crate::validate::validate;
use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeMap;

fn children(spec: &str) -> Children {
    let pool = pool_from_yaml("docs", spec);
    let plan = validate(&pool.spec).unwrap();
    build(&pool, &plan).unwrap()
}

fn container(d: &Deployment) -> &Container {
    &d.spec.template.spec.as_ref().unwrap().containers[0]
}

fn env_map(c: &Container) -> BTreeMap<String, String> {
    c.env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn render_pod_gets_guaranteed_resources_env_and_probes() {
    let c = children("replicas: 2\ncpu: '3'\nmemory: 4Gi\nqueueDepth: 16\njobDeadlineMs: 20000");
    let d = &c.render.deployment;
    assert_eq!(d.metadata.name.as_deref(), Some("docs-render"));
    assert_eq!(d.spec.replicas, Some(2));
    let ctr = container(d);
    let res = ctr.resources.as_ref().unwrap();
    assert_eq!(res.requests, res.limits);
    assert_eq!(res.limits.as_ref().unwrap()["cpu"].0, "3");
    assert_eq!(res.limits.as_ref().unwrap()["memory"].0, "4Gi");
    let env = env_map(ctr);
    assert_eq!(env["RENDERPOD_LISTEN"], "0.0.0.0:8080");
    assert_eq!(env["RENDERPOD_MEMORY_PER_SLOT"], "512Mi");
    assert_eq!(env["RENDERPOD_QUEUE_DEPTH"], "16");
    assert_eq!(env["RENDERPOD_JOB_DEADLINE_MS"], "20000");
    assert_eq!(
        env["RENDERPOD_GRACE_PERIOD_MS"], "20000",
        "in-flight jobs get their whole deadline"
    );
    assert_eq!(env["RENDERPOD_GOTENBERG_URL"], "http://docs-gotenberg:3000");
    // 1 Gotenberg replica shared by 2 render pods: max(1, 1 / 2) = 1
    assert_eq!(env["RENDERPOD_OFFICE_CONCURRENCY"], "1");
    assert!(!env.contains_key("RENDERPOD_SLOTS"), "slots are derived in the pod unless overridden");
    let probe_path =
        |p: &Option<k8s_openapi::api::core::v1::Probe>| p.clone().unwrap().http_get.unwrap().path;
    assert_eq!(probe_path(&ctr.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(probe_path(&ctr.readiness_probe).as_deref(), Some("/readyz"));
    assert_eq!(ctr.ports.as_ref().unwrap()[0].name.as_deref(), Some("http"));
}

#[test]
fn shutdown_outlasts_prestop_drain_and_one_job() {
    let c = children("jobDeadlineMs: 20500\npreStopSeconds: 7\ndrainDelayMs: 1500");
    let pod = c.render.deployment.spec.template.spec.clone().unwrap();
    // 7 preStop + 2 drain (1.5 s rounded up) + 21 deadline (20.5 s rounded up) + 5 margin
    assert_eq!(pod.termination_grace_period_seconds, Some(35));
    let pre_stop = container(&c.render.deployment).lifecycle.clone().unwrap().pre_stop.unwrap();
    assert_eq!(pre_stop.sleep.unwrap().seconds, 7);
}

#[test]
fn render_pod_is_restricted_spread_and_evictable() {
    let c = children("nodeSelector:\n  pool: docs\npriorityClassName: batch");
    let template = &c.render.deployment.spec.template;
    let pod = template.spec.clone().unwrap();
    let sc = container(&c.render.deployment).security_context.clone().unwrap();
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
    let psc = pod.security_context.unwrap();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let spread = pod.topology_spread_constraints.unwrap();
    assert_eq!(spread[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(pod.node_selector.unwrap()["pool"], "docs");
    assert_eq!(pod.priority_class_name.as_deref(), Some("batch"));
    let annotations = template.metadata.clone().unwrap().annotations.unwrap();
    assert_eq!(annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true");
}

#[test]
fn explicit_slots_are_passed_to_the_pod() {
    let c = children("slots: 5");
    assert_eq!(env_map(container(&c.render.deployment))["RENDERPOD_SLOTS"], "5");
}

#[test]
fn gotenberg_is_bounded_and_flags_follow_its_limits() {
    let c = children(
        "replicas: 2\ngotenberg:\n  officeConcurrency: 5\n  cpu: 2500m\n  memory: 3Gi\n  \
         restartAfter: 20\n  queueSize: 1\n  timeoutSeconds: 45",
    );
    let g = c.gotenberg.unwrap();
    assert_eq!(g.deployment.metadata.name.as_deref(), Some("docs-gotenberg"));
    assert_eq!(g.deployment.spec.replicas, Some(5));
    let ctr = container(&g.deployment);
    let limits = ctr.resources.clone().unwrap().limits.unwrap();
    assert_eq!((limits["cpu"].0.as_str(), limits["memory"].0.as_str()), ("2500m", "3Gi"));
    let args = ctr.args.clone().unwrap();
    for flag in
        ["--api-timeout=45s", "--libreoffice-restart-after=20", "--libreoffice-max-queue-size=1"]
    {
        assert!(args.iter().any(|a| a == flag), "{flag} missing from {args:?}");
    }
    // The LibreOffice-only Gotenberg refuses unknown flags.
    assert!(!args.iter().any(|a| a.starts_with("--chromium")), "{args:?}");
    assert_eq!(g.service.spec.unwrap().ports.unwrap()[0].port, 3000);
}

#[test]
fn children_are_owned_labelled_and_selected_consistently() {
    let c = children("gotenberg:\n  enabled: false");
    assert!(c.gotenberg.is_none());
    let d = &c.render.deployment;
    let owner = &d.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("RenderPool", Some(true)));
    let selector = d.spec.selector.match_labels.clone().unwrap();
    let pod_labels = d.spec.template.metadata.clone().unwrap().labels.unwrap();
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
    assert_eq!(c.render.service.spec.clone().unwrap().selector.unwrap(), selector);
    assert_eq!(
        c.render.pdb.spec.clone().unwrap().selector.unwrap().match_labels.unwrap(),
        selector
    );
    assert_eq!(
        selector_string("docs", Component::Render),
        "app.kubernetes.io/component=render,app.kubernetes.io/instance=docs,\
         app.kubernetes.io/name=renderpool"
    );
    let env = env_map(container(d));
    assert!(!env.contains_key("RENDERPOD_GOTENBERG_URL"));
}

#[test]
fn a_pool_never_stored_cannot_own_children() {
    let mut pool = pool_from_yaml("docs", "{}");
    pool.metadata.uid = None;
    let plan = validate(&pool.spec).unwrap();
    assert!(build(&pool, &plan).is_err());
}
