//! Autoscaling on saturation, on the real node: the operator with the chart's rights and the HPA
//! it makes from the pool's `spec.autoscaling`, Prometheus scraping the render pods at their pod
//! IPs with the shipped scrape job, prometheus-adapter serving the shipped rules as
//! `custom.metrics.k8s.io` through the API server's aggregation layer, and the
//! controller-manager's HPA controller scaling the RenderPool through its `/scale` on the pods'
//! busy-slot ratio.
//!
//! A load ramp through the render Service drives the ratio up; the HPA raises the pool's
//! replicas before most requests are refused, and lowers them after its stabilisation window
//! once the load stops. Every admitted request completes or is refused cleanly (429/503 with a
//! code and `Retry-After`), and the render ReplicaSet never rolls. The test prints its timeline
//! and figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::ListParams;
use renderpool_operator::build::{BUSY_SLOT_RATIO_METRIC, QUEUE_DEPTH_METRIC};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::metrics::rules_path;
use renderpool_tests::cluster::{Cluster, HPA_SYNC_SECONDS, run_with_input};
use renderpool_tests::load::{Load, Tally};
use renderpool_tests::operator::{OperatorProcess, RELEASE_NAMESPACE};
use renderpool_tests::repo_root;
use serde_json::{Value, json};

#[path = "e2e/operator_support.rs"]
mod operator_support;
use operator_support::{is_settled, wait_pool};

#[path = "autoscaling/alerting.rs"]
mod alerting;
#[path = "autoscaling/keda.rs"]
mod keda;

/// One real-node test at a time: each fills the node's two CPUs with its pool.
async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

const POOL: &str = "ramp";
/// The ceiling of the ramp pool: three render pods of 500m fit the node's 2 CPUs (the operator
/// runs as a host process here, not on the node).
const MAX_REPLICAS: i32 = 3;
/// The target busy-slot ratio, in percent as `spec.autoscaling` takes it.
const TARGET_BUSY_PERCENT: i32 = 70;
/// A short scale-down stabilisation window, so the test sees the scale-in in a minute.
const SCALE_DOWN_WINDOW_SECONDS: u64 = 30;
/// The ramp: clients added at each step, and how long each step lasts.
const RAMP_STEPS: [usize; 4] = [1, 1, 2, 2];
const STEP: Duration = Duration::from_secs(10);
/// How long the full load is held, at most, for the pool to reach its ceiling.
const HOLD_LIMIT: Duration = Duration::from_secs(180);
/// An A4 page of vector graphics as a 300 dpi PNG (8.7 megapixels): its slot works for a good
/// part of a second on 500m, while its 39 KB upload is quick, so busy slots measure the load.
const LOAD_REQUEST: &str = "/v1/render?page=1&dpi=300";
const LOAD_DOCUMENT: &str = "pdf/vector.pdf";

/// A pool of small pods: one slot each (0.5 CPU rounds up to one slot; (576Mi - 296Mi for the
/// supervisor) / 256Mi = 1), two jobs queued at most, so a saturated pod refuses quickly; one
/// replica to start with. `more` adds to its spec (Gotenberg, autoscaling).
fn one_slot_pool(name: &str, node_selector: &Value, more: Value) -> Value {
    let mut spec = json!({
        // Where the ramp starts (rather than the default 2); an HPA owns the field from then
        // on, and nothing re-applies the manifest.
        "replicas": 1,
        "cpu": "500m",
        "memory": "576Mi",
        "memoryPerSlot": "256Mi",
        "queueDepth": 2,
        "preStopSeconds": 2,
        "nodeSelector": node_selector,
    });
    if let (Some(spec), Value::Object(more)) = (spec.as_object_mut(), more) {
        spec.extend(more);
    }
    json!({
        "apiVersion": "renderpool.dev/v1beta1",
        "kind": "RenderPool",
        "metadata": { "name": name },
        "spec": spec,
    })
}

/// The ramp's pool: the operator's HPA between 1 and [`MAX_REPLICAS`] on the busy-slot ratio.
fn pool_manifest(node_selector: &Value) -> Value {
    let autoscaling = json!({
        "gotenberg": { "enabled": false },
        "autoscaling": {
            "minReplicas": 1,
            "maxReplicas": MAX_REPLICAS,
            "targetBusyPercent": TARGET_BUSY_PERCENT,
            "scaleDownStabilizationSeconds": SCALE_DOWN_WINDOW_SECONDS,
        },
    });
    one_slot_pool(POOL, node_selector, autoscaling)
}

