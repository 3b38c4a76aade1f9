//! Where objects live and which buckets the pod may use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use renderpool_api::jobs::Scheme;

use crate::outbound::{CaError, StoreConnector};

/// The pod's one object store, and so the one kind of URL it takes.
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
    /// Google Cloud Storage, for `gs://` URLs.
    Gcs {
        /// The service account key (JSON), read from its file.
        service_account: String,
    },
    /// Azure Blob Storage, for `az://container/key` URLs.
    Azure {
        /// The storage account.
        account: String,
        /// The account's access key, read from its file.
        access_key: String,
        /// `https://<account>.blob.core.windows.net` unless another endpoint is given (Azurite
        /// or a sovereign cloud).
        endpoint: Option<String>,
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
            Backend::Gcs { .. } => f.write_str("Gcs"),
            Backend::Azure { account, endpoint, .. } => f
                .debug_struct("Azure")
                .field("account", account)
                .field("endpoint", endpoint)
                .finish(),
            Backend::Dir(dir) => f.debug_tuple("Dir").field(dir).finish(),
        }
    }
}

impl Backend {
    /// The client for one bucket.
    pub(super) fn open(
        &self,
        bucket: &str,
        connector: &StoreConnector,
    ) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
        match self {
            Backend::S3 { endpoint, region, access_key_id, secret_access_key } => {
                let keys = (access_key_id.as_str(), secret_access_key.as_str());
                let store = s3_client(endpoint, region, keys, bucket)
                    .with_http_connector(connector.clone())
                    .build()?;
                Ok(Arc::new(store))
            }
            Backend::Gcs { service_account } => Ok(Arc::new(
                GoogleCloudStorageBuilder::new()
                    .with_service_account_key(service_account.clone())
                    .with_bucket_name(bucket)
                    .with_http_connector(connector.clone())
                    .build()?,
            )),
            Backend::Azure { account, access_key, endpoint } => {
                let mut builder = MicrosoftAzureBuilder::new()
                    .with_account(account.clone())
                    .with_access_key(access_key.clone())
                    .with_container_name(bucket)
                    .with_http_connector(connector.clone());
                if let Some(endpoint) = endpoint {
                    builder = builder
                        .with_endpoint(endpoint.clone())
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                Ok(Arc::new(builder.build()?))
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
        !matches!(self, Backend::Dir(_))
    }

    /// The URLs this store takes (a local folder stands in for S3).
    pub fn scheme(&self) -> Scheme {
        match self {
            Backend::S3 { .. } | Backend::Dir(_) => Scheme::S3,
            Backend::Gcs { .. } => Scheme::Gs,
            Backend::Azure { .. } => Scheme::Az,
        }
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
    /// The store's HTTP, trusting the CA file's certificates when one is given.
    pub connector: StoreConnector,
    /// The CA file, and how many certificates it added.
    pub ca: Option<(PathBuf, usize)>,
}

/// Why the object store settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsConfigError {
    /// More than one store.
    #[error("give one object store, not {0}")]
    Backend(String),
    /// An endpoint that is not http(s).
    #[error("{flag} {url:?} is not an http:// or https:// URL")]
    Endpoint { flag: &'static str, url: String },
    /// S3 without credentials.
    #[error(
        "an S3 endpoint needs --objects-s3-access-key-id-file and --objects-s3-secret-access-key-file"
    )]
    Credentials,
    /// A credentials file could not be read.
    #[error("cannot read {path}: {source}")]
    File { path: PathBuf, source: std::io::Error },
    /// Azure without its access key.
    #[error("an Azure account (--objects-azure-account) needs --objects-azure-access-key-file")]
    AzureKey,
    /// A credentials file holds nothing.
    #[error("{0} is empty")]
    Empty(PathBuf),
    /// A service account key the GCS client cannot use.
    #[error("--objects-gcs-service-account-file {path}: {detail}")]
    ServiceAccount { path: PathBuf, detail: String },
    /// A CA file that cannot be trusted.
    #[error("--objects-ca-file {path}: {source}")]
    Ca { path: PathBuf, source: CaError },
    /// A bucket name the store would refuse.
    #[error("{name:?} is not a bucket name {} takes", .scheme.store())]
    Bucket { name: String, scheme: Scheme },
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
    /// `--objects-gcs-service-account-file`.
    pub gcs_service_account_file: Option<&'a Path>,
    /// `--objects-azure-account`.
    pub azure_account: Option<&'a str>,
    /// `--objects-azure-access-key-file`.
    pub azure_access_key_file: Option<&'a Path>,
    /// `--objects-azure-endpoint`.
    pub azure_endpoint: Option<&'a str>,
    /// `--objects-ca-file`.
    pub ca_file: Option<&'a Path>,
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
        let given: Vec<&str> = [
            (flags.endpoint.is_some(), "--objects-s3-endpoint"),
            (flags.gcs_service_account_file.is_some(), "--objects-gcs-service-account-file"),
            (flags.azure_account.is_some(), "--objects-azure-account"),
            (flags.dir.is_some(), "--objects-dir"),
        ]
        .into_iter()
        .filter_map(|(given, flag)| given.then_some(flag))
        .collect();
        let backend = match given.as_slice() {
            [] => return Ok(None),
            [_] => Self::backend(flags)?,
            many => return Err(ObjectsConfigError::Backend(many.join(" and "))),
        };
        let scheme = backend.scheme();
        let (connector, ca) = match flags.ca_file {
            None => (StoreConnector::default(), None),
            Some(path) => {
                let ca_error = |source| ObjectsConfigError::Ca { path: path.to_path_buf(), source };
                let pem = std::fs::read(path).map_err(|source| ObjectsConfigError::File {
                    path: path.to_path_buf(),
                    source,
                })?;
                let (connector, added) = StoreConnector::with_ca(&pem).map_err(ca_error)?;
                (connector, Some((path.to_path_buf(), added)))
            }
        };
        Ok(Some(Self {
            backend,
            read_buckets: buckets(flags.read_buckets, scheme)?,
            write_buckets: buckets(flags.write_buckets, scheme)?,
            connector,
            ca,
        }))
    }

