//! Where the real node keeps everything: one folder inside the cluster's state folder.

use std::path::{Path, PathBuf};

/// Every path the node's components are told to use, all under [`Layout::dir`].
#[derive(Debug, Clone)]
pub(super) struct Layout {
    /// The node's folder; logs and configs sit at its top.
    pub dir: PathBuf,
    pub containerd_root: PathBuf,
    pub containerd_state: PathBuf,
    pub containerd_temp: PathBuf,
    pub containerd_socket: PathBuf,
    pub containerd_config: PathBuf,
    pub runc_root: PathBuf,
    pub cni_conf_dir: PathBuf,
    pub cni_ipam_dir: PathBuf,
    pub kubelet_root: PathBuf,
    pub kubelet_config: PathBuf,
    pub pod_logs: PathBuf,
    pub volume_plugins: PathBuf,
    /// What pods with `dnsPolicy: Default` get instead of the host's resolvers.
    pub resolv_conf: PathBuf,
    pub kube_proxy_config: PathBuf,
    pub corefile: PathBuf,
}

impl Layout {
    /// The layout of a node living in `dir`.
    pub fn new(dir: &Path) -> Layout {
        let containerd = dir.join("containerd");
        Layout {
            dir: dir.to_path_buf(),
            containerd_root: containerd.join("root"),
            containerd_state: containerd.join("state"),
            containerd_temp: containerd.join("tmp"),
            containerd_socket: containerd.join("containerd.sock"),
            containerd_config: dir.join("containerd.toml"),
            runc_root: dir.join("runc"),
            cni_conf_dir: dir.join("cni/net.d"),
            cni_ipam_dir: dir.join("cni/ipam"),
            kubelet_root: dir.join("kubelet"),
            kubelet_config: dir.join("kubelet.json"),
            pod_logs: dir.join("pod-logs"),
            volume_plugins: dir.join("volume-plugins"),
            resolv_conf: dir.join("resolv.conf"),
            kube_proxy_config: dir.join("kube-proxy.json"),
            corefile: dir.join("Corefile"),
        }
    }

    /// The folders the components expect to exist before they start.
    pub fn folders(&self) -> [&Path; 9] {
        [
            &self.containerd_root,
            &self.containerd_state,
            &self.containerd_temp,
            &self.runc_root,
            &self.cni_conf_dir,
            &self.cni_ipam_dir,
            &self.kubelet_root,
            &self.pod_logs,
            &self.volume_plugins,
        ]
    }
}
