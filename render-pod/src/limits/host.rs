//! The host's own CPU and memory, used where the cgroup sets no limit.

use std::path::Path;

/// CPUs this process may run on (its affinity mask), at least one.
///
/// Not `std::thread::available_parallelism`: that already applies the cgroup quota, and here the
/// quota is read (and reported) separately.
pub fn cpus() -> u64 {
    // SAFETY: `set` is a plain bitmask that sched_getaffinity fills; CPU_COUNT only reads it.
    let count = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            libc::CPU_COUNT(&set)
        } else {
            0
        }
    };
    u64::try_from(count).unwrap_or(0).max(1)
}

/// `MemTotal` from a meminfo file, in bytes.
pub fn memory_bytes(meminfo: &Path) -> Option<u64> {
    parse_mem_total(&std::fs::read_to_string(meminfo).ok()?)
}

fn parse_mem_total(content: &str) -> Option<u64> {
    let line = content.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn mem_total_in_bytes() {
        let meminfo = "MemTotal:       24570408 kB\nMemFree:        17000000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24_570_408 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn at_least_one_cpu() {
        assert!(cpus() >= 1);
    }
}
