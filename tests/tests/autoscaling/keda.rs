//! A job pool scaled by KEDA on synchronous load, and the hand-over between the operator's HPA
//! and KEDA's ScaledObject, on the real node with real KEDA.
//!
//! The ramp pool starts with the operator's HPA. Given `spec.jobs`, the operator swaps it for a
//! ScaledObject with the backlog trigger and the busy-slot ratio from Prometheus; the same load
//! ramp as the HPA test drives it to its ceiling through KEDA's HPA (the job backlog is empty
//! all along). Dropping the jobs swaps back. A watch on the namespace's HPAs records every
//! change: the operator's HPA and KEDA's never exist at the same moment, so /scale has one
//! writer throughout.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use renderpool_operator::crd::RenderPool;
use renderpool_operator::keda::{ScaledObject, hpa_name};
use renderpool_testkit::wait;
use renderpool_tests::cluster::Cluster;
use renderpool_tests::cluster::addresses::BRIDGE_IP;
use renderpool_tests::jobs::World;
use renderpool_tests::load::Load;
use renderpool_tests::operator::OperatorProcess;
use renderpool_tests::versitygw::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use serde_json::{Value, json};

use super::operator_support::{is_settled, wait_pool};
use super::{LOAD_DOCUMENT, MAX_REPLICAS, POOL, Watch, apply, load_url, pool_manifest, turn};

/// The ramp pool's manifest with `spec.jobs` on `world` and KEDA's triggers: the backlog on
/// NATS's monitoring endpoint and the busy-slot ratio from `prometheus`.
fn with_jobs(node_selector: &Value, world: &World, prometheus: &str) -> Value {
    let mut pool = pool_manifest(node_selector);
    let spec = &mut pool["spec"];
    spec["jobs"] = json!({
        "nats": { "url": world.nats.url() },
        "objects": {
            "endpoint": world.store.s3().url(),
            "credentialsSecretRef": { "name": "s3-keys" },
            "readBuckets": ["uploads"],
            "writeBuckets": ["results"],
        },
    });
    spec["autoscaling"]["prometheusAddress"] = json!(prometheus);
    spec["autoscaling"]["backlog"] =
        json!({ "natsMonitoringEndpoint": world.nats.monitor_url().trim_start_matches("http://") });
    pool
}

/// Every change to the namespace's HPAs, with the set of HPAs that existed right after it.
#[derive(Default)]
struct HpaLog {
    present: BTreeSet<String>,
    changes: Vec<(Duration, BTreeSet<String>)>,
}

