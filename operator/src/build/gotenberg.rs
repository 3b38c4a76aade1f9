//! The Gotenberg pool: bounded replicas with limits, and the flags derived from them.

use super::ComponentObjects;
use super::common::{
    Component, Meta, container_security, guaranteed, http_port, http_probe, pod_annotations,
    pod_security, selector_labels,
};
use crate::crd::GotenbergSpec;
use crate::validate::GotenbergPlan;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

/// Gotenberg's API port (--api-port) and the Service port the render pods call.
pub const GOTENBERG_PORT: i32 = 3000;
/// The `gotenberg` user of the official image.
const GOTENBERG_UID: i64 = 1001;

pub(super) fn objects(meta: &Meta, spec: &GotenbergSpec, plan: &GotenbergPlan) -> ComponentObjects {
    ComponentObjects {
        component: Component::Gotenberg,
        deployment: deployment(meta, spec, plan),
        service: meta.service(Component::Gotenberg, GOTENBERG_PORT),
        pdb: meta.pdb(Component::Gotenberg),
    }
}

/// The command line: LibreOffice restarts and queue bound from the spec, shutdown long enough for
/// a request at its timeout. No Chromium flag: the LibreOffice-only command refuses it.
pub fn gotenberg_args(spec: &GotenbergSpec, _plan: &GotenbergPlan) -> Vec<String> {
    vec![
        "gotenberg".into(),
        format!("--api-port={GOTENBERG_PORT}"),
        format!("--api-timeout={}s", spec.timeout_seconds),
        format!("--gotenberg-graceful-shutdown-duration={}s", spec.timeout_seconds),
        "--libreoffice-auto-start=true".into(),
        format!("--libreoffice-restart-after={}", spec.restart_after),
        format!("--libreoffice-max-queue-size={}", spec.queue_size),
    ]
}

fn deployment(meta: &Meta, spec: &GotenbergSpec, plan: &GotenbergPlan) -> Deployment {
    let container = Container {
        name: "gotenberg".into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(gotenberg_args(spec, plan)),
        ports: Some(vec![http_port(GOTENBERG_PORT)]),
        resources: Some(guaranteed(&spec.cpu, &spec.memory)),
        // LibreOffice takes seconds to start: liveness is lenient, readiness gates traffic.
        liveness_probe: Some(http_probe("/health", 10, 6)),
        readiness_probe: Some(http_probe("/health", 5, 2)),
        // LibreOffice writes its profile and scratch files on disk, so the root stays writable
        // (no memory-backed /tmp that would count against the memory limit).
        security_context: Some(container_security(false)),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        security_context: Some(pod_security(GOTENBERG_UID)),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(i64::from(spec.timeout_seconds) + 10),
        ..PodSpec::default()
    };
    Deployment {
        metadata: meta.object(Component::Gotenberg),
        spec: DeploymentSpec {
            replicas: Some(plan.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(&meta.pool, Component::Gotenberg)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(meta.labels(Component::Gotenberg)),
                    annotations: Some(pod_annotations()),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}