fn apply(cluster: &Cluster, namespace: &str, object: &Value) {
    let mut kubectl = cluster.kubectl();
    kubectl.args(["apply", "-n", namespace, "-f", "-"]);
    run_with_input(&mut kubectl, object.to_string().as_bytes())
        .unwrap_or_else(|err| panic!("kubectl apply: {err}"));
}

fn render_selector() -> String {
    format!("app.kubernetes.io/instance={POOL},app.kubernetes.io/component=render")
}

fn is_ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// One second of the timeline.
#[derive(Debug, Clone)]
struct Sample {
    at: Duration,
    clients: usize,
    /// The pods' busy-slot ratio as the adapter serves it (their mean), if it serves any.
    busy: Option<f64>,
    /// The pods' queue depth as the adapter serves it (their mean).
    queued: Option<f64>,
    spec_replicas: i32,
    ready_replicas: i32,
    tally: Tally,
}

impl std::fmt::Display for Sample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        write!(
            f,
            "{:>5.1}s  clients {}  busy {:>4}  queue {:>4}  replicas spec {} ready {}  \
             admitted {:>4}  completed {:>4}  refused {:>4}  failed {}",
            self.at.as_secs_f64(),
            self.clients,
            value(self.busy),
            value(self.queued),
            self.spec_replicas,
            self.ready_replicas,
            self.tally.admitted,
            self.tally.completed,
            self.tally.refusals(),
            self.tally.failed.len(),
        )
    }
}

/// Reads what the test watches: the pool, its render pods and the adapter's metrics.
struct Watch {
    cluster: &'static Cluster,
    client: kube::Client,
    namespace: String,
    pools: Api<RenderPool>,
    pods: Api<Pod>,
    started: Instant,
    /// What the load came to, once it has stopped (the later samples show it).
    finished: Option<Tally>,
    /// Every render pod's `pod-template-hash`, over the whole test.
    template_hashes: BTreeSet<String>,
    timeline: Vec<Sample>,
}

impl Watch {
    /// Watches the ramp pool in `namespace`, the clock starting now.
    fn new(cluster: &'static Cluster, client: kube::Client, namespace: &str) -> Watch {
        Watch {
            cluster,
            pools: Api::namespaced(client.clone(), namespace),
            pods: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.to_string(),
            started: Instant::now(),
            finished: None,
            template_hashes: BTreeSet::new(),
            timeline: Vec::new(),
        }
    }

    async fn mean(&self, metric: &str) -> Option<f64> {
        let values =
            self.cluster.metrics().pod_metric(&self.client, &self.namespace, metric).await.ok()?;
        (!values.is_empty()).then(|| values.values().sum::<f64>() / values.len() as f64)
    }

    async fn sample(&mut self, load: Option<&Load>) -> Sample {
        let pool = self.pools.get(POOL).await.unwrap();
        let pods = self.pods.list(&ListParams::default().labels(&render_selector())).await;
        for pod in pods.unwrap().items {
            let labels = pod.metadata.labels.unwrap_or_default();
            if let Some(hash) = labels.get("pod-template-hash") {
                self.template_hashes.insert(hash.clone());
            }
        }
        let sample = Sample {
            at: self.started.elapsed(),
            clients: load.map_or(0, Load::clients),
            busy: self.mean(BUSY_SLOT_RATIO_METRIC).await,
            queued: self.mean(QUEUE_DEPTH_METRIC).await,
            spec_replicas: pool.spec.replicas,
            ready_replicas: pool.status.map_or(0, |s| s.ready_replicas),
            tally: load.map(Load::tally).or_else(|| self.finished.clone()).unwrap_or_default(),
        };
        eprintln!("{sample}");
        self.timeline.push(sample.clone());
        sample
    }

    /// The ramp: [`RAMP_STEPS`] clients added to `load` a [`STEP`] apart, then held until the
    /// pool has [`MAX_REPLICAS`] Ready (the sample that saw it) or [`HOLD_LIMIT`] passed (None).
    async fn ramp_to_ceiling(&mut self, load: &mut Load) -> Option<Sample> {
        for more in RAMP_STEPS {
            load.add_clients(more);
            self.follow(Some(load), STEP, |_| false).await;
        }
        self.follow(Some(load), HOLD_LIMIT, |s| {
            s.spec_replicas == MAX_REPLICAS && s.ready_replicas == MAX_REPLICAS
        })
        .await
    }

