//! End-to-end test support: the local Kubernetes control plane and helpers shared by the tests.

pub mod cluster;
pub mod operator;
mod process;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

/// The repository root (the folder holding the workspace `Cargo.toml`).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The shared test corpus, laid beside the checkout as `../shared/corpus`.
pub fn corpus_dir() -> PathBuf {
    repo_root().join("../shared/corpus")
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

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("no free port on 127.0.0.1: {err}"))
}

/// Polls `check` every 250 ms until it yields a value or `timeout` passes.
pub async fn wait_for<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = tokio::time::Instant::now();
    while start.elapsed() < timeout {
        if let Some(value) = check().await {
            return Some(value);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}
