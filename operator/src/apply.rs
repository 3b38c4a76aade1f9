//! Applying children by server-side apply, skipping those already converged.
//!
//! Every reconcile compares each built child with the controller's cached copy
//! ([`crate::converge`]): a child that was edited, scaled, mutated or deleted is applied again
//! (with force, so this manager takes its fields back), one that matches is left alone, so a
//! steady state sends no writes.

use crate::build::{Children, Component, child_name, office_share_name};
use crate::converge::converged;
use crate::metrics::Metrics;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

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
    /// The Gotenberg NetworkPolicies.
    pub network_policies: Store<NetworkPolicy>,
    /// The render pods' HorizontalPodAutoscalers.
    pub autoscalers: Store<HorizontalPodAutoscaler>,
}

/// A failed write, with what was being written.
#[derive(Debug, thiserror::Error)]
#[error("{action} {kind} {namespace}/{name}: {source}")]
pub struct ApplyError {
    /// apply or delete.
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
}

/// Applies what is not converged in `children` and deletes the Gotenberg pool and the
/// autoscaler when they are no longer wanted. Returns the objects written.
pub async fn apply_children(
    target: &Target<'_>,
    pool: &str,
    pool_uid: &str,
    children: Children,
) -> Result<Vec<String>, ApplyError> {
    let stores = target.stores;
    let mut written = Vec::new();
    let render = children.render;
    match children.gotenberg {
        Some(g) => {
            // The share first: new render pods mount it and would wait for it.
            written.extend(apply_one(target, &stores.config_maps, g.office_share).await?);
            written.extend(apply_one(target, &stores.network_policies, g.network_policy).await?);
            written.extend(apply_one(target, &stores.deployments, g.deployment).await?);
            written.extend(apply_one(target, &stores.services, g.service).await?);
            written.extend(apply_one(target, &stores.pdbs, g.pdb).await?);
            written.extend(apply_one(target, &stores.deployments, render.deployment).await?);
        }
        None => {
            // The render pods stop referring to the share before it goes.
            written.extend(apply_one(target, &stores.deployments, render.deployment).await?);
            let gotenberg = child_name(pool, Component::Gotenberg);
            for deleted in [
                delete_if_owned(target, &stores.deployments, &gotenberg, pool_uid).await?,
                delete_if_owned(target, &stores.services, &gotenberg, pool_uid).await?,
                delete_if_owned(target, &stores.pdbs, &gotenberg, pool_uid).await?,
                delete_if_owned(target, &stores.network_policies, &gotenberg, pool_uid).await?,
                delete_if_owned(target, &stores.config_maps, &office_share_name(pool), pool_uid)
                    .await?,
            ] {
                written.extend(deleted);
            }
        }
    }
    written.extend(apply_one(target, &stores.services, render.service).await?);
    written.extend(apply_one(target, &stores.pdbs, render.pdb).await?);
    // Only the autoscaler this pool owns goes: one a person made under the same name stays.
    written.extend(match children.autoscaler {
        Some(hpa) => apply_one(target, &stores.autoscalers, hpa).await?,
        None => delete_if_owned(target, &stores.autoscalers, pool, pool_uid).await?,
    });
    Ok(written)
}

async fn apply_one<K>(
    target: &Target<'_>,
    store: &Store<K>,
    desired: K,
) -> Result<Option<String>, ApplyError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let kind = K::kind(&()).to_string();
    let name = desired.name_any();
    let key = ObjectRef::<K>::new(&name).within(target.namespace);
    if store.get(&key).is_some_and(|existing| converged(existing.as_ref(), &desired, MANAGER)) {
        return Ok(None);
    }
    target.metrics.write(&kind, "apply");
    let api: Api<K> = Api::namespaced(target.client.clone(), target.namespace);
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&desired)).await.map_err(
        |source| ApplyError {
            action: "apply",
            kind: kind.clone(),
            namespace: target.namespace.into(),
            name: name.clone(),
            source,
        },
    )?;
    Ok(Some(format!("{kind} {name}")))
}

async fn delete_if_owned<K>(
    target: &Target<'_>,
    store: &Store<K>,
    name: &str,
    pool_uid: &str,
) -> Result<Option<String>, ApplyError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let kind = K::kind(&()).to_string();
    let Some(existing) = store.get(&ObjectRef::new(name).within(target.namespace)) else {
        return Ok(None);
    };
    let owned = existing.owner_references().iter().any(|o| o.uid == pool_uid);
    if !owned || existing.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    target.metrics.write(&kind, "delete");
    let api: Api<K> = Api::namespaced(target.client.clone(), target.namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(Some(format!("deleted {kind} {name}"))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(source) => Err(ApplyError {
            action: "delete",
            kind,
            namespace: target.namespace.into(),
            name: name.into(),
            source,
        }),
    }
}
