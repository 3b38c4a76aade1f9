//! RenderPools from YAML for unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::crd::{RenderPool, RenderPoolSpec};

/// A spec from YAML, defaults filled in as the API server would.
pub fn spec_from_yaml(yaml: &str) -> RenderPoolSpec {
    serde_saphyr::from_str(yaml).unwrap()
}

/// A stored RenderPool (name, namespace, uid, generation) with the given spec.
pub fn pool_from_yaml(name: &str, spec: &str) -> RenderPool {
    let mut pool = RenderPool::new(name, spec_from_yaml(spec));
    pool.metadata.namespace = Some("docs".into());
    pool.metadata.uid = Some("0b9e7a52-5f44-4d1e-9a55-3f2c1f2d0a11".into());
    pool.metadata.generation = Some(1);
    pool
}
