//! The render pod's side of the contract: the environment variable of every `render-pod serve`
//! flag (the operator writes them, the image sets one, the pod's parser reads them), the
//! defaults the operator's CRD repeats, its port and its image.

use crate::quantity::Mebibytes;

/// The render pod's image, tagged with the workspace's version (the chart's appVersion, which a
/// test holds to it).
pub const IMAGE: &str = concat!("ghcr.io/renderpool/render-pod:", env!("CARGO_PKG_VERSION"));

/// The port the render pod serves on: its default listen address, the image's `EXPOSE`, and the
/// container port and Service port the operator gives it.
pub const PORT: u16 = 8080;

/// Jobs that may wait for a slot; beyond this requests get 503 at once.
pub const QUEUE_DEPTH: u16 = 64;
/// Milliseconds from arrival after which a job is dropped or its worker killed.
pub const JOB_DEADLINE_MS: u32 = 30_000;
/// Milliseconds between SIGTERM (readiness false at once) and refusing new work, for a pod run
/// by hand or by a Deployment of its own: nothing else holds it in its load balancers' pools
/// while they notice, so it waits a few of their check intervals. The operator's pods default
/// to less (`drainDelayMs` 1000 in the CRD) because they get `preStopSeconds` of serving
/// before SIGTERM, which already gave the endpoints time to go.
pub const DRAIN_DELAY_MS: u32 = 5_000;
/// Seconds a render pod has past preStop, its drain delay and one job deadline before the
/// kubelet kills it: the operator adds them to the pod's termination grace period, and the pod
/// spends them handing back the jobs it still holds and sending its last acks to the broker.
pub const EXIT_MARGIN_SECONDS: u8 = 5;
/// The last of those seconds: what the pod keeps for sending the broker what it has not sent.
pub const EXIT_FLUSH_SECONDS: u8 = 1;
/// The largest accepted request body.
pub const MAX_BODY: Mebibytes = Mebibytes(100);
/// Each worker's memory budget: its ceiling, and the unit the slot count is carved in.
pub const MEMORY_PER_SLOT: Mebibytes = Mebibytes(512);
/// Converted PDFs the supervisor keeps (its memory, not a slot's).
pub const OFFICE_CACHE: Mebibytes = Mebibytes(64);

/// The pool's job backlog as a render pod last read it from the broker: the `jobs` of its
/// `/readyz` body, which the operator copies into the RenderPool's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobsBacklog {
    /// Jobs in the pool's stream: queued, or taken by a pod and not yet ended.
    pub pending: u64,
    /// Milliseconds since the pod read the figure.
    pub age_ms: u64,
}

/// The key of [`JobsBacklog`] in the `/readyz` body (absent without jobs or before a reading).
pub const READYZ_JOBS: &str = "jobs";

