//! Pods that really run: the machine's one real node (containerd, runc, CNI bridge, kubelet,
//! kube-proxy, CoreDNS) joined to the local control plane beside kwok nodes. Every test here
//! shares that node; it is undone when this binary exits (`real_node_exit` checks that).
//!
//! The pods run the pause image from `$RENDERPOOL_IMAGES` as their root filesystem and the
//! host's static busybox (Debian's `busybox-static`, mounted read-only) as their program: a
//! web server, a shell for hooks and traps, and wget/nslookup for a client pod. That needs no
//! image beyond the sandbox's own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use renderpool_api::versions;
use renderpool_testkit::wait;
use renderpool_tests::cluster::real_node::{NODE_LABEL, NODE_LABEL_VALUE};
use renderpool_tests::cluster::{Cluster, RealNode, run};
use serde_json::{Value, json};

#[path = "support/real_node_pods.rs"]
mod real_node_pods;
use real_node_pods::BUSYBOX;

fn node() -> (&'static Cluster, &'static RealNode) {
    let cluster = Cluster::shared_with_real_node();
    (cluster, cluster.real_node())
}

/// A pod on the real node running `script` under busybox's shell, from the pause image.
fn busybox_pod(node: &RealNode, name: &str, script: &str) -> Value {
    let image = node.image("pause").expect("the pause image is imported");
    real_node_pods::busybox_pod(&node.node_selector(), &image, name, script)
}

/// A busybox web server on port 8080 answering `hello from NAME`, ready when it serves.
fn web_pod(node: &RealNode, name: &str, cpu: &str, memory: &str) -> Value {
    let script = format!(
        "echo serving {name}; mkdir -p /tmp/www && echo hello from {name} > /tmp/www/index.html \
         && exec busybox httpd -f -v -p 8080 -h /tmp/www"
    );
    let mut pod = busybox_pod(node, name, &script);
    let container = &mut pod["spec"]["containers"][0];
    container["resources"] = json!({
        "requests": { "cpu": cpu, "memory": memory },
        "limits": { "cpu": cpu, "memory": memory },
    });
    container["ports"] = json!([{ "containerPort": 8080 }]);
    container["readinessProbe"] =
        json!({ "httpGet": { "path": "/index.html", "port": 8080 }, "periodSeconds": 1 });
    pod["spec"]["restartPolicy"] = json!("Always");
    pod
}

async fn create(pods: &Api<Pod>, pod: Value) -> Pod {
    pods.create(&PostParams::default(), &serde_json::from_value(pod).unwrap()).await.unwrap()
}

async fn wait_ready(pods: &Api<Pod>, name: &str) -> Pod {
    let ready = wait::try_until(&format!("pod {name} Ready"), Duration::from_secs(90), || async {
        let pod = pods.get(name).await.ok()?;
        let conditions = pod.status.as_ref()?.conditions.as_ref()?;
        conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(pod)
    })
    .await;
    match ready {
        Ok(pod) => pod,
        Err(timed_out) => panic!("{timed_out}; the pod: {:?}", pods.get(name).await.ok()),
    }
}

async fn wait_finished(pods: &Api<Pod>, name: &str) -> String {
    wait::until(&format!("pod {name} finished"), Duration::from_secs(90), || async {
        let phase = pods.get(name).await.ok().and_then(|p| p.status?.phase);
        match phase {
            Some(phase) if matches!(phase.as_str(), "Succeeded" | "Failed") => Ok(phase),
            other => Err(other),
        }
    })
    .await
}

fn logs(cluster: &Cluster, namespace: &str, pod: &str) -> String {
    run(cluster.kubectl().args(["logs", "-n", namespace, pod])).unwrap()
}

/// `kubectl port-forward` to a pod, stopped when dropped.
struct PortForward {
    child: Child,
    port: u16,
}

