//! Where objects live and which buckets the pod may use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;

use crate::outbound::StoreConnector;

/// The store behind `s3://` URLs.
#[derive(Clone)]
pub enum Backend {
    /// An S3 endpoint (path-style requests, so any S3-compatible server works).
    S3 {
        /// `http://host:port` or `https://...`.
        endpoint: String,
        /// The region requests are signed for.
        region: String,
        /// The access key id, read from its file.
        access_key_id: String,
        /// The secret, read from its file.
        secret_access_key: String,
    },
    /// A local folder: `s3://bucket/key` is `<folder>/bucket/key` (a pod run by hand).
    Dir(PathBuf),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The credentials stay out of logs.
            Backend::S3 { endpoint, region, .. } => {
                f.debug_struct("S3").field("endpoint", endpoint).field("region", region).finish()
            }
            Backend::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
        }
    }
}

impl Backend {
    /// The client for one bucket.
    pub(super) fn open(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
        match self {
            Backend::S3 { endpoint, region, access_key_id, secret_access_key } => {
                let store = AmazonS3Builder::new()
                    .with_endpoint(endpoint.clone())
                    .with_allow_http(endpoint.starts_with("http://"))
                    .with_virtual_hosted_style_request(false)
                    .with_region(region.clone())
                    .with_bucket_name(bucket)
                    .with_access_key_id(access_key_id.clone())
                    .with_secret_access_key(secret_access_key.clone())
                    .with_http_connector(StoreConnector)
                    .build()?;
                Ok(Arc::new(store))
            }
            Backend::Dir(dir) => {
                let folder = dir.join(bucket);
                std::fs::create_dir_all(&folder).map_err(|source| {
                    object_store::Error::Generic {
                        store: "LocalFileSystem",
                        source: Box::new(source),
                    }
                })?;
                Ok(Arc::new(LocalFileSystem::new_with_prefix(folder)?))
            }
        }
    }

    /// Whether objects carry a content type (a local folder has none).
    pub(super) fn keeps_content_types(&self) -> bool {
        matches!(self, Backend::S3 { .. })
    }
}

/// The object store as configured.
#[derive(Debug, Clone)]
pub struct ObjectsConfig {
    /// Where objects live.
    pub backend: Backend,
    /// Buckets documents may be read from.
    pub read_buckets: BTreeSet<String>,
    /// Buckets outputs may be written to.
    pub write_buckets: BTreeSet<String>,
}

/// Why the object store settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsConfigError {
    /// Both or neither of an endpoint and a folder.
    #[error(
        "give an S3 endpoint (--objects-s3-endpoint) or a local folder (--objects-dir), not both"
    )]
    Backend,
    /// An endpoint that is not http(s).
    #[error("--objects-s3-endpoint {0:?} is not an http:// or https:// URL")]
    Endpoint(String),
    /// S3 without credentials.
    #[error(
        "an S3 endpoint needs --objects-s3-access-key-id-file and --objects-s3-secret-access-key-file"
    )]
    Credentials,
    /// A credentials file could not be read.
    #[error("cannot read {path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    /// A credentials file holds nothing.
    #[error("{0} is empty")]
    Empty(PathBuf),
    /// A bucket name S3 would refuse.
    #[error("{0:?} is not a bucket name")]
    Bucket(String),
}

/// What the flags say about the store.
#[derive(Debug, Clone, Default)]
pub struct StoreFlags<'a> {
    /// `--objects-s3-endpoint`.
    pub endpoint: Option<&'a str>,
    /// `--objects-s3-region`.
    pub region: &'a str,
    /// `--objects-s3-access-key-id-file`.
    pub access_key_id_file: Option<&'a Path>,
    /// `--objects-s3-secret-access-key-file`.
    pub secret_access_key_file: Option<&'a Path>,
    /// `--objects-dir`.
    pub dir: Option<&'a Path>,
    /// `--objects-read-buckets`.
    pub read_buckets: &'a [String],
    /// `--objects-write-buckets`.
    pub write_buckets: &'a [String],
}

