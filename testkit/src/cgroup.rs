//! Child groups of the cgroup v1 cpu and memory controllers, for the tests and benchmarks that
//! hold a process to a CPU quota or a memory limit as a pod's container is held. A group is
//! removed on drop; a controller that is missing or not writable is a recorded skip.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::{capability, skip, wait};

/// Where the cgroup v1 cpu controller is mounted.
const CPU_CONTROLLER: &str = "/sys/fs/cgroup/cpu";
/// Where the cgroup v1 memory controller is mounted.
const MEMORY_CONTROLLER: &str = "/sys/fs/cgroup/memory";

/// A child group under one v1 controller, removed on drop (once its processes are gone).
#[derive(Debug)]
pub struct Group {
    path: PathBuf,
}

impl Group {
    /// A cpu group with a CFS quota of `quota_us` each `period_us`; `None` when the controller
    /// is not there or not writable, after recording the skip (which fails the test where
    /// `RENDERPOOL_CAPABILITIES` lists `cgroup-v1-cpu`).
    pub fn cpu(name: &str, quota_us: u64, period_us: u64) -> Option<Group> {
        let dir = format!("{name}-{}-{quota_us}", std::process::id());
        let group =
            Group::create(CPU_CONTROLLER, "cpu.cfs_quota_us", capability::CGROUP_V1_CPU, &dir)?;
        group.write("cpu.cfs_period_us", &period_us.to_string());
        group.write("cpu.cfs_quota_us", &quota_us.to_string());
        Some(group)
    }

    /// A memory group limited to `limit_bytes`, with no swap; `None` as for [`Group::cpu`]
    /// (capability `cgroup-v1-memory`).
    pub fn memory(name: &str, limit_bytes: u64) -> Option<Group> {
        let dir = format!("{name}-{}", std::process::id());
        let group = Group::create(
            MEMORY_CONTROLLER,
            "memory.limit_in_bytes",
            capability::CGROUP_V1_MEMORY,
            &dir,
        )?;
        group.write("memory.limit_in_bytes", &limit_bytes.to_string());
        // No swap: the limit is the memory. Not every kernel has the knob.
        let _ = std::fs::write(group.path.join("memory.swappiness"), "0");
        Some(group)
    }

    /// Creates `dir` under the controller mounted at `controller` (which has `probe` when it is
    /// there); `None` after recording a skip for `capability` when it is missing or not
    /// writable.
    fn create(controller: &str, probe: &str, capability: &str, dir: &str) -> Option<Group> {
        let root = Path::new(controller);
        if !root.join(probe).exists() {
            skip(capability, format!("no cgroup v1 controller with {probe} at {controller}"));
            return None;
        }
        let path = root.join(dir);
        match std::fs::create_dir(&path) {
            Ok(()) => Some(Group { path }),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                let reason = format!(
                    "cannot create {} ({e}): the controller is not writable",
                    path.display()
                );
                skip(capability, reason);
                None
            }
            Err(e) => panic!("cannot create {}: {e}", path.display()),
        }
    }

    /// The group's folder under its controller.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file a process enters the group by: its pid written there.
    pub fn procs(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// Moves process `pid` (all its threads) into the group; the processes it starts from then
    /// on are born in it.
    pub fn enter(&self, pid: u32) {
        let procs = self.procs();
        std::fs::write(&procs, pid.to_string())
            .unwrap_or_else(|e| panic!("cannot write {pid} to {}: {e}", procs.display()));
    }

    /// Writes one of the group's files.
    pub fn write(&self, file: &str, value: &str) {
        std::fs::write(self.path.join(file), value)
            .unwrap_or_else(|e| panic!("cannot write {file} of {}: {e}", self.path.display()));
    }

    /// A number from one of the group's files: the whole file, or the value after `key`
    /// (`memory.oom_control`'s `oom_kill 0` lines).
    pub fn read(&self, file: &str, key: Option<&str>) -> u64 {
        let text = std::fs::read_to_string(self.path.join(file))
            .unwrap_or_else(|e| panic!("cannot read {file} of {}: {e}", self.path.display()));
        let value = match key {
            None => text.trim(),
            Some(key) => text
                .lines()
                .find_map(|l| l.strip_prefix(key).map(str::trim))
                .unwrap_or_else(|| panic!("no {key} in {file}: {text}")),
        };
        value.parse().unwrap_or_else(|_| panic!("{file}: {value:?} is not a number"))
    }

    /// Processes the kernel's OOM killer killed in a memory group so far.
    pub fn oom_kills(&self) -> u64 {
        self.read("memory.oom_control", Some("oom_kill "))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // A server's workers die a moment after it: the folder goes once they are gone.
        let what = format!("removal of {}", self.path.display());
        let removed = wait::try_until_blocking(&what, Duration::from_secs(10), || {
            std::fs::remove_dir(&self.path).map_err(|e| e.to_string())
        });
        if let Err(timed_out) = removed {
            eprintln!("{timed_out}");
        }
    }
}
