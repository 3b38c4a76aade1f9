//! Pure builders: a validated RenderPool becomes the objects that run it. No API calls here.

mod auth;
mod autoscaler;
mod clients;
mod common;
mod gotenberg;
mod jobs;
mod office;
mod render;

pub use autoscaler::{
    Autoscaler, BUSY_SLOT_RATIO_METRIC, KEDA_POLLING_SECONDS, QUEUE_DEPTH_METRIC,
};
pub use common::{Component, child_name, office_share_name, selector_labels, selector_string};
pub use gotenberg::{GOTENBERG_PORT, gotenberg_args};
pub use office::{OFFICE_MOUNT, SHARE_KEY};
pub use render::RENDER_CONTAINER;

use crate::crd::RenderPool;
use crate::validate::PoolPlan;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Resource;

/// One component's objects: a Deployment, its Service and its PodDisruptionBudget.
#[derive(Debug, Clone, PartialEq)]
pub struct ComponentObjects {
    /// Which component these run.
    pub component: Component,
    /// The pods.
    pub deployment: Deployment,
    /// Stable address of the pods.
    pub service: Service,
    /// Keeps voluntary evictions to one pod at a time.
    pub pdb: PodDisruptionBudget,
}

/// The Gotenberg pool and what the render pods need to use it.
#[derive(Debug, Clone, PartialEq)]
pub struct GotenbergObjects {
    /// `<pool>-office`: each render pod's share of the conversions, read at run time.
    pub office_share: ConfigMap,
    /// The Gotenberg pods.
    pub deployment: Deployment,
    /// Their address for the render pods.
    pub service: Service,
    /// One voluntary eviction at a time.
    pub pdb: PodDisruptionBudget,
    /// Only the pool's render pods reach Gotenberg.
    pub network_policy: NetworkPolicy,
}

/// Everything one RenderPool owns.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    /// The render pods.
    pub render: ComponentObjects,
    /// The Gotenberg pool, absent when disabled.
    pub gotenberg: Option<GotenbergObjects>,
    /// The render pods' autoscaler (named like the pool), absent without `spec.autoscaling`.
    pub autoscaler: Option<Autoscaler>,
    /// `<pool>-render`, admitting only `spec.clients` and `spec.scrapers`; absent without
    /// `spec.clients`.
    pub render_policy: Option<NetworkPolicy>,
}

/// A RenderPool that cannot own children (it has not been stored by the API server).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RenderPool has no {0}; only objects read from the API server can own children")]
pub struct MissingMetadata(pub &'static str);

/// Builds the children of `pool` from its validated `plan`.
pub fn build(pool: &RenderPool, plan: &PoolPlan) -> Result<Children, MissingMetadata> {
    let owner = pool.controller_owner_ref(&()).ok_or(MissingMetadata("name or uid"))?;
    let namespace = pool.metadata.namespace.clone().ok_or(MissingMetadata("namespace"))?;
    let name = pool.metadata.name.clone().ok_or(MissingMetadata("name"))?;
    let ctx = common::Meta { pool: name, namespace, owner };
    let render = render::objects(&ctx, &pool.spec, plan);
    let gotenberg = plan.gotenberg.map(|g| gotenberg::objects(&ctx, &pool.spec, &g, plan.rollout));
    let autoscaler = pool.spec.autoscaling.as_ref().map(|a| {
        let backlog = a.backlog.as_ref();
        match (backlog, &pool.spec.jobs) {
            (Some(backlog), Some(jobs)) => Autoscaler::Keda(autoscaler::scaled_object(
                &ctx,
                a,
                backlog,
                &jobs.queue,
                plan.slots.slots,
            )),
            // Validation refuses a backlog trigger without jobs and jobs without one.
            _ => Autoscaler::Hpa(autoscaler::autoscaler(&ctx, a)),
        }
    });
    let render_policy = clients::render_policy(&ctx, &pool.spec);
    Ok(Children { render, gotenberg, autoscaler, render_policy })
}

#[cfg(test)]
mod tests;