impl ObjectsConfig {
    /// The store the flags describe, its credentials read from their files; `None` when no
    /// store is configured.
    pub fn from_flags(flags: &StoreFlags<'_>) -> Result<Option<Self>, ObjectsConfigError> {
        let backend = match (flags.endpoint, flags.dir) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => return Err(ObjectsConfigError::Backend),
            (None, Some(dir)) => Backend::Dir(dir.to_path_buf()),
            (Some(endpoint), None) => {
                if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                    return Err(ObjectsConfigError::Endpoint(endpoint.to_string()));
                }
                let (Some(id), Some(secret)) =
                    (flags.access_key_id_file, flags.secret_access_key_file)
                else {
                    return Err(ObjectsConfigError::Credentials);
                };
                Backend::S3 {
                    endpoint: endpoint.trim_end_matches('/').to_string(),
                    region: flags.region.to_string(),
                    access_key_id: read_secret(id)?,
                    secret_access_key: read_secret(secret)?,
                }
            }
        };
        Ok(Some(Self {
            backend,
            read_buckets: buckets(flags.read_buckets)?,
            write_buckets: buckets(flags.write_buckets)?,
        }))
    }
}

/// A credential file's content, without surrounding whitespace.
pub fn read_secret(path: &Path) -> Result<String, ObjectsConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ObjectsConfigError::File { path: path.to_path_buf(), source })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ObjectsConfigError::Empty(path.to_path_buf()));
    }
    Ok(text.to_string())
}

fn buckets(names: &[String]) -> Result<BTreeSet<String>, ObjectsConfigError> {
    names
        .iter()
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(|name| {
            renderpool_api::jobs::ObjectUrl::parse(&format!("s3://{name}"))
                .map(|url| url.bucket)
                .map_err(|_| ObjectsConfigError::Bucket(name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn flags_make_a_store_or_say_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let read = vec!["uploads".to_string(), " results ".to_string()];
        let flags = StoreFlags {
            dir: Some(dir.path()),
            read_buckets: &read,
            write_buckets: &read[1..],
            ..Default::default()
        };
        let config = ObjectsConfig::from_flags(&flags).unwrap().unwrap();
        assert_eq!(config.read_buckets.len(), 2);
        assert!(config.write_buckets.contains("results"));
        assert!(ObjectsConfig::from_flags(&StoreFlags::default()).unwrap().is_none());
        let both = StoreFlags { endpoint: Some("http://s3"), ..flags.clone() };
        assert!(matches!(ObjectsConfig::from_flags(&both), Err(ObjectsConfigError::Backend)));
        let no_keys = StoreFlags { endpoint: Some("http://s3"), dir: None, ..flags.clone() };
        assert!(matches!(
            ObjectsConfig::from_flags(&no_keys),
            Err(ObjectsConfigError::Credentials)
        ));
        let bad = vec!["Not_A_Bucket".to_string()];
        let bad = StoreFlags { read_buckets: &bad, ..flags.clone() };
        assert!(matches!(ObjectsConfig::from_flags(&bad), Err(ObjectsConfigError::Bucket(_))));
        let id = dir.path().join("id");
        std::fs::write(&id, " key\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let s3 = StoreFlags {
            endpoint: Some("http://127.0.0.1:9000/"),
            dir: None,
            access_key_id_file: Some(&id),
            secret_access_key_file: Some(&id),
            region: "us-east-1",
            ..flags.clone()
        };
        let config = ObjectsConfig::from_flags(&s3).unwrap().unwrap();
        assert!(matches!(&config.backend, Backend::S3 { endpoint, access_key_id, .. }
            if endpoint == "http://127.0.0.1:9000" && access_key_id == "key"));
        assert!(!format!("{:?}", config.backend).contains("key\""), "no secret in the debug form");
        let s3_empty = StoreFlags { secret_access_key_file: Some(&empty), ..s3 };
        assert!(matches!(ObjectsConfig::from_flags(&s3_empty), Err(ObjectsConfigError::Empty(_))));
    }
}
