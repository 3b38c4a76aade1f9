#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::test_fixtures::pool_from_yaml;
use crate::validate::validate;
use clap::{CommandFactory, Parser};
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use render_pod::config::ServeArgs;
use renderpool_runtime::logging::LogFormat;
use renderpool_sizing::parse_memory_bytes;
use std::collections::BTreeMap;

/// The children built from `spec` (a pool `docs` in namespace `docs`); the build modules' own
/// tests use it too.
pub(super) fn children(spec: &str) -> Children {
    let pool = pool_from_yaml("docs", spec);
    let plan = validate(&pool.spec).unwrap();
    build(&pool, &plan).unwrap()
}

pub(super) fn container(d: &Deployment) -> &Container {
    &d.spec.template.spec.as_ref().unwrap().containers[0]
}

pub(super) fn env_map(c: &Container) -> BTreeMap<String, String> {
    c.env
        .as_ref()
        .unwrap()
        .iter()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// `render-pod serve`'s own parser.
#[derive(Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

/// `vars` read the way the render pod reads its environment: each variable through the `serve`
/// argument whose `env` it is, by clap's own table of arguments. clap ignores variables it does
/// not know, so a name that is no argument's is an error here.
pub(super) fn parse_as_the_pod(vars: &BTreeMap<String, String>) -> Result<ServeArgs, String> {
    let command = Serve::command();
    let flag_of: BTreeMap<String, String> = command
        .get_arguments()
        .filter_map(|arg| Some((arg.get_env()?.to_str()?.to_owned(), arg.get_long()?.to_owned())))
        .collect();
    let mut argv = vec!["serve".to_string()];
    for (name, value) in vars {
        let flag = flag_of.get(name).ok_or_else(|| {
            format!("{name} is no variable render-pod serve reads ({:?})", flag_of.keys())
        })?;
        argv.push(format!("--{flag}={value}"));
    }
    Serve::try_parse_from(argv).map(|serve| serve.args).map_err(|e| e.to_string())
}

#[test]
fn the_render_pod_parses_every_variable_the_operator_writes() {
    let specs = [
        "{}",
        "slots: 3\ncpu: '4'\nmemory: 8Gi\nmemoryPerSlot: 1Gi\nqueueDepth: 9\njobDeadlineMs: 12345\n\
         drainDelayMs: 0\nmaxBodySize: 200Mi",
        "gotenberg:\n  enabled: false",
        "auth:\n  tokenSecretRef: {name: docs-token, key: token}",
    ];
    for yaml in specs {
        let spec = pool_from_yaml("docs", yaml).spec;
        let env = env_map(container(&children(yaml).render.deployment));
        let args = parse_as_the_pod(&env).unwrap_or_else(|e| panic!("{yaml}: {e}"));
        assert_eq!(args.listen, "[::]:8080".parse().unwrap());
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.slots, spec.slots.map(|s| u32::try_from(s).unwrap()));
        assert_eq!(args.memory_per_slot, parse_memory_bytes(&spec.memory_per_slot).unwrap());
        assert_eq!(args.queue_depth, usize::try_from(spec.queue_depth).unwrap());
        assert_eq!(args.job_deadline_ms, u64::try_from(spec.job_deadline_ms).unwrap());
        assert_eq!(args.grace_period_ms, args.job_deadline_ms);
        assert_eq!(args.drain_delay_ms, u64::try_from(spec.drain_delay_ms).unwrap());
        assert_eq!(args.max_body_bytes, parse_memory_bytes(&spec.max_body_size).unwrap());
        let office = spec.gotenberg.enabled;
        assert_eq!(args.gotenberg_url.is_some(), office, "{yaml}");
        assert_eq!(args.office_share_file.is_some(), office, "{yaml}");
        assert_eq!(args.auth_token_file.is_some(), spec.auth.is_some(), "{yaml}");
    }
}

#[test]
fn a_misspelt_or_refused_variable_fails_the_pods_parse() {
    let env = env_map(container(&children("{}").render.deployment));
    assert!(parse_as_the_pod(&env).is_ok());
    let mut misspelt = env.clone();
    let depth = misspelt.remove("RENDERPOD_QUEUE_DEPTH").unwrap();
    misspelt.insert("RENDERPOD_QUEUE_DEPHT".into(), depth);
    let err = parse_as_the_pod(&misspelt).unwrap_err();
    assert!(err.contains("RENDERPOD_QUEUE_DEPHT is no variable"), "{err}");
    let mut refused = env;
    refused.insert("RENDERPOD_MAX_BODY_BYTES".into(), "100MB".into());
    assert!(parse_as_the_pod(&refused).unwrap_err().contains("100MB"));
}

