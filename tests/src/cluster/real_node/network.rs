//! The node's network, kept inside the machine. Traffic may go only to 127.0.0.0/8 or to pod
//! and Service addresses served here:
//! - pods sit on a bridge the harness makes ([`BRIDGE`]), with no default route (the CNI config);
//! - the rest of the pod range is a blackhole route, so a missing rule drops instead of leaving;
//! - the Service range is routed to an `ifb` device ([`SERVICE_SINK`]), which drops whatever
//!   reaches it; a blackhole would refuse the host's own ClusterIP connections before
//!   kube-proxy's rewrite;
//! - forwarding is on for the bridge alone (global `ip_forward` stays 0), and a guard table lets
//!   the bridge forward only to itself, so nothing is routed off the machine.

use super::record::UndoLog;
use super::system_tool;
use crate::cluster::addresses::{BRIDGE_IP, NODE_POD_PREFIX, POD_RANGE, SERVICE_RANGE};
use crate::cluster::{ClusterError, run_with_input};

/// The pod bridge.
pub(super) const BRIDGE: &str = "rpbr0";
/// The `ifb` device the Service range is routed to.
pub(super) const SERVICE_SINK: &str = "rpsvc0";
/// The guard table (`inet` family).
pub(super) const GUARD_TABLE: &str = "inet renderpool-guard";
/// The tables kube-proxy makes in nftables mode and leaves behind on exit.
pub(super) const KUBE_PROXY_TABLES: [&str; 2] = ["ip kube-proxy", "ip6 kube-proxy"];

/// The guard: forwarded packets pass only from the pod bridge back to it (pod to pod, and pod
/// to a ClusterIP that kube-proxy rewrote to a pod). It hooks in before kube-proxy's filters.
pub(super) fn guard_ruleset() -> String {
    format!(
        "table {GUARD_TABLE} {{\n\
         \tchain forward {{\n\
         \t\ttype filter hook forward priority filter - 10; policy drop;\n\
         \t\tiifname \"{BRIDGE}\" oifname \"{BRIDGE}\" accept\n\
         \t}}\n\
         }}\n"
    )
}

/// The `ip` commands that build the network, each with what undoes it noted first.
pub(super) fn set_up(undo: &mut UndoLog) -> Result<(), ClusterError> {
    undo.note(|record| record.links.push(BRIDGE.into()))?;
    ip(&["link", "add", BRIDGE, "type", "bridge"])?;
    ip(&["addr", "add", &format!("{BRIDGE_IP}/{NODE_POD_PREFIX}"), "dev", BRIDGE])?;
    ip(&["link", "set", BRIDGE, "up"])?;
    // The link's own setting: it goes away with the link.
    super::sysctl::write(&format!("net/ipv4/conf/{BRIDGE}/forwarding"), "1")?;

    let blackhole: Vec<String> = ["blackhole", POD_RANGE].map(String::from).into();
    undo.note(|record| record.routes.push(blackhole.clone()))?;
    ip(&["route", "add", "blackhole", POD_RANGE])?;

    undo.note(|record| record.links.push(SERVICE_SINK.into()))?;
    ip(&["link", "add", SERVICE_SINK, "type", "ifb"])?;
    ip(&["link", "set", SERVICE_SINK, "up"])?;
    // From the bridge's address, so a pod's reply to the host comes back over the bridge.
    ip(&["route", "add", SERVICE_RANGE, "dev", SERVICE_SINK, "src", BRIDGE_IP])?;

    undo.note(|record| {
        record.nft_tables.push(GUARD_TABLE.into());
        record.nft_tables.extend(KUBE_PROXY_TABLES.map(String::from));
    })?;
    let nft = system_tool("nft")?;
    run_with_input(std::process::Command::new(nft).args(["-f", "-"]), guard_ruleset().as_bytes())?;
    Ok(())
}

/// Runs `ip` with `args`.
pub(super) fn ip(args: &[&str]) -> Result<String, ClusterError> {
    crate::cluster::run(std::process::Command::new(system_tool("ip")?).args(args))
}
