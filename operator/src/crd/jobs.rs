//! `spec.jobs`: durable jobs through NATS JetStream with documents in an object store (S3, GCS
//! or Azure Blob). Each field becomes a `render-pod serve` flag; each Secret reaches the pods as a
//! mounted file.

use super::{SecretKeyRef, bounds, defaults};
use kube::KubeSchema;
use renderpool_api::jobs::Scheme;
use serde::{Deserialize, Serialize};

/// Durable jobs (POST /v1/jobs): the render pods take jobs from a NATS JetStream stream, read
/// their documents from an object store (S3-compatible, GCS or Azure Blob) and write the
/// results there, and call each job's webhook at its end. Omit to run without durable jobs
/// (POST /v1/jobs answers 404). Credentials are named by Secret; each is mounted read-only into
/// the render pods as a file and read when a pod starts, so after changing one restart the pods
/// (kubectl rollout restart deployment <pool>-render).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct JobsSpec {
    /// The NATS server holding the job stream.
    pub nats: NatsSpec,

    /// The pool's queue on the NATS account: its streams RENDERPOOL_<QUEUE> and
    /// RENDERPOOL_<QUEUE>_DEAD (upper case, - as _), its subjects under renderpool.<queue> (jobs
    /// are published on renderpool.<queue>.submit, each job's end announced on
    /// renderpool.<queue>.events.<job id>) and its job-state bucket renderpool_<queue>. Pools
    /// on one NATS account need queues of their own: pools sharing one would take each other's
    /// jobs. Changing it moves the pool to an empty queue; the old one's jobs stay where they
    /// are.
    #[serde(default = "defaults::jobs_queue")]
    #[schemars(length(min = 1, max = 32))]
    #[schemars(pattern(r"^[a-z0-9]([a-z0-9_-]*[a-z0-9])?$"))]
    pub queue: String,

    /// Seconds a job delivered to a pod may go without word from it (the pods report progress
    /// at a third of this) before NATS delivers it to another pod: how soon a job lost with a
    /// killed pod runs again. A pod that drains hands its job back at once.
    #[serde(default = "defaults::ack_wait_seconds")]
    #[schemars(range(min = bounds::ACK_WAIT_SECONDS.min, max = bounds::ACK_WAIT_SECONDS.max))]
    pub ack_wait_seconds: i32,

    /// Deliveries lost with a worker or a pod (a crash, an out-of-memory kill, a killed pod)
    /// after which a job goes to the dead-letter stream with its reason instead of running
    /// again; a document PDFium refuses fails at once.
    #[serde(default = "defaults::max_deliveries")]
    #[schemars(range(min = bounds::MAX_DELIVERIES.min, max = bounds::MAX_DELIVERIES.max))]
    pub max_deliveries: i32,

    /// Limits of the work-queue stream and its dead-letter stream. Each render pod makes the
    /// streams at start if missing, and brings an existing stream to these limits (a stream
    /// with another retention or other subjects is refused: the pods do not start).
    #[serde(default)]
    pub stream: StreamSpec,

    /// The object store job documents are read from and results written to.
    pub objects: ObjectStoreSpec,

    /// Where POST /v1/jobs stores a document sent as the request body, as s3://<bucket>/<prefix>;
    /// the bucket must be one of objects.writeBuckets and objects.readBuckets. Omit to accept
    /// only jobs that name their document by URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    #[x_kube(validation = Rule::new("self.startsWith('s3://')")
        .message("jobs.uploadUrl must be an s3://<bucket>/<prefix> URL"))]
    pub upload_url: Option<String>,

    /// The Secret key holding the webhook signing secret (whsec_<base64>, as Standard Webhooks
    /// libraries make them, or any text). Omit to send webhooks unsigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_ref: Option<SecretKeyRef>,

    /// Let webhooks reach private, loopback and link-local addresses (receivers inside the
    /// cluster). Off by default, so a job cannot make the pods call internal services.
    #[serde(default)]
    pub webhook_allow_private: bool,
}

/// A NATS server and how the render pods log in.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NatsSpec {
    /// The server's URL: nats://, tls://, ws:// or wss://, e.g. nats://nats.nats:4222.
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = bounds::nats_url_scheme())]
    pub url: String,

    /// The Secret the render pods log in with, for a server that wants a login. Omit for a
    /// server that does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<NatsCredentialsRef>,
}

/// A Secret in the pool's namespace holding a NATS login: a credentials file (JWT and seed) or
/// a token, one of the two.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.credsKey) != has(self.tokenKey)")
    .message("jobs.nats.credentialsSecretRef needs exactly one of credsKey and tokenKey"))]
pub struct NatsCredentialsRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"))]
    pub name: String,

    /// The key holding a NATS credentials file (the .creds file nsc or the NATS account server
    /// makes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub creds_key: Option<String>,

    /// The key holding a NATS token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub token_key: Option<String>,
}