#[test]
fn a_default_pool_runs_its_pods_at_their_own_defaults_but_the_drain_delay() {
    let pod = Serve::try_parse_from(["serve"]).unwrap().args;
    let env = env_map(container(&children("{}").render.deployment));
    let pool = parse_as_the_pod(&env).unwrap();
    assert_eq!(pool.memory_per_slot, pod.memory_per_slot);
    assert_eq!(pool.queue_depth, pod.queue_depth);
    assert_eq!(pool.job_deadline_ms, pod.job_deadline_ms);
    assert_eq!(pool.max_body_bytes, pod.max_body_bytes);
    // Deliberately shorter: the pool's pods also get preStopSeconds (see crd/defaults.rs).
    assert_eq!((pool.drain_delay_ms, pod.drain_delay_ms), (1_000, 5_000));
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
    assert_eq!(env["RENDERPOD_LISTEN"], "[::]:8080", "both address families");
    assert_eq!(env["RENDERPOD_LOG_FORMAT"], "json");
    assert_eq!(env["RENDERPOD_MAX_BODY_BYTES"], "100Mi");
    assert_eq!(env["RENDERPOD_MEMORY_PER_SLOT"], "512Mi");
    assert_eq!(env["RENDERPOD_QUEUE_DEPTH"], "16");
    assert_eq!(env["RENDERPOD_JOB_DEADLINE_MS"], "20000");
    assert_eq!(
        env["RENDERPOD_GRACE_PERIOD_MS"], "20000",
        "in-flight jobs get their whole deadline"
    );
    assert_eq!(env["RENDERPOD_GOTENBERG_URL"], "http://docs-gotenberg:3000");
    assert_eq!(env["RENDERPOD_OFFICE_SHARE_FILE"], "/etc/renderpool/office/concurrency");
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
    let g = c.gotenberg.unwrap();
    let gotenberg_pod = g.deployment.spec.template.spec.clone().unwrap();
    // 7 preStop + 21 (Gotenberg's timeout: the 20.5 s deadline rounded up) + 5 margin
    assert_eq!(gotenberg_pod.termination_grace_period_seconds, Some(33));
    assert_eq!(
        container(&g.deployment)
            .lifecycle
            .clone()
            .unwrap()
            .pre_stop
            .unwrap()
            .sleep
            .unwrap()
            .seconds,
        7
    );
}

#[test]
fn zero_pre_stop_leaves_the_hook_out() {
    let c = children("preStopSeconds: 0");
    assert_eq!(container(&c.render.deployment).lifecycle, None);
    assert_eq!(container(&c.gotenberg.unwrap().deployment).lifecycle, None);
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
        "replicas: 2\njobDeadlineMs: 50000\ngotenberg:\n  officeConcurrency: 5\n  cpu: 2500m\n  \
         memory: 3Gi\n  restartAfter: 20\n  queueSize: 1\n  timeoutSeconds: 45",
    );
    let g = c.gotenberg.unwrap();
    assert_eq!(g.deployment.metadata.name.as_deref(), Some("docs-gotenberg"));
    assert_eq!(g.deployment.spec.replicas, Some(5));
    let ctr = container(&g.deployment);
    let limits = ctr.resources.clone().unwrap().limits.unwrap();
    assert_eq!((limits["cpu"].0.as_str(), limits["memory"].0.as_str()), ("2500m", "3Gi"));
    let args = ctr.args.clone().unwrap();
    assert_eq!(args[0], "gotenberg", "the command name comes first, as both images expect");
    for flag in [
        "--api-timeout=45s",
        "--gotenberg-graceful-shutdown-duration=45s",
        // 100Mi upload limit + 1Mi multipart framing
        "--api-body-limit=105906176",
        "--api-disable-download-from=true",
        "--webhook-disable=true",
        "--libreoffice-restart-after=20",
        "--libreoffice-max-queue-size=1",
        "--libreoffice-deny-private-ips=true",
        "--libreoffice-deny-public-ips=true",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} missing from {args:?}");
    }
    // The LibreOffice-only Gotenberg refuses unknown flags.
    assert!(!args.iter().any(|a| a.starts_with("--chromium")), "{args:?}");
    assert_eq!(g.service.spec.unwrap().ports.unwrap()[0].port, 3000);
    // 5 Gotenberg replicas over 2 render pods: 2 each, in the ConfigMap, not in the pods.
    assert_eq!(g.office_share.metadata.name.as_deref(), Some("docs-office"));
    assert_eq!(g.office_share.data.unwrap()["concurrency"], "2");
}

