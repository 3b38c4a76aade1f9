//! The pod network config: the CNI bridge plugin on the harness's own bridge, host-local
//! addresses, and no route out of the machine.

use std::path::Path;

use super::network::BRIDGE;
use crate::cluster::addresses::{BRIDGE_IP, NODE_POD_SUBNET, SERVICE_RANGE};

/// The conflist containerd hands to the plugins (the loopback plugin it runs by itself).
pub(super) fn conflist(ipam_dir: &Path) -> serde_json::Value {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "renderpool",
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            // Gateway mode would turn on the host's global ip_forward; the bridge already has
            // its address, and masquerading would hand pods a way out.
            "isGateway": false,
            "ipMasq": false,
            // A pod reaching itself through its own Service.
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{ "subnet": NODE_POD_SUBNET, "gateway": BRIDGE_IP }]],
                // Services only: pods get no default route.
                "routes": [{ "dst": SERVICE_RANGE, "gw": BRIDGE_IP }],
                "dataDir": ipam_dir,
            },
        }],
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pods_get_a_service_route_and_no_default_route() {
        let config = conflist(Path::new("/state/node/cni/ipam"));
        let bridge = &config["plugins"][0];
        assert_eq!(bridge["isGateway"], false);
        assert_eq!(bridge["ipMasq"], false);
        let routes = bridge["ipam"]["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0]["dst"], SERVICE_RANGE);
        assert_eq!(bridge["ipam"]["dataDir"], "/state/node/cni/ipam");
    }
}
