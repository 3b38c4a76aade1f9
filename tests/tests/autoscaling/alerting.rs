//! The chart's alerts and dashboard on the real node's Prometheus: the rule file its
//! PrometheusRule holds (every `for:` 10 s, every window 20 s) loaded into the test's
//! Prometheus, which scrapes the render pods with the shipped job and the operator as the chart's
//! ServiceMonitor asks. Each fault fires its alert, which clears once the fault is gone: a
//! saturating load (saturated, refusing), Gotenberg stopped (Office unavailable), memory bombs,
//! each sent twice (workers out of memory, documents quarantined), a worker killed whenever it
//! comes back (crash-looping), a spec that cannot be sized (Degraded, not Ready), a quota that
//! refuses the pool's Deployment (reconcile errors). While the load runs, every dashboard
//! panel's query returns series; the test prints them and draws every panel over the whole run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::ListParams;
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::wait;
use renderpool_tests::cluster::metrics::{MetricsPipeline, SCRAPE_SECONDS};
use renderpool_tests::cluster::{Cluster, RealNode, run};
use renderpool_tests::load::Load;
use renderpool_tests::operator::OperatorProcess;
use renderpool_tests::{chart, panels};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::operator_support::{is_settled, wait_pool};
use super::{apply, one_slot_pool, turn};

/// The pool the faults hit.
const POOL: &str = "alerts";
/// Every rate and average of the rules looks back this far: ten scrapes.
const WINDOW: &str = "20s";
/// Every alert's `for:`.
const HOLD: Duration = Duration::from_secs(10);
/// The longest a fault may take to fire its alert, or its removal to clear it: detection (a
/// probe, a status write, a scrape, the window filling or emptying) plus `for:`, with room for
/// a loaded machine. A ceiling for a broken run, not a speed claim.
const BOUND: Duration = Duration::from_secs(120);
/// Grafana's `$__rate_interval` for the panel queries: several scrapes.
const RATE_INTERVAL: &str = "30s";
/// The load: PDF clients on the pool's one slot (two queued at most) and Office clients on
/// its one Gotenberg place.
const RENDER_CLIENTS: usize = 6;
const OFFICE_CLIENTS: usize = 2;
const LOAD_REQUEST: &str = "/v1/render?page=1&dpi=300";
const LOAD_DOCUMENT: &str = "pdf/vector.pdf";
const OFFICE_DOCUMENT: &str = "office/test.docx";

/// The ramp's one-slot pool with one Gotenberg instead of an autoscaler: 1 of the node's 2
/// CPUs.
fn pool_manifest(node_selector: &Value) -> Value {
    let gotenberg = json!({ "enabled": true, "officeConcurrency": 1, "cpu": "500m",
                            "memory": "1Gi" });
    one_slot_pool(POOL, node_selector, json!({ "gotenberg": gotenberg }))
}

/// A pool that runs no pod (Degraded and quota faults): `memory` decides whether it can be
/// sized.
fn podless_pool(name: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "renderpool.dev/v1alpha1",
        "kind": "RenderPool",
        "metadata": { "name": name },
        "spec": { "replicas": 0, "cpu": "500m", "memory": memory, "memoryPerSlot": "512Mi",
                  "gotenberg": { "enabled": false } },
    })
}

/// One episode of an alert: from first seen pending, through firing if it got there, to gone.
#[derive(Debug, Clone)]
struct Episode {
    pending: Instant,
    firing: Option<Instant>,
    gone: Option<Instant>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
}

/// An alert by name and the namespace it names ("" for the operator's own).
type Key = (String, String);

/// Every episode of every alert Prometheus holds, polled twice a second.
struct Recorder {
    seen: Arc<Mutex<BTreeMap<Key, Vec<Episode>>>>,
    task: JoinHandle<()>,
}

