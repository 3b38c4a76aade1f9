//! A job pool that sleeps at zero pods and wakes on its backlog: the operator's KEDA
//! ScaledObject (real KEDA, `Cluster::keda`) on the pool's NATS consumer. The pool starts at one
//! pod, which makes the stream and its consumer; KEDA takes it to zero after the cooldown; 50
//! jobs published straight to NATS (no pod is there to take POST /v1/jobs) bring a pod up, all
//! finish once, and the pool goes back to zero; a monitoring endpoint where nothing listens
//! then leaves KEDA unable to wake it, and the pool says so. The timeline is printed.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use renderpool_api::jobs::defaults::CONSUMER;
use renderpool_api::jobs::{JobId, JobStatus, QueueNames, State};
use renderpool_operator::crd::RenderPool;
use renderpool_operator::keda::ScaledObject;
use renderpool_testkit::wait;
use renderpool_tests::cluster::Cluster;
use renderpool_tests::cluster::addresses::BRIDGE_IP;
use renderpool_tests::jobs::{World, message};
use renderpool_tests::operator::OperatorProcess;
use serde_json::json;

use super::operator_support::{condition, kubectl_apply, pool_manifest};
use super::{DOCUMENT, NATS_TOKEN, POOL, logins, pool_spec, turn};

/// Jobs published to the sleeping pool.
const JOBS: usize = 50;
/// Seconds without pending jobs before KEDA takes the pool from one pod to none (the pool's
/// scale-down window): short, so the test sees both ways.
const COOLDOWN_SECONDS: u64 = 20;

/// A job pool at zero pods with KEDA's ScaledObject between 0 and `max_replicas`, its stream and
/// consumer made by the one pod it started with, and the servers its pods use.
struct SleepingPool {
    _namespace: renderpool_tests::cluster::TestNamespace,
    world: World,
    pools: Api<RenderPool>,
    pods: Api<Pod>,
}

