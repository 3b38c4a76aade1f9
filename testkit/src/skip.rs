//! Skips that are never silent: counted and printed by the test command, and failures on a
//! machine that declares the capability.

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;

/// Env var naming the file each skip appends a line to (`test<TAB>capability<TAB>reason`);
/// `scripts/test.sh` sets it and prints every line in its closing tally.
pub const LOG_ENV: &str = "RENDERPOOL_SKIP_LOG";

/// Env var listing, comma-separated, the capabilities this machine has; a skip for one of them
/// fails the test. `.ci/run` declares its machine's.
pub const CAPABILITIES_ENV: &str = "RENDERPOOL_CAPABILITIES";

/// The capability names a skip can give (the vocabulary of `RENDERPOOL_CAPABILITIES`).
pub mod capability {
    /// A cgroup v1 `cpu` controller at `/sys/fs/cgroup/cpu` in which this process may create
    /// groups and set CFS quotas.
    pub const CGROUP_V1_CPU: &str = "cgroup-v1-cpu";
    /// A cgroup v1 `memory` controller at `/sys/fs/cgroup/memory` in which this process may
    /// create groups and set limits.
    pub const CGROUP_V1_MEMORY: &str = "cgroup-v1-memory";
    /// The right to make a mount namespace and mount in it (`unshare --mount`: root).
    pub const MOUNT_NAMESPACE: &str = "mount-namespace";
}

/// Records that the calling test cannot run its real part here for lack of `capability`, and
/// why; the caller then returns without asserting anything.
///
/// ```no_run
/// use renderpool_testkit::{capability, skip};
///
/// if !std::path::Path::new("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").exists() {
///     skip(capability::CGROUP_V1_CPU, "no cgroup v1 cpu controller at /sys/fs/cgroup/cpu");
///     return;
/// }
/// ```
///
/// Panics, failing the test with the reason, when `RENDERPOOL_CAPABILITIES` lists the
/// capability, or when the skip cannot be written to `RENDERPOOL_SKIP_LOG`. Without that log (a
/// bare `cargo test`) the skip is printed to stderr only.
#[track_caller]
pub fn skip(capability: &str, reason: impl Display) {
    Policy::from_env().skip(&test_name(), capability, &reason.to_string());
}

/// What a skip does, from the environment.
struct Policy {
    /// Capabilities this machine has: skipping for one of them is a failure.
    available: Vec<String>,
    /// Where skips are recorded.
    log: Option<PathBuf>,
}

impl Policy {
    fn from_env() -> Policy {
        Policy {
            available: parse_capabilities(&std::env::var(CAPABILITIES_ENV).unwrap_or_default()),
            log: std::env::var_os(LOG_ENV).filter(|v| !v.is_empty()).map(PathBuf::from),
        }
    }

    #[track_caller]
    fn skip(&self, test: &str, capability: &str, reason: &str) {
        assert!(
            !self.available.iter().any(|c| c == capability),
            "{test} cannot run its real part, yet {CAPABILITIES_ENV} says this machine has \
             {capability}: {reason}"
        );
        eprintln!("SKIPPED {test} [{capability}]: {reason}");
        if let Some(log) = &self.log {
            let line = log_line(test, capability, reason);
            // One write of one line to a file opened for appending: tests running in parallel
            // threads or processes do not interleave.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .and_then(|mut file| file.write_all(line.as_bytes()))
                .unwrap_or_else(|err| {
                    panic!("{test}: cannot record its skip in {}: {err}", log.display())
                });
        }
    }
}

fn parse_capabilities(list: &str) -> Vec<String> {
    list.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect()
}

/// `test<TAB>capability<TAB>reason<LF>`, each field on one line without tabs.
fn log_line(test: &str, capability: &str, reason: &str) -> String {
    let clean = |field: &str| field.replace(['\t', '\n', '\r'], " ");
    format!("{}\t{}\t{}\n", clean(test), clean(capability), clean(reason))
}

/// `<test binary>::<test>`: the harness names each test's thread after the test.
fn test_name() -> String {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, _hash)) => name.to_string(),
            None => stem,
        })
        .unwrap_or_default();
    match std::thread::current().name() {
        Some(test) if test != "main" => format!("{binary}::{test}"),
        _ => binary,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn policy(available: &str, log: Option<PathBuf>) -> Policy {
        Policy { available: parse_capabilities(available), log }
    }

    #[test]
    fn capabilities_are_a_comma_separated_list() {
        assert_eq!(parse_capabilities(" a, b ,,c "), ["a", "b", "c"]);
        assert!(parse_capabilities("").is_empty());
    }

    #[test]
    #[should_panic(expected = "says this machine has cgroup-v1-cpu: no controller")]
    fn a_skip_for_a_capability_the_machine_has_fails() {
        policy("cgroup-v1-memory,cgroup-v1-cpu", None).skip("t", "cgroup-v1-cpu", "no controller");
    }

    #[test]
    fn a_skip_for_another_capability_appends_one_line_each() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        let policy = policy("cgroup-v1-memory", Some(log.clone()));
        policy.skip("bin::a", "cgroup-v1-cpu", "not writable:\nread-only file system");
        policy.skip("bin::b", "real-node", "no kubelet");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "bin::a\tcgroup-v1-cpu\tnot writable: read-only file system\n\
             bin::b\treal-node\tno kubelet\n"
        );
    }

    #[test]
    #[should_panic(expected = "cannot record its skip")]
    fn a_skip_that_cannot_be_recorded_fails() {
        let dir = tempfile::tempdir().unwrap();
        policy("", Some(dir.path().join("missing/skips"))).skip("t", "cgroup-v1-cpu", "none");
    }

    #[test]
    fn the_test_name_is_binary_and_harness_thread() {
        let name = test_name();
        assert!(
            name.ends_with("::skip::tests::the_test_name_is_binary_and_harness_thread"),
            "{name}"
        );
        assert!(name.starts_with("renderpool_testkit::"), "{name}");
    }
}
