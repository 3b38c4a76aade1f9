//! Applying children by server-side apply, skipping those already converged.
//!
//! Every reconcile compares each built child with the controller's cached copy
//! ([`crate::converge`]): a child that was edited, scaled, mutated or deleted is applied again
//! (with force, so this manager takes its fields back), one that matches is left alone, so a
//! steady state sends no writes.
//!
//! A child is written only where its name is free or the object under it is this pool's
//! ([`crate::ownership`]): someone else's object is left untouched and reported as a conflict.
//! The caches only hold objects with the operator's label, so a name missing from them is looked
//! up on the API server before anything is created under it.

use crate::build::{
    Autoscaler, Children, Component, KEDA_POLLING_SECONDS, child_name, office_share_name,
};
use crate::converge::converged;
use crate::keda::{self, ScaledObject};
use crate::metrics::Metrics;
use crate::ownership::{Claim, claim, owned_by};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;

/// What a child object is to the generic apply and delete below: a namespaced kind with a
/// static type that serializes for server-side apply.
trait Child:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + Debug
{
}

impl<K> Child for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
{
}

/// The one field manager of everything the operator writes.
pub const MANAGER: &str = "renderpool-operator";

/// Reflector caches of the children, filled by the controller's watches.
#[derive(Clone)]
pub struct Stores {
    /// Deployments managed by the operator.
    pub deployments: Store<Deployment>,
    /// Services managed by the operator.
    pub services: Store<Service>,
    /// PodDisruptionBudgets managed by the operator.
    pub pdbs: Store<PodDisruptionBudget>,
    /// The Office share ConfigMaps.
    pub config_maps: Store<ConfigMap>,
    /// The Gotenberg and render NetworkPolicies.
    pub network_policies: Store<NetworkPolicy>,
    /// The render pods' HorizontalPodAutoscalers.
    pub autoscalers: Store<HorizontalPodAutoscaler>,
}

/// A failed write, with what was being written (in the pool's namespace, which the reconcile's
/// span names).
#[derive(Debug, thiserror::Error)]
#[error("{action} {kind} {name}: {source}")]
pub struct ApplyError {
    /// apply, delete or look up.
    pub action: &'static str,
    /// Object kind.
    pub kind: String,
    /// Object namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// The client error.
    #[source]
    pub source: kube::Error,
}

/// Where the children are written: the client, its caches and the write counter.
pub struct Target<'a> {
    /// The API client.
    pub client: &'a Client,
    /// The caches the skip decision reads.
    pub stores: &'a Stores,
    /// Counts every write.
    pub metrics: &'a Metrics,
    /// Namespace of the pool and its children.
    pub namespace: &'a str,
    /// The reconcile's one reading of the clock, which the status is written with too.
    pub now: Timestamp,
}

impl Target<'_> {
    /// Makes a client error into the failure of `action` on the `kind` object `name` here.
    fn failed(
        &self,
        action: &'static str,
        kind: &str,
        name: &str,
    ) -> impl FnOnce(kube::Error) -> ApplyError {
        let (kind, namespace, name) = (kind.to_string(), self.namespace.to_string(), name.into());
        move |source| ApplyError { action, kind, namespace, name, source }
    }
}

/// What one pass wrote, and the children it left alone because someone else holds their names.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The objects written (`Kind name`, `deleted Kind name`).
    pub written: Vec<String>,
    /// The children not written because an object not owned by the pool has the name
    /// (`Kind name`).
    pub conflicts: Vec<String>,
    /// The generation the API server gave each object applied (`Kind name`, generation).
    pub generations: Vec<(String, i64)>,
    /// The autoscaler is changing hands (HPA and ScaledObject): the new one waits until the
    /// old one and what it made are gone, so look again soon.
    pub handing_over: bool,
    /// The pool wants a ScaledObject and the API server serves no KEDA.
    pub keda_missing: bool,
    /// KEDA's words while it says the pool's ScaledObject is not Ready.
    pub keda_not_ready: Option<String>,
}

/// What became of one child.
enum Step {
    /// Already as built, or nothing to delete.
    Unchanged,
    /// Applied (with the generation the API server gave it) or deleted.
    Written(String, Option<i64>),
    /// Its name is held by an object the pool does not own.
    Conflict(String),
}

impl Applied {
    /// The generation of Deployment `name` if this pass applied it.
    pub fn generation_of(&self, name: &str) -> Option<i64> {
        let what = format!("{} {name}", Deployment::kind(&()));
        self.generations.iter().find(|(w, _)| *w == what).map(|(_, g)| *g)
    }