#[test]
fn the_libreoffice_flavor_gets_no_chromium_flag_and_the_full_one_loses_its_routes() {
    let plan = |spec: &str| {
        let pool = pool_from_yaml("docs", spec);
        let plan = validate(&pool.spec).unwrap();
        (pool.spec.gotenberg.clone(), plan.gotenberg.unwrap())
    };
    let (spec, g) = plan("{}");
    let args = gotenberg_args(&spec, &g);
    assert!(!args.iter().any(|a| a.starts_with("--chromium")), "{args:?}");
    let full = "gotenberg:\n  flavor: full\n  image: gotenberg/gotenberg:";
    let (spec, g) = plan(&format!("{full}{}", renderpool_api::versions::GOTENBERG));
    let args = gotenberg_args(&spec, &g);
    assert!(args.contains(&"--chromium-disable-routes=true".to_string()), "{args:?}");
}

#[test]
fn gotenberg_runs_read_only_with_a_disk_scratch_and_the_pools_placement() {
    let c = children(
        "nodeSelector:\n  pool: docs\npriorityClassName: batch\ntolerations:\n- key: office\n  operator: Exists",
    );
    let g = c.gotenberg.unwrap();
    let pod = g.deployment.spec.template.spec.clone().unwrap();
    let ctr = &pod.containers[0];
    assert_eq!(ctr.image, Some(renderpool_api::gotenberg::image()), "the CRD's default");
    assert_eq!(ctr.security_context.clone().unwrap().read_only_root_filesystem, Some(true));
    let tmp = pod.volumes.clone().unwrap().into_iter().find(|v| v.name == "tmp").unwrap();
    let empty_dir = tmp.empty_dir.unwrap();
    assert_eq!(empty_dir.medium, None, "disk-backed");
    // 4 x 100Mi uploads + 256Mi for LibreOffice's profile.
    assert_eq!(empty_dir.size_limit.unwrap().0, "656Mi");
    let env = env_map(ctr);
    assert_eq!((env["HOME"].as_str(), env["TMPDIR"].as_str()), ("/tmp", "/tmp"));
    assert_eq!(env["OTEL_METRICS_EXPORTER"], "none");
    assert_eq!(pod.node_selector.unwrap()["pool"], "docs");
    assert_eq!(pod.priority_class_name.as_deref(), Some("batch"));
    assert_eq!(pod.tolerations.unwrap()[0].key.as_deref(), Some("office"));
    let spread = pod.topology_spread_constraints.unwrap();
    let selector = spread[0].label_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(selector["app.kubernetes.io/component"], "gotenberg", "each kind spreads by itself");
}

#[test]
fn only_the_pools_render_pods_reach_gotenberg() {
    let g = children("{}").gotenberg.unwrap();
    let spec = g.network_policy.spec.unwrap();
    let selected = spec.pod_selector.unwrap().match_labels.unwrap();
    assert_eq!(selected, selector_labels("docs", Component::Gotenberg));
    assert_eq!(spec.policy_types.unwrap(), ["Ingress", "Egress"]);
    assert_eq!(spec.egress, None, "no egress rule: Gotenberg reaches nothing");
    let rule = &spec.ingress.unwrap()[0];
    let from = rule.from.clone().unwrap()[0].pod_selector.clone().unwrap().match_labels.unwrap();
    assert_eq!(from, selector_labels("docs", Component::Render));
    let port = &rule.ports.clone().unwrap()[0];
    assert_eq!(port.port, Some(IntOrString::Int(3000)));
}

