//! Durable jobs against the synchronous path on the same pod, in one run: a release render pod
//! with 2 slots, a real NATS server, a real S3 server, real PDFium. Prints, never fails on time:
//! - pages per second through jobs (one job per page, published at once) against through
//!   `/v1/render` (clients keeping every slot busy), rounds alternating; goal: at least 0.9;
//!   with the CPU the pod itself spent a page each way, since here NATS, the S3 server and the
//!   clients share the pod's two CPUs; as one job a page naming the document's ETag (the pod
//!   holds that version, so a job reads nothing from the store); and as one job a pass over the
//!   whole document; then all of it, and the backlog below, on a 1-slot pod given a CPU of its
//!   own; then the rates again with that pod held to half its CPU by a CFS quota, so that the
//!   store and the broker beside it never set the pace (needs a writable cgroup v1 cpu
//!   controller);
//! - a viewer paging through the stored document on one connection: uploading it with each
//!   page, against the pod reading it from S3 by `?source=` (a conditional GET a page) and by
//!   `?source=&source_etag=` (no request once held), with the S3 server's CPU a page;
//! - publish-to-start latency at idle (p50, p99): from the producer's publish to the pod's
//!   recorded start;
//! - a 2,000-job backlog's time against its ideal: the same work at the slots' pace (each job's
//!   render taking what it takes alone, `slots` at a time);
//! - preview (page render) latency p50/p99 with and without that backlog.
//!
//! Run: `cargo build --release -p render-pod && cargo bench -p renderpool-tests --bench jobs
//! --profile dev` after `eval "$(scripts/setup.sh --cluster)"` (bench/run.sh does it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use render_pod::engine::FOREGROUND_WINDOW;
use renderpool_api::jobs::JobId;
use renderpool_testkit::cgroup::Group;
use renderpool_testkit::{corpus, machine};
use renderpool_tests::jobs::{World, message, percentile, sync_renders};
use renderpool_tests::release_bin;
use renderpool_tests::render_pod::RenderPod;