    /// The one store the flags name.
    fn backend(flags: &StoreFlags<'_>) -> Result<Backend, ObjectsConfigError> {
        if let Some(endpoint) = flags.endpoint {
            let (Some(id), Some(secret)) = (flags.access_key_id_file, flags.secret_access_key_file)
            else {
                return Err(ObjectsConfigError::Credentials);
            };
            return Ok(Backend::S3 {
                endpoint: http_url("--objects-s3-endpoint", endpoint)?,
                region: flags.region.to_string(),
                access_key_id: read_secret(id)?,
                secret_access_key: read_secret(secret)?,
            });
        }
        if let Some(path) = flags.gcs_service_account_file {
            let service_account = read_secret(path)?;
            // Checked now, so a bad key stops the pod at start rather than its first job.
            GoogleCloudStorageBuilder::new()
                .with_service_account_key(service_account.clone())
                .with_bucket_name("checked-at-start")
                .with_http_connector(StoreConnector::default())
                .build()
                .map_err(|e| ObjectsConfigError::ServiceAccount {
                    path: path.to_path_buf(),
                    detail: e.to_string(),
                })?;
            return Ok(Backend::Gcs { service_account });
        }
        if let Some(account) = flags.azure_account {
            let key = flags.azure_access_key_file.ok_or(ObjectsConfigError::AzureKey)?;
            let endpoint =
                flags.azure_endpoint.map(|url| http_url("--objects-azure-endpoint", url));
            return Ok(Backend::Azure {
                account: account.trim().to_string(),
                access_key: read_secret(key)?,
                endpoint: endpoint.transpose()?,
            });
        }
        let dir = flags.dir.ok_or_else(|| ObjectsConfigError::Backend("none".into()))?;
        Ok(Backend::Dir(dir.to_path_buf()))
    }
}

/// `url` without a trailing `/`, if it is http(s).
fn http_url(flag: &'static str, url: &str) -> Result<String, ObjectsConfigError> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ObjectsConfigError::Endpoint { flag, url: url.to_string() });
    }
    Ok(url.trim_end_matches('/').to_string())
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

/// The S3 client's settings for one bucket: path-style requests to `endpoint`, keys as
/// (access key id, secret).
fn s3_client(endpoint: &str, region: &str, keys: (&str, &str), bucket: &str) -> AmazonS3Builder {
    AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(endpoint.starts_with("http://"))
        // Over TLS the body's integrity is TLS's: SigV4 then signs the headers alone (as AWS's
        // SDKs do over https) and no PUT body is hashed first. Over plain http the signature
        // still covers the body.
        .with_unsigned_payload(endpoint.starts_with("https://"))
        .with_virtual_hosted_style_request(false)
        .with_region(region)
        .with_bucket_name(bucket)
        .with_access_key_id(keys.0)
        .with_secret_access_key(keys.1)
}

