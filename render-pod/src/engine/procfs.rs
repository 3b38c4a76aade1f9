//! Reading a process's memory from `/proc/<pid>/status` and describing how it ended.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// Resident and peak resident memory of a process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Memory {
    /// `VmRSS`.
    pub rss_bytes: u64,
    /// `VmHWM` (the peak).
    pub peak_rss_bytes: u64,
}

/// Memory of `pid`, or `None` when it is gone.
pub fn memory(pid: u32) -> Option<Memory> {
    parse_status(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

fn parse_status(content: &str) -> Option<Memory> {
    let field = |name: &str| {
        let line = content.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    };
    Some(Memory { rss_bytes: field("VmRSS:")?, peak_rss_bytes: field("VmHWM:")? })
}

/// "killed by signal 11 (SIGSEGV)" or "exited with status 1".
pub fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (_, Some(signal)) => describe_signal(signal),
        (Some(code), None) => format!("exited with status {code}"),
        (None, None) => "ended".to_string(),
    }
}

/// "killed by signal 11 (SIGSEGV)".
pub fn describe_signal(signal: i32) -> String {
    format!("killed by signal {signal} ({})", signal_name(signal))
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSYS => "SIGSYS",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn status_fields_in_bytes() {
        let status = "Name:\trender-pod\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n";
        assert_eq!(
            parse_status(status),
            Some(Memory { rss_bytes: 40960 * 1024, peak_rss_bytes: 51200 * 1024 })
        );
        assert_eq!(parse_status("Name:\tx\n"), None);
    }

    #[test]
    fn own_process_has_memory() {
        let mem = memory(std::process::id());
        assert!(mem.is_some_and(|m| m.rss_bytes > 0 && m.peak_rss_bytes >= m.rss_bytes));
    }

    #[test]
    fn exits_are_described() {
        assert_eq!(
            describe_exit(ExitStatus::from_raw(libc::SIGSEGV)),
            "killed by signal 11 (SIGSEGV)"
        );
        assert_eq!(describe_exit(ExitStatus::from_raw(1 << 8)), "exited with status 1");
    }
}
