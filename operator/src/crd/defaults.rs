//! Default values, shared by serde (missing fields) and the schema (`kubectl explain`).

pub fn replicas() -> i32 {
    2
}
pub fn image() -> String {
    "ghcr.io/renderpool/render-pod:0.1.0".into()
}
pub fn cpu() -> String {
    "2".into()
}
pub fn memory() -> String {
    "2Gi".into()
}
pub fn memory_per_slot() -> String {
    "512Mi".into()
}
pub fn queue_depth() -> i32 {
    64
}
pub fn job_deadline_ms() -> i64 {
    30_000
}
pub fn pre_stop_seconds() -> i64 {
    5
}
pub fn drain_delay_ms() -> i64 {
    1_000
}
pub fn max_body_size() -> String {
    "100Mi".into()
}
pub fn enabled() -> bool {
    true
}
/// The LibreOffice-only build: no Chromium in it, and the binary the tests prove the flags on.
pub fn gotenberg_image() -> String {
    "ghcr.io/renderpool/gotenberg-libreoffice:8.36.0".into()
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
pub fn min_replicas() -> i32 {
    1
}
pub fn target_busy_percent() -> i32 {
    70
}
pub fn scale_down_stabilization_seconds() -> i32 {
    300
}
