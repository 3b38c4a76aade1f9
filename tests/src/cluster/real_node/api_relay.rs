//! The API server for pods. It listens on 127.0.0.1, which a pod cannot reach, so the node
//! relays the bridge address's port 443 to it and points the `kubernetes` Service there: an
//! in-cluster client (the operator as a pod, with its mounted ServiceAccount token) connects to
//! `kubernetes.default.svc` or 10.96.0.1:443 as in production, and both names are in the API
//! server's certificate.

use std::net::TcpListener;

use crate::cluster::addresses::BRIDGE_IP;
use crate::cluster::{ClusterError, relay};

/// The relay's port on the bridge address, the `kubernetes` Service's own port.
pub(super) const PORT: u16 = 443;

/// Starts relaying `BRIDGE_IP:443` to the API server on 127.0.0.1:`apiserver_port`, for as
/// long as this process runs.
pub(super) fn start(apiserver_port: u16) -> Result<(), ClusterError> {
    let listener = TcpListener::bind((BRIDGE_IP, PORT))
        .map_err(|err| ClusterError::Setup(format!("API relay on {BRIDGE_IP}:{PORT}: {err}")))?;
    relay::serve(listener, "api-relay", apiserver_port)?;
    Ok(())
}

/// The `kubernetes` Service's EndpointSlice (the API server writes none with
/// `--endpoint-reconciler-type=none`): the relay.
pub(super) fn endpoint_slice() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes-relay",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "kubernetes",
                "endpointslice.kubernetes.io/managed-by": "renderpool-tests",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{ "addresses": [BRIDGE_IP], "conditions": { "ready": true } }],
        "ports": [{ "name": "https", "protocol": "TCP", "port": PORT }],
    })
}
