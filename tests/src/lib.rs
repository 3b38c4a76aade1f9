//! End-to-end test support: the local Kubernetes control plane, a real Gotenberg, a real NATS
//! server and S3 server (and GCS and Azure Blob emulators) for durable jobs, the render pod as a process, the image archives and their runc containers, and helpers shared by the tests.

pub mod azurite;
pub mod balancer;
pub mod chart;
pub mod cluster;
pub mod fake_gcs;
pub mod gotenberg;
pub mod jobs;
pub mod load;
mod mounts;
pub mod nats;
pub mod object_stores;
pub mod oci;
pub mod operator;
pub mod panels;
mod ports;
mod process;
pub mod release;
pub mod render_pod;
pub mod runc;
mod served;
pub mod tls;
pub mod versitygw;

use std::path::PathBuf;

pub use ports::free_port;

/// The repository root (the folder holding the workspace `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The test documents' folder (see `renderpool_testkit::corpus`).
pub fn corpus_dir() -> PathBuf {
    renderpool_testkit::corpus::dir().to_path_buf()
}

/// Path of a workspace binary next to the running test executable (`target/<profile>/<name>`).
///
/// The test command builds every binary before the tests run; a missing one is a set-up error.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/<name>
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).map(PathBuf::from);
    let path = profile_dir.unwrap_or_default().join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// Path of a workspace binary built with the release profile (`target/release/<name>`), whatever
/// profile the running test or benchmark was built with; a missing one is a set-up error.
pub fn release_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<bench>-<hash> -> target/release/<name>
    let target = exe.ancestors().nth(3).map(PathBuf::from).unwrap_or_default();
    let path = target.join("release").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --release --bin {name}` first",
        path.display()
    );
    path
}

/// Waits up to `bound` until `url` answers a success (a server's health or readiness path).
pub async fn until_http_ok(
    what: &str,
    url: &str,
    bound: std::time::Duration,
) -> Result<(), renderpool_testkit::wait::TimedOut> {
    renderpool_testkit::wait::try_until(what, bound, || async {
        let status = reqwest::get(url).await.map(|r| r.status());
        status.as_ref().is_ok_and(|s| s.is_success()).then_some(()).ok_or(status)
    })
    .await
}

/// Where the servers tests start listen unless a test says otherwise.
pub const LOOPBACK: &str = "127.0.0.1";

/// Resident memory (VmRSS) of process `pid`, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
