//! Documents and results in object storage: `s3://bucket/key` URLs on an S3 endpoint,
//! `gs://bucket/key` on Google Cloud Storage or `az://container/key` on Azure Blob Storage, one
//! store per pod (or, for a pod run by hand, a local folder with one sub-folder per bucket), only
//! in the buckets the pod may read or write. Reads are bounded (the largest accepted body) and counted in the upload
//! budget like a request body. What was read stays in the pod's one document cache, beside
//! uploads named by digest, and an index of ETags says which cached document an object is: a
//! viewer paging through a stored upload (or a job after another on the same input) costs one
//! conditional request, and a client may name the fetched document by its digest afterwards. A
//! reader that names the version it wants by its ETag (a job's `input.etag`) costs no request
//! at all where the pod holds that version, and is refused, not served another, where the
//! object has changed.

pub mod config;
mod etags;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as StorePath;
use object_store::{
    Attribute, Attributes, GetOptions, ObjectStore, ObjectStoreExt, PutOptions, PutPayload,
};
use renderpool_api::jobs::{ObjectUrl, Scheme};

use crate::byte_budget::ByteBudget;
use crate::doc_cache::{Digest, DocCache, HeldDocument};
use crate::ops::DocHash;
use etags::{EtagIndex, Seen};

pub use config::{Backend, ObjectsConfig, ObjectsConfigError};
pub use etags::EtagStatus;

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Documents are read.
    Read,
    /// Outputs are written.
    Write,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// Why an object could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The URL names another kind of store than the pod's.
    #[error("{url}: the pool's object store is {store}, which takes {scheme} URLs only")]
    OtherStore { url: String, store: &'static str, scheme: Scheme },
    /// The bucket is not one the pod may use this way.
    #[error("{url}: the pool may not {access} bucket {bucket:?} (allowed: {allowed})")]
    NotAllowed { url: String, bucket: String, access: Access, allowed: String },
    /// No such object.
    #[error("{url}: no such object")]
    NotFound { url: String },
    /// The object is no longer the version the reader named.
    #[error("{url}: the object has changed since its ETag {etag} was taken")]
    Changed { url: String, etag: String },
    /// Larger than the pod accepts.
    #[error("{url}: the object has {bytes} bytes, more than the limit of {max}")]
    TooLarge { url: String, bytes: u64, max: u64 },
    /// The upload budget has no room for it now.
    #[error("{url}: the documents in memory hold the upload budget; retry later")]
    NoRoom { url: String },
    /// The store failed or could not be reached.
    #[error("{url}: the object store failed: {detail}")]
    Store { url: String, detail: String },
    /// Hashing what was read failed (its task panicked or was cancelled).
    #[error("{url}: hashing the document failed: {detail}")]
    Hash { url: String, detail: String },
}

impl ObjectError {
    fn store(url: &ObjectUrl, error: object_store::Error) -> Self {
        match error {
            object_store::Error::NotFound { .. } => ObjectError::NotFound { url: url.to_string() },
            other => ObjectError::Store { url: url.to_string(), detail: other.to_string() },
        }
    }
}

/// A document read from the store: held like an upload (its bytes with their hash and their
/// reservation in the upload budget), and the object's ETag when read.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The document.
    pub document: HeldDocument,
    /// The object's ETag when read.
    pub etag: Option<String>,
}

/// An object a listing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its URL.
    pub url: ObjectUrl,
    /// Its size.
    pub bytes: u64,
}

/// The object store as the pod uses it.
pub struct Objects {
    config: ObjectsConfig,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    /// Where what was read is kept (the pod's one document cache).
    documents: Arc<DocCache>,
    etags: EtagIndex,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Objects").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Objects {
    /// The store `config` describes, keeping what it reads in `documents`.
    pub fn new(config: ObjectsConfig, documents: Arc<DocCache>) -> Self {
        Self { config, stores: Mutex::new(HashMap::new()), documents, etags: EtagIndex::new() }
    }

