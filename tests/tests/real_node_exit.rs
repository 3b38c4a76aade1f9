//! However a process holding the real node ends, the machine is left as it was: no processes,
//! mounts, bridge, routes, ifb device, nftables tables, hard-coded host paths, pod cgroups or
//! changed sysctls. Each test runs the node in a child process and ends that child its own way;
//! one at a time, since a machine holds one real node. A second node is refused while one runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use renderpool_testkit::wait;
use renderpool_tests::cluster::real_node::{self, kernel_settings, leftovers};
use renderpool_tests::cluster::{Cluster, run, run_with_input};
use renderpool_tests::workspace_bin;
use tokio::sync::Mutex;

#[path = "support/real_node_pods.rs"]
mod real_node_pods;

/// Set for the child process of the panic test, the only place its child test may run.
const CHILD_ENV: &str = "RENDERPOOL_REAL_NODE_EXIT_CHILD";

/// A pod that sleeps until it is killed: a container, its shim, mounts and cgroups to undo.
const SLEEPER: &str = "exec busybox sleep 3600";

/// One real node on the machine at a time.
static MACHINE: Mutex<()> = Mutex::const_new(());

async fn machine() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = MACHINE.lock().await;
    assert_eq!(leftovers(), Vec::<String>::new(), "the machine is not clean before the test");
    guard
}

/// `local-cluster --real-node` with one small kwok node, once it printed that its node is Ready.
fn local_cluster_with_real_node() -> (Child, String) {
    let images = real_node::images_dir().unwrap();
    let mut child = Command::new(workspace_bin("local-cluster"))
        .arg("--real-node")
        .arg("--images")
        .arg(&images)
        .args(["1", "2", "4Gi"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            panic!("local-cluster ended before its real node was Ready:\n{seen}");
        }
        seen.push_str(&line);
        if line.starts_with("logs and state:") {
            break;
        }
    }
    assert!(seen.contains("real node 127.0.0.1 Ready"), "{seen}");
    // Keep draining its stdout so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, seen)
}

/// Waits until a node's reaper has undone everything (after a kill it works on its own time).
async fn wait_clean() -> Vec<String> {
    // What is left after the bound is the caller's finding (it asserts on the list).
    let clean = wait::try_until("the reaper's cleanup", Duration::from_secs(90), || async {
        let left = leftovers();
        if left.is_empty() { Ok(()) } else { Err(left) }
    });
    let _ = clean.await;
    leftovers()
}

/// The text after `prefix` on the first line of `out` that starts with it.
fn printed<'a>(out: &'a str, prefix: &str) -> &'a str {
    let line = out.lines().map(str::trim).find(|line| line.starts_with(prefix));
    line.unwrap_or_else(|| panic!("no {prefix:?} in:\n{out}"))[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
}

/// Runs a sleeping pod on the real node of the `local-cluster` that printed `out`.
fn run_sleeper_via(out: &str) {
    let kubectl = std::path::Path::new(printed(out, "export PATH=").split(':').next().unwrap())
        .join("kubectl");
    let image = out.lines().find(|line| line.contains("(from pause.tar)")).unwrap();
    let image = image.split_whitespace().next().unwrap();
    let selector = serde_json::json!({ real_node::NODE_LABEL: real_node::NODE_LABEL_VALUE });
    let pod = real_node_pods::busybox_pod(&selector, image, "sleeper", SLEEPER).to_string();
    let kubectl = || {
        let mut command = Command::new(&kubectl);
        command.arg("--kubeconfig").arg(printed(out, "export KUBECONFIG="));
        command
    };
    // The default ServiceAccount appears a moment after the control plane.
    wait::until_blocking("the sleeper applied", Duration::from_secs(30), || {
        run_with_input(kubectl().args(["apply", "-f", "-"]), pod.as_bytes())
            .map_err(|err| err.to_string())
    });
    run(kubectl().args(["wait", "--for=condition=Ready", "pod/sleeper", "--timeout=90s"])).unwrap();
}

#[tokio::test]
async fn a_killed_process_leaves_nothing_and_a_second_node_is_refused_meanwhile() {
    let _machine = machine().await;
    let settings = kernel_settings();
    let (mut child, out) = local_cluster_with_real_node();
    run_sleeper_via(&out);
    let up = leftovers();
    for part in ["link rpbr0", "link rpsvc0", "nftables table inet renderpool-guard"] {
        assert!(up.iter().any(|found| found == part), "{part} missing while the node runs: {up:?}");
    }
    for part in ["kubepods", "kubelet)", "containerd-shim-runc-v2)", "rootfs"] {
        assert!(up.iter().any(|found| found.contains(part)), "no {part} while up: {up:?}");
    }

    let cluster = Cluster::start().unwrap();
    let refused = cluster.start_real_node(&real_node::images_dir().unwrap()).err();
    let message = refused.map(|err| err.to_string()).unwrap_or_default();
    assert!(message.contains("another real node runs on this machine"), "{message}");

    child.kill().unwrap(); // SIGKILL: no exit hook runs, only the reaper is left to clean up
    child.wait().unwrap();
    assert_eq!(wait_clean().await, Vec::<String>::new());
    assert_eq!(kernel_settings(), settings);
    let state = printed(&out, "logs and state:");
    assert!(!std::path::Path::new(state).exists(), "{state} outlived its killed cluster");
}

#[tokio::test]
async fn local_cluster_undoes_its_real_node_on_sigterm() {
    let _machine = machine().await;
    let settings = kernel_settings();
    let (child, out) = local_cluster_with_real_node();
    // SAFETY: plain kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait_with_output().unwrap().status;
    assert!(status.success(), "local-cluster on SIGTERM: {status}");
    // A normal exit waits for the reaper: the machine is clean the moment it returns.
    assert_eq!(leftovers(), Vec::<String>::new());
    assert_eq!(kernel_settings(), settings);
    assert!(!std::path::Path::new(printed(&out, "logs and state:")).exists());
}

#[tokio::test]
async fn a_test_that_panics_with_the_node_up_leaves_nothing() {
    let _machine = machine().await;
    let settings = kernel_settings();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_panics_with_the_real_node_up", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child test was meant to fail");
    assert!(stderr.contains("panicking on purpose with the real node up"), "{stderr}");
    assert_eq!(leftovers(), Vec::<String>::new());
    assert_eq!(kernel_settings(), settings);
}

/// Run by [`a_test_that_panics_with_the_node_up_leaves_nothing`] in a child process.
#[tokio::test]
#[ignore = "a child of a_test_that_panics_with_the_node_up_leaves_nothing"]
async fn child_panics_with_the_real_node_up() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "run a_test_that_panics_with_the_node_up_leaves_nothing instead: this is its child"
    );
    let cluster = Cluster::shared_with_real_node();
    let node = cluster.real_node();
    let ns = cluster.namespace("panic").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());
    let image = node.image("pause").unwrap();
    let pod = real_node_pods::busybox_pod(&node.node_selector(), &image, "sleeper", SLEEPER);
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap();
    wait::until("the sleeper Running", Duration::from_secs(90), || async {
        let phase = pods.get("sleeper").await.ok().and_then(|p| p.status?.phase);
        if phase.as_deref() == Some("Running") { Ok(()) } else { Err(phase) }
    })
    .await;
    panic!("panicking on purpose with the real node up ({})", node.name());
}
