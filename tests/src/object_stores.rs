//! The object store of a jobs world: the real S3 server, or the GCS or Azure Blob emulator,
//! behind the one shape the world and the tests use (a client per bucket, the pod's flags, the
//! URLs the store takes).

use std::sync::Arc;

use object_store::ObjectStore;
use renderpool_api::jobs::Scheme;

use crate::azurite::AzuriteServer;
use crate::fake_gcs::GcsServer;
use crate::versitygw::S3Server;

/// A running object store.
pub enum Store {
    /// The Versity S3 Gateway.
    S3(S3Server),
    /// fake-gcs-server.
    Gcs(GcsServer),
    /// Azurite.
    Azure(AzuriteServer),
}

impl Store {
    /// Starts the store `scheme` names on 127.0.0.1 with `buckets` made.
    pub async fn start(scheme: Scheme, buckets: &[&str]) -> Store {
        match scheme {
            Scheme::S3 => Store::S3(S3Server::start(buckets).await),
            Scheme::Gs => Store::Gcs(GcsServer::start(buckets).await),
            Scheme::Az => Store::Azure(AzuriteServer::start(buckets).await),
        }
    }

    /// The URLs it takes.
    pub fn scheme(&self) -> Scheme {
        match self {
            Store::S3(_) => Scheme::S3,
            Store::Gcs(_) => Scheme::Gs,
            Store::Azure(_) => Scheme::Az,
        }
    }

    /// `<scheme>bucket/key`.
    pub fn url(&self, bucket: &str, key: &str) -> String {
        format!("{}{bucket}/{key}", self.scheme())
    }

    /// A client of `bucket`, as a producer has one.
    pub fn client(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        match self {
            Store::S3(s3) => s3.client(bucket),
            Store::Gcs(gcs) => gcs.client(bucket),
            Store::Azure(azure) => azure.client(bucket),
        }
    }

    /// The render pod's flags for the store and the buckets it may read and write.
    pub fn pod_flags(&self, read: &[&str], write: &[&str]) -> Vec<String> {
        let mut flags = match self {
            Store::S3(s3) => s3.pod_flags(),
            Store::Gcs(gcs) => gcs.pod_flags(),
            Store::Azure(azure) => azure.pod_flags(),
        };
        flags.extend(["--objects-read-buckets".into(), read.join(",")]);
        flags.extend(["--objects-write-buckets".into(), write.join(",")]);
        flags
    }

    /// The S3 server, for a test that reaches it by its address (the real node's pods).
    pub fn s3(&self) -> &S3Server {
        match self {
            Store::S3(s3) => s3,
            other => panic!("this world's store is {}, not S3", other.scheme().store()),
        }
    }
}
