//! What the API server stored, read from etcd past it: the version a custom resource is
//! encoded in there is invisible through the API (which converts on every read).

use k8s_openapi::ByteString;

use super::{Cluster, ClusterError};

/// The object the API server stored under `key` (e.g.
/// `/registry/renderpool.dev/renderpools/NAMESPACE/NAME`; custom resources are stored as JSON),
/// or `None` when there is none. Through etcd's JSON gateway (`/v3/kv/range`, keys and values
/// in base64), so no etcd client is needed.
pub async fn stored_json(
    cluster: &Cluster,
    key: &str,
) -> Result<Option<serde_json::Value>, ClusterError> {
    let encode = |bytes: &[u8]| serde_json::to_value(ByteString(bytes.to_vec()));
    let body = serde_json::json!({ "key": encode(key.as_bytes()).map_err(setup)? });
    let url = format!("{}/v3/kv/range", cluster.etcd_url());
    let answer: serde_json::Value = async {
        reqwest::Client::new().post(&url).json(&body).send().await?.error_for_status()?.json().await
    }
    .await
    .map_err(|err| ClusterError::Setup(format!("etcd range {key}: {err}")))?;
    let Some(value) = answer.pointer("/kvs/0/value") else {
        return Ok(None);
    };
    let bytes: ByteString = serde_json::from_value(value.clone()).map_err(setup)?;
    serde_json::from_slice(&bytes.0).map(Some).map_err(setup)
}

fn setup(err: serde_json::Error) -> ClusterError {
    ClusterError::Setup(format!("etcd's answer: {err}"))
}
