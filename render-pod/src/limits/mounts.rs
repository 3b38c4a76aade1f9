//! Finding this process's cgroup directories from `/proc/self/mountinfo` and `/proc/self/cgroup`.

use std::path::{Path, PathBuf};

/// One cgroup filesystem mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// The path inside the cgroup hierarchy that is mounted (usually "/").
    pub root: String,
    /// Where it is mounted.
    pub mount_point: PathBuf,
    /// `None` for the v2 unified hierarchy, else the v1 controllers (e.g. `["cpu", "cpuacct"]`).
    pub v1_controllers: Option<Vec<String>>,
}

/// Parses the cgroup and cgroup2 mounts out of a mountinfo file.
pub fn parse_mountinfo(content: &str) -> Vec<CgroupMount> {
    content.lines().filter_map(parse_mount_line).collect()
}

fn parse_mount_line(line: &str) -> Option<CgroupMount> {
    // "id parent major:minor root mount_point options [optional...] - fstype source super_options"
    let (left, right) = line.split_once(" - ")?;
    let left: Vec<&str> = left.split(' ').collect();
    let right: Vec<&str> = right.split(' ').collect();
    let (root, mount_point) = (*left.get(3)?, *left.get(4)?);
    let fstype = *right.first()?;
    let v1_controllers = match fstype {
        "cgroup2" => None,
        "cgroup" => Some(
            right
                .get(2)?
                .split(',')
                .filter(|o| !matches!(*o, "rw" | "ro") && !o.contains('='))
                .map(str::to_string)
                .collect(),
        ),
        _ => return None,
    };
    Some(CgroupMount {
        root: unescape(root),
        mount_point: PathBuf::from(unescape(mount_point)),
        v1_controllers,
    })
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok().and_then(|s| u8::from_str_radix(s, 8).ok()));
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This process's membership from `/proc/self/cgroup`: (v1 controllers or empty for v2, path).
pub fn parse_proc_cgroup(content: &str) -> Vec<(Vec<String>, String)> {
    content
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let controllers = controllers
                .split(',')
                .filter(|c| !c.is_empty() && !c.starts_with("name="))
                .map(str::to_string)
                .collect();
            Some((controllers, path.to_string()))
        })
        .collect()
}

/// A controller's directory for this process: the leaf and the mount point above which no limit
/// can be read (the walk up to find the tightest ancestor limit stops there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerDir {
    /// The process's own cgroup directory.
    pub leaf: PathBuf,
    /// The mount point (top of the walk).
    pub top: PathBuf,
    /// True for the v2 unified hierarchy.
    pub v2: bool,
}

/// The directory holding `controller`'s files for this process, v1 first, then the v2 hierarchy
/// (in a hybrid setup the v2 mount has no controllers; reading its files then finds nothing).
pub fn controller_dir(
    controller: &str,
    mounts: &[CgroupMount],
    membership: &[(Vec<String>, String)],
    fs_root: &Path,
) -> Option<ControllerDir> {
    let v1 = membership.iter().find(|(cs, _)| cs.iter().any(|c| c == controller)).and_then(
        |(_, path)| {
            let mount = mounts.iter().find(|m| {
                m.v1_controllers.as_ref().is_some_and(|cs| cs.iter().any(|c| c == controller))
            })?;
            Some(resolve(mount, path, fs_root, false))
        },
    );
    v1.or_else(|| {
        let (_, path) = membership.iter().find(|(cs, _)| cs.is_empty())?;
        let mount = mounts.iter().find(|m| m.v1_controllers.is_none())?;
        Some(resolve(mount, path, fs_root, true))
    })
}

fn resolve(mount: &CgroupMount, path: &str, fs_root: &Path, v2: bool) -> ControllerDir {
    // Inside a cgroup namespace the path may not lie under the mount's root ("/../x"): the mount
    // point itself is then this process's cgroup.
    let relative = path.strip_prefix(mount.root.as_str()).filter(|_| !path.contains("/.."));
    let top = fs_root.join(mount.mount_point.strip_prefix("/").unwrap_or(&mount.mount_point));
    let leaf = match relative {
        Some(rel) => top.join(rel.trim_start_matches('/')),
        None => top.clone(),
    };
    ControllerDir { leaf, top, v2 }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const HYBRID_MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
4:memory:/process_api/a71d
1:cpu:/
0::/
";

    #[test]
    fn hybrid_host_prefers_v1_controllers() {
        let mounts = parse_mountinfo(HYBRID_MOUNTINFO);
        assert_eq!(mounts.len(), 4);
        let membership = parse_proc_cgroup(HYBRID_CGROUP);
        let root = Path::new("/");
        let memory = controller_dir("memory", &mounts, &membership, root).unwrap();
        assert_eq!(memory.leaf, Path::new("/sys/fs/cgroup/memory/process_api/a71d"));
        assert_eq!(memory.top, Path::new("/sys/fs/cgroup/memory"));
        assert!(!memory.v2);
        let cpu = controller_dir("cpu", &mounts, &membership, root).unwrap();
        assert_eq!(cpu.leaf, Path::new("/sys/fs/cgroup/cpu"));
        // No v1 pids mount: falls back to the unified hierarchy.
        let pids = controller_dir("pids", &mounts, &membership, root).unwrap();
        assert!(pids.v2);
        assert_eq!(pids.leaf, Path::new("/sys/fs/cgroup/unified"));
    }

    #[test]
    fn combined_v1_controllers_and_escapes() {
        let mounts = parse_mountinfo(
            "30 25 0:26 /kubepods /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
             50 25 0:40 / /mnt/odd\\040dir rw - cgroup2 cgroup2 rw\n",
        );
        assert_eq!(mounts[0].v1_controllers.as_deref().unwrap(), ["cpu", "cpuacct"]);
        assert_eq!(mounts[1].mount_point, Path::new("/mnt/odd dir"));
        let membership = parse_proc_cgroup("3:cpu,cpuacct:/kubepods/pod1/c1\n");
        let dir = controller_dir("cpu", &mounts, &membership, Path::new("/")).unwrap();
        assert_eq!(dir.leaf, Path::new("/sys/fs/cgroup/cpu,cpuacct/pod1/c1"));
    }

    #[test]
    fn namespaced_path_outside_mount_root_uses_mount_point() {
        let mounts = parse_mountinfo("41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
        let membership = parse_proc_cgroup("0::/../../pod7\n");
        let dir = controller_dir("cpu", &mounts, &membership, Path::new("/x")).unwrap();
        assert_eq!(dir.leaf, Path::new("/x/sys/fs/cgroup"));
    }
}