/// The environment variable of each `render-pod serve` flag, named after the flag.
pub mod env {
    pub const LISTEN: &str = "RENDERPOD_LISTEN";
    pub const SLOTS: &str = "RENDERPOD_SLOTS";
    pub const MEMORY_PER_SLOT: &str = "RENDERPOD_MEMORY_PER_SLOT";
    pub const MEMORY_CEILING: &str = "RENDERPOD_MEMORY_CEILING";
    pub const SUPERVISOR_OVERHEAD: &str = "RENDERPOD_SUPERVISOR_OVERHEAD";
    pub const QUEUE_DEPTH: &str = "RENDERPOD_QUEUE_DEPTH";
    pub const JOB_DEADLINE_MS: &str = "RENDERPOD_JOB_DEADLINE_MS";
    pub const DRAIN_DELAY_MS: &str = "RENDERPOD_DRAIN_DELAY_MS";
    pub const GRACE_PERIOD_MS: &str = "RENDERPOD_GRACE_PERIOD_MS";
    pub const MAX_BODY_BYTES: &str = "RENDERPOD_MAX_BODY_BYTES";
    pub const UPLOAD_BUDGET: &str = "RENDERPOD_UPLOAD_BUDGET";
    pub const UPLOAD_ADMIT_SHARE: &str = "RENDERPOD_UPLOAD_ADMIT_SHARE";
    pub const ANSWER_BUDGET: &str = "RENDERPOD_ANSWER_BUDGET";
    pub const DOCUMENT_CACHE_BYTES: &str = "RENDERPOD_DOCUMENT_CACHE_BYTES";
    pub const HEADER_READ_TIMEOUT_MS: &str = "RENDERPOD_HEADER_READ_TIMEOUT_MS";
    pub const WRITE_TIMEOUT_MS: &str = "RENDERPOD_WRITE_TIMEOUT_MS";
    pub const WRITE_MIN_RATE: &str = "RENDERPOD_WRITE_MIN_RATE";
    pub const BODY_MIN_RATE: &str = "RENDERPOD_BODY_MIN_RATE";
    pub const BODY_IDLE_TIMEOUT_MS: &str = "RENDERPOD_BODY_IDLE_TIMEOUT_MS";
    pub const FRONT_LIMITS: &str = "RENDERPOD_FRONT_LIMITS";
    pub const THUMBNAIL_MAX_WIDTH: &str = "RENDERPOD_THUMBNAIL_MAX_WIDTH";
    pub const THUMBNAIL_MAX_DPI: &str = "RENDERPOD_THUMBNAIL_MAX_DPI";
    pub const THUMBNAIL_MAX_PIXELS: &str = "RENDERPOD_THUMBNAIL_MAX_PIXELS";
    pub const RECYCLE_AFTER_JOBS: &str = "RENDERPOD_RECYCLE_AFTER_JOBS";
    pub const MAX_PIXELS: &str = "RENDERPOD_MAX_PIXELS";
    pub const MAX_PAGES: &str = "RENDERPOD_MAX_PAGES";
    pub const POISON_TTL_MS: &str = "RENDERPOD_POISON_TTL_MS";
    pub const CANCEL_GRACE_MS: &str = "RENDERPOD_CANCEL_GRACE_MS";
    pub const WORKER_NICE: &str = "RENDERPOD_WORKER_NICE";
    pub const SANDBOX: &str = "RENDERPOD_SANDBOX";
    pub const SANDBOX_PROBE: &str = "RENDERPOD_SANDBOX_PROBE";
    pub const GOTENBERG_URL: &str = "RENDERPOD_GOTENBERG_URL";
    pub const OFFICE_CONCURRENCY: &str = "RENDERPOD_OFFICE_CONCURRENCY";
    pub const OFFICE_SHARE_FILE: &str = "RENDERPOD_OFFICE_SHARE_FILE";
    pub const OFFICE_SHARE_POLL_MS: &str = "RENDERPOD_OFFICE_SHARE_POLL_MS";
    pub const OFFICE_QUEUE_DEPTH: &str = "RENDERPOD_OFFICE_QUEUE_DEPTH";
    pub const OFFICE_CACHE_BYTES: &str = "RENDERPOD_OFFICE_CACHE_BYTES";
    pub const OFFICE_MAX_INFLATED_BYTES: &str = "RENDERPOD_OFFICE_MAX_INFLATED_BYTES";
    pub const OFFICE_MAX_PART_BYTES: &str = "RENDERPOD_OFFICE_MAX_PART_BYTES";
    pub const OFFICE_MAX_COMPRESSION_RATIO: &str = "RENDERPOD_OFFICE_MAX_COMPRESSION_RATIO";
    pub const AUTH_TOKEN_FILE: &str = "RENDERPOD_AUTH_TOKEN_FILE";
    pub const LOG_FORMAT: &str = "RENDERPOD_LOG_FORMAT";
    pub const WORKER_EXE: &str = "RENDERPOD_WORKER_EXE";
    // Durable jobs (NATS JetStream) and object storage. Credentials are files (Secrets mounted
    // as files), never values.
    pub const JOBS_NATS_URL: &str = "RENDERPOD_JOBS_NATS_URL";
    pub const JOBS_NATS_CREDS_FILE: &str = "RENDERPOD_JOBS_NATS_CREDS_FILE";
    pub const JOBS_NATS_TOKEN_FILE: &str = "RENDERPOD_JOBS_NATS_TOKEN_FILE";
    pub const JOBS_STREAM: &str = "RENDERPOD_JOBS_STREAM";
    pub const JOBS_DEAD_LETTER_STREAM: &str = "RENDERPOD_JOBS_DEAD_LETTER_STREAM";
    pub const JOBS_SUBJECT_PREFIX: &str = "RENDERPOD_JOBS_SUBJECT_PREFIX";
    pub const JOBS_CONSUMER: &str = "RENDERPOD_JOBS_CONSUMER";
    pub const JOBS_STATE_BUCKET: &str = "RENDERPOD_JOBS_STATE_BUCKET";
    pub const JOBS_STREAM_MAX_MESSAGES: &str = "RENDERPOD_JOBS_STREAM_MAX_MESSAGES";
    pub const JOBS_STREAM_MAX_AGE_SECS: &str = "RENDERPOD_JOBS_STREAM_MAX_AGE_SECS";
    pub const JOBS_STREAM_REPLICAS: &str = "RENDERPOD_JOBS_STREAM_REPLICAS";
    pub const JOBS_STATE_TTL_SECS: &str = "RENDERPOD_JOBS_STATE_TTL_SECS";
    pub const JOBS_ACK_WAIT_MS: &str = "RENDERPOD_JOBS_ACK_WAIT_MS";
    pub const JOBS_MAX_DELIVERIES: &str = "RENDERPOD_JOBS_MAX_DELIVERIES";
    pub const JOBS_PULL: &str = "RENDERPOD_JOBS_PULL";
    pub const JOBS_UPLOAD_URL: &str = "RENDERPOD_JOBS_UPLOAD_URL";
    pub const JOBS_WEBHOOK_SECRET_FILE: &str = "RENDERPOD_JOBS_WEBHOOK_SECRET_FILE";
    pub const JOBS_WEBHOOK_ALLOW_PRIVATE: &str = "RENDERPOD_JOBS_WEBHOOK_ALLOW_PRIVATE";
    pub const JOBS_WEBHOOK_TIMEOUT_MS: &str = "RENDERPOD_JOBS_WEBHOOK_TIMEOUT_MS";
    pub const JOBS_WEBHOOK_ATTEMPTS: &str = "RENDERPOD_JOBS_WEBHOOK_ATTEMPTS";
    pub const OBJECTS_S3_ENDPOINT: &str = "RENDERPOD_OBJECTS_S3_ENDPOINT";
    pub const OBJECTS_S3_REGION: &str = "RENDERPOD_OBJECTS_S3_REGION";
    pub const OBJECTS_S3_ACCESS_KEY_ID_FILE: &str = "RENDERPOD_OBJECTS_S3_ACCESS_KEY_ID_FILE";
    pub const OBJECTS_S3_SECRET_ACCESS_KEY_FILE: &str =
        "RENDERPOD_OBJECTS_S3_SECRET_ACCESS_KEY_FILE";
    pub const OBJECTS_GCS_SERVICE_ACCOUNT_FILE: &str = "RENDERPOD_OBJECTS_GCS_SERVICE_ACCOUNT_FILE";
    pub const OBJECTS_AZURE_ACCOUNT: &str = "RENDERPOD_OBJECTS_AZURE_ACCOUNT";
    pub const OBJECTS_AZURE_ACCESS_KEY_FILE: &str = "RENDERPOD_OBJECTS_AZURE_ACCESS_KEY_FILE";
    pub const OBJECTS_AZURE_ENDPOINT: &str = "RENDERPOD_OBJECTS_AZURE_ENDPOINT";
    pub const OBJECTS_CA_FILE: &str = "RENDERPOD_OBJECTS_CA_FILE";
    pub const OBJECTS_DIR: &str = "RENDERPOD_OBJECTS_DIR";
    pub const OBJECTS_READ_BUCKETS: &str = "RENDERPOD_OBJECTS_READ_BUCKETS";
    pub const OBJECTS_WRITE_BUCKETS: &str = "RENDERPOD_OBJECTS_WRITE_BUCKETS";
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `images/build.sh` tags the images with the chart's appVersion; the CRD's default image
    /// is tagged with the crate's version: the two must be one.
    #[test]
    fn the_image_tag_is_the_charts_app_version() {
        let chart =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/renderpool-operator/Chart.yaml");
        let text = std::fs::read_to_string(chart).unwrap_or_default();
        let app_version = text
            .lines()
            .find_map(|line| line.strip_prefix("appVersion:"))
            .map(|v| v.trim().trim_matches('"'));
        assert_eq!(app_version, Some(env!("CARGO_PKG_VERSION")), "{chart}");
        assert!(IMAGE.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))));
    }
}
