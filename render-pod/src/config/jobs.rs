//! `render-pod serve` flags of the durable jobs and the object store. Credentials are files (a
//! Secret mounted as files), never values on the command line or in the environment.

use std::path::PathBuf;
use std::time::Duration;

use renderpool_api::jobs::{ObjectUrl, Scheme, Subjects, defaults};
use renderpool_api::render_pod::env;

use crate::broker::BrokerConfig;
use crate::jobs::webhook::{self, SecretError, WebhookConfig};
use crate::objects::config::StoreFlags;
use crate::objects::{ObjectsConfig, ObjectsConfigError};

/// Flags of durable jobs and object storage.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Durable jobs and object storage")]
pub struct JobsArgs {
    /// NATS server URL (e.g. nats://nats:4222): turns durable jobs on (`POST /v1/jobs`, and
    /// this pod takes jobs from the pool's stream). Needs an object store.
    #[arg(long, env = env::JOBS_NATS_URL)]
    pub jobs_nats_url: Option<String>,
    /// NATS credentials file (JWT and seed) for a server that wants one.
    #[arg(long, env = env::JOBS_NATS_CREDS_FILE)]
    pub jobs_nats_creds_file: Option<PathBuf>,
    /// File holding a NATS token for a server that wants one.
    #[arg(long, env = env::JOBS_NATS_TOKEN_FILE)]
    pub jobs_nats_token_file: Option<PathBuf>,
    /// The work-queue stream jobs are published to; made at start if missing.
    #[arg(long, env = env::JOBS_STREAM, default_value = defaults::STREAM)]
    pub jobs_stream: String,
    /// The stream jobs that keep killing workers or pods are moved to.
    #[arg(long, env = env::JOBS_DEAD_LETTER_STREAM, default_value = defaults::DEAD_LETTER_STREAM)]
    pub jobs_dead_letter_stream: String,
    /// Subject prefix: jobs on `<prefix>.submit`, dead letters on `<prefix>.dead`, each job's
    /// end on `<prefix>.events.<job id>`.
    #[arg(long, env = env::JOBS_SUBJECT_PREFIX, default_value = defaults::SUBJECT_PREFIX)]
    pub jobs_subject_prefix: String,
    /// The durable pull consumer every pod of the pool shares.
    #[arg(long, env = env::JOBS_CONSUMER, default_value = defaults::CONSUMER)]
    pub jobs_consumer: String,
    /// The key-value bucket of job states.
    #[arg(long, env = env::JOBS_STATE_BUCKET, default_value = defaults::STATE_BUCKET)]
    pub jobs_state_bucket: String,
    /// Most jobs the stream holds; past it a publish is refused (the backlog is never dropped).
    #[arg(long, env = env::JOBS_STREAM_MAX_MESSAGES, default_value_t = defaults::STREAM_MAX_MESSAGES,
          value_parser = clap::value_parser!(i64).range(1..))]
    pub jobs_stream_max_messages: i64,
    /// Seconds a queued job may wait before the stream drops it.
    #[arg(long, env = env::JOBS_STREAM_MAX_AGE_SECS, default_value_t = u64::from(defaults::STREAM_MAX_AGE_SECS),
          value_parser = clap::value_parser!(u64).range(60..))]
    pub jobs_stream_max_age_secs: u64,
    /// Replicas of the streams and the state bucket (a NATS cluster's; 1, 3 or 5).
    #[arg(long, env = env::JOBS_STREAM_REPLICAS, default_value_t = u64::from(defaults::STREAM_REPLICAS),
          value_parser = clap::value_parser!(u64).range(1..=5))]
    pub jobs_stream_replicas: u64,
    /// Seconds a job's state is kept after its last change.
    #[arg(long, env = env::JOBS_STATE_TTL_SECS, default_value_t = 7 * 86_400,
          value_parser = clap::value_parser!(u64).range(60..))]
    pub jobs_state_ttl_secs: u64,
    /// Milliseconds a delivered job may go without an ack or an in-progress ack before the
    /// broker delivers it again (a pod that died mid-job); in-progress acks go at a third of it.
    #[arg(long, env = env::JOBS_ACK_WAIT_MS, default_value_t = defaults::ACK_WAIT_MS,
          value_parser = clap::value_parser!(u64).range(1_000..))]
    pub jobs_ack_wait_ms: u64,
    /// Deliveries that end with a dead worker or a lost pod after which a job goes to the
    /// dead-letter stream with its reason (a document PDFium refuses fails at once instead).
    #[arg(long, env = env::JOBS_MAX_DELIVERIES, default_value_t = defaults::MAX_DELIVERIES,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub jobs_max_deliveries: u32,
    /// Take jobs from the stream; `false` for a pod that only accepts and reports them.
    #[arg(long, env = env::JOBS_PULL, default_value_t = true, action = clap::ArgAction::Set)]
    pub jobs_pull: bool,
    /// Where `POST /v1/jobs` stores a document sent as the body, e.g. s3://uploads/jobs (a
    /// bucket this pod may read and write).
    #[arg(long, env = env::JOBS_UPLOAD_URL)]
    pub jobs_upload_url: Option<String>,
    /// File holding the webhook signing secret (`whsec_<base64>`, as Standard Webhooks
    /// libraries make them, or any text); without it webhooks are sent unsigned.
    #[arg(long, env = env::JOBS_WEBHOOK_SECRET_FILE)]
    pub jobs_webhook_secret_file: Option<PathBuf>,
    /// Send webhooks to private, loopback and link-local addresses too (receivers inside the
    /// cluster).
    #[arg(long, env = env::JOBS_WEBHOOK_ALLOW_PRIVATE, default_value_t = false,
          action = clap::ArgAction::Set)]
    pub jobs_webhook_allow_private: bool,
    /// Milliseconds one webhook attempt may take.
    #[arg(long, env = env::JOBS_WEBHOOK_TIMEOUT_MS, default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(100..))]
    pub jobs_webhook_timeout_ms: u64,
    /// Webhook attempts in all (retried with backoff on 5xx, 429 and timeouts).
    #[arg(long, env = env::JOBS_WEBHOOK_ATTEMPTS, default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub jobs_webhook_attempts: u32,
    /// S3 endpoint for `s3://` URLs (path-style requests; any S3-compatible server), e.g.
    /// http://minio:9000.
    #[arg(long, env = env::OBJECTS_S3_ENDPOINT)]
    pub objects_s3_endpoint: Option<String>,
    /// The region S3 requests are signed for.
    #[arg(long, env = env::OBJECTS_S3_REGION, default_value = defaults::S3_REGION)]
    pub objects_s3_region: String,
    /// File holding the S3 access key id.
    #[arg(long, env = env::OBJECTS_S3_ACCESS_KEY_ID_FILE)]
    pub objects_s3_access_key_id_file: Option<PathBuf>,
    /// File holding the S3 secret access key.
    #[arg(long, env = env::OBJECTS_S3_SECRET_ACCESS_KEY_FILE)]
    pub objects_s3_secret_access_key_file: Option<PathBuf>,
    /// File holding a Google Cloud service account key (JSON): the store is Google Cloud
    /// Storage, for gs://bucket/key URLs.
    #[arg(long, env = env::OBJECTS_GCS_SERVICE_ACCOUNT_FILE)]
    pub objects_gcs_service_account_file: Option<PathBuf>,
    /// Azure storage account: the store is Azure Blob Storage, for az://container/key URLs.
    #[arg(long, env = env::OBJECTS_AZURE_ACCOUNT)]
    pub objects_azure_account: Option<String>,
    /// File holding the Azure storage account's access key.
    #[arg(long, env = env::OBJECTS_AZURE_ACCESS_KEY_FILE)]
    pub objects_azure_access_key_file: Option<PathBuf>,
    /// Azure Blob endpoint, when not https://<account>.blob.core.windows.net (Azurite, a
    /// sovereign cloud), e.g. http://azurite:10000/devstoreaccount1.
    #[arg(long, env = env::OBJECTS_AZURE_ENDPOINT)]
    pub objects_azure_endpoint: Option<String>,
    /// CA certificates (PEM) the store's https endpoint may be signed by, trusted for the store
    /// beside the system's roots: a store of a private CA, e.g. an in-cluster MinIO whose
    /// certificate cert-manager issued. Webhooks do not trust them.
    #[arg(long, env = env::OBJECTS_CA_FILE)]
    pub objects_ca_file: Option<PathBuf>,
    /// A local folder instead of S3: s3://bucket/key is <folder>/bucket/key (a pod run by hand).
    #[arg(long, env = env::OBJECTS_DIR)]
    pub objects_dir: Option<PathBuf>,
    /// Buckets (containers on Azure) documents may be read from (comma-separated): job inputs
    /// and `?source=`.
    #[arg(long, env = env::OBJECTS_READ_BUCKETS, value_delimiter = ',')]
    pub objects_read_buckets: Vec<String>,
    /// Buckets job outputs (and uploaded documents) may be written to (comma-separated).
    #[arg(long, env = env::OBJECTS_WRITE_BUCKETS, value_delimiter = ',')]
    pub objects_write_buckets: Vec<String>,
}

