//! The machine-wide side of the real node: the lock that lets only one exist, and the host paths
//! its tools hard-code whatever they are configured with.

use std::path::{Path, PathBuf};

use crate::cluster::ClusterError;

/// Holds the machine lock and the undo record of the node that holds it.
pub(super) const MACHINE_DIR: &str = "/run/renderpool-real-node";

/// Paths the tools use whatever their configuration says: containerd's shim sockets, the
/// kubelet's device-plugin socket and container log links, libcni's result cache.
pub(super) const HARD_CODED: [&str; 4] = [
    "/run/containerd/s",
    "/var/lib/kubelet/device-plugins",
    "/var/log/containers",
    "/var/lib/cni/results",
];

/// The kubelet's cgroup for pods, made under every cgroup hierarchy.
pub(super) const POD_CGROUP: &str = "kubepods";

const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The machine lock's file.
pub(super) fn lock_path() -> PathBuf {
    Path::new(MACHINE_DIR).join("lock")
}

/// The undo record's file.
pub(super) fn record_path() -> PathBuf {
    Path::new(MACHINE_DIR).join("record.json")
}

/// The highest ancestor of `path` (or `path` itself) that does not exist yet: removing it later
/// removes exactly what the node's tools created. `None` if `path` exists.
pub(super) fn topmost_missing(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return None;
    }
    let mut top = path.to_path_buf();
    while let Some(parent) = top.parent() {
        if parent.exists() {
            break;
        }
        top = parent.to_path_buf();
    }
    Some(top)
}

/// The kubelet's pod cgroup under each hierarchy (`/sys/fs/cgroup/<hierarchy>/kubepods`), and
/// under the root itself on a pure cgroup v2 machine.
pub(super) fn pod_cgroups() -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(CGROUP_ROOT).join(POD_CGROUP)];
    if let Ok(entries) = std::fs::read_dir(CGROUP_ROOT) {
        dirs.extend(entries.flatten().map(|entry| entry.path().join(POD_CGROUP)));
    }
    dirs
}

/// The host folders to remove after the node (see [`HARD_CODED`]); fails, naming them, if any
/// hard-coded path or pod cgroup exists already: another kubelet or containerd on this machine,
/// or a node whose undo record is lost.
pub(super) fn claim_hard_coded() -> Result<Vec<PathBuf>, ClusterError> {
    let taken: Vec<String> = HARD_CODED
        .iter()
        .map(PathBuf::from)
        .chain(pod_cgroups())
        .filter(|path| path.exists())
        .map(|path| path.display().to_string())
        .collect();
    if !taken.is_empty() {
        return Err(ClusterError::RealNodeBusy(format!(
            "cannot start a real node: {} already exist (another kubelet or containerd on this \
             machine, or leftovers of a node that was not cleaned up; remove them)",
            taken.join(", ")
        )));
    }
    let mut roots: Vec<PathBuf> =
        HARD_CODED.iter().filter_map(|path| topmost_missing(Path::new(path))).collect();
    roots.dedup();
    Ok(roots)
}
