//! Pods for the real node that need no image beyond the sandbox's: the pause image as the root
//! filesystem, the host's static busybox (Debian's `busybox-static`) mounted read-only as the
//! program.

use serde_json::{Value, json};

/// Debian's static busybox, mounted into the pods at the same path.
pub const BUSYBOX: &str = "/bin/busybox";

/// A pod selected by `node_selector` running `script` under busybox's shell in `image`.
pub fn busybox_pod(node_selector: &Value, image: &str, name: &str, script: &str) -> Value {
    assert!(
        std::path::Path::new(BUSYBOX).is_file(),
        "{BUSYBOX} is missing: scripts/setup.sh --cluster installs busybox-static"
    );
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": {
            "nodeSelector": node_selector,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 20,
            // Root, whatever user the image names: the scripts write into the image's own
            // root folder and into host folders.
            "securityContext": { "runAsUser": 0 },
            "containers": [{
                "name": "main",
                "image": image,
                "imagePullPolicy": "Never",
                "command": [BUSYBOX, "sh", "-c", script],
                "resources": {
                    "requests": { "cpu": "250m", "memory": "32Mi" },
                    "limits": { "cpu": "250m", "memory": "32Mi" },
                },
                "volumeMounts": [{ "name": "busybox", "mountPath": BUSYBOX, "readOnly": true }],
            }],
            "volumes": [{ "name": "busybox", "hostPath": { "path": BUSYBOX, "type": "File" } }],
        },
    })
}