    fn record(&mut self, step: Step) {
        match step {
            Step::Unchanged => {}
            Step::Written(what, generation) => {
                if let Some(generation) = generation {
                    self.generations.push((what.clone(), generation));
                }
                self.written.push(what);
            }
            Step::Conflict(what) => self.conflicts.push(what),
        }
    }
}

/// Applies what is not converged in `children` and deletes the Gotenberg pool, the autoscaler
/// and the render pods' NetworkPolicy when they are no longer wanted. A child whose name someone
/// else holds is skipped (and reported), the others are still written.
pub async fn apply_children(
    target: &Target<'_>,
    pool: &str,
    pool_uid: &str,
    children: Children,
) -> Result<Applied, ApplyError> {
    let stores = target.stores;
    let uid = pool_uid;
    let mut done = Applied::default();
    let render = children.render;
    // Before the render pods, so new pods of a pool with clients are never open.
    done.record(match children.render_policy {
        Some(policy) => apply_one(target, &stores.network_policies, policy, uid).await?,
        None => {
            let name = child_name(pool, Component::Render);
            delete_if_owned(target, &stores.network_policies, &name, uid).await?
        }
    });
    match children.gotenberg {
        Some(g) => {
            // The share first: new render pods mount it and would wait for it.
            done.record(apply_one(target, &stores.config_maps, g.office_share, uid).await?);
            done.record(apply_one(target, &stores.network_policies, g.network_policy, uid).await?);
            done.record(apply_one(target, &stores.deployments, g.deployment, uid).await?);
            done.record(apply_one(target, &stores.services, g.service, uid).await?);
            done.record(apply_one(target, &stores.pdbs, g.pdb, uid).await?);
            done.record(apply_one(target, &stores.deployments, render.deployment, uid).await?);
        }
        None => {
            // The render pods stop referring to the share before it goes.
            done.record(apply_one(target, &stores.deployments, render.deployment, uid).await?);
            let gotenberg = child_name(pool, Component::Gotenberg);
            for deleted in [
                delete_if_owned(target, &stores.deployments, &gotenberg, uid).await?,
                delete_if_owned(target, &stores.services, &gotenberg, uid).await?,
                delete_if_owned(target, &stores.pdbs, &gotenberg, uid).await?,
                delete_if_owned(target, &stores.network_policies, &gotenberg, uid).await?,
                delete_if_owned(target, &stores.config_maps, &office_share_name(pool), uid).await?,
            ] {
                done.record(deleted);
            }
        }
    }
    done.record(apply_one(target, &stores.services, render.service, uid).await?);
    done.record(apply_one(target, &stores.pdbs, render.pdb, uid).await?);
    apply_autoscaler(target, pool, uid, children.autoscaler, &mut done).await?;
    Ok(done)
}

/// The pool's autoscaler, with one writer of its /scale at every moment: switching between the
/// HPA and KEDA's ScaledObject deletes the old one first, and the new one is applied only once
/// the old one (and the HPA KEDA made for it) is gone. Only the autoscaler this pool owns goes:
/// one a person made under the same name stays.
async fn apply_autoscaler(
    target: &Target<'_>,
    pool: &str,
    uid: &str,
    wanted: Option<Autoscaler>,
    done: &mut Applied,
) -> Result<(), ApplyError> {
    let stores = target.stores;
    let scaled_object = look_up_scaled_object(target, pool).await?;
    // KEDA's HPA carries the ScaledObject's labels, so the labelled cache holds it too.
    let keda_hpa = ObjectRef::new(&keda::hpa_name(pool)).within(target.namespace);
    let keda_hpa_present = stores.autoscalers.get(&keda_hpa).is_some();
    match wanted {
        Some(Autoscaler::Keda(desired)) => {
            let Some(existing) = scaled_object else {
                done.keda_missing = true;
                return Ok(());
            };
            let hpa_step = delete_if_owned(target, &stores.autoscalers, pool, uid).await?;
            let hpa_was_there = !matches!(hpa_step, Step::Unchanged);
            done.record(hpa_step);
            if hpa_was_there {
                done.handing_over = true;
                return Ok(());
            }
            // Two polls after its creation: time for a new pool's first pod to make the stream.
            let settle = 2 * i64::from(KEDA_POLLING_SECONDS);
            done.keda_not_ready = existing
                .as_ref()
                .filter(|so| owned_by(so.meta(), uid))
                .and_then(|so| so.not_ready(target.now, settle));
            done.record(apply_over(target, existing.as_ref(), desired, uid).await?);
        }
        Some(Autoscaler::Hpa(hpa)) => {
            // Its HPA (owned by it) goes after it: both must be gone first.
            let ours = scaled_object.flatten().filter(|so| owned_by(so.meta(), uid));
            if let Some(so) = ours {
                done.record(delete_owned(target, &so, uid).await?);
                done.handing_over = true;
            } else if keda_hpa_present {
                done.handing_over = true;
            } else {
                done.record(apply_one(target, &stores.autoscalers, hpa, uid).await?);
            }
        }
        None => {
            if let Some(so) = scaled_object.flatten() {
                done.record(delete_owned(target, &so, uid).await?);
            }
            done.record(delete_if_owned(target, &stores.autoscalers, pool, uid).await?);
        }
    }
    Ok(())
}

