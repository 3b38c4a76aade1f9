//! Durable jobs on the real node: a RenderPool whose `spec.jobs` the operator (this workspace's
//! binary with the chart's rights, a host process) turns into render pods that really run, with
//! a real NATS server (JetStream), a real S3 server (the Versity S3 Gateway) and a webhook
//! receiver on the pod bridge's address, where the pods reach the host, and nowhere else. The
//! pods log in with a NATS token, S3 keys and a webhook secret from Secrets, which the operator
//! mounts as files.
//!
//! A job caught mid-run on one pod is lost with it (its main process SIGKILLed from the host),
//! handed back by it (the pod deleted, so it drains), or neither (the pod deleted with a grace
//! period too short to hand it back, a strike spared as the pod said it was stopping): each way
//! it completes on a pod,
//! every output whole and named by its manifest, and its webhook fires once per completion,
//! checked by the test's own Standard Webhooks verifier. Each test prints its timeline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::AsyncBufReadExt;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, LogParams};
use renderpool_api::jobs::{JobId, JobStatus, State};
use renderpool_operator::crd::RenderPool;
use renderpool_testkit::{corpus, metrics, wait};
use renderpool_tests::cluster::addresses::BRIDGE_IP;
use renderpool_tests::cluster::{Cluster, RealNode, TestNamespace};
use renderpool_tests::jobs::{Answer, Delivery, Receiver, SECRET, World, message, verify};
use renderpool_tests::operator::OperatorProcess;
use renderpool_tests::versitygw::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
use serde_json::{Value, json};

#[path = "e2e/operator_support.rs"]
mod operator_support;
#[path = "real_node_jobs/scale_from_zero.rs"]
mod scale_from_zero;
use operator_support::{is_settled, kubectl_apply, pool_manifest, wait_pool};

const POOL: &str = "durable";
/// The token NATS wants, which the pods read from a Secret.
const NATS_TOKEN: &str = "renderpool-real-node-nats-token";
/// A document of more than 100 pages: 100 of them at 600 dpi (35 megapixels each) keep one
/// 600m slot busy for tens of seconds, longer than a drain's grace period (at 200 dpi the job
/// ends within the grace period and nothing is handed back).
const DOCUMENT: &str = "pdf/R-intro.pdf";
const PAGES: u32 = 100;
const DPI: u32 = 600;
/// The pods' consumer's ack wait (spec.jobs.ackWaitSeconds, left at its default): a job lost
/// with its pod is delivered again once it runs out.
const ACK_WAIT: Duration = Duration::from_secs(30);

/// One test at a time: each pool takes 1.2 of the node's 2 CPUs.
async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// The servers, the webhook receiver and a pool of two one-slot render pods using them.
/// Dropped in this order: the namespace with the pool first, then the servers its pods use.
struct JobsPool {
    _namespace: TestNamespace,
    node: &'static RealNode,
    world: World,
    hooks: Receiver,
    pods: Api<Pod>,
}

fn apply(cluster: &Cluster, namespace: &str, object: &Value) {
    kubectl_apply(cluster, namespace, &object.to_string()).unwrap();
}

fn secret(name: &str, data: Value) -> Value {
    json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name },
            "stringData": data })
}

/// The Secrets [`pool_spec`] names: the NATS token, the S3 keys and the webhook secret.
fn logins(cluster: &Cluster, namespace: &str) {
    apply(cluster, namespace, &secret("nats-login", json!({ "token": NATS_TOKEN })));
    apply(
        cluster,
        namespace,
        &secret(
            "s3-keys",
            json!({ "access-key-id": ACCESS_KEY_ID, "secret-access-key": SECRET_ACCESS_KEY }),
        ),
    );
    apply(cluster, namespace, &secret("hooks", json!({ "signing": SECRET })));
}

/// Two render pods of 600m / 868Mi (one slot each), no Gotenberg, the job servers on the
/// bridge's address, every credential from a Secret. The job deadline is the pods' drain grace
/// period too: a short one, so a drained pod hands its long job back within seconds.
fn pool_spec(world: &World, node_selector: &Value) -> Value {
    json!({
            "replicas": 2,
            "cpu": "600m",
            "memory": "868Mi",
            "jobDeadlineMs": 5000,
            "preStopSeconds": 1,
            "nodeSelector": node_selector,
            "gotenberg": { "enabled": false },
            "rollout": { "maxSurge": 0, "maxUnavailable": 1 },
            "jobs": {
                "nats": {
                    "url": world.nats.url(),
                    "credentialsSecretRef": { "name": "nats-login", "tokenKey": "token" },
                },
                "objects": {
                    "endpoint": world.store.s3().url(),
                    "credentialsSecretRef": { "name": "s3-keys" },
                    "readBuckets": ["uploads", "results"],
                    "writeBuckets": ["uploads", "results"],
                },
                "uploadUrl": "s3://uploads/incoming",
                "webhookSecretRef": { "name": "hooks", "key": "signing" },
                "webhookAllowPrivate": true,
            },
    })
}

