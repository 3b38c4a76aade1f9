//! The render pods: Deployment, Service and PDB, with the env the render pod reads.

use super::ComponentObjects;
use super::common::{
    self, Component, Meta, Scratch, container_security, env, guaranteed, http_port, http_probe,
    place, pod_annotations, pod_security, pre_stop, selector_labels, strategy, tmp_volume,
};
use super::gotenberg::GOTENBERG_PORT;
use super::{auth, jobs, office};
use crate::crd::RenderPoolSpec;
use crate::validate::PoolPlan;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use renderpool_api::render_pod::{self as pod, env as var};

/// Port the render pod listens on (its listen address) and the Service exposes.
pub const RENDER_PORT: i32 = pod::PORT as i32;
/// Name of the render pod's container.
pub const RENDER_CONTAINER: &str = "render-pod";
/// The distroless "nonroot" user the render image runs as.
const RENDER_UID: i64 = 65532;

pub(super) fn objects(meta: &Meta, spec: &RenderPoolSpec, plan: &PoolPlan) -> ComponentObjects {
    ComponentObjects {
        component: Component::Render,
        deployment: deployment(meta, spec, plan),
        service: meta.service(Component::Render, RENDER_PORT),
        pdb: meta.pdb(Component::Render),
    }
}

/// Environment of `render-pod serve`, by the names the pod's parser reads (a unit test parses
/// it with that parser). Nothing here may depend on a replica count: a change would replace
/// every pod on a scale.
fn render_env(meta: &Meta, spec: &RenderPoolSpec, plan: &PoolPlan) -> Vec<EnvVar> {
    // All interfaces of both families: IPv6 single-stack clusters too (the pod falls back to
    // 0.0.0.0 where the kernel has no IPv6).
    let mut vars = vec![env(var::LISTEN, format!("[::]:{RENDER_PORT}"))];
    vars.push(env(var::LOG_FORMAT, "json"));
    // Only an explicit count is passed: otherwise the pod derives the same figure from its
    // cgroup with the same formula, and the two cannot drift.
    if let Some(slots) = spec.slots {
        vars.push(env(var::SLOTS, slots.to_string()));
    }
    vars.push(env(var::MEMORY_PER_SLOT, spec.memory_per_slot.clone()));
    vars.push(env(var::QUEUE_DEPTH, spec.queue_depth.to_string()));
    vars.push(env(var::JOB_DEADLINE_MS, spec.job_deadline_ms.to_string()));
    vars.push(env(var::DRAIN_DELAY_MS, spec.drain_delay_ms.to_string()));
    // In-flight jobs get their whole deadline to finish after SIGTERM; the pod's termination
    // grace period below covers it.
    vars.push(env(var::GRACE_PERIOD_MS, spec.job_deadline_ms.to_string()));
    vars.push(env(var::MAX_BODY_BYTES, spec.max_body_size.clone()));
    if plan.gotenberg.is_some() {
        let service = common::child_name(&meta.pool, Component::Gotenberg);
        vars.push(env(var::GOTENBERG_URL, format!("http://{service}:{GOTENBERG_PORT}")));
        vars.push(env(var::OFFICE_SHARE_FILE, office::share_file()));
    }
    vars
}

fn deployment(meta: &Meta, spec: &RenderPoolSpec, plan: &PoolPlan) -> Deployment {
    let (tmp, tmp_mount) = tmp_volume("64Mi".into(), Scratch::Memory);
    let mut volumes = vec![tmp];
    let mut mounts = vec![tmp_mount];
    let mut vars = render_env(meta, spec, plan);
    if plan.gotenberg.is_some() {
        let (share, share_mount) = office::share_volume(&meta.pool);
        volumes.push(share);
        mounts.push(share_mount);
    }
    if let Some(spec_auth) = &spec.auth {
        let (token, token_mount, token_var) = auth::token(spec_auth);
        volumes.push(token);
        mounts.push(token_mount);
        vars.push(token_var);
    }
    if let Some(spec_jobs) = &spec.jobs {
        let parts = jobs::parts(spec_jobs);
        vars.extend(parts.vars);
        volumes.extend(parts.volumes);
        mounts.extend(parts.mounts);
    }
    let container = Container {
        name: RENDER_CONTAINER.into(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some(spec.image_pull_policy.as_str().into()),
        args: Some(vec!["serve".into()]),
        env: Some(vars),
        ports: Some(vec![http_port(RENDER_PORT)]),
        resources: Some(guaranteed(&spec.cpu, &spec.memory)),
        liveness_probe: Some(http_probe("/healthz", 10, 3)),
        readiness_probe: Some(http_probe("/readyz", 5, 1)),
        lifecycle: pre_stop(spec.pre_stop_seconds),
        security_context: Some(container_security(true)),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let mut pod = PodSpec {
        containers: vec![container],
        volumes: Some(volumes),
        security_context: Some(pod_security(RENDER_UID)),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        // preStop, drain, one full job and a margin (validation keeps it within node
        // autoscalers' drain limit), so a job that started just before shutdown still finishes.
        termination_grace_period_seconds: Some(plan.grace_period_seconds),
        ..PodSpec::default()
    };
    place(&mut pod, spec, &meta.pool, Component::Render);
    Deployment {
        metadata: meta.object(Component::Render),
        spec: DeploymentSpec {
            replicas: Some(plan.replicas),
            selector: LabelSelector {
                match_labels: Some(selector_labels(&meta.pool, Component::Render)),
                ..LabelSelector::default()
            },
            strategy: Some(strategy(plan.rollout)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(meta.labels(Component::Render)),
                    annotations: Some(pod_annotations(spec.do_not_disrupt)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}
