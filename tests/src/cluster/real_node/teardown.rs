//! Undoing a real node from its record, and finding what a node left on the machine.
//!
//! Every step tolerates what is already gone, so it undoes a half-finished start, and it runs
//! in the reaper after the test process has ended (normally, by panic or killed outright).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use renderpool_testkit::wait;

use super::host::{self, HARD_CODED};
use super::network::{BRIDGE, GUARD_TABLE, KUBE_PROXY_TABLES, SERVICE_SINK};
use super::record::{Daemon, Record};
use super::{sysctl, system_tool};
use crate::cluster::addresses::{POD_RANGE, SERVICE_RANGE};
use crate::mounts;

/// The binaries whose processes belong to a real node.
const NODE_BINARIES: [&str; 5] =
    ["containerd", "containerd-shim-runc-v2", "kubelet", "kube-proxy", "coredns"];

/// Undoes everything `record` lists; returns what could not be undone.
pub(super) fn undo(record: &Record) -> Vec<String> {
    let mut problems = Vec::new();
    // Newest first: the kubelet before the runtime it drives.
    for daemon in record.daemons.iter().rev() {
        stop_daemon(daemon, &mut problems);
    }
    kill_containers(record, &mut problems);
    unmount_under(&record.node_dir, &mut problems);
    for table in &record.nft_tables {
        if nft_table_exists(table) {
            command("nft", &format!("delete table {table}"), &mut problems);
        }
    }
    for route in &record.routes {
        if route.last().is_some_and(|destination| route_exists(destination)) {
            command("ip", &format!("route del {}", route.join(" ")), &mut problems);
        }
    }
    for link in &record.links {
        if link_exists(link) {
            command("ip", &format!("link del {link}"), &mut problems);
        }
    }
    remove_pod_cgroups(&mut problems);
    for setting in record.sysctls.iter().rev() {
        if let Err(err) = sysctl::write(&setting.name, &setting.original) {
            problems.push(err.to_string());
        }
    }
    for path in &record.host_paths {
        remove_dir(path, &mut problems);
    }
    remove_dir(&record.node_dir, &mut problems);
    problems
}

/// What a real node left on this machine: its lock folder, network links, routes and tables,
/// hard-coded host paths, pod cgroups, mounts and processes. Empty when the machine is clean.
pub fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    if Path::new(host::MACHINE_DIR).exists() {
        found.push(format!("folder {}", host::MACHINE_DIR));
    }
    for link in [BRIDGE, SERVICE_SINK] {
        if link_exists(link) {
            found.push(format!("link {link}"));
        }
    }
    for range in [POD_RANGE, SERVICE_RANGE] {
        if route_exists(range) {
            found.push(format!("route {range}"));
        }
    }
    for table in KUBE_PROXY_TABLES.into_iter().chain([GUARD_TABLE]) {
        if nft_table_exists(table) {
            found.push(format!("nftables table {table}"));
        }
    }
    for path in HARD_CODED.iter().map(PathBuf::from).chain(host::pod_cgroups()) {
        if path.exists() {
            found.push(format!("path {}", path.display()));
        }
    }
    for mount in mounts::points().unwrap_or_default() {
        if mount.to_string_lossy().contains("renderpool-cluster-") {
            found.push(format!("mount {}", mount.display()));
        }
    }
    for (pid, exe) in node_processes() {
        found.push(format!("process {pid} ({})", exe.display()));
    }
    found
}

/// The kernel settings a real node may touch, with their current values (a test compares them
/// before and after a node's life).
pub fn kernel_settings() -> Vec<(String, String)> {
    sysctl::KUBELET_WANTS
        .iter()
        .map(|(name, _)| *name)
        .chain(["net/ipv4/ip_forward", "net/ipv4/conf/all/forwarding"])
        .map(|name| (name.to_string(), sysctl::read(name).unwrap_or_else(|err| err.to_string())))
        .collect()
}

/// Whether any daemon `record` lists still runs.
pub(super) fn runs_any(record: &Record) -> bool {
    record.daemons.iter().any(|daemon| runs(daemon.pid, &daemon.exe))
}

fn stop_daemon(daemon: &Daemon, problems: &mut Vec<String>) {
    if !runs(daemon.pid, &daemon.exe) {
        return;
    }
    signal(daemon.pid, libc::SIGTERM);
    if !wait_gone(daemon.pid, Duration::from_secs(10)) {
        signal(daemon.pid, libc::SIGKILL);
        if !wait_gone(daemon.pid, Duration::from_secs(5)) {
            problems.push(format!("{} ({}) does not die", daemon.pid, daemon.exe.display()));
        }
    }
}

/// Kills every container process (found by the pod cgroups) and every shim of the node's
/// containerd: neither is a child of the test process, so neither dies with it.
fn kill_containers(record: &Record, problems: &mut Vec<String>) {
    let gone = wait::try_until_blocking("no container process", Duration::from_secs(15), || {
        let pids = pod_cgroup_pids();
        for &pid in &pids {
            signal(pid, libc::SIGKILL);
        }
        if pids.is_empty() { Ok(()) } else { Err(pids) }
    });
    if let Err(timed_out) = gone {
        problems.push(format!("container processes survive SIGKILL: {timed_out}"));
    }
    for pid in shim_pids(&record.node_dir) {
        signal(pid, libc::SIGKILL);
        if !wait_gone(pid, Duration::from_secs(5)) {
            problems.push(format!("shim {pid} does not die"));
        }
    }
}