    /// Samples about once a second for `how_long`, or until `done` holds.
    async fn follow(
        &mut self,
        load: Option<&Load>,
        how_long: Duration,
        done: impl Fn(&Sample) -> bool,
    ) -> Option<Sample> {
        let until = Instant::now() + how_long;
        while Instant::now() < until {
            let next = Instant::now() + Duration::from_secs(1);
            let sample = self.sample(load).await;
            if done(&sample) {
                return Some(sample);
            }
            tokio::time::sleep_until(next.into()).await;
        }
        None
    }
}

/// The load's URL: [`LOAD_REQUEST`] on the ramp pool's render Service in `namespace`.
async fn load_url(client: &kube::Client, namespace: &str) -> String {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let spec = services.get(&format!("{POOL}-render")).await.unwrap().spec.unwrap();
    format!("http://{}:{}{LOAD_REQUEST}", spec.cluster_ip.unwrap(), spec.ports.unwrap()[0].port)
}

/// The names of the pool's render ReplicaSets.
async fn render_replica_sets(client: &kube::Client, namespace: &str) -> Vec<String> {
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let listed = sets.list(&ListParams::default().labels(&render_selector())).await.unwrap();
    listed.items.into_iter().filter_map(|rs| rs.metadata.name).collect()
}

#[tokio::test]
async fn a_load_ramp_scales_the_pool_up_on_busy_slots_and_back_after_the_window() {
    let _turn = turn().await;
    // The chart first, while only kwok nodes exist: its operator pods are bound there (kwok
    // plays them, nothing runs), and the operator that works is this workspace's binary with
    // the chart's ServiceAccount token. The real node's CPUs are left to the render pods.
    let operator = OperatorProcess::shared().await;
    let cluster = Cluster::shared_with_real_node();
    let node = cluster.real_node();
    let started = Instant::now();
    let metrics = cluster.metrics();
    eprintln!(
        "Prometheus and prometheus-adapter up (APIService Available) in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let namespace = cluster.namespace("autoscaling").await;
    let ns = namespace.name().to_string();
    let client = cluster.client().await;
    apply(cluster, &ns, &pool_manifest(&node.node_selector()));
    let operators: Api<Pod> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    for pod in operators.list(&ListParams::default()).await.unwrap() {
        let on = pod.spec.and_then(|s| s.node_name);
        assert_ne!(on.as_deref(), Some(node.name()), "an operator pod runs on the real node");
    }
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), &ns);
    wait_pool(&pools, POOL, Duration::from_secs(180), |pool| {
        is_settled(pool) && pool.status.as_ref().is_some_and(|s| s.ready_replicas == 1)
    })
    .await;
    let replica_sets = render_replica_sets(&client, &ns).await;
    assert_eq!(replica_sets.len(), 1, "{replica_sets:?}");

    // The adapter serves the pod's ratio once Prometheus has scraped it and a relist saw it.
    let what = format!("the adapter serving {BUSY_SLOT_RATIO_METRIC} for one pod");
    let served = wait::until(&what, Duration::from_secs(60), || async {
        let values = metrics.pod_metric(&client, &ns, BUSY_SLOT_RATIO_METRIC).await;
        match values {
            Ok(values) if values.len() == 1 => Ok(values),
            other => Err(other.map_err(|err| err.to_string())),
        }
    })
    .await;
    eprintln!("custom.metrics.k8s.io before the load: {served:?}");
    assert!(served.values().all(|v| (0.0..=1.0).contains(v)), "{served:?}");

    // The operator's HPA, named like the pool and aimed at its /scale, reads the metric.
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &ns);
    let active = wait::try_until("the HPA reading the metric", Duration::from_secs(60), || async {
        let hpa = hpas.get(POOL).await.ok()?;
        let target = &hpa.spec.scale_target_ref;
        assert_eq!((target.kind.as_str(), target.name.as_str()), ("RenderPool", POOL));
        let status = hpa.status?;
        let conditions = status.conditions.unwrap_or_default();
        conditions.iter().any(|c| c.type_ == "ScalingActive" && c.status == "True").then_some(())
    })
    .await;
    assert!(active.is_ok(), "{active:?}: {:?}\n{}", hpas.get(POOL).await, operator.log());

    let url = load_url(&client, &ns).await;
    let pdf = renderpool_testkit::corpus::read(LOAD_DOCUMENT);

    let mut watch = Watch::new(cluster, client.clone(), &ns);
    eprintln!("timeline (t from the load's start; busy and queue as the adapter serves them):");
    let load_started = watch.started;
    let mut load = Load::start(&url, pdf, 0);
    let full = watch.ramp_to_ceiling(&mut load).await;
    assert!(full.is_some(), "the pool never reached {MAX_REPLICAS} Ready replicas under load");
    // A while at the ceiling, so every pod has served under load.
    watch.follow(Some(&load), STEP, |_| false).await;
    // The KEDA example's query, on this pool, reads the same saturation from Prometheus.
    let keda = metrics.query(&keda_query(&ns, POOL)).await.unwrap();
    eprintln!("the KEDA example's query on this pool under load: {keda:?}");
    assert_eq!(keda.len(), 1, "{keda:?}");
    assert!(keda[0].value > 0.0 && keda[0].value <= 1.0, "{keda:?}");
    for (name, pid) in metrics.daemons() {
        let rss = renderpool_tests::rss_bytes(*pid).unwrap_or_default();
        eprintln!("{name} RSS under load: {} MiB", rss >> 20);
    }
    let load_stopped = Instant::now();
    let tally = load.stop().await;
    watch.finished = Some(tally.clone());

    let scaled_in = watch
        .follow(None, Duration::from_secs(SCALE_DOWN_WINDOW_SECONDS + 120), |s| {
            s.spec_replicas == 1 && s.ready_replicas == 1
        })
        .await;
    let hpa = hpas.get(POOL).await.unwrap();
    eprintln!("HPA status at the end: {:?}", hpa.status);
    assert!(scaled_in.is_some(), "the pool did not scale back to 1 after the load");
    let timeline = &watch.timeline;

    // Figures.
    let at_load = |s: &Sample| s.at;
    let first_up = timeline.iter().find(|s| s.spec_replicas > 1).map(at_load).unwrap();
    let first_ready = timeline.iter().find(|s| s.ready_replicas > 1).map(at_load).unwrap();
    let all_ready =
        timeline.iter().find(|s| s.ready_replicas == MAX_REPLICAS).map(at_load).unwrap();
    let stopped_at = load_stopped.duration_since(load_started);
    let first_down = timeline
        .iter()
        .find(|s| s.at > stopped_at && s.spec_replicas < MAX_REPLICAS)
        .map(at_load)
        .unwrap();
    let refused_by_first_ready =
        timeline.iter().find(|s| s.ready_replicas > 1).map(|s| s.tally.clone()).unwrap();
    eprintln!(
        "figures: load start to spec.replicas > 1 {:.1}s, to a second replica Ready {:.1}s, to \
         {MAX_REPLICAS} Ready {:.1}s; load stopped at {:.1}s, first scale-in at {:.1}s ({:.1}s \
         after, window {SCALE_DOWN_WINDOW_SECONDS}s, HPA sync {HPA_SYNC_SECONDS}s); by the \
         second replica Ready: {}; whole load: {tally}; refused {:.1}% of admitted",
        first_up.as_secs_f64(),
        first_ready.as_secs_f64(),
        all_ready.as_secs_f64(),
        stopped_at.as_secs_f64(),
        first_down.as_secs_f64(),
        (first_down - stopped_at).as_secs_f64(),
        refused_by_first_ready,
        100.0 * tally.refusals() as f64 / tally.admitted.max(1) as f64,
    );

    // What drove the scale: the adapter's ratio passed the target under load.
    let peak = timeline.iter().filter_map(|s| s.busy).fold(0.0, f64::max);
    let target = f64::from(TARGET_BUSY_PERCENT) / 100.0;
    assert!(peak > target, "the busy ratio peaked at {peak:.2}");
    // The HPA scaled through /scale before most requests were refused: most completed.
    assert!(tally.admitted > 0, "the load sent nothing");
    assert!(tally.refusals() * 2 < tally.admitted, "most requests were refused: {tally}");
    assert!(
        refused_by_first_ready.refusals() * 2 < refused_by_first_ready.admitted,
        "most requests were refused before the second replica was Ready: {refused_by_first_ready}"
    );
    // Nothing admitted was lost: every request completed or was refused cleanly.
    assert!(tally.failed.is_empty(), "failed requests: {:#?}", tally.failed);
    assert_eq!(tally.completed + tally.refusals(), tally.admitted, "{tally}");
    assert!(
        tally.refused.keys().all(|code| code == "overloaded" || code == "would_miss_deadline"),
        "{tally}"
    );
    // The window held the replicas after the load: the HPA took the highest recommendation of
    // the last window, and the load's last one was the ceiling.
    let window = Duration::from_secs(SCALE_DOWN_WINDOW_SECONDS);
    assert!(
        first_down - stopped_at >= window,
        "scaled in {first_down:?} < {stopped_at:?} + {window:?}"
    );
    // Scaling only scaled: one ReplicaSet, one pod template, throughout.
    assert_eq!(render_replica_sets(&client, &ns).await, replica_sets, "the render pods rolled");
    assert_eq!(watch.template_hashes.len(), 1, "{:?}", watch.template_hashes);
    wait::until("the scaled-in pods gone", Duration::from_secs(60), || async {
        let pods = watch.pods.list(&ListParams::default().labels(&render_selector())).await.ok()?;
        (pods.items.len() == 1 && pods.items.iter().all(is_ready)).then_some(())
    })
    .await;
}