/// The pool's ScaledObject: `None` when the API server serves no ScaledObjects (no KEDA),
/// `Some(None)` when it does and there is none under the pool's name. Not cached: the operator
/// must start and run on clusters without KEDA, where a watch could never sync.
async fn look_up_scaled_object(
    target: &Target<'_>,
    pool: &str,
) -> Result<Option<Option<ScaledObject>>, ApplyError> {
    match look_up::<ScaledObject>(target, pool).await {
        Ok(found) => Ok(Some(found)),
        Err(ApplyError { source: kube::Error::Api(status), .. }) if status.code == 404 => Ok(None),
        Err(err) => Err(err),
    }
}

async fn apply_one<K>(
    target: &Target<'_>,
    store: &Store<K>,
    desired: K,
    pool_uid: &str,
) -> Result<Step, ApplyError>
where
    K: Child,
{
    let name = desired.name_any();
    let key = ObjectRef::<K>::new(&name).within(target.namespace);
    let existing = match store.get(&key) {
        Some(cached) => Some(cached),
        None => look_up::<K>(target, &name).await?.map(Arc::new),
    };
    apply_over(target, existing.as_deref(), desired, pool_uid).await
}

/// Applies `desired` over `existing` (what is under its name now, if anything) unless the name
/// is someone else's or the object already matches.
async fn apply_over<K>(
    target: &Target<'_>,
    existing: Option<&K>,
    desired: K,
    pool_uid: &str,
) -> Result<Step, ApplyError>
where
    K: Child,
{
    let kind = K::kind(&()).to_string();
    let name = desired.name_any();
    match claim(existing.map(Resource::meta), pool_uid) {
        Claim::Theirs => return Ok(Step::Conflict(format!("{kind} {name}"))),
        Claim::Ours if existing.is_some_and(|e| converged(e, &desired, MANAGER)) => {
            return Ok(Step::Unchanged);
        }
        // Between the look-up and the apply, a name found free could be taken: that window is
        // one round trip, and the next pass reports the object as ours only if it names us.
        Claim::Free | Claim::Ours => {}
    }
    target.metrics.write(&kind, "apply");
    let api: Api<K> = Api::namespaced(target.client.clone(), target.namespace);
    let stored = api
        .patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&desired))
        .await
        .map_err(target.failed("apply", &kind, &name))?;
    Ok(Step::Written(format!("{kind} {name}"), stored.meta().generation))
}

/// The object named `name` on the API server, for a name the label-selected cache lacks. A
/// list by name rather than a get: the operator's role grants list, and no get.
async fn look_up<K>(target: &Target<'_>, name: &str) -> Result<Option<K>, ApplyError>
where
    K: Child,
{
    let api: Api<K> = Api::namespaced(target.client.clone(), target.namespace);
    let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
    let list = api.list(&by_name).await.map_err(target.failed("look up", &K::kind(&()), name))?;
    Ok(list.items.into_iter().next())
}

async fn delete_if_owned<K>(
    target: &Target<'_>,
    store: &Store<K>,
    name: &str,
    pool_uid: &str,
) -> Result<Step, ApplyError>
where
    K: Child,
{
    match store.get(&ObjectRef::new(name).within(target.namespace)) {
        Some(existing) => delete_owned(target, existing.as_ref(), pool_uid).await,
        None => Ok(Step::Unchanged),
    }
}

/// Deletes `existing` if the pool owns it and it is not already going.
async fn delete_owned<K>(
    target: &Target<'_>,
    existing: &K,
    pool_uid: &str,
) -> Result<Step, ApplyError>
where
    K: Child,
{
    let kind = K::kind(&()).to_string();
    let name = existing.name_any();
    if !owned_by(existing.meta(), pool_uid) || existing.meta().deletion_timestamp.is_some() {
        return Ok(Step::Unchanged);
    }
    target.metrics.write(&kind, "delete");
    let api: Api<K> = Api::namespaced(target.client.clone(), target.namespace);
    // Only the very object seen as ours: one made since under the same name fails the uid
    // precondition (409) and stays.
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: existing.uid(), resource_version: None }),
        ..DeleteParams::background()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(Step::Written(format!("deleted {kind} {name}"), None)),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
            Ok(Step::Unchanged)
        }
        Err(source) => Err(target.failed("delete", &kind, &name)(source)),
    }
}
