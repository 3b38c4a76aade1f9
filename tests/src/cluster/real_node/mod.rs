//! One real node beside the kwok nodes: containerd with Debian's runc, the CNI bridge plugin, a
//! kubelet registered as [`NODE_NAME`], kube-proxy in nftables mode and CoreDNS, all on this
//! machine. Pods scheduled onto it (select it by [`NODE_LABEL`]`=`[`NODE_LABEL_VALUE`]) really
//! run: probes, cgroup limits, logs, exec, port-forward, Services, cluster DNS and the API
//! server through the `kubernetes` Service work.
//!
//! Images come from OCI archives imported into its containerd (no registry): the folder given
//! to [`RealNode::start`] must hold `pause.tar` (the sandbox image, a binary that sleeps until
//! signalled) and any archives the tests' pods run; more can be imported later
//! ([`RealNode::import_archives`]).
//!
//! Only one real node can exist on a machine: containerd, the kubelet and the CNI plugins use a
//! few fixed host paths. A second attempt, from any process, fails and says so. A reaper process
//! ([`reaper`]) holds the machine lock and, when the test process ends in any way, undoes what
//! the node did to the machine ([`record`] lists it, [`teardown`] undoes it).

mod api_relay;
mod cni;
mod containerd;
mod coredns;
mod host;
mod images;
mod kube_proxy;
mod kubelet;
mod layout;
mod network;
pub mod reaper;
mod record;
mod sysctl;
mod teardown;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use layout::Layout;
use record::{Daemon, UndoLog};
pub use teardown::{kernel_settings, leftovers};

use super::components::{path_arg, spawn, wait_until};
use super::{Cluster, ClusterError, http_ok, kubeconfig, run, run_with_input, system_tool};
use crate::cluster::addresses::NODE_NAME;
use crate::cluster::addresses::{BRIDGE_IP, DNS_SERVICE_IP};
use crate::free_port;

/// The label that tells the real node from kwok's (`type=kwok`); select it in a `nodeSelector`.
pub const NODE_LABEL: &str = "renderpool.dev/node";
/// [`NODE_LABEL`]'s value on the real node.
pub const NODE_LABEL_VALUE: &str = "real";
/// Env var naming the folder of OCI image archives [`Cluster::real_node`] imports.
pub const IMAGES_ENV: &str = "RENDERPOOL_IMAGES";
/// The archive in that folder holding the pause image.
pub const PAUSE_ARCHIVE: &str = "pause";

/// The folder of image archives named by `$RENDERPOOL_IMAGES`.
pub fn images_dir() -> Result<PathBuf, ClusterError> {
    std::env::var_os(IMAGES_ENV).map(PathBuf::from).ok_or_else(|| {
        ClusterError::Setup(format!(
            "{IMAGES_ENV} is not set: point it at a folder of OCI image archives \
             ({PAUSE_ARCHIVE}.tar and the images the pods run), as images/build.sh writes"
        ))
    })
}

/// A running real node; see the module doc.
pub struct RealNode {
    layout: Layout,
    bin_dir: PathBuf,
    images: Mutex<BTreeMap<String, Vec<String>>>,
    daemons: Vec<(&'static str, u32)>,
    started_in: Duration,
    imported_in: Duration,
}

impl RealNode {
    /// Starts the node in `cluster` with every archive in `images` imported.
    pub(super) fn start(cluster: &Cluster, images: &Path) -> Result<RealNode, ClusterError> {
        let started = Instant::now();
        let runc = system_tool("runc")?;
        for tool in ["ip", "nft"] {
            system_tool(tool)?;
        }
        if !images.join(format!("{PAUSE_ARCHIVE}.tar")).is_file() {
            return Err(ClusterError::Setup(format!(
                "{} has no {PAUSE_ARCHIVE}.tar (the sandbox image every pod needs)",
                images.display()
            )));
        }
        reaper::claim()?;
        let layout = Layout::new(&cluster.state_dir.join("node"));
        std::fs::create_dir_all(&layout.dir)?;
        let undo = UndoLog::create(host::record_path(), &layout.dir, &cluster.state_dir)?;
        let mut node = Starter {
            cluster,
            layout,
            bin_dir: cluster.bin_dir.clone(),
            undo,
            daemons: Vec::new(),
        };
        node.prepare_machine()?;
        node.relay_api()?;
        node.start_containerd(&runc)?;
        let importing = Instant::now();
        let imported = node.import_images(images)?;
        let imported_in = importing.elapsed();
        node.start_dns()?;
        node.start_kubelet()?;
        // After the kubelet: kube-proxy reports healthy only once its Node exists.
        node.start_kube_proxy()?;
        Ok(RealNode {
            layout: node.layout,
            bin_dir: node.bin_dir,
            images: Mutex::new(imported),
            daemons: node.daemons,
            started_in: started.elapsed(),
            imported_in,
        })
    }