impl PortForward {
    fn start(cluster: &Cluster, namespace: &str, pod: &str, port: u16) -> PortForward {
        let mut child = cluster
            .kubectl()
            .args(["port-forward", "-n", namespace, &format!("pod/{pod}"), &format!(":{port}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // "Forwarding from 127.0.0.1:PORT -> 8080"
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        // Keep reading: kubectl dies of a closed pipe at its next line otherwise.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let local = line
            .split_once("127.0.0.1:")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("kubectl port-forward said: {line}"));
        PortForward { child, port: local }
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_real_node_is_ready_labelled_and_runs_real_components() {
    let (cluster, node) = node();
    // Figures for the record, not asserted.
    eprintln!("real node Ready {:.1}s after its start began", node.started_in().as_secs_f64());
    for (name, pid) in node.daemons() {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss = status.lines().find(|line| line.starts_with("VmRSS:")).unwrap_or("VmRSS: ?");
        eprintln!("  {name}: {}", rss.trim_start_matches("VmRSS:").trim());
    }
    // A kwok node next to it keeps its own label and not the real node's.
    cluster.ensure_nodes("beside-real", 1, "4", "8Gi").await;
    let nodes: Api<Node> = Api::all(cluster.client().await);
    let real = nodes
        .list(&ListParams::default().labels(&format!("{NODE_LABEL}={NODE_LABEL_VALUE}")))
        .await
        .unwrap();
    let names: Vec<_> = real.items.iter().filter_map(|n| n.metadata.name.clone()).collect();
    assert_eq!(names, [node.name()], "only the real node carries {NODE_LABEL}");
    let kwok = nodes.get("beside-real-0").await.unwrap();
    let kwok_labels = kwok.metadata.labels.unwrap();
    assert_eq!(kwok_labels.get("type").map(String::as_str), Some("kwok"));
    assert!(!kwok_labels.contains_key(NODE_LABEL));

    let status = real.items[0].status.clone().unwrap();
    let info = status.node_info.unwrap();
    assert_eq!(info.kubelet_version, format!("v{}", versions::KUBERNETES));
    assert_eq!(info.container_runtime_version, format!("containerd://{}", versions::CONTAINERD));
    let addresses = status.addresses.unwrap();
    assert!(addresses.iter().any(|a| a.type_ == "InternalIP" && a.address == "127.0.0.1"));
    let dns: Api<Service> = Api::namespaced(cluster.client().await, "kube-system");
    let dns = dns.get("kube-dns").await.unwrap();
    assert_eq!(dns.spec.unwrap().cluster_ip.as_deref(), Some("10.96.0.10"));
}

#[tokio::test]
async fn a_guaranteed_pod_runs_with_its_limits_probe_logs_exec_and_port_forward() {
    let (cluster, node) = node();
    let ns = cluster.namespace("real-web").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());
    create(&pods, web_pod(node, "web", "300m", "48Mi")).await;
    let pod = wait_ready(&pods, "web").await;
    let status = pod.status.as_ref().unwrap();
    assert_eq!(status.qos_class.as_deref(), Some("Guaranteed"));
    assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(node.name()));

    // The kubelet made the container's cgroup from the spec: 300m is 30 ms per 100 ms period.
    assert_eq!(node.container_cgroup(&pod, "cpu", "cpu.cfs_period_us").unwrap(), "100000");
    assert_eq!(node.container_cgroup(&pod, "cpu", "cpu.cfs_quota_us").unwrap(), "30000");
    assert_eq!(
        node.container_cgroup(&pod, "memory", "memory.limit_in_bytes").unwrap(),
        (48u64 << 20).to_string()
    );

    assert!(logs(cluster, ns.name(), "web").contains("serving web"));
    let uid = run(cluster
        .kubectl()
        .args(["exec", "-n", ns.name(), "web", "--"])
        .args([BUSYBOX, "id", "-u"]))
    .unwrap();
    assert_eq!(uid.trim(), "0");

    let forward = PortForward::start(cluster, ns.name(), "web", 8080);
    let body = reqwest::get(format!("http://127.0.0.1:{}/index.html", forward.port))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body.trim(), "hello from web");
}

#[tokio::test]
async fn a_pod_reaches_another_through_its_service_name_and_nothing_outside() {
    let (cluster, node) = node();
    let ns = cluster.namespace("real-svc").await;
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    create(&pods, web_pod(node, "web", "200m", "32Mi")).await;
    let services: Api<Service> = Api::namespaced(client, ns.name());
    let service = json!({
        "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web" },
        "spec": { "selector": { "app": "web" },
                  "ports": [{ "port": 80, "targetPort": 8080, "protocol": "TCP" }] },
    });
    let service = services
        .create(&PostParams::default(), &serde_json::from_value(service).unwrap())
        .await
        .unwrap();
    wait_ready(&pods, "web").await;

    // The client resolves the Service by its short and its namespaced name through CoreDNS,
    // connects through kube-proxy's rules, and finds no route or name beyond the machine.
    let namespaced = format!("web.{}.svc", ns.name());
    let script = format!(
        "for name in web {namespaced}; do \
           until busybox timeout 5 busybox wget -q -O- http://$name/index.html; do busybox sleep 1; done; \
         done; \
         echo routes-begin; busybox ip route; echo routes-end; \
         if busybox nslookup example.com; then echo OUTSIDE-RESOLVED; else echo OUTSIDE-NXDOMAIN; fi"
    );
    create(&pods, busybox_pod(node, "client", &script)).await;
    let phase = wait_finished(&pods, "client").await;
    let out = logs(cluster, ns.name(), "client");
    assert_eq!(phase, "Succeeded", "client output:\n{out}");
    assert_eq!(out.matches("hello from web").count(), 2, "client output:\n{out}");
    assert!(out.contains("OUTSIDE-NXDOMAIN"), "an outside name must not resolve:\n{out}");
    let routes: Vec<&str> = out
        .lines()
        .skip_while(|line| *line != "routes-begin")
        .skip(1)
        .take_while(|line| *line != "routes-end")
        .collect();
    assert!(!routes.iter().any(|r| r.starts_with("default")), "no default route: {routes:?}");
    assert!(routes.iter().any(|r| r.starts_with("10.96.0.0/16 via 10.244.0.1")), "{routes:?}");