    /// Checks that `url` may be used for `access`.
    pub fn check(&self, url: &ObjectUrl, access: Access) -> Result<(), ObjectError> {
        let scheme = self.config.backend.scheme();
        if url.scheme != scheme {
            return Err(ObjectError::OtherStore {
                url: url.to_string(),
                store: scheme.store(),
                scheme,
            });
        }
        let allowed = match access {
            Access::Read => &self.config.read_buckets,
            Access::Write => &self.config.write_buckets,
        };
        if allowed.contains(&url.bucket) {
            return Ok(());
        }
        Err(ObjectError::NotAllowed {
            url: url.to_string(),
            bucket: url.bucket.clone(),
            access,
            allowed: names(allowed),
        })
    }

    /// The client of `bucket` (made once).
    fn store(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>, object_store::Error> {
        let mut stores = self.stores.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(store) = stores.get(bucket) {
            return Ok(store.clone());
        }
        let store = self.config.backend.open(bucket, &self.config.connector)?;
        stores.insert(bucket.to_string(), store.clone());
        Ok(store)
    }

    /// Reads `url` whole (at most `max_bytes`), reserving its size in `budget` before its
    /// bytes are read. An object unchanged since the pod read it (one conditional request) is
    /// the document it still holds; a new one is kept for the next read. With `etag`, only that
    /// version is read: the one held without asking the store, else the object if it still is
    /// that version.
    pub async fn fetch(
        &self,
        url: &ObjectUrl,
        etag: Option<&str>,
        max_bytes: u64,
        budget: &Arc<ByteBudget>,
    ) -> Result<Fetched, ObjectError> {
        self.check(url, Access::Read)?;
        let held = self.held(url);
        if let Some(held) =
            held.as_ref().filter(|held| etag.is_some() && held.etag.as_deref() == etag)
        {
            self.etags.hit();
            return Ok(held.clone());
        }
        let store = self.store(&url.bucket).map_err(|e| ObjectError::store(url, e))?;
        let path = StorePath::from(url.key.as_str());
        let options = match etag {
            Some(etag) => GetOptions { if_match: Some(etag.to_string()), ..GetOptions::default() },
            None => GetOptions {
                if_none_match: held.as_ref().and_then(|fetched| fetched.etag.clone()),
                ..GetOptions::default()
            },
        };
        let result = match (store.get_opts(&path, options).await, held, etag) {
            (Err(object_store::Error::NotModified { .. }), Some(held), None) => {
                self.etags.hit();
                return Ok(held);
            }
            (Err(object_store::Error::Precondition { .. }), _, Some(etag)) => {
                return Err(ObjectError::Changed { url: url.to_string(), etag: etag.to_string() });
            }
            (other, _, _) => other.map_err(|e| ObjectError::store(url, e))?,
        };
        let size = result.meta.size;
        if size > max_bytes {
            return Err(ObjectError::TooLarge {
                url: url.to_string(),
                bytes: size,
                max: max_bytes,
            });
        }
        let reservation = Arc::new(
            budget.reserve(size).ok_or_else(|| ObjectError::NoRoom { url: url.to_string() })?,
        );
        let etag = result.meta.e_tag.clone();
        let bytes = result.bytes().await.map_err(|e| ObjectError::store(url, e))?;
        let hash = DocHash::of_shared(&bytes)
            .await
            .map_err(|e| ObjectError::Hash { url: url.to_string(), detail: e.to_string() })?;
        let document = HeldDocument { bytes, hash, reservation };
        let Some(etag) = etag else {
            // Nothing to check a kept copy by.
            return Ok(Fetched { document, etag: None });
        };
        let document = self.keep(url, document, &etag);
        Ok(Fetched { document, etag: Some(etag) })
    }

    /// Keeps `document` in the document cache as what `url` is at `etag`; the copy it holds.
    fn keep(&self, url: &ObjectUrl, document: HeldDocument, etag: &str) -> HeldDocument {
        let hash = document.hash;
        let document = self.documents.insert(document, None);
        self.etags.put(url, Seen { etag: etag.to_string(), hash });
        document
    }

    /// The document `url` was when last read, if the cache still holds it.
    fn held(&self, url: &ObjectUrl) -> Option<Fetched> {
        let seen = self.etags.get(url)?;
        // Counted by the etags once the store says the copy is current, never here.
        let Some(document) = self.documents.get_uncounted(&[Digest::Blake3(seen.hash)]) else {
            self.etags.forget(url);
            return None;
        };
        Some(Fetched { document, etag: Some(seen.etag) })
    }

    /// Stores an uploaded document at `url` and keeps it as the version written: a job that
    /// names that version (its ETag, answered) finds it here without a read.
    pub async fn put_document(
        &self,
        url: &ObjectUrl,
        document: HeldDocument,
    ) -> Result<Option<String>, ObjectError> {
        let etag = self.put(url, document.bytes.clone(), "application/octet-stream").await?;
        if let Some(etag) = &etag {
            self.keep(url, document, etag);
        }
        Ok(etag)
    }

    /// Writes `bytes` to `url` whole (a put replaces what was there: written again, an output
    /// is the same object, never a second one); the ETag the store gave it, if any.
    pub async fn put(
        &self,
        url: &ObjectUrl,
        bytes: Bytes,
        content_type: &str,
    ) -> Result<Option<String>, ObjectError> {
        self.check(url, Access::Write)?;
        let store = self.store(&url.bucket).map_err(|e| ObjectError::store(url, e))?;
        let mut attributes = Attributes::new();
        if self.config.backend.keeps_content_types() {
            attributes.insert(Attribute::ContentType, content_type.to_string().into());
        }
        let options = PutOptions { attributes, ..Default::default() };
        store
            .put_opts(&StorePath::from(url.key.as_str()), PutPayload::from(bytes), options)
            .await
            .map(|written| written.e_tag)
            .map_err(|e| ObjectError::store(url, e))
    }

    /// Reads a small object whole (a manifest), without the budget: `max_bytes` bounds it.
    pub async fn read_small(&self, url: &ObjectUrl, max_bytes: u64) -> Result<Bytes, ObjectError> {
        let store = self.store(&url.bucket).map_err(|e| ObjectError::store(url, e))?;
        let result = store
            .get_opts(&StorePath::from(url.key.as_str()), GetOptions::default())
            .await
            .map_err(|e| ObjectError::store(url, e))?;
        if result.meta.size > max_bytes {
            let bytes = result.meta.size;
            return Err(ObjectError::TooLarge { url: url.to_string(), bytes, max: max_bytes });
        }
        result.bytes().await.map_err(|e| ObjectError::store(url, e))
    }

    /// Every object under `prefix`.
    pub async fn list(&self, prefix: &ObjectUrl) -> Result<Vec<Listed>, ObjectError> {
        let store = self.store(&prefix.bucket).map_err(|e| ObjectError::store(prefix, e))?;
        let path = StorePath::from(prefix.key.trim_end_matches('/'));
        let listed: Vec<_> = store
            .list(Some(&path))
            .try_collect()
            .await
            .map_err(|e| ObjectError::store(prefix, e))?;
        Ok(listed
            .into_iter()
            .map(|meta| Listed {
                url: ObjectUrl {
                    scheme: prefix.scheme,
                    bucket: prefix.bucket.clone(),
                    key: meta.location.to_string(),
                },
                bytes: meta.size,
            })
            .collect())
    }

    /// Removes `url` (a missing object is no error).
    pub async fn delete(&self, url: &ObjectUrl) -> Result<(), ObjectError> {
        self.check(url, Access::Write)?;
        let store = self.store(&url.bucket).map_err(|e| ObjectError::store(url, e))?;
        match store.delete(&StorePath::from(url.key.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ObjectError::store(url, e)),
        }
    }

    /// The ETag index's size and hits, for `/readyz`.
    pub fn cache_status(&self) -> EtagStatus {
        self.etags.status()
    }

    /// The configuration, for the log line at start.
    pub fn config(&self) -> &ObjectsConfig {
        &self.config
    }
}

/// Bucket names for a message.
fn names(set: &BTreeSet<String>) -> String {
    if set.is_empty() {
        return "none".into();
    }
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}
