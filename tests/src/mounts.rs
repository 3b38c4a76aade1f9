//! The mount table of this process's mount namespace.

use std::path::{Path, PathBuf};

/// Every mount point, from `/proc/self/mountinfo` (its fifth field); `None` if it cannot be read.
pub(crate) fn points() -> Option<Vec<PathBuf>> {
    let info = std::fs::read("/proc/self/mountinfo").ok()?;
    let info = String::from_utf8_lossy(&info);
    Some(info.lines().filter_map(|line| line.split(' ').nth(4)).map(unescape).collect())
}

/// Mount points at or under `dir` (none under an empty path).
pub(crate) fn under(dir: &Path) -> Vec<PathBuf> {
    if dir.as_os_str().is_empty() {
        return Vec::new();
    }
    let all = points().unwrap_or_default();
    all.into_iter().filter(|mount| mount.starts_with(dir)).collect()
}

/// Whether anything is mounted at or under `dir`; true when the mount table cannot be read, so
/// a caller about to delete `dir` never deletes through a mount it could not see.
pub(crate) fn any_under(dir: &Path) -> bool {
    points().is_none_or(|all| all.iter().any(|mount| mount.starts_with(dir)))
}

/// Decodes the escapes the kernel writes into mountinfo paths (space, tab, newline, backslash).
/// The backslash goes last: every backslash left in a field starts an escape.
fn unescape(field: &str) -> PathBuf {
    let decoded = field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n");
    PathBuf::from(decoded.replace("\\134", "\\"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/a\040b/c\134d"), PathBuf::from("/a b/c\\d"));
        // A literal backslash followed by "040" is written as \134040.
        assert_eq!(unescape(r"/x\134040"), PathBuf::from(r"/x\040"));
        assert_eq!(unescape("/plain/path"), PathBuf::from("/plain/path"));
    }

    #[test]
    fn the_root_is_mounted() {
        assert!(points().is_some_and(|all| all.contains(&PathBuf::from("/"))));
        assert!(any_under(Path::new("/")));
    }
}