/// Limits of the job streams; a change rolls the render pods, which set the new limits.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StreamSpec {
    /// Most jobs the stream holds; past it a submission is refused (queued jobs are never
    /// dropped to make room).
    #[serde(default = "defaults::stream_max_messages")]
    #[schemars(range(min = bounds::STREAM_MAX_MESSAGES.min, max = bounds::STREAM_MAX_MESSAGES.max))]
    pub max_messages: i64,

    /// Seconds a queued job may wait before the stream drops it, at least 60.
    #[serde(default = "defaults::stream_max_age_seconds")]
    #[schemars(range(
        min = bounds::STREAM_MAX_AGE_SECONDS.min,
        max = bounds::STREAM_MAX_AGE_SECONDS.max
    ))]
    pub max_age_seconds: i64,

    /// Copies NATS keeps of the streams and the state bucket: 1, or 3 or 5 on a NATS cluster of
    /// at least that many servers.
    #[serde(default = "defaults::stream_replicas")]
    #[x_kube(validation = bounds::stream_replicas())]
    pub replicas: i32,
}

impl Default for StreamSpec {
    fn default() -> Self {
        Self {
            max_messages: defaults::stream_max_messages(),
            max_age_seconds: defaults::stream_max_age_seconds(),
            replicas: defaults::stream_replicas(),
        }
    }
}

/// The object store job documents are read from and results written to, exactly one of: an
/// S3-compatible store (endpoint and credentialsSecretRef: AWS S3, MinIO, Ceph RGW, ..., addressed
/// path-style; s3://bucket/key URLs), Google Cloud Storage (gcs; gs://bucket/key) or Azure Blob
/// Storage (azure; az://container/key). Jobs, ?source= and uploadUrl name objects by the store's
/// URLs only.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "(has(self.endpoint) ? 1 : 0) + (has(self.gcs) ? 1 : 0) + (has(self.azure) ? 1 : 0) == 1"
).message("jobs.objects needs exactly one store: endpoint (S3), gcs or azure"))]
#[x_kube(validation = Rule::new("has(self.endpoint) == has(self.credentialsSecretRef)")
    .message("jobs.objects.endpoint (S3) and jobs.objects.credentialsSecretRef go together"))]
pub struct ObjectStoreSpec {
    /// S3: the endpoint, http:// or https://, e.g. http://minio.storage:9000 or
    /// https://s3.eu-west-1.amazonaws.com.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')")
        .message("jobs.objects.endpoint must start with http:// or https://"))]
    pub endpoint: Option<String>,

    /// S3: the region requests are signed for.
    #[serde(default = "defaults::s3_region")]
    #[schemars(length(min = 1, max = 64))]
    pub region: String,

    /// S3: the Secret holding the store's access key id and secret access key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<S3CredentialsRef>,

    /// Google Cloud Storage instead of S3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcs: Option<GcsStoreSpec>,

    /// Azure Blob Storage instead of S3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureStoreSpec>,

    /// A Secret key holding the CA certificates (PEM) the store's https endpoint is signed by,
    /// when that is a private CA (an in-cluster MinIO whose certificate cert-manager issued):
    /// the render pods trust them for the store beside the public roots. Webhooks do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret_ref: Option<SecretKeyRef>,

    /// Buckets (containers on Azure) job documents may be read from (and ?source= URLs name). A
    /// job naming another bucket is refused.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(inner(length(min = 3, max = 63), pattern(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")))]
    pub read_buckets: Vec<String>,

    /// Buckets (containers on Azure) job results (and uploaded documents) may be written to. A
    /// job naming another bucket is refused.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(inner(length(min = 3, max = 63), pattern(r"^[a-z0-9][a-z0-9._-]*[a-z0-9]$")))]
    pub write_buckets: Vec<String>,
}

impl ObjectStoreSpec {
    /// The URLs the store takes.
    pub fn scheme(&self) -> Scheme {
        match (&self.gcs, &self.azure) {
            (Some(_), _) => Scheme::Gs,
            (None, Some(_)) => Scheme::Az,
            (None, None) => Scheme::S3,
        }
    }
}

/// Google Cloud Storage, for gs://bucket/key URLs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GcsStoreSpec {
    /// The Secret key holding a service account key: the JSON file `gcloud iam
    /// service-accounts keys create` writes, of an account that may read and write the buckets.
    pub service_account_secret_ref: SecretKeyRef,
}

/// Azure Blob Storage, for az://container/key URLs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AzureStoreSpec {
    /// The storage account.
    #[schemars(length(min = 3, max = 24))]
    #[schemars(pattern(r"^[a-z0-9]+$"))]
    pub account: String,

    /// The Secret key holding the storage account's access key.
    pub access_key_secret_ref: SecretKeyRef,

    /// The Blob endpoint, when not https://<account>.blob.core.windows.net: a sovereign cloud,
    /// or Azurite (http://azurite:10000/<account>).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2048))]
    #[x_kube(validation = Rule::new("self.startsWith('http://') || self.startsWith('https://')")
        .message("jobs.objects.azure.endpoint must start with http:// or https://"))]
    pub endpoint: Option<String>,
}

/// A Secret in the pool's namespace holding S3 credentials.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct S3CredentialsRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"))]
    pub name: String,

    /// The key holding the access key id.
    #[serde(default = "defaults::access_key_id_key")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub access_key_id_key: String,

    /// The key holding the secret access key.
    #[serde(default = "defaults::secret_access_key_key")]
    #[schemars(length(min = 1, max = 253))]
    #[schemars(pattern(r"^[-._a-zA-Z0-9]+$"))]
    pub secret_access_key_key: String,
}
