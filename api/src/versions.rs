//! The pinned versions of `versions.env` at the repository root, compiled in: the one file the
//! shell scripts source and Rust reads, so a pin is changed in one place.

/// The file, as it was when this crate was built (cargo rebuilds when it changes).
const FILE: &str = include_str!("../../versions.env");

/// The pypdfium2 release whose wheel carries `libpdfium.so`.
pub const PYPDFIUM2: &str = pin("PYPDFIUM2_VERSION");
/// Gotenberg's release: the gotenberg-libreoffice image's tag.
pub const GOTENBERG: &str = pin("GOTENBERG_VERSION");
/// The Kubernetes release of the local control plane and the real node.
pub const KUBERNETES: &str = pin("KUBERNETES_VERSION");
/// The containerd release of the real node.
pub const CONTAINERD: &str = pin("CONTAINERD_VERSION");
/// The NATS server release the job tests and `scripts/run.sh --jobs` run.
pub const NATS_SERVER: &str = pin("NATS_SERVER_VERSION");

/// The value of the line `NAME=VALUE` of [`FILE`]; a missing name fails the build.
const fn pin(name: &str) -> &'static str {
    match value_of(FILE, name) {
        Some(value) => value,
        None => panic!("versions.env lacks a pin this crate reads"),
    }
}

/// The value of the first line of `text` that reads `name=VALUE` (`#` lines are comments).
const fn value_of(text: &'static str, name: &str) -> Option<&'static str> {
    let (text, name) = (text.as_bytes(), name.as_bytes());
    let mut start = 0;
    while start < text.len() {
        let mut end = start;
        while end < text.len() && text[end] != b'\n' {
            end += 1;
        }
        let value_start = start + name.len() + 1;
        if value_start <= end && text[value_start - 1] == b'=' && starts_with(text, start, name) {
            let (_, rest) = text.split_at(value_start);
            let (value, _) = rest.split_at(end - value_start);
            return match std::str::from_utf8(value) {
                Ok(value) => Some(value),
                Err(_) => None,
            };
        }
        start = end + 1;
    }
    None
}

/// True when `text[at..]` begins with `prefix`.
const fn starts_with(text: &[u8], at: usize, prefix: &[u8]) -> bool {
    let mut i = 0;
    while i < prefix.len() {
        if at + i >= text.len() || text[at + i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_the_value_of_its_own_line_only() {
        let text = "# GOTENBERG_VERSION=0\nGOTENBERG=1\nGOTENBERG_VERSION=8.36.0\nX=\n";
        assert_eq!(value_of(text, "GOTENBERG_VERSION"), Some("8.36.0"));
        assert_eq!(value_of(text, "GOTENBERG"), Some("1"));
        assert_eq!(value_of(text, "X"), Some(""));
        assert_eq!(value_of(text, "GOTENBERG_VERSIO"), None);
        assert_eq!(value_of("A=1", "A"), Some("1"), "no newline at the end");
        assert_eq!(value_of("", "A"), None);
    }

    #[test]
    fn the_pins_are_versions() {
        for pin in [PYPDFIUM2, GOTENBERG, KUBERNETES, CONTAINERD, NATS_SERVER] {
            let parts: Vec<&str> = pin.split('.').collect();
            assert_eq!(parts.len(), 3, "{pin:?}");
            assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{pin:?}: no leading v");
        }
    }
}
