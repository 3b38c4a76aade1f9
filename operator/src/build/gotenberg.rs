//! The Gotenberg pool: bounded replicas with limits, flags that shut every door a document
//! could open (downloads, webhooks, outbound fetches, Chromium), and a NetworkPolicy that lets
//! only the pool's render pods in.

use super::common::{
    Component, Meta, Scratch, container_security, env, guaranteed, http_port, http_probe,
    mebibytes, place, pod_annotations, pod_security, pre_stop, selector_labels, strategy,
    tmp_volume,
};
use super::{GotenbergObjects, office};
use crate::crd::{GotenbergFlavor, GotenbergSpec, RenderPoolSpec, RolloutSpec};
use crate::validate::GotenbergPlan;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Gotenberg's API port (--api-port) and the Service port the render pods call.
pub const GOTENBERG_PORT: i32 = renderpool_api::gotenberg::PORT as i32;
/// The `gotenberg` user of the Gotenberg images.
const GOTENBERG_UID: i64 = 1001;
/// Extra seconds past preStop + one conversion before the kubelet sends SIGKILL.
const GRACE_MARGIN_SECONDS: i64 = 5;

pub(super) fn objects(
    meta: &Meta,
    spec: &RenderPoolSpec,
    plan: &GotenbergPlan,
    rollout: RolloutSpec,
) -> GotenbergObjects {
    GotenbergObjects {
        office_share: office::share(meta, plan.office_per_pod),
        deployment: deployment(meta, spec, plan, rollout),
        service: meta.service(Component::Gotenberg, GOTENBERG_PORT),
        pdb: meta.pdb(Component::Gotenberg),
        network_policy: network_policy(meta),
    }
}

/// The container's arguments, starting with the command name (`gotenberg` in both images, after
/// their tini entrypoint): LibreOffice restarts and queue bound from the spec, timeout and body
/// limit from the render pods' deadline and upload limit, a graceful shutdown that fits one
/// conversion, and downloadFrom, webhooks, the PDF-engine routes and LibreOffice's own outbound
/// fetches turned off. The full image's Chromium routes are turned off too; the LibreOffice-only
/// binary knows no Chromium flag and refuses unknown flags, so it gets none.
pub fn gotenberg_args(spec: &GotenbergSpec, plan: &GotenbergPlan) -> Vec<String> {
    let timeout = plan.timeout_seconds;
    let mut args = vec![
        "gotenberg".into(),
        format!("--api-port={GOTENBERG_PORT}"),
        format!("--api-timeout={timeout}s"),
        format!("--api-body-limit={}", plan.body_limit_bytes),
        "--api-disable-download-from=true".into(),
        "--webhook-disable=true".into(),
        "--pdfengines-disable-routes=true".into(),
        format!("--gotenberg-graceful-shutdown-duration={timeout}s"),
        "--log-std-format=json".into(),
        "--libreoffice-auto-start=true".into(),
        format!("--libreoffice-restart-after={}", spec.restart_after),
        format!("--libreoffice-max-queue-size={}", spec.queue_size),
        // Documents can link images and content by URL; LibreOffice fetches them through
        // Gotenberg's filtering proxy, which these two turn into "never".
        "--libreoffice-deny-private-ips=true".into(),
        "--libreoffice-deny-public-ips=true".into(),
    ];
    if spec.flavor == GotenbergFlavor::Full {
        args.push("--chromium-disable-routes=true".into());
    }
    args
}

/// Environment for a read-only root: every home, config, cache and temp folder points into the
/// size-limited /tmp, and OpenTelemetry export (on by default, to nowhere here) is off.
fn gotenberg_env() -> Vec<EnvVar> {
    vec![
        env("HOME", "/tmp"),
        env("TMPDIR", "/tmp"),
        env("XDG_CONFIG_HOME", "/tmp/.config"),
        env("XDG_CACHE_HOME", "/tmp/.cache"),
        env("OTEL_TRACES_EXPORTER", "none"),
        env("OTEL_METRICS_EXPORTER", "none"),
        env("OTEL_LOGS_EXPORTER", "none"),
    ]
}

fn deployment(
    meta: &Meta,
    spec: &RenderPoolSpec,
    plan: &GotenbergPlan,
    rollout: RolloutSpec,
) -> Deployment {
    let g = &spec.gotenberg;
    // On disk, not tmpfs: uploads, PDFs and LibreOffice's profile must not count against the
    // memory limit LibreOffice itself needs.
    let (tmp, tmp_mount) = tmp_volume(mebibytes(plan.scratch_bytes), Scratch::Disk);
    let container = Container {
        name: "gotenberg".into(),
        image: Some(g.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().into()),
        args: Some(gotenberg_args(g, plan)),
        env: Some(gotenberg_env()),
        ports: Some(vec![http_port(GOTENBERG_PORT)]),
        resources: Some(guaranteed(&g.cpu, &g.memory)),
        // LibreOffice takes seconds to start: liveness is lenient, readiness gates traffic.
        liveness_probe: Some(http_probe("/health", 10, 6)),
        readiness_probe: Some(http_probe("/health", 5, 2)),
        lifecycle: pre_stop(spec.pre_stop_seconds),
        security_context: Some(container_security(true)),
        volume_mounts: Some(vec![tmp_mount]),
        ..Container::default()
    };
    let mut pod = PodSpec {
        containers: vec![container],
        volumes: Some(vec![tmp]),
        security_context: Some(pod_security(GOTENBERG_UID)),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        // preStop, then Gotenberg's graceful shutdown (one conversion at its timeout).
        termination_grace_period_seconds: Some(
            spec.pre_stop_seconds.max(0) + i64::from(plan.timeout_seconds) + GRACE_MARGIN_SECONDS,
        ),
        ..PodSpec::default()
    };
    place(&mut pod, spec, &meta.pool, Component::Gotenberg);
    Deployment {
        metadata: meta.object(Component::Gotenberg),
        spec: DeploymentSpec {
            replicas: Some(plan.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(&meta.pool, Component::Gotenberg)),
                ..LabelSelector::default()
            },
            strategy: Some(strategy(rollout)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(meta.labels(Component::Gotenberg)),
                    // Conversions are short: their drain finishes them.
                    annotations: Some(pod_annotations(false)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

/// Only the pool's render pods reach Gotenberg's port, and Gotenberg reaches nothing (Egress
/// listed with no rule): a conversion needs no network.
fn network_policy(meta: &Meta) -> NetworkPolicy {
    let pods = |component| LabelSelector {
        match_labels: Some(selector_labels(&meta.pool, component)),
        ..LabelSelector::default()
    };
    NetworkPolicy {
        metadata: meta.object(Component::Gotenberg),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(pods(Component::Gotenberg)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(pods(Component::Render)),
                    ..NetworkPolicyPeer::default()
                }]),
                ports: Some(vec![NetworkPolicyPort {
                    port: Some(IntOrString::Int(GOTENBERG_PORT)),
                    protocol: Some("TCP".into()),
                    ..NetworkPolicyPort::default()
                }]),
            }]),
            egress: None,
        }),
    }
}
