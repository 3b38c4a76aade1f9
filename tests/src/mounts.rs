//! The mount table of this process's mount namespace.

use std::path::{Path, PathBuf};

/// Every mount point, from `/proc/self/mountinfo` (its fifth field, octal-escaped).
pub(crate) fn points() -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines().filter_map(|line| line.split(' ').nth(4)).map(unescape).collect()
}

/// Mount points at or under `dir`.
pub(crate) fn under(dir: &Path) -> Vec<PathBuf> {
    if dir.as_os_str().is_empty() {
        return Vec::new();
    }
    points().into_iter().filter(|mount| mount.starts_with(dir)).collect()
}

/// Decodes mountinfo's `\NNN` octal escapes (space, tab, newline, backslash).
fn unescape(field: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|digits| {
            let text = std::str::from_utf8(digits).ok()?;
            u8::from_str_radix(text, 8).ok()
        });
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
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape(r"/a\040b/c\134d"), PathBuf::from("/a b/c\\d"));
        assert_eq!(unescape("/plain/path"), PathBuf::from("/plain/path"));
    }

    #[test]
    fn the_root_is_mounted() {
        assert!(points().contains(&PathBuf::from("/")));
    }
}