/// Follows the HPAs of `hpas` from `started` until the task is aborted.
fn watch_hpas(
    hpas: Api<HorizontalPodAutoscaler>,
    started: Instant,
) -> (Arc<Mutex<HpaLog>>, tokio::task::JoinHandle<()>) {
    let log = Arc::new(Mutex::new(HpaLog::default()));
    let into = log.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(hpas, watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            let mut log = into.lock().unwrap();
            let before = log.present.clone();
            match event {
                Ok(watcher::Event::Apply(hpa) | watcher::Event::InitApply(hpa)) => {
                    log.present.insert(hpa.name_any());
                }
                Ok(watcher::Event::Delete(hpa)) => {
                    log.present.remove(&hpa.name_any());
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) | Err(_) => {}
            }
            if log.present != before {
                let present = log.present.clone();
                log.changes.push((started.elapsed(), present));
            }
        }
    });
    (log, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keda_scales_a_job_pool_on_sync_load_and_takes_over_from_the_hpa_with_one_writer() {
    let _turn = turn().await;
    OperatorProcess::shared().await;
    let cluster = Cluster::shared_with_real_node();
    let node = cluster.real_node();
    let metrics = cluster.metrics();
    let started = Instant::now();
    cluster.keda();
    eprintln!("KEDA up in {:.1}s", started.elapsed().as_secs_f64());
    let world = World::start_on(BRIDGE_IP, None).await;
    let namespace = cluster.namespace("autoscaling-keda").await;
    let ns = namespace.name().to_string();
    let client = cluster.client().await;
    apply(
        cluster,
        &ns,
        &json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s3-keys" },
                 "stringData": { "access-key-id": ACCESS_KEY_ID,
                                 "secret-access-key": SECRET_ACCESS_KEY } }),
    );
    let pools: Api<RenderPool> = Api::namespaced(client.clone(), &ns);
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &ns);
    let scaled_objects: Api<ScaledObject> = Api::namespaced(client.clone(), &ns);
    let (log, watching) = watch_hpas(hpas.clone(), Instant::now());

    // The operator's HPA first.
    apply(cluster, &ns, &pool_manifest(&node.node_selector()));
    wait::until("the operator's HPA", Duration::from_secs(60), || async {
        hpas.get_opt(POOL).await.ok().flatten().ok_or("absent")
    })
    .await;

    // Jobs: the ScaledObject takes over, and KEDA's HPA reads both triggers.
    let handover = Instant::now();
    let prometheus = metrics.prometheus_url().to_string();
    apply(cluster, &ns, &with_jobs(&node.node_selector(), &world, &prometheus));
    wait_pool(&pools, POOL, Duration::from_secs(240), |pool| {
        is_settled(pool) && pool.status.as_ref().is_some_and(|s| s.ready_replicas >= 1)
    })
    .await;
    let keda_hpa = hpa_name(POOL);
    let active =
        wait::try_until("KEDA's HPA reading its metrics", Duration::from_secs(120), || async {
            let hpa = hpas.get_opt(&keda_hpa).await.ok().flatten()?;
            let conditions = hpa.status?.conditions.unwrap_or_default();
            conditions
                .iter()
                .any(|c| c.type_ == "ScalingActive" && c.status == "True")
                .then_some(())
        })
        .await;
    let so = scaled_objects.get_opt(POOL).await.unwrap();
    assert!(active.is_ok(), "{active:?}: {:?}\nScaledObject {so:?}", hpas.get_opt(&keda_hpa).await);
    let triggers: Vec<&str> = so
        .as_ref()
        .map(|so| so.spec.triggers.iter().map(|t| t.type_.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(triggers, ["nats-jetstream", "prometheus"]);
    eprintln!(
        "HPA -> ScaledObject: KEDA's HPA active {:.1}s after the jobs were applied",
        handover.elapsed().as_secs_f64()
    );

    // The HPA test's ramp, through the render Service.
    let url = load_url(&client, &ns).await;
    let mut watch = Watch::new(cluster, client.clone(), &ns);
    let mut load = Load::start(&url, renderpool_testkit::corpus::read(LOAD_DOCUMENT), 0);
    let full = watch.ramp_to_ceiling(&mut load).await;
    let tally = load.stop().await;
    assert!(full.is_some(), "KEDA never took the pool to {MAX_REPLICAS} Ready replicas");
    let at = |replicas: i32| {
        watch
            .timeline
            .iter()
            .find(|s| s.ready_replicas >= replicas)
            .map_or(f64::NAN, |s| s.at.as_secs_f64())
    };
    eprintln!(
        "sync load through KEDA (Prometheus trigger): a second replica Ready {:.1}s, \
         {MAX_REPLICAS} Ready {:.1}s after the load started; load: {tally}",
        at(2),
        at(MAX_REPLICAS)
    );
    assert!(tally.failed.is_empty(), "failed requests: {:#?}", tally.failed);
    assert_eq!(tally.completed + tally.refusals(), tally.admitted, "{tally}");

    // Back to the HPA: the ScaledObject and KEDA's HPA go first.
    let back = Instant::now();
    apply(cluster, &ns, &pool_manifest(&node.node_selector()));
    wait::until("the operator's HPA back", Duration::from_secs(120), || async {
        hpas.get_opt(POOL).await.ok().flatten().ok_or("absent")
    })
    .await;
    assert!(scaled_objects.get_opt(POOL).await.unwrap().is_none(), "the ScaledObject is gone");
    eprintln!(
        "ScaledObject -> HPA: the operator's HPA back {:.1}s after the jobs went",
        back.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    watching.abort();
    let log = log.lock().unwrap();
    eprintln!("HPAs in the namespace, at each change:");
    for (at, present) in &log.changes {
        eprintln!("  {:>6.1}s  {present:?}", at.as_secs_f64());
    }
    let both = log
        .changes
        .iter()
        .find(|(_, present)| present.contains(POOL) && present.contains(&keda_hpa));
    assert!(both.is_none(), "two writers of /scale at {both:?}");
    let kinds: Vec<bool> = log.changes.iter().map(|(_, p)| p.contains(&keda_hpa)).collect();
    assert!(
        kinds.contains(&true) && kinds.contains(&false),
        "both autoscalers were seen: {kinds:?}"
    );
}
