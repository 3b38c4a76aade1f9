//! Operator at scale on the local control plane: one RenderPool as the baseline, then 200 at
//! once. Prints time until all are Ready, API requests per RenderPool (the operator's own
//! client counter), the operator's peak RSS, and its writes over one idle minute (target: 0).
//!
//! The operator measured is always the release build (`target/release/renderpool-operator`),
//! whatever profile this harness was built with:
//! `cargo build --release -p renderpool-operator && cargo bench -p renderpool-tests --bench
//! operator_scale --profile dev` (POOLS=<n> changes the 200).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use renderpool_operator::crd::{RenderPool, RenderPoolSpec};
use renderpool_testkit::metrics;
use renderpool_tests::cluster::Cluster;
use renderpool_tests::operator::{ChartInstall, OperatorProcess, child_versions};
use renderpool_tests::release_bin;

/// Operator counters read from /metrics.
#[derive(Debug, Clone, Copy)]
struct Counters {
    requests: f64,
    writes: f64,
}

async fn counters(op: &OperatorProcess) -> Counters {
    let text = op.metrics().await;
    Counters {
        requests: metrics::sum(&text, "renderpool_operator_api_requests_total", &[]),
        writes: metrics::sum(&text, "renderpool_operator_api_writes_total", &[]),
    }
}

/// [`counters`] of an operator that may not have written yet: its writes family has no series
/// until the first write, and that absence is a zero here, and only here.
async fn first_counters(op: &OperatorProcess) -> Counters {
    let text = op.metrics().await;
    let writes = metrics::value(&text, "renderpool_operator_api_writes_total", &[]);
    Counters {
        requests: metrics::sum(&text, "renderpool_operator_api_requests_total", &[]),
        writes: writes.unwrap_or(0.0),
    }
}

/// Peak resident memory (VmHWM) of the operator process, found by its Lease identity.
fn peak_rss_kib(identity: &str) -> Option<u64> {
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_operator = args.first().is_some_and(|a| a.ends_with(b"renderpool-operator"))
            && args.contains(&identity.as_bytes());
        if is_operator {
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            return line.split_whitespace().nth(1)?.parse().ok();
        }
    }
    None
}

/// resourceVersion of every RenderPool and child in `namespace`, by kind and name.
async fn versions(client: &kube::Client, namespace: &str) -> BTreeMap<String, String> {
    let all = ListParams::default();
    let mut out = child_versions(client, namespace, &all).await;
    for pool in Api::<RenderPool>::namespaced(client.clone(), namespace).list(&all).await.unwrap() {
        out.insert(
            format!("RenderPool/{}", pool.name_any()),
            pool.resource_version().unwrap_or_default(),
        );
    }
    out
}

fn pool(name: &str) -> RenderPool {
    let spec: RenderPoolSpec = serde_json::from_value(serde_json::json!({
        "replicas": 1, "cpu": "1", "memory": "1Gi",
        "gotenberg": {"replicas": 1, "cpu": "500m", "memory": "1Gi"}
    }))
    .unwrap();
    RenderPool::new(name, spec)
}

fn ready(p: &RenderPool) -> bool {
    let status = p.status.as_ref();
    status.and_then(|s| s.observed_generation) == p.metadata.generation
        && status.is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                && s.conditions.iter().any(|c| c.type_ == "Progressing" && c.status == "False")
        })
}

/// Creates `count` pools at once; returns the seconds until every one is Ready and at rest.
async fn create_and_wait(api: &Api<RenderPool>, prefix: &str, count: usize) -> f64 {
    let started = Instant::now();
    let mut creations = tokio::task::JoinSet::new();
    for i in 0..count {
        let api = api.clone();
        let pool = pool(&format!("{prefix}-{i}"));
        creations.spawn(async move { api.create(&PostParams::default(), &pool).await.map(|_| ()) });
    }
    while let Some(done) = creations.join_next().await {
        done.unwrap().unwrap();
    }
    let selector = ListParams::default();
    let mut last_report = Instant::now();
    loop {
        let pools = api.list(&selector).await.unwrap();
        let mine: Vec<_> = pools
            .items
            .iter()
            .filter(|p| p.metadata.name.as_deref().unwrap_or("").starts_with(prefix))
            .collect();
        let done = mine.iter().filter(|p| ready(p)).count();
        if mine.len() == count && done == count {
            return started.elapsed().as_secs_f64();
        }
        if last_report.elapsed() > Duration::from_secs(15) {
            eprintln!(
                "  {prefix}: {done} of {count} Ready after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{prefix}: only {done} of {count} pools Ready after 10 minutes; first not ready: {:?}",
            mine.iter().find(|p| !ready(p)).map(|p| &p.status)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("POOLS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let cluster = Cluster::shared();
    let binary = release_bin("renderpool-operator");
    let op = &OperatorProcess::start_binary(ChartInstall::shared().await, binary.clone()).await;
    // Each pool: one 1-CPU render pod and one 500m Gotenberg pod.
    let nodes = u32::try_from(count.div_ceil(20)).unwrap().max(1);
    cluster.ensure_nodes("bench-node", nodes, "32", "128Gi").await;
    let ns = cluster.namespace("bench").await;
    let client = cluster.client().await;
    let api: Api<RenderPool> = Api::namespaced(client.clone(), ns.name());

    let c0 = first_counters(op).await;
    let one = create_and_wait(&api, "baseline", 1).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c1 = counters(op).await;
    let one_requests = c1.requests - c0.requests;
    let one_writes = c1.writes - c0.writes;

    let all = create_and_wait(&api, "pool", count).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let c2 = counters(op).await;
    let n = count as f64;
    let per_pool_requests = (c2.requests - c1.requests) / n;
    let per_pool_writes = (c2.writes - c1.writes) / n;
    let rss = peak_rss_kib(op.identity());

    let before_idle = op.metrics().await;
    let objects_before = versions(&client, ns.name()).await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let c3 = counters(op).await;
    let after_idle = op.metrics().await;
    let objects_after = versions(&client, ns.name()).await;
    let changed = objects_after.iter().filter(|(k, v)| objects_before.get(*k) != Some(v)).count();

    println!(
        "operator_scale: {count} RenderPools on {nodes} kwok nodes, operator {}",
        binary.display()
    );
    println!(
        "  baseline, 1 pool:    {one:.2} s to Ready; {one_requests:.0} API requests, {one_writes:.0} writes"
    );
    println!(
        "  {count} pools at once: {all:.2} s until all Ready ({:.1} ms per pool; {:.1}x the single pool's time)",
        all * 1000.0 / n,
        all / one
    );
    println!(
        "  API requests per RenderPool: {per_pool_requests:.1} (writes {per_pool_writes:.1}); baseline pool {one_requests:.0} ({:.2}x)",
        per_pool_requests / one_requests.max(1.0)
    );
    match rss {
        Some(kib) => println!("  operator peak RSS: {:.1} MiB", kib as f64 / 1024.0),
        None => println!("  operator peak RSS: process not found"),
    }
    println!(
        "  idle minute: {:.0} writes (target 0), {:.0} requests (lease renewals); {changed} of {} objects changed resourceVersion",
        c3.writes - c2.writes,
        c3.requests - c2.requests,
        objects_after.len()
    );
    let writes = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("renderpool_operator_api_writes_total"))
            .map(String::from)
            .collect()
    };
    let (before, after) = (writes(&before_idle), writes(&after_idle));
    for line in after.iter().filter(|l| !before.contains(l)) {
        println!("    idle-minute write counter now: {line}");
    }
}