/// 36 pages of text and figures.
const DOC: &str = "pdf/libtasn1.pdf";
/// 1 page, 515 bytes: the backlog's input.
const TRIVIAL: &str = "pdf/trivial.pdf";
const SLOTS: &str = "2";
const ROUNDS: usize = 3;
const BACKLOG: usize = 2000;
/// The held pod's CFS quota and period (µs): half of its CPU.
const HELD_QUOTA: (u64, u64) = (50_000, 100_000);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// How a request through `/v1/render` gives its document.
#[derive(Clone)]
enum Sent {
    /// Uploaded with each request.
    Body(Arc<Vec<u8>>),
    /// Read by the pod from the store: these query parameters (`source`, `source_etag`).
    Stored(Vec<(&'static str, String)>),
}

/// Pages per second through `/v1/render`: `clients` clients render `pages` of the document at
/// 150 dpi, each request giving it as `sent` says.
async fn sync_pages(pod: &RenderPod, sent: &Sent, pages: &[u32], clients: usize) -> f64 {
    let count = pages.len() as f64;
    let queue = Arc::new(Mutex::new(pages.to_vec()));
    let started = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let (queue, sent, client, url) =
                (queue.clone(), sent.clone(), pod.client.clone(), pod.url("/v1/render"));
            tokio::spawn(async move {
                loop {
                    let Some(page) = queue.lock().unwrap().pop() else { return };
                    let mut url =
                        reqwest::Url::parse(&format!("{url}?page={page}&dpi=150")).unwrap();
                    let request = match &sent {
                        Sent::Body(doc) => client.post(url).body(doc.to_vec()),
                        Sent::Stored(query) => {
                            url.query_pairs_mut().extend_pairs(query);
                            client.post(url)
                        }
                    };
                    let response = request.send().await.unwrap();
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    count / started.elapsed().as_secs_f64()
}

/// CPU seconds (user and system) process `pid` has used, and those of its children: the live
/// ones and the ended ones it waited for (the render pod's workers, recycled or not).
fn cpu_seconds(pid: u32) -> (f64, f64) {
    // After the command: state is field 0, utime 11 and stime 12 (fields 14 and 15 of stat),
    // then what its ended children used, cutime 13 and cstime 14.
    let of = |pid: u32| -> [f64; 4] {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> =
            stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
        [11, 12, 13, 14]
            .map(|i| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 100.0)
    };
    let [user, system, ended_user, ended_system] = of(pid);
    let live: f64 =
        machine::children_of(pid).into_iter().map(|kid| of(kid).iter().sum::<f64>()).sum();
    (user + system, ended_user + ended_system + live)
}

/// `pid` and its children (a pod and its workers).
fn with_children(pid: u32) -> Vec<u32> {
    std::iter::once(pid).chain(machine::children_of(pid)).collect()
}

/// Pins every thread of `pid` (and of its children when `children`) to `cpus` (a `taskset`
/// list); threads and processes they start later inherit it.
fn pin(pid: u32, children: bool, cpus: &str) {
    let pids = if children { with_children(pid) } else { vec![pid] };
    for pid in pids {
        let status = std::process::Command::new("taskset")
            .args(["-a", "-c", "-p", cpus, &pid.to_string()])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "taskset {cpus} {pid}: {status}");
    }
}

/// CPU seconds of the pod (supervisor and workers), NATS and the S3 server; then of the pod's
/// supervisor alone.
fn cpu(pod: &RenderPod, world: &World) -> [f64; 4] {
    let (supervisor, workers) = cpu_seconds(pod.pid());
    [
        supervisor + workers,
        cpu_seconds(world.nats.pid()).0,
        cpu_seconds(world.store.s3().pid()).0,
        supervisor,
    ]
}

/// What [`cpu`] counted between two readings.
fn spent(before: [f64; 4], after: [f64; 4]) -> [f64; 4] {
    [0, 1, 2, 3].map(|i| after[i] - before[i])
}

/// CPU seconds from [`spent`] as milliseconds a page over `pages` pages.
fn per_page(spent: [f64; 4], pages: f64) -> String {
    let [pod, nats, s3, supervisor] = spent.map(|s| s * 1000.0 / pages);
    format!("pod {pod:.1} (supervisor {supervisor:.1}), NATS {nats:.1}, S3 {s3:.1}")
}

/// The sum and count of a histogram in `pod`'s metrics.
async fn histogram(pod: &RenderPod, name: &str) -> (f64, f64) {
    (pod.metric(&format!("{name}_sum"), &[]).await, pod.metric(&format!("{name}_count"), &[]).await)
}

/// Publishes `messages` at once and waits for every one's end event; the time from the first
/// publish to the last end.
async fn run_jobs(world: &World, messages: &[serde_json::Value]) -> Duration {
    let mut events =
        world.client().subscribe(format!("{}.>", world.subjects.events)).await.unwrap();
    let started = Instant::now();
    futures::stream::iter(messages)
        .for_each_concurrent(64, |m| async move {
            world.publish(m).await;
        })
        .await;
    let mut ended = BTreeSet::new();
    while ended.len() < messages.len() {
        let event = events.next().await.unwrap();
        let event: serde_json::Value = serde_json::from_slice(&event.payload).unwrap();
        assert_eq!(event["type"], "job.done", "{event}");
        ended.insert(event["data"]["id"].as_str().unwrap().to_string());
    }
    started.elapsed()
}

/// Rounds of `pages` through `/v1/render` (`clients` at a time) then as one job a page, past the
/// window the pod keeps for previews in between, and as one job a page naming the stored
/// document's ETag; prints each round's figures and the medians.
async fn rates(
    pod: &RenderPod,
    world: &World,
    (doc, etag): (&Arc<Vec<u8>>, &str),
    pages: &[u32],
    clients: usize,
    arm: &str,
) {
    let (mut sync_rates, mut job_rates, mut whole_rates) = (Vec::new(), Vec::new(), Vec::new());
    let mut pinned_rates = Vec::new();
    let mut cost_ratios = Vec::new();
    for round in 0..ROUNDS {
        let before = cpu(pod, world);
        let sync = sync_pages(pod, &Sent::Body(doc.clone()), pages, clients).await;
        let after_sync = cpu(pod, world);
        let sync_cpu = spent(before, after_sync);
        // Past the window in which the pod keeps a slot free for previews: the jobs run on a
        // pod with no interactive traffic, as the renders did.
        tokio::time::sleep(FOREGROUND_WINDOW + Duration::from_millis(200)).await;
        let messages: Vec<_> = pages
            .iter()
            .enumerate()
            .map(|(n, page)| {
                message(
                    &format!("rate-{arm}-{round}-{n}"),
                    "s3://uploads/bench/doc.pdf",
                    serde_json::json!([{"op": "render", "page": page, "dpi": 150}]),
                    "s3://results/rate",
                )
            })
            .collect();
        let (sum_before, count_before) = histogram(pod, "renderpod_jobs_run_seconds").await;
        let jobs = pages.len() as f64 / run_jobs(world, &messages).await.as_secs_f64();
        let (sum, count) = histogram(pod, "renderpod_jobs_run_seconds").await;
        let after_jobs = cpu(pod, world);
        // The same pages as one job per pass over the document (a filmstrip, as an upload's
        // previews are made): the fixed cost of a job shared by its 36 pages.
        let passes: Vec<_> = (0..pages.len() / 36)
            .map(|n| {
                message(
                    &format!("whole-{arm}-{round}-{n}"),
                    "s3://uploads/bench/doc.pdf",
                    serde_json::json!([{"op": "render", "pages": "1-36", "dpi": 150}]),
                    "s3://results/whole",
                )
            })
            .collect();
        let whole = (passes.len() * 36) as f64 / run_jobs(world, &passes).await.as_secs_f64();
        // The same jobs a page naming the document's version: the pod holds it, so a job asks
        // the store nothing before it starts (a conditional GET fewer).
        let named: Vec<_> = messages
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m["idempotency_key"] =
                    format!("named-{}", m["idempotency_key"].as_str().unwrap()).into();
                m["input"]["etag"] = etag.into();
                m
            })
            .collect();
        let before_named = cpu(pod, world);
        let pinned = pages.len() as f64 / run_jobs(world, &named).await.as_secs_f64();
        let after_named = cpu(pod, world);
        let named_cpu = spent(before_named, after_named);
        let jobs_cpu = spent(after_sync, after_jobs);
        let n = pages.len() as f64;
        println!(
            "  CPU ms a page: /v1/render {}; jobs {}",
            per_page(sync_cpu, n),
            per_page(jobs_cpu, n)
        );
        println!(
            "  jobs naming the ETag: {pinned:.1} pages/s, ratio {:.2}; CPU ms a page: {}",
            pinned / sync,
            per_page(named_cpu, n)
        );
        let run_ms = (sum - sum_before) / (count - count_before) * 1000.0;
        // CPUs the pod kept busy: below what it has, the pace was set outside it.
        let (sync_busy, jobs_busy) = (sync_cpu[0] / n * sync, jobs_cpu[0] / n * jobs);
        println!(
            "round {round}: /v1/render {sync:.1} pages/s, jobs {jobs:.1} pages/s, ratio {:.2} (a job's run on the pod {run_ms:.1} ms on average; the pod busy {sync_busy:.2} then {jobs_busy:.2} CPUs); a job a document {whole:.1} pages/s, ratio {:.2}",
            jobs / sync,
            whole / sync
        );
        sync_rates.push(sync);
        job_rates.push(jobs);
        whole_rates.push(whole);
        pinned_rates.push(pinned);
        cost_ratios.push(sync_cpu[0] / jobs_cpu[0]);
    }
    let (sync, jobs) = (median(&mut sync_rates), median(&mut job_rates));
    let (whole, pinned) = (median(&mut whole_rates), median(&mut pinned_rates));
    println!(
        "median ({arm}): /v1/render {sync:.1} pages/s, jobs {jobs:.1} pages/s, jobs/sync {:.2} (goal >= 0.9); naming the ETag {pinned:.1} pages/s, {:.2}; pages per CPU-second of the pod, jobs/sync {:.2}; a job a document {whole:.1} pages/s, {:.2} of /v1/render",
        jobs / sync,
        pinned / sync,
        median(&mut cost_ratios),
        whole / sync
    );
}

/// A viewer paging through the stored document on one connection, each way in turn for
/// [`ROUNDS`] rounds: pages per second against uploading it, and the S3 server's CPU a page.
async fn viewer(pod: &RenderPod, world: &World, (doc, etag): (&Arc<Vec<u8>>, &str), pages: &[u32]) {
    let source = ("source", "s3://uploads/bench/doc.pdf".to_string());
    let ways = [
        ("uploaded", Sent::Body(doc.clone())),
        ("?source=", Sent::Stored(vec![source.clone()])),
        ("?source=&source_etag=", Sent::Stored(vec![source, ("source_etag", etag.to_string())])),
    ];
    let mut rates = vec![Vec::new(); ways.len()];
    for round in 0..ROUNDS {
        let mut line = format!("round {round}:");
        for (way, (name, sent)) in ways.iter().enumerate() {
            let before = cpu(pod, world);
            let rate = sync_pages(pod, sent, pages, 1).await;
            let s3_ms = (cpu(pod, world)[2] - before[2]) * 1000.0 / pages.len() as f64;
            line += &format!(" {name} {rate:.1} pages/s (S3 {s3_ms:.2} ms CPU a page);");
            rates[way].push(rate);
        }
        println!("{line}");
    }
    let medians: Vec<f64> = rates.iter_mut().map(|r| median(r)).collect();
    println!(
        "median: uploaded {:.1} pages/s; ?source= {:.1} ({:.2}x); ?source=&source_etag= {:.1} ({:.2}x)",
        medians[0],
        medians[1],
        medians[1] / medians[0],
        medians[2],
        medians[2] / medians[0]
    );
}

/// A backlog of [`BACKLOG`] small jobs against its ideal (`slots` at the pace of one job's work
/// alone), with previews rendered through it against at idle; the pod's world holds
/// `uploads/bench/trivial.pdf`.
async fn backlog(pod: &Arc<RenderPod>, world: &World, slots: u32, arm: &str) {
    let trivial = corpus::read(TRIVIAL);
    let preview = corpus::read(DOC);
    let query = "page=1&width=400";
    // What one job's work takes alone, through the same engine: its two operations in a row.
    let mut alone = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let info = pod.post("/v1/info", trivial.clone()).await;
        assert_eq!(info.status(), 200);
        let render = pod.post("/v1/render?page=1&width=64", trivial.clone()).await;
        assert_eq!(render.status(), 200);
        alone.push(started.elapsed());
    }
    let alone = percentile(&mut alone, 50.0);
    let mut idle = sync_renders(pod, &preview, query, 60, Duration::from_millis(20)).await;
    let messages: Vec<_> = (0..BACKLOG)
        .map(|n| {
            message(
                &format!("backlog-{arm}-{n}"),
                "s3://uploads/bench/trivial.pdf",
                serde_json::json!([{"op": "info"}, {"op": "render", "page": 1, "width": 64}]),
                "s3://results/backlog",
            )
        })
        .collect();
    let previews = {
        let (pod, preview) = (pod.clone(), preview.clone());
        tokio::spawn(async move {
            // Starts once the backlog is there, and stays within it (60 at 20 ms apart).
            tokio::time::sleep(Duration::from_millis(500)).await;
            sync_renders(&pod, &preview, query, 60, Duration::from_millis(20)).await
        })
    };
    let backlog = run_jobs(world, &messages).await;
    let mut busy = previews.await.unwrap();
    let ideal = alone * u32::try_from(BACKLOG).unwrap() / slots;
    println!(
        "{BACKLOG} jobs in {backlog:?}; one job's work alone {alone:?}, so {slots} slots' ideal {ideal:?}: backlog/ideal {:.2}",
        backlog.as_secs_f64() / ideal.as_secs_f64()
    );
    let (idle50, idle99) = (percentile(&mut idle, 50.0), percentile(&mut idle, 99.0));
    let (busy50, busy99) = (percentile(&mut busy, 50.0), percentile(&mut busy, 99.0));
    println!(
        "previews ({DOC} page 1, 400 px): idle p50 {idle50:?} p99 {idle99:?}; during the backlog p50 {busy50:?} p99 {busy99:?}: p99 x{:.2} (goal <= 1.5)",
        busy99.as_secs_f64() / idle99.as_secs_f64()
    );
}

/// A 1-slot pod pinned to the last of `cpus` with its workers, and this process and the
/// world's servers pinned to the others before they start (so that each sizes itself to the
/// CPUs it has: Go's GOMAXPROCS, tokio's workers, as on a machine of its own), the document
/// stored and its worker warm; the document's ETag. `None` on a machine of one CPU, which
/// cannot give the pod one of its own.
async fn pod_on_last_cpu(
    doc: &Arc<Vec<u8>>,
    pages: &[u32],
    cpus: usize,
    group: Option<&Group>,
) -> Option<(World, Arc<RenderPod>, String)> {
    if cpus < 2 {
        println!("not run: this machine has one CPU, so the pod cannot have one of its own");
        return None;
    }
    let (own, others) = (format!("{}", cpus - 1), format!("0-{}", cpus - 2));
    pin(std::process::id(), false, &others);
    let world = World::start().await;
    let pod = Arc::new(world.pod_binary(&release_bin("render-pod"), &["--slots", "1"]).await);
    pin(pod.pid(), true, &own);
    if let Some(group) = group {
        // The workers it starts from now on are born in the group.
        for pid in with_children(pod.pid()) {
            group.enter(pid);
        }
    }
    let etag = world.put("uploads", "bench/doc.pdf", doc.to_vec()).await.unwrap();
    world.put("uploads", "bench/trivial.pdf", corpus::read(TRIVIAL)).await;
    sync_pages(&pod, &Sent::Body(doc.clone()), &pages[..4], 1).await;
    Some((world, pod, etag))
}

/// The same rounds and backlog shaped as in production, where NATS, the object store and the
/// clients run on other machines than the pod: a 1-slot pod pinned to the last CPU, everything
/// else to the others. The figures are then the pod's own, as long as the others keep up.
async fn pinned(doc: &Arc<Vec<u8>>, pages: &[u32], cpus: usize) {
    println!("\n## the same, production-shaped: a 1-slot pod alone on CPU {}", cpus - 1);
    let Some((world, pod, etag)) = pod_on_last_cpu(doc, pages, cpus, None).await else { return };
    rates(&pod, &world, (doc, &etag), pages, 2, "pinned").await;
    println!("\n## the backlog on the same pod alone on its CPU");
    backlog(&pod, &world, 1, "pinned").await;
}

/// The pinned pod held to [`HELD_QUOTA`] of its CPU by a CFS quota: at that pace the store,
/// the broker and the clients on the other CPU have room to spare, so the pod alone sets the
/// pace both ways, as in a cluster where they run on other machines (in the pinned arm they
/// can fill their CPU and leave the pod's idle).
async fn held(doc: &Arc<Vec<u8>>, pages: &[u32], cpus: usize) {
    let (quota, period) = HELD_QUOTA;
    println!(
        "\n## the same, the pod held to {:.1} of CPU {} (a CFS quota): the store and broker never set the pace",
        quota as f64 / period as f64,
        cpus - 1
    );
    let Some(group) = Group::cpu("renderpool-jobs-bench", quota, period) else {
        println!("not run: no writable cgroup v1 cpu controller");
        return;
    };
    let Some((world, pod, etag)) = pod_on_last_cpu(doc, pages, cpus, Some(&group)).await else {
        return;
    };
    // Declared after the group, the pod and its workers end before it is removed.
    rates(&pod, &world, (doc, &etag), pages, 2, "held").await;
}

async fn run() {
    // Counted before the arms below pin this process to fewer.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let world = World::start().await;
    let pod = Arc::new(world.pod_binary(&release_bin("render-pod"), &["--slots", SLOTS]).await);
    let doc = Arc::new(corpus::read(DOC));
    let etag = world.put("uploads", "bench/doc.pdf", doc.to_vec()).await.unwrap();
    world.put("uploads", "bench/trivial.pdf", corpus::read(TRIVIAL)).await;
    // Every page of the document, four times over: 144 renders a round.
    let pages: Vec<u32> = (0..4).flat_map(|_| 1..=36u32).collect();
    // Warm both workers and the object cache.
    sync_pages(&pod, &Sent::Body(doc.clone()), &pages[..4], 2).await;
    println!("machine: {cpus} CPUs, load average {}", machine::load_average());

    println!(
        "\n## pages per second, {SLOTS} slots, {} renders of {DOC}'s 36 pages at 150 dpi PNG; pod, NATS, S3 and clients sharing the machine's CPUs",
        pages.len()
    );
    rates(&pod, &world, (&doc, &etag), &pages, 4, "shared").await;

    println!(
        "\n## a viewer of the stored document: one client, {} renders, the document uploaded with each, read from S3 by ?source= (a conditional GET each), and by ?source=&source_etag= (no request)",
        pages.len()
    );
    viewer(&pod, &world, (&doc, &etag), &pages).await;

    println!("\n## publish to start at idle (50 jobs, one at a time: info of {TRIVIAL})");
    let mut starts = Vec::new();
    let mut ends = Vec::new();
    for n in 0..50 {
        let key = format!("idle-{n}");
        let m = message(
            &key,
            "s3://uploads/bench/trivial.pdf",
            serde_json::json!([{"op": "info"}]),
            "s3://results/idle",
        );
        let published = now_ms();
        let took = run_jobs(&world, std::slice::from_ref(&m)).await;
        let state = world.state(&JobId::from_key(&key)).await.unwrap();
        starts.push(Duration::from_millis(state.started_ms.unwrap().saturating_sub(published)));
        ends.push(took);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "publish to start p50 {:?} p99 {:?}; publish to end p50 {:?} p99 {:?}",
        percentile(&mut starts, 50.0),
        percentile(&mut starts, 99.0),
        percentile(&mut ends, 50.0),
        percentile(&mut ends, 99.0)
    );

    println!("\n## a backlog of {BACKLOG} jobs (info, and page 1 at 64 px wide, of {TRIVIAL})");
    backlog(&pod, &world, SLOTS.parse().unwrap(), "shared").await;
    // The shared arm's servers and pod go first.
    drop(pod);
    drop(world);
    pinned(&doc, &pages, cpus).await;
    held(&doc, &pages, cpus).await;
    println!("\nload average afterwards {}", machine::load_average());
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(run());
}
