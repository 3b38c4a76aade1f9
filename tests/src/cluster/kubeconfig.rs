//! Kubeconfig files that authenticate with a bearer token.

use std::path::Path;

/// Writes a kubeconfig for `server` trusting `ca_cert` and presenting `token`.
pub fn write(path: &Path, server: &str, ca_cert: &Path, token: &str) -> std::io::Result<()> {
    // JSON is valid YAML, and serde_json escapes every value for us.
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": {
            "server": server,
            "certificate-authority": ca_cert.to_string_lossy(),
        }}],
        "users": [{"name": "user", "user": {"token": token}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "local",
    });
    std::fs::write(path, serde_json::to_vec_pretty(&config).unwrap_or_default())
}
