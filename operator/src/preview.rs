//! The children this operator would apply for a RenderPool manifest, printed rather than
//! applied: what `renderpool-operator children` shows before an upgrade or a spec change, for
//! `kubectl diff` to compare with what runs.

use crate::build::{Autoscaler, Children, MissingMetadata, build};
use crate::crd::{DEPRECATED_VERSIONS, RenderPool};
use crate::validate::{SpecError, validate};
use kube::Resource;
use serde_json::Value;

/// Why no children could be shown.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    /// The manifest is not YAML or JSON.
    #[error("the manifest is not YAML: {0}")]
    Yaml(String),
    /// A document is not a RenderPool this operator reads.
    #[error("{0}")]
    NotAPool(String),
    /// The RenderPool does not match the CRD's types.
    #[error("RenderPool {name}: {source}")]
    Fields {
        /// metadata.name.
        name: String,
        /// What serde found wrong.
        source: serde_json::Error,
    },
    /// The spec would be refused (the pool would become Degraded).
    #[error("RenderPool {name}: spec cannot be applied: {source}")]
    Spec {
        /// metadata.name.
        name: String,
        /// The refusal.
        source: SpecError,
    },
    /// The children could not be built (no name).
    #[error(transparent)]
    Metadata(#[from] MissingMetadata),
    /// A child could not be written out.
    #[error("rendering a child: {0}")]
    Render(#[from] serde_json::Error),
}

/// Stands in for the uid of a pool not read from the cluster; its children are shown without
/// owner references, which only the API server's uid can fill in.
const NO_UID: &str = "not-read-from-the-cluster";

/// The children of every RenderPool in `manifest` (one object, several YAML documents, or a
/// `List` as `kubectl get -o yaml` prints one), in the order the operator applies them.
/// `namespace` is used where a pool has none. Objects read from the cluster carry their uid, and
/// their children get the owner reference the operator gives them; a pool written by hand gets
/// children without one.
pub fn children_of(manifest: &str, namespace: &str) -> Result<Vec<Value>, PreviewError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(manifest).map_err(|e| PreviewError::Yaml(e.to_string()))?;
    let mut objects = Vec::new();
    for document in documents.into_iter().filter(|d| !d.is_null()) {
        let items = match document.get("kind").and_then(Value::as_str) {
            Some("List") => {
                document.get("items").and_then(Value::as_array).cloned().unwrap_or_default()
            }
            _ => vec![document],
        };
        for item in items {
            objects.extend(children_of_pool(item, namespace)?);
        }
    }
    Ok(objects)
}

fn children_of_pool(mut object: Value, namespace: &str) -> Result<Vec<Value>, PreviewError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let served = std::iter::once(RenderPool::api_version(&()).into_owned())
        .chain(DEPRECATED_VERSIONS.map(|v| format!("{}/{v}", RenderPool::group(&()))))
        .collect::<Vec<_>>();
    if kind != RenderPool::kind(&()) || !served.iter().any(|v| v == api_version) {
        return Err(PreviewError::NotAPool(format!(
            "{api_version} {kind} is no RenderPool this operator reads ({})",
            served.join(", ")
        )));
    }
    // Every served version has the same schema: read it as the one this build uses.
    object["apiVersion"] = RenderPool::api_version(&()).into_owned().into();
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let name = name.to_string();
    let mut pool: RenderPool = serde_json::from_value(object)
        .map_err(|source| PreviewError::Fields { name: name.clone(), source })?;
    let from_cluster = pool.metadata.uid.is_some();
    pool.metadata.namespace.get_or_insert_with(|| namespace.into());
    pool.metadata.uid.get_or_insert_with(|| NO_UID.into());
    let plan = validate(&pool.spec).map_err(|source| PreviewError::Spec { name, source })?;
    let mut objects = manifests(build(&pool, &plan)?)?;
    if !from_cluster {
        for object in &mut objects {
            if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("ownerReferences");
            }
        }
    }
    Ok(objects)
}

