//! Default values, shared by serde (missing fields) and the schema (`kubectl explain`). Those
//! the render pod has too come from its own defaults (renderpool-api), so the two agree.

use renderpool_api::jobs::defaults as jobs;
use renderpool_api::{gotenberg, render_pod as pod};

pub fn replicas() -> i32 {
    2
}
pub fn image() -> String {
    pod::IMAGE.into()
}
pub fn cpu() -> String {
    "2".into()
}
pub fn memory() -> String {
    "2Gi".into()
}
pub fn memory_per_slot() -> String {
    pod::MEMORY_PER_SLOT.to_string()
}
pub fn queue_depth() -> i32 {
    i32::from(pod::QUEUE_DEPTH)
}
pub fn job_deadline_ms() -> i64 {
    i64::from(pod::JOB_DEADLINE_MS)
}
pub fn pre_stop_seconds() -> i64 {
    5
}
/// Less than the render pod's own 5000 on purpose: the pool's pods get `preStopSeconds` (5 s by
/// default) of serving while the endpoints drop them before SIGTERM, so the drain delay after it
/// only covers stragglers, and every millisecond of it lengthens the termination grace period.
pub fn drain_delay_ms() -> i64 {
    1_000
}
pub fn max_body_size() -> String {
    pod::MAX_BODY.to_string()
}
pub fn enabled() -> bool {
    true
}
/// The LibreOffice-only build: no Chromium in it, and the binary the tests prove the flags on.
pub fn gotenberg_image() -> String {
    gotenberg::image()
}
pub fn gotenberg_cpu() -> String {
    "1".into()
}
pub fn gotenberg_memory() -> String {
    "2Gi".into()
}
pub fn restart_after() -> i32 {
    10
}
pub fn queue_size() -> i32 {
    2
}
/// One pod above the replica count: capacity never drops during a rollout.
pub fn max_surge() -> i32 {
    1
}
pub fn min_replicas() -> i32 {
    1
}
pub fn target_busy_percent() -> i32 {
    70
}
pub fn scale_down_stabilization_seconds() -> i32 {
    300
}
pub fn jobs_queue() -> String {
    renderpool_api::jobs::QueueNames::DEFAULT.into()
}
pub fn stream_max_messages() -> i64 {
    jobs::STREAM_MAX_MESSAGES
}
pub fn stream_max_age_seconds() -> i64 {
    i64::from(jobs::STREAM_MAX_AGE_SECS)
}
pub fn ack_wait_seconds() -> i32 {
    i32::try_from(jobs::ACK_WAIT_MS / 1000).unwrap_or(i32::MAX)
}
pub fn max_deliveries() -> i32 {
    i32::try_from(jobs::MAX_DELIVERIES).unwrap_or(i32::MAX)
}
pub fn stream_replicas() -> i32 {
    i32::from(jobs::STREAM_REPLICAS)
}
pub fn s3_region() -> String {
    jobs::S3_REGION.into()
}
/// The key names MinIO's and most charts' S3 Secrets use.
pub fn access_key_id_key() -> String {
    "access-key-id".into()
}
pub fn secret_access_key_key() -> String {
    "secret-access-key".into()
}
/// The account of a NATS server without accounts configured.
pub fn nats_account() -> String {
    "$G".into()
}
/// Two pending jobs per slot: one running, one waiting.
pub fn target_pending_jobs_per_slot() -> i32 {
    2
}