fn pod_cgroup_pids() -> Vec<u32> {
    let mut pids = Vec::new();
    for root in host::pod_cgroups() {
        for dir in dirs_depth_first(&root) {
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            pids.extend(procs.lines().filter_map(|line| line.trim().parse::<u32>().ok()));
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// The shims serving the node's containerd: its binary, with `-address` in the node's folder.
fn shim_pids(node_dir: &Path) -> Vec<u32> {
    processes()
        .filter(|(_, exe)| exe.file_name().is_some_and(|name| name == "containerd-shim-runc-v2"))
        .filter(|(pid, _)| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let mut args = cmdline.split(|byte| *byte == 0);
            args.any(|arg| arg == b"-address")
                && args.next().is_some_and(|address| {
                    Path::new(OsStr::from_bytes(address)).starts_with(node_dir)
                })
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Unmounts everything at or under `dir`, deepest first, until nothing is left (one mount may
/// hide another at the same place).
fn unmount_under(dir: &Path, problems: &mut Vec<String>) {
    for _ in 0..20 {
        let mut found = mounts::under(dir);
        if found.is_empty() {
            return;
        }
        found.sort_by_key(|mount| std::cmp::Reverse(mount.components().count()));
        for mount in found {
            let Ok(path) = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()) else {
                continue;
            };
            // SAFETY: umount2 with a valid NUL-terminated path; a lazy detach never blocks.
            unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
        }
    }
    let left = mounts::under(dir);
    if !left.is_empty() {
        problems.push(format!("cannot unmount {left:?}"));
    }
}

/// Removes the pod cgroups bottom-up; a cgroup empties a moment after its last process died.
fn remove_pod_cgroups(problems: &mut Vec<String>) {
    let removed = wait::try_until_blocking("no pod cgroup", Duration::from_secs(10), || {
        let mut left = Vec::new();
        for root in host::pod_cgroups() {
            for dir in dirs_depth_first(&root) {
                if std::fs::remove_dir(&dir).is_err() && dir.exists() {
                    left.push(dir);
                }
            }
        }
        if left.is_empty() { Ok(()) } else { Err(left) }
    });
    if let Err(timed_out) = removed {
        problems.push(format!("cannot remove cgroups: {timed_out}"));
    }
}

/// `root` and every folder under it, children before their parents.
fn dirs_depth_first(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                out.extend(dirs_depth_first(&entry.path()));
            }
        }
    }
    if root.is_dir() {
        out.push(root.to_path_buf());
    }
    out
}

/// Removes `path` whole unless something is mounted under it.
pub(super) fn remove_dir(path: &Path, problems: &mut Vec<String>) {
    if mounts::any_under(path) {
        problems.push(format!(
            "{} has mounts (or the mount table is unreadable); left in place",
            path.display()
        ));
        return;
    }
    match std::fs::remove_dir_all(path) {
        Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
            problems.push(format!("remove {}: {err}", path.display()));
        }
        _ => {}
    }
}

fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Whether the main table has a route of any type for exactly `destination`.
fn route_exists(destination: &str) -> bool {
    let Ok(ip) = system_tool("ip") else { return false };
    Command::new(ip)
        .args(["route", "show", "exact", destination])
        .output()
        .is_ok_and(|output| output.status.success() && !output.stdout.is_empty())
}

fn nft_table_exists(table: &str) -> bool {
    let Ok(nft) = system_tool("nft") else { return false };
    let args: Vec<&str> = ["list", "table"].into_iter().chain(table.split(' ')).collect();
    Command::new(nft).args(&args).output().is_ok_and(|output| output.status.success())
}

/// Runs a `tool` with space-separated `args`, noting a failure.
fn command(tool: &str, args: &str, problems: &mut Vec<String>) {
    let result = system_tool(tool)
        .and_then(|path| crate::cluster::run(Command::new(path).args(args.split(' '))));
    if let Err(err) = result {
        problems.push(err.to_string());
    }
}

/// Running processes of the node's binaries (not a distribution's own, under /usr).
fn node_processes() -> Vec<(u32, PathBuf)> {
    processes()
        .filter(|(_, exe)| {
            let name = exe.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            NODE_BINARIES.contains(&name) && !exe.starts_with("/usr")
        })
        .collect()
}

/// Every process whose binary can be read, with that binary's path.
fn processes() -> impl Iterator<Item = (u32, PathBuf)> {
    let entries = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    entries
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, std::fs::read_link(format!("/proc/{pid}/exe")).ok()?)))
}

/// Whether `pid` is alive and runs `exe` (a zombie or a reused pid does not count).
fn runs(pid: u32, exe: &Path) -> bool {
    let Ok(running) = std::fs::read_link(format!("/proc/{pid}/exe")) else { return false };
    let expected = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    running == expected
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: plain kill(2); callers checked the pid belongs to the node.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Waits until `pid` has exited (gone, or a zombie whose parent has not reaped it yet).
fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let what = format!("process {pid} gone");
    let gone = wait::try_until_blocking(&what, timeout, || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The state follows the parenthesised command name.
        let state = stat.rsplit_once(") ").and_then(|(_, rest)| rest.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) { Ok(()) } else { Err(state) }
    });
    gone.is_ok()
}