/// Every child as JSON, in the order the operator applies them.
fn manifests(children: Children) -> Result<Vec<Value>, serde_json::Error> {
    let mut out = Vec::new();
    if let Some(policy) = children.render_policy {
        out.push(serde_json::to_value(policy)?);
    }
    if let Some(g) = children.gotenberg {
        out.push(serde_json::to_value(g.office_share)?);
        out.push(serde_json::to_value(g.network_policy)?);
        out.push(serde_json::to_value(g.deployment)?);
        out.push(serde_json::to_value(g.service)?);
        out.push(serde_json::to_value(g.pdb)?);
    }
    out.push(serde_json::to_value(children.render.deployment)?);
    out.push(serde_json::to_value(children.render.service)?);
    out.push(serde_json::to_value(children.render.pdb)?);
    match children.autoscaler {
        Some(Autoscaler::Hpa(hpa)) => out.push(serde_json::to_value(hpa)?),
        Some(Autoscaler::Keda(scaled_object)) => out.push(serde_json::to_value(scaled_object)?),
        None => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const POOL: &str = "apiVersion: renderpool.dev/v1alpha1
kind: RenderPool
metadata:
  name: previews
spec:
  replicas: 2
  cpu: 600m
  memory: 868Mi
";

    fn kinds(objects: &[Value]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                format!(
                    "{} {}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn a_pool_file_of_either_version_gives_its_children_in_apply_order() {
        let objects = children_of(POOL, "docs").unwrap();
        assert_eq!(
            kinds(&objects),
            [
                "ConfigMap previews-office",
                "NetworkPolicy previews-gotenberg",
                "Deployment previews-gotenberg",
                "Service previews-gotenberg",
                "PodDisruptionBudget previews-gotenberg",
                "Deployment previews-render",
                "Service previews-render",
                "PodDisruptionBudget previews-render",
            ]
        );
        assert_eq!(objects[5]["apiVersion"], "apps/v1");
        assert_eq!(objects[5]["metadata"]["namespace"], "docs");
        // Written by hand: no uid, so no owner reference to show.
        assert!(objects.iter().all(|o| o["metadata"].get("ownerReferences").is_none()));
        let beta = POOL.replace("v1alpha1", "v1beta1");
        assert_eq!(children_of(&beta, "docs").unwrap(), objects);
    }

    #[test]
    fn a_pool_read_from_the_cluster_gives_children_owned_by_it() {
        let live = format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}",
            POOL.replace(
                "  name: previews\n",
                "  name: previews\n  namespace: web\n  uid: 0b9e7a52-5f44\n"
            )
            .replace('\n', "\n  ")
        );
        let objects = children_of(&live, "docs").unwrap();
        let render = &objects[5];
        assert_eq!(render["metadata"]["namespace"], "web");
        let owner = &render["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["uid"], &owner["apiVersion"]),
            (&"0b9e7a52-5f44".into(), &"renderpool.dev/v1beta1".into())
        );
    }

    #[test]
    fn what_is_no_pool_or_a_refused_spec_says_why() {
        let err = children_of("apiVersion: v1\nkind: ConfigMap\n", "docs").unwrap_err();
        assert!(err.to_string().starts_with("v1 ConfigMap is no RenderPool"), "{err}");
        let err = children_of(&POOL.replace("868Mi", "600Mi"), "docs").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("RenderPool previews: spec cannot be applied: spec.memory 600Mi"),
            "{err}"
        );
        let err = children_of(&POOL.replace("replicas: 2", "replicas: many"), "docs").unwrap_err();
        assert!(err.to_string().starts_with("RenderPool previews: invalid type"), "{err}");
        let err = children_of("spec: [unclosed", "docs").unwrap_err();
        assert!(err.to_string().starts_with("the manifest is not YAML"), "{err}");
    }
}