impl Recorder {
    fn start(metrics: &'static MetricsPipeline) -> Recorder {
        let seen: Arc<Mutex<BTreeMap<Key, Vec<Episode>>>> = Arc::default();
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Ok(alerts) = metrics.alerts().await {
                    let now = Instant::now();
                    let mut seen = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    let mut present = BTreeSet::new();
                    for alert in alerts {
                        let namespace = alert.labels.get("namespace").cloned().unwrap_or_default();
                        let key = (alert.name.clone(), namespace);
                        present.insert(key.clone());
                        let episodes = seen.entry(key).or_default();
                        if episodes.last().is_none_or(|e| e.gone.is_some()) {
                            episodes.push(Episode {
                                pending: now,
                                firing: None,
                                gone: None,
                                labels: BTreeMap::new(),
                                annotations: BTreeMap::new(),
                            });
                        }
                        let Some(episode) = episodes.last_mut() else { continue };
                        if alert.state == "firing" {
                            episode.firing.get_or_insert(now);
                        }
                        episode.labels = alert.labels;
                        episode.annotations = alert.annotations;
                    }
                    for (key, episodes) in seen.iter_mut() {
                        if let Some(episode) = episodes.last_mut()
                            && episode.gone.is_none()
                            && !present.contains(key)
                        {
                            episode.gone = Some(now);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        Recorder { seen, task }
    }

    /// The first episode of `name` for `namespace` that `pick` takes.
    fn find(
        &self,
        name: &str,
        namespace: &str,
        pick: impl Fn(&Episode) -> bool,
    ) -> Option<Episode> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let episodes = seen.get(&(name.to_string(), namespace.to_string()))?;
        episodes.iter().find(|e| pick(e)).cloned()
    }

    /// Waits until `name` for `namespace` fires after `since` (the fault); checks that it was
    /// pending for its `for:` first and that it names the pool; returns how long after `since`
    /// it fired, and the episode.
    async fn fired(&self, name: &str, namespace: &str, since: Instant) -> (Duration, Episode) {
        let what = format!("{name} firing for {namespace:?}");
        let episode = wait::until(&what, BOUND, || async {
            self.find(name, namespace, |e| e.firing.is_some_and(|f| f >= since))
                .ok_or_else(|| self.find(name, namespace, |_| true))
        })
        .await;
        let firing = episode.firing.unwrap();
        // Seen pending late by up to a poll and an evaluation; never firing before `for:`.
        let slack = Duration::from_secs(u64::from(SCRAPE_SECONDS)) + Duration::from_millis(500);
        assert!(
            firing + slack >= episode.pending + HOLD,
            "{name} fired before its for: {episode:?}"
        );
        let description = episode.annotations.get("description").cloned().unwrap_or_default();
        if !namespace.is_empty() {
            assert!(description.contains(namespace), "{name}: {description}");
        }
        assert!(
            episode.annotations.get("runbook_url").is_some_and(|u| u.contains('#')),
            "{episode:?}"
        );
        eprintln!(
            "{name} {namespace}: pending {:.1}s, firing {:.1}s after the fault: {description}",
            episode.pending.saturating_duration_since(since).as_secs_f64(),
            firing.duration_since(since).as_secs_f64()
        );
        (firing.duration_since(since), episode)
    }

    /// Waits until `name` for `namespace`, having fired, is no longer held once `since` (the
    /// fault's removal) has passed; returns how long after `since` it went. An alert may go
    /// before the removal (a load that stops saturating between scrapes while it still runs):
    /// that counts as cleared, after 0 s, as long as it does not come back.
    async fn cleared(&self, name: &str, namespace: &str, since: Instant) -> Duration {
        let what = format!("{name} cleared for {namespace:?}");
        let key = (name.to_string(), namespace.to_string());
        let gone = wait::until(&what, BOUND, || async {
            let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            let episodes = seen.get(&key).map_or(&[][..], Vec::as_slice);
            let last = episodes.last();
            match last.and_then(|e| e.gone) {
                Some(gone) if episodes.iter().any(|e| e.firing.is_some()) => Ok(gone),
                _ => Err(last.cloned()),
            }
        })
        .await;
        let took = gone.saturating_duration_since(since);
        let when = if gone < since { " (it went before)" } else { "" };
        eprintln!(
            "{name} {namespace}: cleared {:.1}s after the fault was removed{when}",
            took.as_secs_f64()
        );
        took
    }

    /// Every episode seen, with when it was pending, fired and went, relative to `start`.
    fn timeline(&self, start: Instant) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let at = |t: Option<Instant>| {
            t.map_or("-".into(), |t| {
                format!("{:.1}s", t.saturating_duration_since(start).as_secs_f64())
            })
        };
        seen.iter()
            .flat_map(|((name, namespace), episodes)| {
                episodes.iter().map(move |e| {
                    format!(
                        "{name} {namespace}: pending {} firing {} gone {}",
                        at(Some(e.pending)),
                        at(e.firing),
                        at(e.gone)
                    )
                })
            })
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A docx that converts like `docx` but hashes differently: the zip's closing record given a
/// comment (`tag`), so the render pod's PDF cache misses and Gotenberg converts it again.
fn docx_variant(docx: &[u8], tag: u64) -> Vec<u8> {
    const END: [u8; 4] = [0x50, 0x4b, 0x05, 0x06];
    let end = docx.len() - 22;
    assert_eq!(docx[end..end + 4], END, "the docx's zip has a comment already");
    let comment = format!("renderpool alerting test {tag}");
    let mut out = docx.to_vec();
    out[end + 20..end + 22].copy_from_slice(&(comment.len() as u16).to_le_bytes());
    out.extend_from_slice(comment.as_bytes());
    out
}

/// Office clients converting a new variant of a docx, one request after another.
fn office_load(
    url: String,
    docx: Vec<u8>,
    clients: usize,
    stop: Arc<AtomicBool>,
) -> Vec<JoinHandle<BTreeMap<u16, u64>>> {
    let next = Arc::new(AtomicU64::new(0));
    (0..clients)
        .map(|_| {
            let (url, docx, stop, next) = (url.clone(), docx.clone(), stop.clone(), next.clone());
            tokio::spawn(async move {
                let http =
                    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
                let mut statuses = BTreeMap::new();
                while !stop.load(Ordering::Relaxed) {
                    let body = docx_variant(&docx, next.fetch_add(1, Ordering::Relaxed));
                    let status = match http.post(&url).body(body).send().await {
                        Ok(response) => response.status().as_u16(),
                        Err(_) => 0,
                    };
                    *statuses.entry(status).or_default() += 1;
                    if status != 200 {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                statuses
            })
        })
        .collect()
}

/// A panel's query with its pickers on the test's pool and `$__rate_interval` filled in.
fn fill(expr: &str, namespace: &str) -> String {
    expr.replace("$namespace", namespace)
        .replace("$pool", POOL)
        .replace("$__rate_interval", RATE_INTERVAL)
}

/// Every dashboard panel's query, filled in, evaluated now: (panel, legend, query, series as
/// `labels = value`). Fails on a query that returns nothing.
async fn evaluate_panels(
    metrics: &MetricsPipeline,
    namespace: &str,
) -> Vec<(String, String, String, Vec<String>)> {
    let dashboard = chart::dashboard().unwrap();
    let mut results = Vec::new();
    let mut empty = Vec::new();
    for (title, legend, expr) in chart::panel_queries(&dashboard) {
        let query = fill(&expr, namespace);
        let samples = metrics.query(&query).await.unwrap_or_else(|err| panic!("{title}: {err}"));
        if samples.is_empty() {
            empty.push(format!("{title}: {query}"));
        }
        let series = samples
            .iter()
            .map(|s| {
                let labels: Vec<String> = s
                    .labels
                    .iter()
                    .filter(|(k, _)| !["instance", "job"].contains(&k.as_str()))
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                format!("{{{}}} = {}", labels.join(", "), s.value)
            })
            .collect();
        results.push((title, legend, query, series));
    }
    assert!(empty.is_empty(), "panel queries that returned nothing:\n{}", empty.join("\n"));
    results
}

/// Draws every panel over `from` until now, the pickers on the test's pool, into an SVG page a
/// person can open; returns its path.
async fn draw_dashboard(metrics: &MetricsPipeline, namespace: &str, from: SystemTime) -> PathBuf {
    let unix = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let (start, end) = (unix(from), unix(SystemTime::now()));
    let mut drawn = Vec::new();
    for panel in chart::panels(&chart::dashboard().unwrap()) {
        let mut out = panels::Panel { title: panel.title, unit: panel.unit, ..Default::default() };
        for (format, expr) in &panel.targets {
            let query = fill(expr, namespace);
            if panel.kind == "table" {
                for sample in metrics.query(&query).await.unwrap() {
                    out.rows.push(format!(
                        "{} = {}",
                        panels::legend(format, &sample.labels),
                        sample.value
                    ));
                }
                continue;
            }
            let range = (start, end, f64::from(SCRAPE_SECONDS));
            for series in metrics.query_range(&query, range).await.unwrap() {
                let points = series.points.iter().map(|(t, v)| (t - start, *v)).collect();
                out.lines
                    .push(panels::Line { legend: panels::legend(format, &series.labels), points });
            }
        }
        drawn.push(out);
    }
    let heading = format!(
        "renderpool dashboard, pool {POOL} in {namespace}: the alerting test's {:.0} s (load, then faults)",
        end - start
    );
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("renderpool-dashboard.svg");
    std::fs::write(&path, panels::page(&heading, &drawn, 3, end - start)).unwrap();
    path
}

/// Stops every process of a pod's container (SIGSTOP): it holds its port but answers nothing,
/// as a hung process does; its probes fail. Returns the host pids, to continue.
fn stop_container(node: &RealNode, pod: &Pod) -> Vec<i32> {
    let procs = node.container_cgroup(pod, "memory", "cgroup.procs").unwrap();
    let pids: Vec<i32> = procs.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert!(!pids.is_empty(), "no process in the container");
    for pid in &pids {
        // SAFETY: kill(2) on pids read from the container's cgroup; no memory is shared.
        unsafe { libc::kill(*pid, libc::SIGSTOP) };
    }
    pids
}

fn continue_processes(pids: &[i32]) {
    for pid in pids {
        // SAFETY: as in stop_container.
        unsafe { libc::kill(*pid, libc::SIGCONT) };
    }
}

/// Sends the render pod memory bombs until `stop`: each new one (a form XObject fan-out, a
/// comment after its end making it new) passes its worker's memory ceiling, which replaces the
/// worker and quarantines the document; sent again, it is refused at once. Returns the answers'
/// error codes, counted.
fn send_bombs(pod: &Pod, stop: Arc<AtomicBool>) -> JoinHandle<BTreeMap<String, u64>> {
    let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    let url = format!("http://{ip}:{}/v1/render?page=1", renderpool_api::render_pod::PORT);
    tokio::spawn(async move {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let mut answers = BTreeMap::new();
        let mut variant = 0u64;
        while !stop.load(Ordering::Relaxed) {
            variant += 1;
            let mut bomb = renderpool_testkit::bombs::xobject_fanout(8, 8);
            bomb.extend_from_slice(format!("% variant {variant}\n").as_bytes());
            for _ in 0..2 {
                let code = match http.post(&url).body(bomb.clone()).send().await {
                    Ok(response) => {
                        let body: Value = response.json().await.unwrap_or_default();
                        body["error"]["code"].as_str().unwrap_or("no error code").to_string()
                    }
                    Err(err) => format!("request failed: {err}"),
                };
                *answers.entry(code).or_insert(0) += 1;
            }
        }
        answers
    })
}

/// Kills the render pod's workers from the host whenever one is alive, until `stop`: each
/// dies young and idle, so its slot backs off and retries, as a crash loop does. Returns how
/// many it killed.
fn kill_workers(node: &'static RealNode, pod: Pod, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    tokio::spawn(async move {
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
        let url = format!("http://{ip}:{}/readyz", renderpool_api::render_pod::PORT);
        let mut killed = 0;
        while !stop.load(Ordering::Relaxed) {
            if let Ok(response) = reqwest::get(&url).await
                && let Ok(ready) = response.json::<Value>().await
            {
                let workers = ready["engine"]["workers"].as_array().cloned().unwrap_or_default();
                for pid in workers.iter().filter_map(|w| w["pid"].as_u64()) {
                    if let Ok(host) = node.host_pid(&pod, pid as u32) {
                        // SAFETY: kill(2) on a worker found in the container's cgroup.
                        if unsafe { libc::kill(host as i32, libc::SIGKILL) } == 0 {
                            killed += 1;
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        killed
    })
}

async fn pods(client: &kube::Client, namespace: &str, component: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector =
        format!("app.kubernetes.io/instance={POOL},app.kubernetes.io/component={component}");
    pods.list(&ListParams::default().labels(&selector)).await.unwrap().items
}

#[tokio::test]
async fn alerts_fire_on_their_faults_and_clear_and_every_dashboard_panel_has_data() {
    let _turn = turn().await;
    let operator = OperatorProcess::shared().await;
    let cluster = Cluster::shared_with_real_node();
    let node = cluster.real_node();
    let metrics = cluster.metrics();
    let client = cluster.client().await;
    let start = Instant::now();
    let started_at = SystemTime::now();

    metrics.scrape_operator(&operator.listen_address()).unwrap();
    let quick = chart::quick_alerting(WINDOW, &format!("{}s", HOLD.as_secs())).unwrap();
    let quick: Vec<&str> = quick.iter().map(String::as_str).collect();
    let rules = chart::alerting_rules(&quick).unwrap();
    metrics.load_rules("renderpool", &rules).await.unwrap();
    let alert_names = chart::alert_names(&rules);
    eprintln!("{} alerts loaded into Prometheus: {alert_names:?}", alert_names.len());
    let recorder = Recorder::start(metrics);

    // Faults that need no pod, from the start: a spec whose memory cannot hold one slot, and a
    // quota that refuses the pool's Deployment.
    let spec_namespace = cluster.namespace("alerts-spec").await;
    let spec_ns = spec_namespace.name().to_string();
    apply(cluster, &spec_ns, &podless_pool("unsizable", "600Mi"));
    let spec_fault = Instant::now();
    let quota_namespace = cluster.namespace("alerts-quota").await;
    let quota_ns = quota_namespace.name().to_string();
    let quota = json!({ "apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": { "name": "no-deployments" },
                        "spec": { "hard": { "count/deployments.apps": "0" } } });
    apply(cluster, &quota_ns, &quota);
    apply(cluster, &quota_ns, &podless_pool("refused", "1Gi"));
    let quota_fault = Instant::now();

    let namespace = cluster.namespace("alerts").await;
    let ns = namespace.name().to_string();
    apply(cluster, &ns, &pool_manifest(&node.node_selector()));
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), &ns);
    wait_pool(&pools, POOL, Duration::from_secs(240), |pool| {
        is_settled(pool)
            && pool
                .status
                .as_ref()
                .is_some_and(|s| s.ready_replicas == 1 && s.gotenberg_ready_replicas == Some(1))
    })
    .await;
    eprintln!("pool {POOL} Ready with Gotenberg at {:.1}s", start.elapsed().as_secs_f64());

    // The saturating load, PDF and Office, through the render Service.
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let spec = services.get(&format!("{POOL}-render")).await.unwrap().spec.unwrap();
    let service = format!("http://{}:{}", spec.cluster_ip.unwrap(), spec.ports.unwrap()[0].port);
    let pdf = renderpool_testkit::corpus::read(LOAD_DOCUMENT);
    let load_started = Instant::now();
    let load = Load::start(&format!("{service}{LOAD_REQUEST}"), pdf, RENDER_CLIENTS);
    let stop_office = Arc::new(AtomicBool::new(false));
    let docx = renderpool_testkit::corpus::read(OFFICE_DOCUMENT);
    let office =
        office_load(format!("{service}/v1/convert"), docx, OFFICE_CLIENTS, stop_office.clone());
    let (saturated, _) = recorder.fired("RenderPoolSaturated", &ns, load_started).await;
    let (refusing, _) = recorder.fired("RenderPoolRefusingRequests", &ns, load_started).await;
    let panels = evaluate_panels(metrics, &ns).await;
    let names = metrics
        .query("count by (__name__) ({__name__=~\"renderpod_.+|renderpool_operator_.+\"})")
        .await
        .unwrap();
    let tally = load.stop().await;
    stop_office.store(true, Ordering::Relaxed);
    let mut office_statuses = BTreeMap::new();
    for client in office {
        for (status, n) in client.await.unwrap() {
            *office_statuses.entry(status).or_insert(0) += n;
        }
    }
    let load_stopped = Instant::now();
    eprintln!("load: {tally}; Office answers by status: {office_statuses:?}");
    assert!(tally.failed.is_empty(), "{tally}");
    assert!(office_statuses.get(&200).is_some_and(|n| *n > 0), "{office_statuses:?}");

    // Every metric the rules and the panels read exists in Prometheus, but one that needs an
    // Office document struck by LibreOffice (a timeout or a crash) and one of a pool with durable
    // jobs, which no fault here makes.
    let exported: BTreeSet<String> =
        names.iter().filter_map(|s| s.labels.get("__name__").cloned()).collect();
    let mut read = BTreeSet::new();
    let exprs = chart::alerts(&rules)
        .into_iter()
        .map(|(_, rule)| rule["expr"].as_str().unwrap().to_string())
        .chain(panels.iter().map(|(_, _, query, _)| query.clone()));
    for expr in exprs {
        read.extend(chart::metric_names(&expr));
    }
    let missing: Vec<&String> = read.difference(&exported).collect();
    assert_eq!(
        missing,
        ["renderpod_jobs_backlog_oldest_seconds", "renderpod_office_strikes_total"],
        "read but never scraped"
    );

    // The podless faults have long fired by now; they are removed here.
    let (degraded, seen) = recorder.fired("RenderPoolDegraded", &spec_ns, spec_fault).await;
    assert_eq!(seen.labels["reason"], "MemoryTooSmallForOneSlot", "{seen:?}");
    assert_eq!(seen.labels["renderpool"], "unsizable", "{seen:?}");
    let (not_ready, _) = recorder.fired("RenderPoolNotReady", &spec_ns, spec_fault).await;
    let (errors, seen) = recorder.fired("RenderPoolOperatorReconcileErrors", "", quota_fault).await;
    assert_eq!(seen.labels["kind"], "apply", "{seen:?}");
    apply(cluster, &spec_ns, &podless_pool("unsizable", "1Gi"));
    let spec_fixed = Instant::now();
    run(cluster.kubectl().args(["delete", "resourcequota", "no-deployments", "-n", &quota_ns]))
        .unwrap();
    let quota_removed = Instant::now();

    // Gotenberg stopped, and memory bombs sent to the render pod, each new one then again.
    let gotenberg = pods(&client, &ns, "gotenberg").await.remove(0);
    let render = pods(&client, &ns, "render").await.remove(0);
    let stopped = stop_container(node, &gotenberg);
    let office_fault = Instant::now();
    let stop_bombing = Arc::new(AtomicBool::new(false));
    let bomber = send_bombs(&render, stop_bombing.clone());
    let bomb_fault = Instant::now();
    let (office_down, _) = recorder.fired("RenderPoolOfficeUnavailable", &ns, office_fault).await;
    let (out_of_memory, seen) =
        recorder.fired("RenderPoolWorkersOutOfMemory", &ns, bomb_fault).await;
    assert!(seen.labels["pod"].starts_with(&format!("{POOL}-render-")), "{seen:?}");
    let (quarantining, _) =
        recorder.fired("RenderPoolQuarantiningDocuments", &ns, bomb_fault).await;
    continue_processes(&stopped);
    let office_back = Instant::now();
    stop_bombing.store(true, Ordering::Relaxed);
    let answers = bomber.await.unwrap();
    let bombs_over = Instant::now();
    eprintln!("memory bombs answered, by code: {answers:?}");
    assert!(answers.get("memory_limit_exceeded").is_some_and(|n| *n > 1), "{answers:?}");
    assert!(answers.get("document_quarantined").is_some_and(|n| *n > 1), "{answers:?}");

    // The render pod's workers killed as they come back.
    let stop_killing = Arc::new(AtomicBool::new(false));
    let killer = kill_workers(node, render, stop_killing.clone());
    let crash_fault = Instant::now();
    let (crash_looping, seen) =
        recorder.fired("RenderPoolWorkersCrashLooping", &ns, crash_fault).await;
    assert!(seen.labels["pod"].starts_with(&format!("{POOL}-render-")), "{seen:?}");
    stop_killing.store(true, Ordering::Relaxed);
    let killed = killer.await.unwrap();
    let crash_over = Instant::now();
    eprintln!("workers killed from the host: {killed}");

    let cleared = [
        ("RenderPoolSaturated", ns.as_str(), load_stopped),
        ("RenderPoolRefusingRequests", &ns, load_stopped),
        ("RenderPoolDegraded", &spec_ns, spec_fixed),
        ("RenderPoolNotReady", &spec_ns, spec_fixed),
        ("RenderPoolOperatorReconcileErrors", "", quota_removed),
        ("RenderPoolOfficeUnavailable", &ns, office_back),
        ("RenderPoolWorkersOutOfMemory", &ns, bombs_over),
        ("RenderPoolQuarantiningDocuments", &ns, bombs_over),
        ("RenderPoolWorkersCrashLooping", &ns, crash_over),
    ];
    let mut took = Vec::new();
    for (name, namespace, since) in cleared {
        took.push((name, recorder.cleared(name, namespace, since).await));
    }
    // Nothing of the pool's is left firing once every fault is gone.
    wait::until("no alert of the pool left", BOUND, || async {
        let alerts = metrics.alerts().await.unwrap();
        let left: Vec<String> = alerts
            .iter()
            .filter(|a| {
                [ns.as_str(), &spec_ns, &quota_ns]
                    .contains(&a.labels.get("namespace").map_or("", String::as_str))
            })
            .map(|a| {
                format!(
                    "{} {} {}",
                    a.name,
                    a.state,
                    a.labels.get("namespace").cloned().unwrap_or_default()
                )
            })
            .collect();
        if left.is_empty() { Ok(()) } else { Err(left) }
    })
    .await;

    eprintln!(
        "dashboard panels while the load ran ({RENDER_CLIENTS} PDF and {OFFICE_CLIENTS} Office clients), $__rate_interval {RATE_INTERVAL}:"
    );
    for (title, legend, query, series) in &panels {
        eprintln!("  {title} [{legend}]\n    {query}");
        for line in series.iter().take(8) {
            eprintln!("      {line}");
        }
        if series.len() > 8 {
            eprintln!("      ... {} series in all", series.len());
        }
    }
    let drawn = draw_dashboard(metrics, &ns, started_at).await;
    eprintln!("every panel drawn over the test: {}", drawn.display());
    eprintln!("alert timeline (from the test's start):");
    for line in recorder.timeline(start) {
        eprintln!("  {line}");
    }
    eprintln!(
        "figures: fired after the fault: Saturated {:.1}s, Refusing {:.1}s, Degraded {:.1}s, \
         NotReady {:.1}s, ReconcileErrors {:.1}s, OfficeUnavailable {:.1}s, WorkersOutOfMemory \
         {:.1}s, QuarantiningDocuments {:.1}s, WorkersCrashLooping {:.1}s (for: {}s, window \
         {WINDOW}); cleared after its removal: {}",
        saturated.as_secs_f64(),
        refusing.as_secs_f64(),
        degraded.as_secs_f64(),
        not_ready.as_secs_f64(),
        errors.as_secs_f64(),
        office_down.as_secs_f64(),
        out_of_memory.as_secs_f64(),
        quarantining.as_secs_f64(),
        crash_looping.as_secs_f64(),
        HOLD.as_secs(),
        took.iter()
            .map(|(n, t)| format!("{n} {:.1}s", t.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
    );

    // Leave the node empty for the next test: the pool's pods gone, not only their namespace.
    drop(namespace);
    let all: Api<Pod> = Api::namespaced(client.clone(), &ns);
    wait::until("the alert pool's pods gone", Duration::from_secs(120), || async {
        let left = all.list(&ListParams::default()).await.map(|l| l.items.len());
        if left.as_ref().is_ok_and(|n| *n == 0) {
            Ok(())
        } else {
            Err(left.map_err(|e| e.to_string()))
        }
    })
    .await;
    drop((spec_namespace, quota_namespace));
    eprintln!("alerting test took {:.1}s", start.elapsed().as_secs_f64());
}
