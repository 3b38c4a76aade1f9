//! The service inside a real cgroup v1 `cpu` group with a CFS quota: the slot count follows the
//! quota (including one above this machine's core count, which only the quota can explain).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Server, binary, serve_args};

const CPU_CONTROLLER: &str = "/sys/fs/cgroup/cpu";

/// A child cgroup under the v1 cpu controller, removed on drop.
struct CpuGroup {
    path: PathBuf,
}

impl CpuGroup {
    /// `None` (with a message) when the controller is not there or not writable.
    fn create(name: &str, quota_us: u64, period_us: u64) -> Option<CpuGroup> {
        let root = Path::new(CPU_CONTROLLER);
        if !root.join("cpu.cfs_quota_us").exists() {
            eprintln!("SKIPPED: no cgroup v1 cpu controller at {CPU_CONTROLLER}");
            return None;
        }
        let path = root.join(format!("{name}-{}-{quota_us}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                eprintln!(
                    "SKIPPED: cannot create {} ({e}): the cpu controller is not writable",
                    path.display()
                );
                return None;
            }
            Err(e) => panic!("cannot create {}: {e}", path.display()),
        }
        let group = CpuGroup { path };
        std::fs::write(group.path.join("cpu.cfs_period_us"), period_us.to_string()).unwrap();
        std::fs::write(group.path.join("cpu.cfs_quota_us"), quota_us.to_string()).unwrap();
        Some(group)
    }

    /// `render-pod serve` started inside the group (a shell enters it, then execs the binary).
    fn serve(&self, flags: &[&str]) -> Server {
        let procs = self.path.join("cgroup.procs");
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(format!("echo $$ > '{}' && exec \"$0\" \"$@\"", procs.display()))
            .arg(binary())
            .args(serve_args(flags));
        Server::spawn(cmd)
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        // The server is gone by now; its workers die with it a moment later.
        let start = Instant::now();
        while std::fs::remove_dir(&self.path).is_err() {
            if start.elapsed() > Duration::from_secs(10) {
                eprintln!("could not remove {}", self.path.display());
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn slots_under_quota(quota_us: u64, expected_slots: u64) {
    let Some(group) = CpuGroup::create("renderpool-test", quota_us, 100_000) else {
        return;
    };
    let server = group.serve(&[]);
    let ready = server.wait_ready().await;
    let plan = &ready["plan"];
    assert_eq!(plan["limits"]["cpu_millis"], quota_us / 100, "{plan}");
    let source = plan["limits"]["cpu_source"].as_str().unwrap();
    assert!(source.contains(&format!("cpu.cfs_quota_us = {quota_us}")), "{source}");
    assert_eq!(plan["cpu_slots"], expected_slots, "{plan}");
    assert_eq!(plan["slots"], expected_slots, "{plan}");
    assert_eq!(ready["engine"]["alive"], expected_slots);
    assert_eq!(server.metric("renderpod_slots_planned", &[]).await, expected_slots as f64);
    // The workers run inside the group too.
    let group_name = group.path.file_name().unwrap().to_str().unwrap().to_string();
    for pid in server.worker_pids().await.into_iter().flatten() {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        assert!(cgroups.contains(&group_name), "worker {pid}: {cgroups}");
    }
    drop(server);
}

#[tokio::test]
async fn one_and_a_half_cores_give_one_slot() {
    slots_under_quota(150_000, 1).await;
}

#[tokio::test]
async fn three_and_a_half_cores_give_three_slots_even_on_a_smaller_host() {
    slots_under_quota(350_000, 3).await;
}
