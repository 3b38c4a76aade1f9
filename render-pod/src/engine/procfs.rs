//! Reading a process's memory from `/proc/<pid>/status` and `statm`, and describing how it
//! ended.

use std::os::unix::fs::FileExt;
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

/// A process's resident memory, read as often as asked through one open `/proc/<pid>/statm`.
/// A worker's is checked after every job: opening `/proc/<pid>/status` by its path and
/// formatting all of it each time was a tenth of the HTTP front's CPU per page
/// (`benches/front_cpu.rs`).
#[derive(Debug)]
pub struct Resident {
    statm: std::fs::File,
    page_bytes: u64,
}

impl Resident {
    /// Opens `pid`'s `statm`; `None` when the process is gone or the page size is unknown.
    pub fn open(pid: u32) -> Option<Self> {
        // SAFETY: sysconf reads a constant of the system; no memory is passed.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page_bytes = u64::try_from(page).ok().filter(|p| *p > 0)?;
        let statm = std::fs::File::open(format!("/proc/{pid}/statm")).ok()?;
        Some(Self { statm, page_bytes })
    }

    /// Resident bytes now (`VmRSS`); `None` once the process has ended (the kernel answers a
    /// read of a dead process's file with an error, and a reused pid is another file).
    pub fn bytes(&self) -> Option<u64> {
        // Seven numbers of at most 20 digits each.
        let mut buf = [0u8; 160];
        let read = self.statm.read_at(&mut buf, 0).ok()?;
        parse_statm(buf.get(..read)?, self.page_bytes)
    }
}

/// `statm`'s second field (resident pages) in bytes.
fn parse_statm(content: &[u8], page_bytes: u64) -> Option<u64> {
    let resident = std::str::from_utf8(content).ok()?.split_whitespace().nth(1)?;
    resident.parse::<u64>().ok()?.checked_mul(page_bytes)
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
    fn statm_resident_pages_in_bytes() {
        assert_eq!(parse_statm(b"5000 1200 300 10 0 900 0\n", 4096), Some(1200 * 4096));
        assert_eq!(parse_statm(b"5000\n", 4096), None);
        assert_eq!(parse_statm(b"", 4096), None);
        assert_eq!(parse_statm(b"1 18446744073709551615 0", 4096), None);
    }

    #[test]
    fn resident_agrees_with_status_and_ends_with_its_process() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let resident = Resident::open(child.id()).unwrap();
        // Past its start-up (the loader mapping and touching its libraries), `sleep` holds still.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let from_status = memory(child.id()).unwrap().rss_bytes;
        let from_statm = resident.bytes().unwrap();
        // The same counter (file, anonymous and shared pages), read a moment apart.
        assert!(from_statm.abs_diff(from_status) <= 64 * 1024, "{from_statm} vs {from_status}");
        // Read again through the same open file: still an answer.
        assert!(resident.bytes().is_some_and(|b| b > 0));
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(resident.bytes(), None, "a reaped process has no memory to report");
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
