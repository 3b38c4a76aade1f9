//! Applying children by server-side apply, skipping objects already as built.
//!
//! Every built object carries a hash of itself in an annotation. When the cached copy (from the
//! controller's reflector) carries the same hash and the same owner, the apply is skipped: a
//! steady state makes no writes, and a deleted or changed-spec child is applied again.

use crate::build::{Children, Component, ComponentObjects, child_name};
use crate::metrics::Metrics;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fmt::Debug;

/// The one field manager of everything the operator writes.
pub const MANAGER: &str = "renderpool-operator";
/// Annotation holding the hash of the object as built.
pub const HASH_ANNOTATION: &str = "renderpool.dev/applied-hash";

/// Reflector caches of the children, filled by the controller's watches.
#[derive(Clone)]
pub struct Stores {
    /// Deployments managed by the operator.
    pub deployments: Store<Deployment>,
    /// Services managed by the operator.
    pub services: Store<Service>,
    /// PodDisruptionBudgets managed by the operator.
    pub pdbs: Store<PodDisruptionBudget>,
}

/// A failed write, with what was being written.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server refused or could not be reached.
    #[error("{action} {kind} {namespace}/{name}: {source}")]
    Api {
        /// apply or delete.
        action: &'static str,
        /// Object kind.
        kind: String,
        /// Object namespace.
        namespace: String,
        /// Object name.
        name: String,
        /// The client error.
        source: kube::Error,
    },
    /// A built object could not be serialised for hashing (a bug, not a user error).
    #[error("serialising {0} for its hash: {1}")]
    Hash(String, serde_json::Error),
}

/// Puts the hash of `obj` (as built, without the hash) into its annotations.
pub fn stamp<K: Resource + Serialize>(obj: &mut K) -> Result<(), serde_json::Error> {
    let digest = Sha256::digest(serde_json::to_vec(obj)?);
    let hash: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    obj.annotations_mut().insert(HASH_ANNOTATION.into(), hash);
    Ok(())
}

/// True when `existing` was applied from the same build as `desired` and has the same owner.
pub fn up_to_date<K: Resource>(existing: &K, desired: &K) -> bool {
    let hash = |o: &K| o.meta().annotations.as_ref().and_then(|a| a.get(HASH_ANNOTATION).cloned());
    let owners = |o: &K| o.meta().owner_references.clone().unwrap_or_default();
    existing.meta().deletion_timestamp.is_none()
        && hash(existing).is_some()
        && hash(existing) == hash(desired)
        && owners(desired).iter().all(|d| owners(existing).iter().any(|e| e.uid == d.uid))
}

/// Applies what changed in `children`; deletes the Gotenberg pool when it is no longer wanted.
/// Returns the names of the objects written.
pub async fn apply_children(
    client: &Client,
    stores: &Stores,
    metrics: &Metrics,
    namespace: &str,
    pool: &str,
    pool_uid: &str,
    children: Children,
) -> Result<Vec<String>, ApplyError> {
    let mut written = Vec::new();
    let mut components = vec![children.render];
    match children.gotenberg {
        Some(g) => components.push(g),
        None => {
            written.extend(delete_owned(client, stores, metrics, namespace, pool, pool_uid).await?)
        }
    }
    for ComponentObjects { deployment, service, pdb, .. } in components {
        let (deployments, services, pdbs) = (
            Api::namespaced(client.clone(), namespace),
            Api::namespaced(client.clone(), namespace),
            Api::namespaced(client.clone(), namespace),
        );
        written.extend(apply_one(deployments, &stores.deployments, metrics, deployment).await?);
        written.extend(apply_one(services, &stores.services, metrics, service).await?);
        written.extend(apply_one(pdbs, &stores.pdbs, metrics, pdb).await?);
    }
    Ok(written)
}

async fn apply_one<K>(
    api: Api<K>,
    store: &Store<K>,
    metrics: &Metrics,
    mut desired: K,
) -> Result<Option<String>, ApplyError>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let kind = K::kind(&()).to_string();
    let name = desired.name_any();
    stamp(&mut desired).map_err(|e| ApplyError::Hash(format!("{kind} {name}"), e))?;
    let key = ObjectRef::<K>::new(&name).within(&desired.namespace().unwrap_or_default());
    if store.get(&key).is_some_and(|existing| up_to_date(existing.as_ref(), &desired)) {
        return Ok(None);
    }
    metrics.write(&kind, "apply");
    api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&desired)).await.map_err(
        |source| ApplyError::Api {
            action: "apply",
            kind: kind.clone(),
            namespace: desired.namespace().unwrap_or_default(),
            name: name.clone(),
            source,
        },
    )?;
    Ok(Some(format!("{kind} {name}")))
}

async fn delete_owned(
    client: &Client,
    stores: &Stores,
    metrics: &Metrics,
    namespace: &str,
    pool: &str,
    pool_uid: &str,
) -> Result<Vec<String>, ApplyError> {
    let name = child_name(pool, Component::Gotenberg);
    let mut deleted = Vec::new();
    deleted.extend(
        delete_if_owned(client, &stores.deployments, metrics, namespace, &name, pool_uid).await?,
    );
    deleted.extend(
        delete_if_owned(client, &stores.services, metrics, namespace, &name, pool_uid).await?,
    );
    deleted
        .extend(delete_if_owned(client, &stores.pdbs, metrics, namespace, &name, pool_uid).await?);
    Ok(deleted)
}

async fn delete_if_owned<K>(
    client: &Client,
    store: &Store<K>,
    metrics: &Metrics,
    namespace: &str,
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
    let Some(existing) = store.get(&ObjectRef::new(name).within(namespace)) else {
        return Ok(None);
    };
    let owned = existing.owner_references().iter().any(|o| o.uid == pool_uid);
    if !owned || existing.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    metrics.write(&kind, "delete");
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(Some(format!("deleted {kind} {name}"))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(source) => Err(ApplyError::Api {
            action: "delete",
            kind,
            namespace: namespace.into(),
            name: name.into(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn deployment(replicas: i32) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = Some("p-render".into());
        d.spec.replicas = Some(replicas);
        d
    }

    #[test]
    fn hash_is_stable_and_follows_the_content() {
        let (mut a, mut b, mut c) = (deployment(2), deployment(2), deployment(3));
        stamp(&mut a).unwrap();
        stamp(&mut b).unwrap();
        stamp(&mut c).unwrap();
        assert!(up_to_date(&a, &b));
        assert!(!up_to_date(&a, &c));
        assert_eq!(a.annotations()[HASH_ANNOTATION].len(), 24);
    }

    #[test]
    fn an_unstamped_or_deleting_object_is_never_up_to_date() {
        let mut desired = deployment(2);
        stamp(&mut desired).unwrap();
        assert!(!up_to_date(&deployment(2), &desired));
        let mut deleting = desired.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!up_to_date(&deleting, &desired));
    }
}
