//! The address plan of the local cluster. None of these ranges leaves the machine: the real
//! node routes each one locally (see `real_node::network`).

/// Service ClusterIPs (`--service-cluster-ip-range`); room for hundreds of pools' Services.
pub const SERVICE_RANGE: &str = "10.96.0.0/16";
/// The `kubernetes` Service, the range's first address (in the API server's certificate).
pub const KUBERNETES_SERVICE_IP: &str = "10.96.0.1";
/// The `kube-dns` Service the real node's pods resolve names through.
pub const DNS_SERVICE_IP: &str = "10.96.0.10";
/// Every pod address of the cluster (kube-proxy's `clusterCIDR`).
pub const POD_RANGE: &str = "10.244.0.0/16";
/// The real node's pod subnet, on its bridge.
pub const NODE_POD_SUBNET: &str = "10.244.0.0/24";
/// The bridge's own address: pods' route to Services, and where CoreDNS listens.
pub const BRIDGE_IP: &str = "10.244.0.1";
/// Prefix length of [`NODE_POD_SUBNET`], for the bridge's address.
pub const NODE_POD_PREFIX: u8 = 24;
/// The real node's name, and its address: a loopback `--node-ip` is refused, a hostname is not
/// (the API server's node authorizer and the kubelet's certificate name it too).
pub const NODE_NAME: &str = "127.0.0.1";
