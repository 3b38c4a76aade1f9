//! Ports for the servers tests start. A port checked free and then handed to a server can be
//! taken in between: by an outbound connection (the kernel picks those from its ephemeral range,
//! as it picks `bind(0)`'s) or by another server of the same test run. So the ports come from
//! below the ephemeral range, each at most once per process, each checked free.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

/// Below Linux's default ephemeral range (32768-60999) and Kubernetes' NodePorts (30000-32767),
/// which the real node's proxy answers on every local address.
const RANGE: Range<u16> = 20_000..30_000;
const EPHEMERAL_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// A TCP port on 127.0.0.1 that was free a moment ago and that no outbound connection takes.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    if !below_ephemeral(&std::fs::read_to_string(EPHEMERAL_RANGE).unwrap_or_default()) {
        // The machine's ephemeral range covers ours: the kernel's choice is as good.
        return any_free_port();
    }
    for _ in RANGE {
        let port = nth(NEXT.fetch_add(1, Ordering::Relaxed), std::process::id());
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 in {RANGE:?}")
}

fn any_free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|err| panic!("no free port on 127.0.0.1: {err}"))
}

/// Whether [`RANGE`] lies below the ephemeral range `ip_local_port_range` gives ("low high").
fn below_ephemeral(ip_local_port_range: &str) -> bool {
    let low = ip_local_port_range.split_whitespace().next().and_then(|low| low.parse::<u16>().ok());
    low.is_some_and(|low| low >= RANGE.end)
}

/// The `n`th port this process tries: in [`RANGE`], from an offset of its process id so two
/// test processes at once start far apart.
fn nth(n: u32, pid: u32) -> u16 {
    let len = u32::from(RANGE.end - RANGE.start);
    let offset = pid.wrapping_mul(997) % len;
    // Below `len`, which fits a u16.
    RANGE.start + ((offset + n % len) % len) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_cycle_through_the_range_once_before_repeating() {
        let len = u32::from(RANGE.end - RANGE.start);
        let ports: std::collections::BTreeSet<u16> = (0..len).map(|n| nth(n, 4242)).collect();
        assert_eq!(ports.len(), len as usize);
        assert!(ports.iter().all(|p| RANGE.contains(p)));
        assert_eq!(nth(len, 4242), nth(0, 4242));
        assert_ne!(nth(0, 4242), nth(0, 4243));
    }

    #[test]
    fn the_range_is_used_only_below_the_ephemeral_one() {
        assert!(below_ephemeral("32768\t60999\n"));
        assert!(below_ephemeral("30000 60999"));
        assert!(!below_ephemeral("1024 65535"));
        assert!(!below_ephemeral(""));
    }
}