impl JobsPool {
    async fn start(prefix: &str, answer: Answer) -> JobsPool {
        // The chart's rights first, while only kwok nodes exist (its operator pods are bound
        // there and do nothing); the operator that works is a host process.
        OperatorProcess::shared().await;
        let cluster = Cluster::shared_with_real_node();
        let node = cluster.real_node();
        let started = Instant::now();
        let (world, hooks) = tokio::join!(
            World::start_on(BRIDGE_IP, Some(NATS_TOKEN)),
            Receiver::start_on(BRIDGE_IP, answer)
        );
        world.put("uploads", "long.pdf", corpus::read(DOCUMENT)).await;
        let namespace = cluster.namespace(prefix).await;
        let ns = namespace.name().to_string();
        logins(cluster, &ns);
        let pool = pool_manifest(POOL, pool_spec(&world, &node.node_selector()));
        kubectl_apply(cluster, &ns, &pool).unwrap();
        let client = cluster.client().await;
        let pools: Api<RenderPool> = Api::namespaced(client.clone(), &ns);
        wait_pool(&pools, POOL, Duration::from_secs(240), |pool| {
            is_settled(pool) && pool.status.as_ref().is_some_and(|s| s.ready_replicas == 2)
        })
        .await;
        eprintln!(
            "NATS {} and S3 {} on the bridge; pool {ns}/{POOL} Ready with 2 render pods {:.1}s \
             after the servers started",
            world.nats.url(),
            world.store.s3().url(),
            started.elapsed().as_secs_f64()
        );
        let pods = Api::namespaced(client, &ns);
        JobsPool { _namespace: namespace, node, world, hooks, pods }
    }

    /// The render pods that are not being deleted, by name.
    async fn render_pods(&self) -> Vec<Pod> {
        let selector =
            format!("app.kubernetes.io/instance={POOL},app.kubernetes.io/component=render");
        let listed = self.pods.list(&ListParams::default().labels(&selector)).await.unwrap();
        let mut pods: Vec<Pod> =
            listed.items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        pods
    }

    /// Publishes the long job (pages 1-[`PAGES`] at [`DPI`] as JPEG, then the document's info)
    /// with a webhook to the receiver, and waits until it is mid-run (its first pages written):
    /// its id, the pod running it and its state then.
    async fn catch_long_job_mid_run(&self, key: &str) -> (JobId, Pod, JobStatus) {
        let mut job = message(
            key,
            "s3://uploads/long.pdf",
            json!([
                {"op": "render", "pages": format!("1-{PAGES}"), "dpi": DPI, "format": "jpeg"},
                {"op": "info"}
            ]),
            &format!("s3://results/{key}"),
        );
        job["webhook"] = json!({ "url": self.hooks.url() });
        let id = JobId::from_key(key);
        self.world.publish(&job).await;
        self.world
            .wait_state(&id, Duration::from_secs(60), |s| {
                s.state == State::Running && s.progress.done > 0
            })
            .await;
        let pod = self.running_on().await;
        let state = self.world.state(&id).await.unwrap();
        (id, pod, state)
    }

    /// The pod whose job counter says it is running a job now.
    async fn running_on(&self) -> Pod {
        wait::until("a render pod running the job", Duration::from_secs(30), || async {
            let mut seen = Vec::new();
            for pod in self.render_pods().await {
                let running = pod_metric(&pod, "renderpod_jobs_running", &[]).await;
                seen.push((name(&pod).to_string(), running));
                if running == Some(1.0) {
                    return Ok(pod);
                }
            }
            Err(seen)
        })
        .await
    }

    /// The pods (and restarted containers) that finished a job as done, by name.
    async fn completed_on(&self) -> Vec<String> {
        let mut done = Vec::new();
        for pod in self.render_pods().await {
            let ended = pod_metric(&pod, "renderpod_jobs_ended_total", &["outcome=\"done\""]).await;
            if ended.is_some_and(|n| n > 0.0) {
                done.push(name(&pod).to_string());
            }
        }
        done
    }

