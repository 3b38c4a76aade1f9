//! containerd for the real node: config version 3, every path in the node's folder, Debian's
//! runc, the CRI stream server on 127.0.0.1.

use std::path::Path;
use std::process::Command;

use super::layout::Layout;
use crate::cluster::ClusterError;

/// The name the node's sandbox (pause) image is known by; the harness tags the imported pause
/// image with it.
pub(super) const SANDBOX_IMAGE: &str = "renderpool.local/node/sandbox:pause";

/// The CRI plugin's containerd namespace, where the kubelet's images and containers live.
pub(super) const CRI_NAMESPACE: &str = "k8s.io";

/// The config file's text.
/// `bin_dir` holds the shim (taken from there, never from PATH) and `cni/` the CNI plugins.
pub(super) fn config(layout: &Layout, runc: &Path, bin_dir: &Path) -> String {
    let q = |path: &Path| toml_string(&path.to_string_lossy());
    let socket = &layout.containerd_socket;
    format!(
        r#"version = 3
root = {root}
state = {state}
temp = {temp}
# Unused here; tracing would try to reach a collector.
disabled_plugins = [
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.native",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = {grpc}

[ttrpc]
  address = {ttrpc}

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  # Its default is /opt/containerd on the host.
  [plugins.'io.containerd.internal.v1.opt']
    path = {opt}

  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = {sandbox}

  [plugins.'io.containerd.cri.v1.runtime']
    # runc cannot lower oom_score_adj without CAP_SYS_RESOURCE; unrestricted, every sandbox
    # fails with "nsexec: failed to update /proc/self/oom_score_adj: Permission denied".
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []

    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = {shim}
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = {runc}
          Root = {runc_root}
          SystemdCgroup = false

    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [{cni_bin}]
      conf_dir = {cni_conf}
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"#,
        root = q(&layout.containerd_root),
        state = q(&layout.containerd_state),
        temp = q(&layout.containerd_temp),
        grpc = q(socket),
        ttrpc = q(&socket.with_extension("sock.ttrpc")),
        opt = q(&layout.containerd_root.join("opt")),
        sandbox = toml_string(SANDBOX_IMAGE),
        runc = q(runc),
        runc_root = q(&layout.runc_root),
        shim = q(&bin_dir.join("containerd-shim-runc-v2")),
        cni_bin = q(&bin_dir.join("cni")),
        cni_conf = q(&layout.cni_conf_dir),
    )
}

/// A TOML basic string.
fn toml_string(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `ctr` on the node's socket, in the CRI namespace. ctr 2.x streams imports through the
/// transfer service, which needs the socket's absolute path.
pub(super) fn ctr(bin_dir: &Path, layout: &Layout) -> Command {
    let mut command = Command::new(bin_dir.join("ctr"));
    command.arg("--address").arg(&layout.containerd_socket).args(["--namespace", CRI_NAMESPACE]);
    command
}

/// Whether containerd answers on its socket.
pub(super) fn answers(bin_dir: &Path, layout: &Layout) -> Result<(), ClusterError> {
    crate::cluster::run(ctr(bin_dir, layout).arg("version")).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_is_in_the_node_folder_and_oom_adjustment_is_restricted() {
        let layout = Layout::new(Path::new("/state/node"));
        let text = config(&layout, Path::new("/usr/sbin/runc"), Path::new("/cache/bin"));
        for line in text.lines().filter(|line| line.contains("= \"/")) {
            let allowed = ["/state/node/", "/usr/sbin/runc", "/cache/bin/"];
            assert!(allowed.iter().any(|prefix| line.contains(prefix)), "host path in: {line}");
        }
        assert!(text.contains("restrict_oom_score_adj = true"));
        assert!(text.contains("stream_server_address = \"127.0.0.1\""));
        assert!(text.contains("disable_tcp_service = true"));
        assert!(text.contains("SystemdCgroup = false"));
        assert!(text.contains(&format!("sandbox = \"{SANDBOX_IMAGE}\"")));
    }

    #[test]
    fn toml_strings_are_escaped() {
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