/// The shipped KEDA example, as YAML parsed into JSON.
fn keda_example() -> Value {
    let path = repo_root().join("deploy/autoscaling/keda-scaledobject.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The example's Prometheus query, aimed at `namespace` and `pool` instead of its placeholders.
fn keda_query(namespace: &str, pool: &str) -> String {
    let example = keda_example();
    let query = example["spec"]["triggers"][0]["metadata"]["query"].as_str().unwrap();
    assert!(query.contains(r#"namespace="default""#) && query.contains(r#"renderpool="previews""#));
    query
        .replace(r#"namespace="default""#, &format!("namespace=\"{namespace}\""))
        .replace(r#"renderpool="previews""#, &format!("renderpool=\"{pool}\""))
}

#[tokio::test]
async fn the_keda_example_is_a_valid_scaled_object_for_kedas_own_crd() {
    let cluster = Cluster::shared();
    // KEDA v2.21.0's CRDs, from its module source (tests/cluster/build.sh).
    cluster.install_keda_crds().unwrap();
    let example = keda_example();
    assert_eq!(example["spec"]["scaleTargetRef"]["kind"], "RenderPool");
    assert_eq!(example["spec"]["scaleTargetRef"]["apiVersion"], "renderpool.dev/v1beta1");
    let dry_run = |object: &Value| {
        let mut kubectl = cluster.kubectl();
        kubectl.args([
            "apply",
            "--server-side",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
        ]);
        run_with_input(&mut kubectl, object.to_string().as_bytes()).map_err(|err| err.to_string())
    };
    let accepted =
        dry_run(&example).unwrap_or_else(|err| panic!("the API server refused it: {err}"));
    assert!(accepted.contains("scaledobject.keda.sh/previews"), "{accepted}");
    // The schema is enforced, so the acceptance above means something: a misspelt field and a
    // broken rule are refused.
    let mut misspelt = example.clone();
    misspelt["spec"]["maxReplicas"] = json!(10);
    let refused = dry_run(&misspelt).unwrap_err();
    assert!(refused.contains("maxReplicas"), "{refused}");
    let mut inverted = example.clone();
    inverted["spec"]["minReplicaCount"] = json!(20);
    let refused = dry_run(&inverted).unwrap_err();
    assert!(
        refused.contains("minReplicaCount must be less than or equal to maxReplicaCount"),
        "{refused}"
    );
}

#[test]
fn the_shipped_adapter_rules_serve_the_two_metrics_the_operators_hpa_reads() {
    let path = rules_path();
    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    let served: BTreeSet<&str> = rules["rules"]
        .as_array()
        .unwrap_or_else(|| panic!("no rules in {rules}"))
        .iter()
        .map(|rule| rule["name"]["as"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(served, BTreeSet::from([BUSY_SLOT_RATIO_METRIC, QUEUE_DEPTH_METRIC]));
}