    /// Deletes the render pod running the job, following its log from just before: the log, and
    /// when the delete was sent.
    async fn delete_mid_run(
        &self,
        pod: &Pod,
        running: &JobStatus,
        params: &DeleteParams,
    ) -> (LogTail, Instant) {
        let log = LogTail::follow(&self.pods, name(pod)).await;
        self.pods.delete(name(pod), params).await.unwrap();
        let deleted = Instant::now();
        let grace = params.grace_period_seconds.map_or("its own".into(), |s| format!("{s}s"));
        eprintln!(
            "deleted {} (grace {grace}) with the job at page {} of {}",
            name(pod),
            running.progress.done,
            running.progress.total
        );
        (log, deleted)
    }

    /// Waits until the job is done and its webhook delivered, checks what it left (see
    /// [`Self::check_outputs_and_webhook`]) and that one pod finished it.
    async fn finished(&self, key: &str, id: &JobId) -> Finished {
        let (state, at) = timed(&self.world, id, Duration::from_secs(240), |s| {
            s.state == State::Done && s.webhook.as_ref().is_some_and(|w| w.delivered)
        })
        .await;
        let deliveries = self.check_outputs_and_webhook(key, id).await;
        let mut on = self.completed_on().await;
        assert_eq!(on.len(), 1, "one pod finished it: {on:?}");
        Finished { state, at, deliveries, on: on.remove(0) }
    }

    /// Checks what the job left: its outputs are those its manifest names, each page a whole
    /// JPEG of the page's size at [`DPI`], and its webhook's deliveries carry one id and valid
    /// signatures. The deliveries.
    async fn check_outputs_and_webhook(&self, key: &str, id: &JobId) -> Vec<Delivery> {
        let world = &self.world;
        let listed = world.outputs_of(key, id).await;
        assert_eq!(listed.len(), PAGES as usize + 2, "the pages, the info and the manifest");
        let manifest = world.check_manifest(key, id, &listed).await;
        let info: Value = serde_json::from_slice(
            &world.get("results", &format!("{key}/{id}/01-info.json")).await,
        )
        .unwrap();
        for (page, output) in manifest.operations[0].outputs.iter().enumerate() {
            let width_pt = info["pages"][page]["width_pt"].as_f64().unwrap();
            let expected = (width_pt * f64::from(DPI) / 72.0).round() as u32;
            assert_eq!(output.width, Some(expected), "page {}", page + 1);
        }
        // One page read back and its JPEG structure walked: whole, and of the size the
        // manifest says.
        let last = &manifest.operations[0].outputs[PAGES as usize - 1];
        let key_of = last.url.strip_prefix("s3://results/").unwrap();
        let image = world.get("results", key_of).await;
        assert_eq!(jpeg_size(&image).map(|(w, _)| w), last.width, "{key_of}");
        assert_eq!(jpeg_size(&image).map(|(_, h)| h), last.height, "{key_of}");
        let deliveries = wait::until("the webhook", Duration::from_secs(30), || async {
            let got = self.hooks.deliveries();
            if got.iter().any(|d| d.status == 200) { Ok(got) } else { Err(got) }
        })
        .await;
        let ids: BTreeSet<String> = deliveries.iter().map(|d| verify(d).unwrap()).collect();
        assert_eq!(ids, BTreeSet::from([format!("msg_{id}")]), "one id, every delivery signed");
        let accepted: Vec<&Delivery> = deliveries.iter().filter(|d| d.status == 200).collect();
        assert_eq!(accepted.len(), 1, "one completion, one accepted delivery");
        let event: Value = serde_json::from_slice(&accepted[0].body).unwrap();
        assert_eq!(
            (event["type"].as_str(), event["data"]["id"].as_str()),
            (Some("job.done"), Some(id.as_str()))
        );
        deliveries
    }
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap()
}

/// A metric of a render pod, read from its pod IP (the host reaches the bridge directly).
async fn pod_metric(pod: &Pod, metric: &str, needles: &[&str]) -> Option<f64> {
    let ip = pod.status.as_ref()?.pod_ip.as_deref()?;
    let url = format!("http://{ip}:{}/metrics", renderpool_api::render_pod::PORT);
    let text = reqwest::get(&url).await.ok()?.text().await.ok()?;
    metrics::value(&text, metric, needles).ok()
}