/// Why the job flags cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JobsConfigError {
    /// The object store flags.
    #[error(transparent)]
    Objects(#[from] ObjectsConfigError),
    /// The webhook secret.
    #[error(transparent)]
    Secret(#[from] SecretError),
    /// Jobs without a store to read and write.
    #[error(
        "durable jobs (--jobs-nats-url) need an object store: --objects-s3-endpoint, --objects-gcs-service-account-file, --objects-azure-account or --objects-dir"
    )]
    NoStore,
    /// A bad upload URL.
    #[error("--jobs-upload-url: {0}")]
    UploadUrl(String),
}

impl JobsArgs {
    /// The object store, if one is configured.
    pub fn objects(&self) -> Result<Option<ObjectsConfig>, JobsConfigError> {
        Ok(ObjectsConfig::from_flags(&StoreFlags {
            endpoint: given(&self.objects_s3_endpoint),
            region: &self.objects_s3_region,
            access_key_id_file: self.objects_s3_access_key_id_file.as_deref(),
            secret_access_key_file: self.objects_s3_secret_access_key_file.as_deref(),
            gcs_service_account_file: self.objects_gcs_service_account_file.as_deref(),
            azure_account: given(&self.objects_azure_account),
            azure_access_key_file: self.objects_azure_access_key_file.as_deref(),
            azure_endpoint: given(&self.objects_azure_endpoint),
            ca_file: self.objects_ca_file.as_deref(),
            dir: self.objects_dir.as_deref(),
            read_buckets: &self.objects_read_buckets,
            write_buckets: &self.objects_write_buckets,
        })?)
    }