    // The host reaches the ClusterIP too (routed to the ifb sink, rewritten by kube-proxy).
    let ip = service.spec.unwrap().cluster_ip.unwrap();
    let body = reqwest::get(format!("http://{ip}/index.html")).await.unwrap().text().await.unwrap();
    assert_eq!(body.trim(), "hello from web");
}

#[tokio::test]
async fn deleting_a_pod_runs_pre_stop_then_sigterm_within_the_grace_period() {
    let (cluster, node) = node();
    let ns = cluster.namespace("real-stop").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());
    let events = node.dir().join(format!("events-{}", ns.name()));
    std::fs::create_dir_all(&events).unwrap();
    let mut pod = busybox_pod(
        node,
        "stopper",
        "trap 'echo TERM $(busybox date +%s) >> /events/log; exit 0' TERM; \
         echo START >> /events/log; \
         while true; do busybox sleep 0.2; done",
    );
    let container = &mut pod["spec"]["containers"][0];
    container["lifecycle"] = json!({ "preStop": { "exec": { "command": [
        BUSYBOX, "sh", "-c",
        "echo PRESTOP-BEGIN >> /events/log; busybox sleep 2; echo PRESTOP-END >> /events/log",
    ]}}});
    container["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "events", "mountPath": "/events" }));
    pod["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "name": "events", "hostPath": { "path": events, "type": "Directory" } }));
    pod["spec"]["restartPolicy"] = json!("Always");
    create(&pods, pod).await;
    let log = events.join("log");
    wait::until("the pod's START line", Duration::from_secs(90), || async {
        std::fs::read_to_string(&log).ok().filter(|text| text.contains("START")).map(drop)
    })
    .await;

    let grace = 20;
    pods.delete(
        "stopper",
        &DeleteParams { grace_period_seconds: Some(grace), ..Default::default() },
    )
    .await
    .unwrap();
    // The API server's deadline for the pod: past it, the kubelet sends SIGKILL.
    let stopping = pods.get("stopper").await.unwrap();
    let deadline = stopping.metadata.deletion_timestamp.expect("a deletion deadline").0;
    wait::until("the stopper gone", Duration::from_secs(grace as u64 + 30), || async {
        pods.get_opt("stopper").await.unwrap().is_none().then_some(())
    })
    .await;
    let lines: Vec<String> =
        std::fs::read_to_string(&log).unwrap().lines().map(String::from).collect();
    let (term, at) = lines.last().and_then(|l| l.split_once(' ')).unwrap_or_default();
    assert_eq!(lines[..3], ["START", "PRESTOP-BEGIN", "PRESTOP-END"], "the hook: {lines:?}");
    assert_eq!((lines.len(), term), (4, "TERM"), "then SIGTERM: {lines:?}");
    // SIGTERM came before the deadline (the container's clock is the host's): the container
    // ended on it, not on the grace period's SIGKILL.
    let at: i64 = at.parse().unwrap();
    assert!(at < deadline.as_second(), "SIGTERM at {at}, the deadline {deadline}");
}

#[tokio::test]
async fn pods_and_the_host_reach_the_api_server_through_the_kubernetes_service() {
    let (cluster, node) = node();
    let ns = cluster.namespace("real-api").await;
    let pods: Api<Pod> = Api::namespaced(cluster.client().await, ns.name());
    // busybox's own TLS cannot talk to Go's, so the pod speaks plain HTTP to the TLS port: only
    // a Go HTTPS server (the API server, behind the Service and the node's relay) answers so.
    let script =
        "printf 'GET /version HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 kubernetes.default.svc 443";
    create(&pods, busybox_pod(node, "probe-api", script)).await;
    wait_finished(&pods, "probe-api").await;
    let out = logs(cluster, ns.name(), "probe-api");
    assert!(out.contains("Client sent an HTTP request to an HTTPS server"), "{out}");

    // The host checks the whole path with TLS verified: the Service's address is in the API
    // server's certificate, as in-cluster clients (kube-rs, client-go) expect.
    let mut kubeconfig: Value =
        serde_json::from_str(&std::fs::read_to_string(cluster.kubeconfig()).unwrap()).unwrap();
    kubeconfig["clusters"][0]["cluster"]["server"] = json!("https://10.96.0.1:443");
    let path = cluster.state_dir().join("kubeconfig-admin-via-service");
    std::fs::write(&path, kubeconfig.to_string()).unwrap();
    let version = cluster.client_for(&path).await.unwrap().apiserver_version().await.unwrap();
    assert_eq!(version.git_version, format!("v{}", versions::KUBERNETES));
}