/// The width and height a baseline or progressive JPEG declares in its frame header, if it is
/// whole: starts with SOI, ends with EOI, and its segments chain up to the frame.
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if !bytes.starts_with(&[0xff, 0xd8]) || !bytes.ends_with(&[0xff, 0xd9]) {
        return None;
    }
    let mut at = 2;
    while at + 4 <= bytes.len() {
        let (marker, kind) = (bytes[at], bytes[at + 1]);
        if marker != 0xff {
            return None;
        }
        let length = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
        if (0xc0..=0xc2).contains(&kind) {
            let frame = bytes.get(at + 4..at + 2 + length)?;
            let height = u16::from_be_bytes([*frame.get(1)?, *frame.get(2)?]);
            let width = u16::from_be_bytes([*frame.get(3)?, *frame.get(4)?]);
            return Some((u32::from(width), u32::from(height)));
        }
        at += 2 + length;
    }
    None
}

/// Seconds from the job's last start to its last state change.
fn run_seconds(state: &JobStatus) -> f64 {
    state.updated_ms.saturating_sub(state.started_ms.unwrap_or(state.updated_ms)) as f64 / 1000.0
}

/// A pod's log as it is written, read until its container ends: what a stopped pod did is
/// still readable after the pod is gone (the kubelet may cut the last lines of a pod it deletes).
struct LogTail {
    text: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl LogTail {
    async fn follow(pods: &Api<Pod>, pod: &str) -> LogTail {
        let params = LogParams { follow: true, ..LogParams::default() };
        let stream = pods.log_stream(pod, &params).await.unwrap();
        let text = Arc::new(Mutex::new(String::new()));
        let task = tokio::spawn({
            let text = text.clone();
            async move {
                let mut lines = std::pin::pin!(stream.lines());
                while let Some(Ok(line)) = futures::StreamExt::next(&mut lines).await {
                    let mut text = text.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        });
        LogTail { text, task }
    }

    fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }
}

impl Drop for LogTail {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A job done: its last state and when it was seen, its webhook's deliveries and the pod that
/// finished it.
struct Finished {
    state: JobStatus,
    at: Instant,
    deliveries: Vec<Delivery>,
    on: String,
}

/// Waits until the job's state satisfies `done`, noting when.
async fn timed(
    world: &World,
    id: &JobId,
    within: Duration,
    done: impl Fn(&JobStatus) -> bool,
) -> (JobStatus, Instant) {
    let state = world.wait_state(id, within, done).await;
    (state, Instant::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_pod_is_sigkilled_mid_run_completes_on_a_pod_with_one_accepted_webhook() {
    let _turn = turn().await;
    // The first webhook delivery is answered 503: the retry carries the same id.
    let pool = JobsPool::start("jobs-killed", Answer::FailFirst).await;
    let (id, victim, running) = pool.catch_long_job_mid_run("killed").await;
    // SIGKILL to the render pod's main process (pid 1 in its container), from the host: no
    // drain, no hand-back; its workers die with it, the kubelet restarts the container.
    let main = pool.node.host_pid(&victim, 1).unwrap();
    // SAFETY: kill(2) on a process found in the render container's cgroup.
    assert_eq!(unsafe { libc::kill(main as i32, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    eprintln!(
        "killed {} (host pid {main}) with the job at page {} of {}",
        name(&victim),
        running.progress.done,
        running.progress.total
    );
    let (again, redelivered) = timed(&pool.world, &id, ACK_WAIT * 3, |s| s.deliveries >= 2).await;
    let done = pool.finished("killed", &id).await;
    let state = &done.state;
    assert_eq!((state.deliveries, state.strikes), (2, 1), "lost with its pod: a strike; {state:?}");
    let statuses: Vec<u16> = done.deliveries.iter().map(|d| d.status).collect();
    assert_eq!(statuses, [503, 200]);
    let restarts: Vec<(String, i32)> = pool
        .render_pods()
        .await
        .iter()
        .map(|p| {
            let statuses = p.status.as_ref().and_then(|s| s.container_statuses.clone());
            (name(p).to_string(), statuses.map_or(0, |s| s[0].restart_count))
        })
        .collect();
    assert!(
        restarts.iter().any(|(pod, n)| pod == name(&victim) && *n == 1),
        "the killed container restarted once: {restarts:?}"
    );
    eprintln!(
        "sigkill: redelivered {:.1}s after the kill (ack wait {}s; delivery {}, strikes {}), \
         done {:.1}s after the kill (its second run {:.1}s) on {} (killed {}; restarts \
         {restarts:?}); webhook deliveries {statuses:?}, one id",
        (redelivered - killed).as_secs_f64(),
        ACK_WAIT.as_secs(),
        again.deliveries,
        again.strikes,
        (done.at - killed).as_secs_f64(),
        run_seconds(state),
        done.on,
        name(&victim),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_pod_is_deleted_mid_run_is_handed_back_and_completes_on_another() {
    let _turn = turn().await;
    let pool = JobsPool::start("jobs-drained", Answer::Ok).await;
    let (id, draining, running) = pool.catch_long_job_mid_run("drained").await;
    // A graceful delete: preStop, then SIGTERM; the pod stops pulling, gives its job the grace
    // period (the job deadline, 5 s), then hands it back.
    let (log, deleted) = pool.delete_mid_run(&draining, &running, &DeleteParams::default()).await;
    let (again, redelivered) =
        timed(&pool.world, &id, Duration::from_secs(60), |s| s.deliveries >= 2).await;
    assert_eq!(
        again.strikes,
        0,
        "handed back, not lost: no strike; {again:?}\nthe drained pod's log:\n{}",
        log.text()
    );
    let done = pool.finished("drained", &id).await;
    let state = &done.state;
    assert_eq!((state.deliveries, state.strikes), (2, 0), "{state:?}");
    assert_eq!(state.webhook.as_ref().map(|w| w.attempts), Some(1), "{state:?}");
    assert_eq!(done.deliveries.len(), 1, "none from the drained pod: {:?}", done.deliveries);
    assert_ne!(done.on, name(&draining));
    eprintln!(
        "drain: handed back and running again {:.1}s after the delete (grace 5s, preStop 1s), \
         done {:.1}s after the delete (its second run {:.1}s) on {} (deleted {}); one webhook \
         delivery",
        (redelivered - deleted).as_secs_f64(),
        (done.at - deleted).as_secs_f64(),
        run_seconds(state),
        done.on,
        name(&draining),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_stopping_pod_is_killed_before_it_hands_back_comes_back_with_no_strike() {
    let _turn = turn().await;
    let pool = JobsPool::start("jobs-cut-short", Answer::Ok).await;
    let (id, stopping, running) = pool.catch_long_job_mid_run("cut-short").await;
    // A delete with a 2 s grace period: preStop (1 s), SIGTERM, then SIGKILL long before the
    // pod's drain reaches its jobs' grace (drain delay 1 s, then 5 s), so it hands nothing back.
    let short = DeleteParams { grace_period_seconds: Some(2), ..DeleteParams::default() };
    let (log, deleted) = pool.delete_mid_run(&stopping, &running, &short).await;
    let (marked, marked_at) =
        timed(&pool.world, &id, Duration::from_secs(30), |s| s.pod_stopping || s.deliveries >= 2)
            .await;
    assert!(
        marked.pod_stopping && marked.state == State::Running && marked.deliveries == 1,
        "the pod records that it stops: {marked:?}\nits log:\n{}",
        log.text()
    );
    wait::until("the deleted pod gone", Duration::from_secs(60), || async {
        match pool.pods.get_opt(name(&stopping)).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.map(|p| p.status)))),
        }
    })
    .await;
    let gone = pool.world.state(&id).await.unwrap();
    assert_eq!(
        (gone.state, gone.deliveries, gone.pod_stopping),
        (State::Running, 1, true),
        "killed before its hand-back: {gone:?}\nits log:\n{}",
        log.text()
    );
    let (again, redelivered) = timed(&pool.world, &id, ACK_WAIT * 2, |s| s.deliveries >= 2).await;
    assert_eq!((again.strikes, again.pod_stopping), (0, false), "no strike: {again:?}");
    let done = pool.finished("cut-short", &id).await;
    let state = &done.state;
    assert_eq!((state.deliveries, state.strikes, state.pod_stopping), (2, 0, false), "{state:?}");
    assert_eq!(done.deliveries.len(), 1, "none from the killed pod: {:?}", done.deliveries);
    assert_ne!(done.on, name(&stopping));
    eprintln!(
        "cut short: marked stopping {:.1}s after the delete, delivered again {:.1}s after it \
         (ack wait {}s) with no strike, done {:.1}s after it on {} (deleted {})",
        (marked_at - deleted).as_secs_f64(),
        (redelivered - deleted).as_secs_f64(),
        ACK_WAIT.as_secs(),
        (done.at - deleted).as_secs_f64(),
        done.on,
        name(&stopping),
    );
}