impl SleepingPool {
    async fn start(prefix: &str, max_replicas: i32) -> SleepingPool {
        OperatorProcess::shared().await;
        let cluster = Cluster::shared_with_real_node();
        let node = cluster.real_node();
        let keda_started = Instant::now();
        cluster.keda();
        eprintln!("KEDA operator and adapter up in {:.1}s", keda_started.elapsed().as_secs_f64());
        let world = World::start_on(BRIDGE_IP, Some(NATS_TOKEN)).await;
        world.put("uploads", "long.pdf", renderpool_testkit::corpus::read(DOCUMENT)).await;
        let namespace = cluster.namespace(prefix).await;
        let ns = namespace.name().to_string();
        logins(cluster, &ns);
        let mut spec = pool_spec(&world, &node.node_selector());
        spec["replicas"] = json!(1);
        let monitor = world.nats.monitor_url();
        spec["autoscaling"] = json!({
            "minReplicas": 0,
            "maxReplicas": max_replicas,
            "scaleDownStabilizationSeconds": COOLDOWN_SECONDS,
            "backlog": {
                "natsMonitoringEndpoint": monitor.trim_start_matches("http://"),
                "targetPendingJobsPerSlot": 4,
            },
        });
        kubectl_apply(cluster, &ns, &pool_manifest(POOL, spec)).unwrap();
        let client = cluster.client().await;
        let pools: Api<RenderPool> = Api::namespaced(client.clone(), &ns);
        let scaled_objects: Api<ScaledObject> = Api::namespaced(client.clone(), &ns);
        let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), &ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);

        // The first pod makes the stream and the consumer KEDA reads; then the pool sleeps.
        // Waiting for the consumer rather than for that pod's Ready: the pod may be gone again
        // before a look at the pool's status catches it.
        let created = Instant::now();
        let names = QueueNames::of(QueueNames::DEFAULT);
        wait::until("the pool's consumer in NATS", Duration::from_secs(240), || async {
            let stream = world.jetstream().get_stream(&names.stream).await;
            let stream = stream.map_err(|e| e.to_string())?;
            stream.consumer_info(CONSUMER).await.map_err(|e| e.to_string())
        })
        .await;
        eprintln!("the consumer made {:.1}s after the pool", created.elapsed().as_secs_f64());
        let so = wait::until("the pool's ScaledObject", Duration::from_secs(60), || async {
            scaled_objects.get_opt(POOL).await.ok().flatten().ok_or("absent")
        })
        .await;
        assert_eq!((so.spec.min_replica_count, so.spec.max_replica_count), (0, max_replicas));
        assert!(
            hpas.get_opt(POOL).await.unwrap().is_none(),
            "no HPA of the operator's beside KEDA's"
        );
        asleep(&pools, &pods).await;
        let slept = created.elapsed();
        eprintln!("asleep at zero pods {:.1}s after the pool was created", slept.as_secs_f64());
        // KEDA counts the initial cooldown from the ScaledObject's creationTimestamp, which is
        // whole seconds (up to 1 s early) and may precede `created` by a little: 3 s of slack.
        // With KEDA's default of 0 a new pool slept 7.7 s after its creation.
        assert!(
            slept >= Duration::from_secs(COOLDOWN_SECONDS - 3),
            "a new pool slept {slept:?} after its creation, before its cooldown"
        );
        let pool = pools.get(POOL).await.unwrap();
        let degraded = condition(&pool, "Degraded").map(|c| c.0);
        assert_eq!(degraded, Some("False".into()), "{:?}", pool.status);
        SleepingPool { _namespace: namespace, world, pools, pods }
    }

    /// Publishes `count` info jobs keyed `<prefix>-<n>` to the stream, as any publisher of the
    /// account may (no pod is there to take POST /v1/jobs); their ids.
    async fn publish(&self, prefix: &str, count: usize) -> Vec<(String, JobId)> {
        let mut jobs = Vec::new();
        for n in 0..count {
            let key = format!("{prefix}-{n}");
            let job = message(
                &key,
                "s3://uploads/long.pdf",
                json!([{"op": "info"}]),
                &format!("s3://results/{key}"),
            );
            self.world.publish(&job).await;
            jobs.push((key.clone(), JobId::from_key(&key)));
        }
        jobs
    }

    /// The latest state of each of `jobs` that has one.
    async fn states(&self, jobs: &[(String, JobId)]) -> Vec<JobStatus> {
        let mut states = Vec::new();
        for (_, id) in jobs {
            states.extend(self.world.state(id).await);
        }
        states
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pool_at_zero_wakes_on_its_backlog_finishes_every_job_once_and_sleeps_again() {
    let _turn = turn().await;
    let pool = SleepingPool::start("jobs-zero", 2).await;
    let (world, pools, pods) = (&pool.world, &pool.pools, &pool.pods);

    let published = Instant::now();
    let jobs = pool.publish("zero", JOBS).await;
    let first_ready = wait::until("a render pod Ready", Duration::from_secs(180), || async {
        let pool = pools.get(POOL).await.map_err(|e| e.to_string())?;
        let ready = pool.status.as_ref().map_or(0, |s| s.ready_replicas);
        if ready >= 1 { Ok(Instant::now()) } else { Err(format!("{ready} ready")) }
    })
    .await;
    let seen = Mutex::new(Seen::default());
    wait::until("every job done", Duration::from_secs(300), || async {
        let states = pool.states(&jobs).await;
        let running = render_pods(pods).await;
        let mut seen = seen.lock().unwrap();
        seen.record(states, running);
        let done = seen.states.values().filter(|s| s.state == State::Done).count();
        if done == JOBS { Ok(()) } else { Err(format!("{done} of {JOBS} done")) }
    })
    .await;
    let seen = seen.into_inner().unwrap();
    let all_done = Instant::now();
    let twice: Vec<&JobStatus> = seen.states.values().filter(|s| s.deliveries != 1).collect();
    assert!(twice.is_empty(), "every job delivered once: {twice:?}");
    for (key, id) in &jobs {
        let outputs = world.outputs_of(key, id).await;
        assert_eq!(outputs.len(), 2, "{key}: the info and the manifest: {outputs:?}");
    }
    asleep(pools, pods).await;
    let slept = Instant::now();
    eprintln!(
        "from zero: {JOBS} jobs published; first pod Ready {:.1}s and first job started {:.1}s \
         after the first publish; all {JOBS} done (each delivered once, outputs whole) {:.1}s \
         after it with at most {} pods; back at zero pods {:.1}s after the last job \
         (cooldown {COOLDOWN_SECONDS}s)",
        (first_ready - published).as_secs_f64(),
        seen.first_started.map_or(f64::NAN, |t| (t - published).as_secs_f64()),
        (all_done - published).as_secs_f64(),
        seen.peak_pods,
        (slept - all_done).as_secs_f64(),
    );

    // A monitoring endpoint where nothing listens: KEDA cannot read the backlog, so the pool
    // could never wake, and the pool says so until the endpoint is right again.
    let backlog = |endpoint: &str| json!({"spec": {"autoscaling": {"backlog": {"natsMonitoringEndpoint": endpoint}}}});
    let right = world.nats.monitor_url().trim_start_matches("http://").to_string();
    let patch = |endpoint: String| async move {
        let body = backlog(&endpoint);
        pools.patch(POOL, &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
        Instant::now()
    };
    let before = condition(&pools.get(POOL).await.unwrap(), "Degraded");
    assert_eq!(before.as_ref().map(|c| c.0.as_str()), Some("False"), "{before:?}");
    let broken = patch(format!("{BRIDGE_IP}:1")).await;
    let degraded = |want: &'static str| async move {
        wait::until(&format!("Degraded {want}"), Duration::from_secs(120), || async {
            let pool = pools.get(POOL).await.map_err(|e| e.to_string())?;
            match condition(&pool, "Degraded") {
                Some((status, reason, message)) if status == want => Ok((reason, message)),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    };
    let (reason, message) = degraded("True").await;
    eprintln!(
        "a monitoring endpoint where nothing listens: Degraded {:.1}s later: {reason}: {message}",
        broken.elapsed().as_secs_f64()
    );
    assert_eq!(reason, "BacklogUnreadable", "{message}");
    assert!(message.contains("TriggerError"), "KEDA's reason: {message}");
    assert_eq!(pools.get(POOL).await.unwrap().spec.replicas, 0, "still asleep");
    let mended = patch(right).await;
    degraded("False").await;
    eprintln!("the endpoint mended: Degraded False {:.1}s later", mended.elapsed().as_secs_f64());
}

/// A backlog of 1,000 jobs takes the pool from zero to its ceiling (four pods: the real node
/// runs three of 600m at most, so the fourth waits Pending, as on a full node before a node
/// autoscaler adds one), and back to zero once the backlog is gone; every job is done once,
/// with no strike (none lost with a pod taken away). The timeline of the scale is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backlog_of_a_thousand_jobs_grows_the_pool_to_its_ceiling_and_back_losing_none() {
    const BACKLOG: usize = 1000;
    const CEILING: i32 = 4;
    let _turn = turn().await;
    let pool = SleepingPool::start("jobs-backlog", CEILING).await;
    let published = Instant::now();
    let jobs = pool.publish("backlog", BACKLOG).await;
    eprintln!("{BACKLOG} jobs published in {:.1}s", published.elapsed().as_secs_f64());
    let mut timeline: Vec<String> = Vec::new();
    let mut last = (0, 0);
    let mut peak = (0, 0);
    let mut drained_at = None;
    let mut states = Vec::new();
    let bound = Instant::now() + Duration::from_secs(900);
    loop {
        assert!(Instant::now() < bound, "not back at zero within 15 minutes: {timeline:#?}");
        let replicas = pool
            .pools
            .get(POOL)
            .await
            .map_or((0, 0), |p| (p.spec.replicas, p.status.map_or(0, |s| s.ready_replicas)));
        peak = (peak.0.max(replicas.0), peak.1.max(replicas.1));
        if drained_at.is_none() {
            states = pool.states(&jobs).await;
            let done = states.iter().filter(|s| s.state == State::Done).count();
            if done == BACKLOG {
                drained_at = Some(published.elapsed());
                timeline.push(format!(
                    "{:>6.1}s  all {BACKLOG} done",
                    published.elapsed().as_secs_f64()
                ));
            }
        }
        if replicas != last {
            timeline.push(format!(
                "{:>6.1}s  replicas {} ready {}",
                published.elapsed().as_secs_f64(),
                replicas.0,
                replicas.1
            ));
            last = replicas;
        }
        if drained_at.is_some() && replicas.0 == 0 && render_pods(&pool.pods).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("the {BACKLOG}-job backlog, t from the first publish:");
    for line in &timeline {
        eprintln!("  {line}");
    }
    assert_eq!(peak.0, CEILING, "the pool grew to its ceiling: {timeline:#?}");
    let done = states.iter().filter(|s| s.state == State::Done).count();
    let struck: Vec<&JobStatus> = states.iter().filter(|s| s.strikes > 0).collect();
    let again = states.iter().filter(|s| s.deliveries > 1).count();
    let without_manifest = states.iter().filter(|s| s.manifest_url.is_none()).count();
    eprintln!(
        "{BACKLOG} jobs: {done} done, lost 0, {again} delivered more than once (handed back \
         by a pod taken away), {} struck; peak replicas {} (ready {}); drained {:.1}s after \
         the first publish",
        struck.len(),
        peak.0,
        peak.1,
        drained_at.map_or(f64::NAN, |d| d.as_secs_f64()),
    );
    assert_eq!(done, BACKLOG);
    assert_eq!(without_manifest, 0, "every done job names its manifest");
    assert!(struck.is_empty(), "no job lost with a pod: {struck:?}");
}

/// What the wait for the jobs saw: each job's latest state, when the first left the queue and
/// the most render pods at once.
#[derive(Default)]
struct Seen {
    states: BTreeMap<String, JobStatus>,
    first_started: Option<Instant>,
    peak_pods: usize,
}

impl Seen {
    fn record(&mut self, states: Vec<JobStatus>, pods: usize) {
        if self.first_started.is_none() && states.iter().any(|s| s.state != State::Queued) {
            self.first_started = Some(Instant::now());
        }
        for state in states {
            self.states.insert(state.id.as_str().to_string(), state);
        }
        self.peak_pods = self.peak_pods.max(pods);
    }
}

/// The pool's render pods that exist now (any phase).
async fn render_pods(pods: &Api<Pod>) -> usize {
    let render = ListParams::default()
        .labels(&format!("app.kubernetes.io/instance={POOL},app.kubernetes.io/component=render"));
    pods.list(&render).await.map_or(0, |list| list.items.len())
}

/// Waits until the pool asks for zero pods and none is left: within KEDA's cooldown, a
/// scale-down window before it and a pod's drain, with room.
async fn asleep(pools: &Api<RenderPool>, pods: &Api<Pod>) {
    let within = Duration::from_secs(COOLDOWN_SECONDS * 6 + 120);
    wait::until("the pool at zero pods", within, || async {
        let replicas = pools.get(POOL).await.map(|p| p.spec.replicas).map_err(|e| e.to_string())?;
        let running = render_pods(pods).await;
        if replicas == 0 && running == 0 {
            Ok(())
        } else {
            Err(format!("{replicas} asked, {running} pods"))
        }
    })
    .await;
}