    /// The Node object's name.
    pub fn name(&self) -> &'static str {
        NODE_NAME
    }

    /// A pod spec's `nodeSelector` that puts it on this node.
    pub fn node_selector(&self) -> serde_json::Value {
        serde_json::json!({ NODE_LABEL: NODE_LABEL_VALUE })
    }

    /// The first image name imported from `<archive>.tar` (e.g. `image("pause")`).
    pub fn image(&self, archive: &str) -> Option<String> {
        let images = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        images.get(archive).and_then(|names| names.first().cloned())
    }

    /// Every archive imported so far (file stem) with the image names it brought.
    pub fn images(&self) -> BTreeMap<String, Vec<String>> {
        self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Imports every `*.tar` OCI archive in `dir`; returns each archive's stem with the image
    /// names it brought (also found later through [`Self::image`]).
    pub fn import_archives(
        &self,
        dir: &Path,
    ) -> Result<BTreeMap<String, Vec<String>>, ClusterError> {
        let imported = images::import_dir(&|| self.ctr(), dir)?;
        let mut images = self.images.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        images.extend(imported.clone());
        Ok(imported)
    }

    /// `ctr` on the node's containerd, in the namespace the kubelet's containers live in.
    pub fn ctr(&self) -> Command {
        containerd::ctr(&self.bin_dir, &self.layout)
    }

    /// The node's folder: configs, component logs (`<component>.log`) and all runtime state.
    pub fn dir(&self) -> &Path {
        &self.layout.dir
    }

    /// How long [`RealNode::start`] took, from the first step to the node being Ready.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// How long importing the start's image archives into containerd took.
    pub fn imported_in(&self) -> Duration {
        self.imported_in
    }

    /// A cgroup file (`cpu.cfs_quota_us` under `cpu`, say) of a running pod's first container,
    /// as the kubelet made it on this machine: the cgroupfs driver on cgroup v1 puts a
    /// Guaranteed pod right under `kubepods`.
    pub fn container_cgroup(
        &self,
        pod: &Pod,
        controller: &str,
        file: &str,
    ) -> Result<String, ClusterError> {
        let uid = pod.metadata.uid.as_deref();
        let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
        let id = statuses.and_then(|s| s.first()).and_then(|s| s.container_id.as_deref());
        let (Some(uid), Some(id)) = (uid, id) else {
            return Err(ClusterError::Setup("the pod has no uid or no running container".into()));
        };
        let id = id.trim_start_matches("containerd://");
        let path = format!("/sys/fs/cgroup/{controller}/kubepods/pod{uid}/{id}/{file}");
        let value = std::fs::read_to_string(&path)
            .map_err(|err| ClusterError::Setup(format!("{path}: {err}")))?;
        Ok(value.trim().to_string())
    }

    /// The host's pid of the process numbered `pid` inside a running pod's first container (the
    /// numbers its own `/readyz` reports): found among the container cgroup's processes by the
    /// last field of their `NSpid`.
    pub fn host_pid(&self, pod: &Pod, pid: u32) -> Result<u32, ClusterError> {
        let procs = self.container_cgroup(pod, "memory", "cgroup.procs")?;
        let inside = pid.to_string();
        procs
            .lines()
            .filter_map(|host| host.trim().parse::<u32>().ok())
            .find(|host| {
                let status = std::fs::read_to_string(format!("/proc/{host}/status"));
                status.is_ok_and(|status| {
                    let nspid = status.lines().find(|l| l.starts_with("NSpid:"));
                    nspid.and_then(|l| l.split_whitespace().last()) == Some(inside.as_str())
                })
            })
            .ok_or_else(|| {
                ClusterError::Setup(format!("no process {pid} in the container: {procs}"))
            })
    }

    /// The node's daemons by name, with their pids (for resource figures).
    pub fn daemons(&self) -> &[(&'static str, u32)] {
        &self.daemons
    }
}

/// The start sequence's state: what is up so far.
struct Starter<'a> {
    cluster: &'a Cluster,
    layout: Layout,
    bin_dir: PathBuf,
    undo: UndoLog,
    daemons: Vec<(&'static str, u32)>,
}

impl Starter<'_> {
    /// Claims the fixed host paths, makes the node's folders, sets the kubelet's sysctls and
    /// builds the network, noting every change first.
    fn prepare_machine(&mut self) -> Result<(), ClusterError> {
        let host_paths = host::claim_hard_coded()?;
        self.undo.note(|record| record.host_paths = host_paths)?;
        for dir in self.layout.folders() {
            std::fs::create_dir_all(dir)?;
        }
        sysctl::set_for_kubelet(&mut self.undo)?;
        network::set_up(&mut self.undo)
    }

    /// Starts `name` from the cluster's bin folder, logging into the node's folder.
    fn spawn_daemon(&mut self, name: &'static str, args: &[&str]) -> Result<(), ClusterError> {
        let pid = spawn(&self.bin_dir, &self.layout.dir, name, args)?;
        let exe = self.bin_dir.join(name);
        self.undo.note(|record| record.daemons.push(Daemon { pid, exe }))?;
        reaper::stop_first_on_exit(pid);
        self.daemons.push((name, pid));
        Ok(())
    }

    fn start_containerd(&mut self, runc: &Path) -> Result<(), ClusterError> {
        let conflist = cni::conflist(&self.layout.cni_ipam_dir);
        write_json(&self.layout.cni_conf_dir.join("10-renderpool.conflist"), &conflist)?;
        let config = containerd::config(&self.layout, runc, &self.bin_dir);
        std::fs::write(&self.layout.containerd_config, config)?;
        let config_arg = path_arg(&self.layout.containerd_config);
        self.spawn_daemon("containerd", &["--config", &config_arg])?;
        let (bin_dir, layout) = (&self.bin_dir, &self.layout);
        wait_until(&layout.dir, "containerd", Duration::from_secs(30), || {
            containerd::answers(bin_dir, layout).is_ok()
        })
    }

    /// Imports the archives and names the pause image as the node's sandbox image.
    fn import_images(&self, dir: &Path) -> Result<BTreeMap<String, Vec<String>>, ClusterError> {
        let ctr = || containerd::ctr(&self.bin_dir, &self.layout);
        let imported = images::import_dir(&ctr, dir)?;
        let pause =
            imported.get(PAUSE_ARCHIVE).and_then(|names| names.first()).ok_or_else(|| {
                ClusterError::Setup(format!("{}/{PAUSE_ARCHIVE}.tar named no image", dir.display()))
            })?;
        run(ctr().args(["images", "tag", "--force", pause, containerd::SANDBOX_IMAGE]))?;
        Ok(imported)
    }

    /// Lets pods reach the API server through the `kubernetes` Service.
    fn relay_api(&self) -> Result<(), ClusterError> {
        api_relay::start(self.cluster.api_port)?;
        let slice = api_relay::endpoint_slice().to_string();
        run_with_input(self.cluster.kubectl().args(["apply", "-f", "-"]), slice.as_bytes())
            .map(drop)
    }

    /// A kubeconfig in the node's folder for one of the cluster's static identities.
    fn kubeconfig(&self, name: &str, token: &str) -> Result<PathBuf, ClusterError> {
        let path = self.layout.dir.join(format!("kubeconfig-{name}"));
        kubeconfig::write(&path, &self.cluster.server, &self.cluster.pki.ca.cert, token)?;
        Ok(path)
    }

    fn start_dns(&mut self) -> Result<(), ClusterError> {
        let identity = &self.cluster.identities.coredns;
        let objects = coredns::api_objects(&identity.user).to_string();
        run_with_input(self.cluster.kubectl().args(["apply", "-f", "-"]), objects.as_bytes())?;
        let kubeconfig = self.kubeconfig("coredns", &identity.token)?;
        let ports = coredns::Ports { health: free_port(), ready: free_port() };
        std::fs::write(&self.layout.corefile, coredns::corefile(&kubeconfig, &ports))?;
        let corefile = path_arg(&self.layout.corefile);
        self.spawn_daemon("coredns", &["-conf", &corefile])?;
        wait_until(&self.layout.dir, "coredns", Duration::from_secs(30), || {
            http_ok(ports.ready, "/ready")
        })
    }

    fn start_kube_proxy(&mut self) -> Result<(), ClusterError> {
        let kubeconfig =
            self.kubeconfig("kube-proxy", &self.cluster.identities.kube_proxy.token)?;
        let ports = kube_proxy::Ports { healthz: free_port(), metrics: free_port() };
        write_json(&self.layout.kube_proxy_config, &kube_proxy::config(&kubeconfig, &ports))?;
        let config = format!("--config={}", path_arg(&self.layout.kube_proxy_config));
        self.spawn_daemon("kube-proxy", &[&config])?;
        // Up once it is healthy and its rules hold cluster DNS, which every pod needs first.
        let nft = system_tool("nft")?;
        wait_until(&self.layout.dir, "kube-proxy", Duration::from_secs(60), || {
            let rules = run(Command::new(&nft).args(["list", "table", "ip", "kube-proxy"]));
            http_ok(ports.healthz, "/healthz")
                && rules.is_ok_and(|rules| rules.contains(DNS_SERVICE_IP))
        })
    }

    /// Starts the kubelet and waits until its Node is Ready and untainted.
    fn start_kubelet(&mut self) -> Result<(), ClusterError> {
        let (serving_cert, serving_key) = self.cluster.pki.ca.issue(
            &self.layout.dir,
            "kubelet",
            &format!("/CN={NODE_NAME}"),
            &format!("subjectAltName=IP:{NODE_NAME}\nextendedKeyUsage=serverAuth\n"),
        )?;
        let kubeconfig = self.kubeconfig("kubelet", &self.cluster.identities.node.token)?;
        // Pods with `dnsPolicy: Default` get cluster DNS too, never the host's resolvers.
        std::fs::write(&self.layout.resolv_conf, format!("nameserver {BRIDGE_IP}\n"))?;
        let ports = kubelet::Ports { api: free_port(), healthz: free_port() };
        let tls = kubelet::Tls {
            ca_cert: &self.cluster.pki.ca.cert,
            serving_cert: &serving_cert,
            serving_key: &serving_key,
        };
        write_json(&self.layout.kubelet_config, &kubelet::config(&self.layout, &ports, &tls))?;
        let args = kubelet::args(&self.layout, &kubeconfig);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.spawn_daemon("kubelet", &args)?;
        let cluster = self.cluster;
        wait_until(&self.layout.dir, "kubelet", Duration::from_secs(90), || {
            node_schedulable(cluster)
        })
    }
}

/// Whether the Node is Ready and the not-ready taint is gone.
fn node_schedulable(cluster: &Cluster) -> bool {
    let jsonpath =
        r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.spec.taints[*].key}"#;
    let out = run(cluster.kubectl().args(["get", "node", NODE_NAME, "-o", jsonpath]));
    out.is_ok_and(|out| out.starts_with("True|") && !out.contains("not-ready"))
}

fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), ClusterError> {
    let text = serde_json::to_vec_pretty(value)
        .map_err(|err| ClusterError::Setup(format!("{}: {err}", path.display())))?;
    std::fs::write(path, text)?;
    Ok(())
}