#[test]
fn scaling_changes_the_share_but_never_the_render_pod_template() {
    let template = |spec: &str| {
        let c = children(spec);
        let share = c.gotenberg.map(|g| g.office_share.data.unwrap()["concurrency"].clone());
        (c.render.deployment.spec.template, share)
    };
    let (base, share) = template("replicas: 2\ngotenberg:\n  replicas: 4");
    for (spec, expected) in [
        ("replicas: 4\ngotenberg:\n  replicas: 4", "1"),
        ("replicas: 1\ngotenberg:\n  replicas: 4", "4"),
        ("replicas: 2\ngotenberg:\n  replicas: 9", "4"),
    ] {
        let (other, other_share) = template(spec);
        assert_eq!(other, base, "{spec}: the pod template must not follow replica counts");
        assert_eq!(other_share.as_deref(), Some(expected), "{spec}");
    }
    assert_eq!(share.as_deref(), Some("2"));
    let volume = base.spec.unwrap().volumes.unwrap().into_iter().find(|v| v.name == "office");
    assert_eq!(volume.unwrap().config_map.unwrap().name, "docs-office");
}

#[test]
fn spec_rollout_sets_both_deployments_strategy_and_never_their_templates() {
    let strategy = |d: &Deployment| {
        let rolling = d.spec.strategy.clone().unwrap().rolling_update.unwrap();
        (rolling.max_surge.unwrap(), rolling.max_unavailable.unwrap())
    };
    let surge = children("replicas: 2");
    let in_place = children("replicas: 2\nrollout:\n  maxSurge: 0\n  maxUnavailable: 1");
    for (c, expected) in [(&surge, (1, 0)), (&in_place, (0, 1))] {
        let expected = (IntOrString::Int(expected.0), IntOrString::Int(expected.1));
        assert_eq!(strategy(&c.render.deployment), expected);
        assert_eq!(strategy(&c.gotenberg.as_ref().unwrap().deployment), expected);
    }
    // A new strategy replaces no pod: the templates are the same.
    assert_eq!(surge.render.deployment.spec.template, in_place.render.deployment.spec.template);
    let gotenberg = |c: &Children| c.gotenberg.clone().unwrap().deployment.spec.template;
    assert_eq!(gotenberg(&surge), gotenberg(&in_place));
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
    assert!(!env.contains_key("RENDERPOD_OFFICE_SHARE_FILE"));
    let volumes = d.spec.template.spec.clone().unwrap().volumes.unwrap();
    assert!(volumes.iter().all(|v| v.config_map.is_none()), "no share to mount");
}

#[test]
fn autoscaling_makes_an_owned_hpa_on_the_pools_scale_with_the_saturation_metrics() {
    let c = children(
        "autoscaling:\n  minReplicas: 2\n  maxReplicas: 9\n  targetBusyPercent: 65\n  \
         targetQueueDepth: 3\n  scaleDownStabilizationSeconds: 120",
    );
    let Some(Autoscaler::Hpa(hpa)) = c.autoscaler else { panic!("no HPA") };
    assert_eq!(hpa.metadata.name.as_deref(), Some("docs"), "named exactly like the pool");
    assert_eq!(hpa.metadata.namespace.as_deref(), Some("docs"));
    let owner = &hpa.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("RenderPool", Some(true)));
    assert_eq!(
        hpa.metadata.labels.as_ref().unwrap(),
        &c.render.deployment.metadata.labels.unwrap()
    );
    let spec = hpa.spec;
    let target = &spec.scale_target_ref;
    assert_eq!(
        (target.api_version.as_deref(), target.kind.as_str(), target.name.as_str()),
        (Some("renderpool.dev/v1beta1"), "RenderPool", "docs")
    );
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 9));
    let metrics: Vec<_> = spec
        .metrics
        .unwrap()
        .into_iter()
        .map(|m| {
            let pods = m.pods.unwrap();
            (m.type_, pods.metric.name, pods.target.type_, pods.target.average_value.unwrap().0)
        })
        .collect();
    let pods = |name: &str, value: &str| {
        ("Pods".to_string(), name.to_string(), "AverageValue".to_string(), value.to_string())
    };
    assert_eq!(
        metrics,
        [pods(BUSY_SLOT_RATIO_METRIC, "650m"), pods(QUEUE_DEPTH_METRIC, "3")],
        "busy ratio as a fraction, queue depth as jobs"
    );
    assert_eq!(BUSY_SLOT_RATIO_METRIC, "renderpod_busy_slot_ratio");
    assert_eq!(QUEUE_DEPTH_METRIC, "renderpod_queue_depth");
    let behavior = spec.behavior.unwrap();
    assert_eq!(behavior.scale_down.unwrap().stabilization_window_seconds, Some(120));
    assert_eq!(behavior.scale_up, None, "scale-up keeps the HPA's defaults");
}