fn buckets(names: &[String], scheme: Scheme) -> Result<BTreeSet<String>, ObjectsConfigError> {
    names
        .iter()
        .map(|name| name.trim())
        .filter(|name| !name.is_empty())
        .map(|name| match scheme.valid_bucket(name) {
            true => Ok(name.to_string()),
            false => Err(ObjectsConfigError::Bucket { name: name.to_string(), scheme }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn s3_bodies_are_signed_over_http_and_left_to_tls_over_https() {
        use object_store::aws::AmazonS3ConfigKey::UnsignedPayload;
        let unsigned = |endpoint| {
            s3_client(endpoint, "us-east-1", ("id", "secret"), "results")
                .get_config_value(&UnsignedPayload)
        };
        assert_eq!(unsigned("http://127.0.0.1:9000").as_deref(), Some("false"));
        assert_eq!(unsigned("https://s3.eu-west-1.amazonaws.com").as_deref(), Some("true"));
    }

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
        assert!(matches!(ObjectsConfig::from_flags(&both), Err(ObjectsConfigError::Backend(_))));
        let no_keys = StoreFlags { endpoint: Some("http://s3"), dir: None, ..flags.clone() };
        assert!(matches!(
            ObjectsConfig::from_flags(&no_keys),
            Err(ObjectsConfigError::Credentials)
        ));
        let bad = vec!["Not_A_Bucket".to_string()];
        let bad = StoreFlags { read_buckets: &bad, ..flags.clone() };
        assert!(matches!(
            ObjectsConfig::from_flags(&bad),
            Err(ObjectsConfigError::Bucket { scheme: Scheme::S3, .. })
        ));
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

    #[test]
    fn a_ca_file_adds_its_certificates_to_the_stores_roots_or_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let buckets = vec!["uploads".to_string()];
        fn flags<'a>(dir: &'a Path, ca: &'a Path, buckets: &'a [String]) -> StoreFlags<'a> {
            StoreFlags {
                dir: Some(dir),
                ca_file: Some(ca),
                read_buckets: buckets,
                ..Default::default()
            }
        }
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let pem = params.self_signed(&key).unwrap().pem();
        let (one, two) = (dir.path().join("one.pem"), dir.path().join("two.pem"));
        std::fs::write(&one, &pem).unwrap();
        std::fs::write(&two, format!("{pem}{pem}")).unwrap();
        for (file, added) in [(&one, 1), (&two, 2)] {
            let config =
                ObjectsConfig::from_flags(&flags(dir.path(), file, &buckets)).unwrap().unwrap();
            assert_eq!(config.ca, Some((file.to_path_buf(), added)));
        }
        let not_pem = dir.path().join("not.pem");
        std::fs::write(&not_pem, "a key, not a certificate\n").unwrap();
        assert!(matches!(
            ObjectsConfig::from_flags(&flags(dir.path(), &not_pem, &buckets)),
            Err(ObjectsConfigError::Ca { source: CaError::Empty, .. })
        ));
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let refused = ObjectsConfig::from_flags(&flags(dir.path(), &broken, &buckets)).unwrap_err();
        assert!(refused.to_string().starts_with("--objects-ca-file "), "{refused}");
        let missing = dir.path().join("missing.pem");
        assert!(matches!(
            ObjectsConfig::from_flags(&flags(dir.path(), &missing, &buckets)),
            Err(ObjectsConfigError::File { .. })
        ));
        let none = StoreFlags { ca_file: None, ..flags(dir.path(), &one, &buckets) };
        assert_eq!(ObjectsConfig::from_flags(&none).unwrap().unwrap().ca, None);
    }

    #[test]
    fn gcs_and_azure_take_their_own_urls_and_bucket_names() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.json");
        // The fields object_store reads for an emulator; a real key has a private key instead.
        std::fs::write(
            &key,
            r#"{"gcs_base_url": "http://127.0.0.1:1", "disable_oauth": true,
            "client_email": "", "private_key": "", "private_key_id": ""}"#,
        )
        .unwrap();
        let buckets = vec!["my_uploads".to_string()];
        let gcs = StoreFlags {
            gcs_service_account_file: Some(&key),
            read_buckets: &buckets,
            ..Default::default()
        };
        let config = ObjectsConfig::from_flags(&gcs).unwrap().unwrap();
        assert_eq!(config.backend.scheme(), Scheme::Gs);
        assert!(config.read_buckets.contains("my_uploads"));
        assert!(config.backend.open("my_uploads", &config.connector).is_ok());
        std::fs::write(&key, "not a key").unwrap();
        assert!(matches!(
            ObjectsConfig::from_flags(&gcs),
            Err(ObjectsConfigError::ServiceAccount { .. })
        ));

        let access = dir.path().join("access-key");
        std::fs::write(&access, "a2V5\n").unwrap();
        let azure = StoreFlags {
            azure_account: Some("devstoreaccount1"),
            azure_access_key_file: Some(&access),
            azure_endpoint: Some("http://127.0.0.1:10000/devstoreaccount1/"),
            ..Default::default()
        };
        let config = ObjectsConfig::from_flags(&azure).unwrap().unwrap();
        assert_eq!(config.backend.scheme(), Scheme::Az);
        assert!(matches!(&config.backend, Backend::Azure { endpoint: Some(e), access_key, .. }
            if e == "http://127.0.0.1:10000/devstoreaccount1" && access_key == "a2V5"));
        assert!(!format!("{:?}", config.backend).contains("a2V5"), "no key in the debug form");
        // `_` is a GCS separator, not an Azure one.
        let azure_bad = StoreFlags { read_buckets: &buckets, ..azure.clone() };
        assert!(matches!(
            ObjectsConfig::from_flags(&azure_bad),
            Err(ObjectsConfigError::Bucket { scheme: Scheme::Az, .. })
        ));
        let no_key = StoreFlags { azure_access_key_file: None, ..azure.clone() };
        assert!(matches!(ObjectsConfig::from_flags(&no_key), Err(ObjectsConfigError::AzureKey)));
        let two = StoreFlags { gcs_service_account_file: Some(&key), ..azure };
        let err = ObjectsConfig::from_flags(&two).unwrap_err().to_string();
        assert!(
            err.contains("--objects-gcs-service-account-file and --objects-azure-account"),
            "{err}"
        );
    }
}