    /// The broker, when jobs are on.
    pub fn broker(&self) -> Option<BrokerConfig> {
        let url = self.jobs_nats_url.clone().filter(|u| !u.trim().is_empty())?;
        Some(BrokerConfig {
            url,
            creds_file: self.jobs_nats_creds_file.clone(),
            token_file: self.jobs_nats_token_file.clone(),
            stream: self.jobs_stream.clone(),
            dead_letter_stream: self.jobs_dead_letter_stream.clone(),
            subjects: Subjects::under(&self.jobs_subject_prefix),
            consumer: self.jobs_consumer.clone(),
            state_bucket: self.jobs_state_bucket.clone(),
            max_messages: self.jobs_stream_max_messages,
            max_age: Duration::from_secs(self.jobs_stream_max_age_secs),
            replicas: usize::try_from(self.jobs_stream_replicas).unwrap_or(1),
            state_ttl: Duration::from_secs(self.jobs_state_ttl_secs),
            ack_wait: Duration::from_millis(self.jobs_ack_wait_ms),
            max_deliveries: self.jobs_max_deliveries,
        })
    }

    /// How webhooks are sent (the secret read from its file).
    pub fn webhook(&self) -> Result<WebhookConfig, JobsConfigError> {
        let key = self.jobs_webhook_secret_file.as_deref().map(webhook::read_key).transpose()?;
        Ok(WebhookConfig {
            key,
            allow_private: self.jobs_webhook_allow_private,
            timeout: Duration::from_millis(self.jobs_webhook_timeout_ms),
            attempts: self.jobs_webhook_attempts,
            first_backoff: Duration::from_secs(1),
        })
    }

    /// Where uploaded job documents go: a URL the pod's store (`scheme`) takes.
    pub fn upload_url(&self, scheme: Scheme) -> Result<Option<ObjectUrl>, JobsConfigError> {
        let Some(text) = given(&self.jobs_upload_url) else {
            return Ok(None);
        };
        let url =
            ObjectUrl::parse(text.trim()).map_err(|e| JobsConfigError::UploadUrl(e.to_string()))?;
        if url.scheme != scheme {
            return Err(JobsConfigError::UploadUrl(format!(
                "{url} is not on the pod's object store, {}, which takes {scheme} URLs",
                scheme.store()
            )));
        }
        Ok(Some(url))
    }
}

/// A flag's value, unless it is missing or blank (an unset variable in a pod spec).
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.trim().is_empty())
}