#[test]
fn autoscaling_defaults_to_one_metric_and_is_absent_unless_asked_for() {
    assert!(children("{}").autoscaler.is_none());
    let Some(Autoscaler::Hpa(hpa)) = children("autoscaling:\n  maxReplicas: 4").autoscaler else {
        panic!("no HPA")
    };
    let spec = hpa.spec;
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(1), 4));
    let metrics = spec.metrics.unwrap();
    assert_eq!(metrics.len(), 1, "no queue target, no queue metric");
    let target = &metrics[0].pods.as_ref().unwrap().target;
    assert_eq!(target.average_value.as_ref().unwrap().0, "700m");
    let down = spec.behavior.unwrap().scale_down.unwrap();
    assert_eq!(down.stabilization_window_seconds, Some(300));
}

#[test]
fn autoscaling_leaves_the_render_pods_and_their_replicas_to_the_spec() {
    let manual = children("replicas: 3");
    let scaled = children("replicas: 3\nautoscaling:\n  minReplicas: 5\n  maxReplicas: 8");
    // The Deployment follows spec.replicas, which the autoscaler writes through /scale; the
    // operator never sets it from minReplicas itself.
    assert_eq!(scaled.render, manual.render);
    assert_eq!(scaled.render.deployment.spec.replicas, Some(3));
}

#[test]
fn every_container_has_requests_and_no_pod_blocks_node_autoscalers() {
    let c = children("{}");
    let g = c.gotenberg.unwrap();
    for d in [&c.render.deployment, &g.deployment] {
        let template = &d.spec.template;
        let pod = template.spec.as_ref().unwrap();
        let init = pod.init_containers.iter().flatten();
        for ctr in pod.containers.iter().chain(init) {
            let requests = ctr.resources.clone().unwrap().requests.unwrap();
            assert!(
                requests.contains_key("cpu") && requests.contains_key("memory"),
                "{}",
                ctr.name
            );
        }
        // Evictable by cluster-autoscaler and never pinned against Karpenter's consolidation:
        // the drain finishes admitted work, so blocking would only keep nodes.
        let annotations = template.metadata.clone().unwrap().annotations.unwrap();
        assert_eq!(
            annotations,
            BTreeMap::from([(
                "cluster-autoscaler.kubernetes.io/safe-to-evict".to_string(),
                "true".to_string()
            )])
        );
        // Within cluster-autoscaler's default drain limit.
        assert!(pod.termination_grace_period_seconds.unwrap() <= 600);
    }
    // Asked for, the render pods (only they run long jobs) pin their nodes against both.
    let pinned = children("doNotDisrupt: true");
    let annotations =
        |d: &Deployment| d.spec.template.metadata.clone().unwrap().annotations.unwrap();
    let render = annotations(&pinned.render.deployment);
    assert_eq!(render["karpenter.sh/do-not-disrupt"], "true");
    assert_eq!(render["cluster-autoscaler.kubernetes.io/safe-to-evict"], "false");
    let gotenberg = annotations(&pinned.gotenberg.unwrap().deployment);
    assert_eq!(gotenberg["cluster-autoscaler.kubernetes.io/safe-to-evict"], "true");
    for pdb in [&c.render.pdb, &g.pdb] {
        assert_eq!(pdb.spec.clone().unwrap().max_unavailable, Some(IntOrString::Int(1)));
    }
}

#[test]
fn the_longest_accepted_drain_fits_and_gotenberg_never_outlasts_the_render_pods() {
    // 120 preStop + 120 drain + 355 deadline + 5 margin = 600 s, the most allowed.
    let c = children("preStopSeconds: 120\ndrainDelayMs: 120000\njobDeadlineMs: 355000");
    let grace =
        |d: &Deployment| d.spec.template.spec.clone().unwrap().termination_grace_period_seconds;
    assert_eq!(grace(&c.render.deployment), Some(600));
    assert!(grace(&c.gotenberg.unwrap().deployment).unwrap() <= 600);
}

#[test]
fn a_pool_never_stored_cannot_own_children() {
    let mut pool = pool_from_yaml("docs", "{}");
    pool.metadata.uid = None;
    let plan = validate(&pool.spec).unwrap();
    assert!(build(&pool, &plan).is_err());
}
