//! The pod's CPU and memory limits from its cgroup (v1 or v2), falling back to the host.
//!
//! The slot count itself comes from `renderpool_sizing::plan_slots`, the formula the operator
//! also uses; this module only finds the numbers to feed it and says where each one came from.

mod host;
mod metrics;
mod mounts;
mod values;

use std::path::{Path, PathBuf};

use renderpool_sizing::Limits;
use serde::Serialize;

pub use metrics::PlanMetrics;
pub use mounts::{CgroupMount, ControllerDir, controller_dir, parse_mountinfo, parse_proc_cgroup};
pub use values::{ValueError, cpu_max_v2, cpu_quota_v1, memory_limit};

/// Limits as resolved, with a sentence for each saying where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DetectedLimits {
    /// CPU limit in millicores.
    pub cpu_millis: u64,
    /// Where the CPU figure came from (a cgroup file or the host).
    pub cpu_source: String,
    /// Memory limit in bytes.
    pub memory_bytes: u64,
    /// Where the memory figure came from.
    pub memory_source: String,
}

impl DetectedLimits {
    /// The figures in the shape the sizing formula takes.
    pub fn limits(&self) -> Limits {
        Limits { cpu_millis: self.cpu_millis, memory_bytes: self.memory_bytes }
    }
}

/// Reads this process's limits from the real `/proc` and `/sys`.
pub fn detect() -> DetectedLimits {
    probe_at(Path::new("/"))
}

/// Reads limits from a filesystem rooted at `root` (`/` in production, a fixture tree in tests):
/// `root/proc/self/{mountinfo,cgroup}`, the cgroup mounts below `root`, `root/proc/meminfo`.
pub fn probe_at(root: &Path) -> DetectedLimits {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    let mounts = parse_mountinfo(&read("proc/self/mountinfo"));
    let membership = parse_proc_cgroup(&read("proc/self/cgroup"));
    let cpu = controller_dir("cpu", &mounts, &membership, root).and_then(|d| cgroup_cpu(&d));
    let memory =
        controller_dir("memory", &mounts, &membership, root).and_then(|d| cgroup_memory(&d));
    let (cpu_millis, cpu_source) = cpu.unwrap_or_else(|| {
        let cpus = host::cpus();
        (cpus * 1000, format!("host: {cpus} CPUs (no cgroup CPU limit)"))
    });
    let (memory_bytes, memory_source) = memory.unwrap_or_else(|| {
        let bytes = host::memory_bytes(&root.join("proc/meminfo")).unwrap_or(0);
        (bytes, format!("host: MemTotal {} MiB (no cgroup memory limit)", bytes >> 20))
    });
    DetectedLimits { cpu_millis, cpu_source, memory_bytes, memory_source }
}

/// The tightest CPU limit from the leaf cgroup up to the mount point.
fn cgroup_cpu(dir: &ControllerDir) -> Option<(u64, String)> {
    tightest(dir, |level| {
        if dir.v2 {
            let content = std::fs::read_to_string(level.join("cpu.max")).ok()?;
            let millis = cpu_max_v2(&content).map_err(log_bad).ok()??;
            Some((millis, format!("cgroup v2 {}/cpu.max = {}", level.display(), content.trim())))
        } else {
            let quota = std::fs::read_to_string(level.join("cpu.cfs_quota_us")).ok()?;
            let period = std::fs::read_to_string(level.join("cpu.cfs_period_us")).ok()?;
            let millis = cpu_quota_v1(&quota, &period).map_err(log_bad).ok()??;
            Some((
                millis,
                format!(
                    "cgroup v1 {}: cpu.cfs_quota_us = {}, cpu.cfs_period_us = {}",
                    level.display(),
                    quota.trim(),
                    period.trim()
                ),
            ))
        }
    })
}

/// The tightest memory limit from the leaf cgroup up to the mount point.
fn cgroup_memory(dir: &ControllerDir) -> Option<(u64, String)> {
    let file = if dir.v2 { "memory.max" } else { "memory.limit_in_bytes" };
    tightest(dir, |level| {
        let content = std::fs::read_to_string(level.join(file)).ok()?;
        let bytes = memory_limit(file, &content).map_err(log_bad).ok()??;
        let version = if dir.v2 { "v2" } else { "v1" };
        Some((bytes, format!("cgroup {version} {}/{file} = {bytes}", level.display())))
    })
}

/// The smallest limit found at the leaf or any ancestor up to the mount point (a pod-level
/// cgroup may be tighter than the container's own).
fn tightest(
    dir: &ControllerDir,
    read_level: impl Fn(&Path) -> Option<(u64, String)>,
) -> Option<(u64, String)> {
    let mut level: PathBuf = dir.leaf.clone();
    let mut best: Option<(u64, String)> = None;
    loop {
        if let Some(found) = read_level(&level)
            && best.as_ref().is_none_or(|(b, _)| found.0 < *b)
        {
            best = Some(found);
        }
        if level == dir.top || !level.pop() || !level.starts_with(&dir.top) {
            return best;
        }
    }
}

fn log_bad(err: ValueError) {
    tracing::warn!(error = %err, "ignoring unreadable cgroup limit");
}
