//! Office to PDF, the audit's experiment in one run: one DOCX alone, four in a row and four at
//! once, through the real render pod in front of one Gotenberg instance and in front of one
//! instance per core (behind a small random-per-connection TCP balancer standing in for the
//! Kubernetes Service), plus four at once straight at one Gotenberg. Prints wall times, p50/p99
//! latencies, the ratio of k at once on k instances to one alone (goal: at most 1.3), Gotenberg's
//! RSS idle and converting, the render pod's RSS added by its PDF cache, and how long an Office
//! bomb holds the next good document. Figures only: it never fails on time.
//!
//! Run: `cargo build -p render-pod && cargo bench -p renderpool-tests --bench office --profile dev`
//! after `eval "$(scripts/setup.sh --office)"` (bench/run.sh does all three).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use renderpool_operator::build::gotenberg_args;
use renderpool_operator::crd::RenderPoolSpec;
use renderpool_operator::validate::validate;
use renderpool_testkit::packages;
use renderpool_tests::balancer::Balancer;
use renderpool_tests::gotenberg::Gotenberg;
use renderpool_tests::render_pod::RenderPod;
use renderpool_tests::{corpus_dir, rss_bytes};

const DOCX: &str = "office/test.docx";
/// Single requests behind the "one alone" baseline (its median).
const ALONE_RUNS: usize = 3;
/// Office bombs, each followed by a good document.
const BOMB_ROUNDS: u64 = 2;

fn doc(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(name)).unwrap()
}

static VARIANT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The DOCX with a ZIP comment of its own: the same document to LibreOffice, a new upload to the
/// pod, so neither its PDF cache nor its sharing of concurrent identical uploads hides a
/// conversion.
fn fresh_docx() -> Vec<u8> {
    let mut docx = doc(DOCX);
    let comment = format!("bench {}", VARIANT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let at = docx.len() - 2;
    assert_eq!(docx[at..], [0, 0], "{DOCX} already has a ZIP comment");
    docx[at..].copy_from_slice(&(comment.len() as u16).to_le_bytes());
    docx.extend_from_slice(comment.as_bytes());
    docx
}

/// Gotenberg as the operator would run it, with `queue_size` (1: a busy instance answers 429).
async fn gotenberg(queue_size: u32) -> Gotenberg {
    let spec: RenderPoolSpec = serde_json::from_value(serde_json::json!({
        "jobDeadlineMs": 120_000,
        "gotenberg": { "queueSize": queue_size, "restartAfter": 0 }
    }))
    .unwrap();
    let plan = validate(&spec).unwrap().gotenberg.unwrap();
    Gotenberg::start(&gotenberg_args(&spec.gotenberg, &plan)).await
}

/// Wall time and per-request latencies of one round.
struct Round {
    wall: Duration,
    latencies: Vec<Duration>,
}

impl Round {
    fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    /// One request alone, as the median of a few: the baseline of every ratio.
    fn alone(&self) -> Duration {
        self.percentile(50.0)
    }

    fn print_alone(&self) {
        println!(
            "  {:<44} each  {:>5.2} s   p50 {:>5.2} s   p99 {:>5.2} s",
            format!("one alone ({} runs, one after another)", self.latencies.len()),
            self.alone().as_secs_f64(),
            self.percentile(50.0).as_secs_f64(),
            self.percentile(99.0).as_secs_f64()
        );
    }

    fn print(&self, label: &str) {
        println!(
            "  {label:<44} wall {:>6.2} s   p50 {:>5.2} s   p99 {:>5.2} s",
            self.wall.as_secs_f64(),
            self.percentile(50.0).as_secs_f64(),
            self.percentile(99.0).as_secs_f64()
        );
    }
}

/// One conversion request; its latency.
async fn convert(client: &reqwest::Client, url: &str, body: Vec<u8>, form: bool) -> Duration {
    let started = Instant::now();
    let request = if form {
        let part = reqwest::multipart::Part::bytes(body).file_name("document.docx");
        client.post(url).multipart(reqwest::multipart::Form::new().part("files", part))
    } else {
        client.post(url).body(body)
    };
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200, "{url}: {:?}", response.text().await);
    response.bytes().await.unwrap();
    started.elapsed()
}

async fn in_a_row(url: &str, n: usize, form: bool) -> Round {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut latencies = Vec::new();
    for _ in 0..n {
        latencies.push(convert(&client, url, fresh_docx(), form).await);
    }
    Round { wall: started.elapsed(), latencies }
}

async fn at_once(url: &str, n: usize, form: bool) -> Round {
    let urls: Vec<String> = (0..n).map(|_| url.to_string()).collect();
    spread(&urls, form).await
}

/// One request to each of `urls`, all at once.
async fn spread(urls: &[String], form: bool) -> Round {
    let client = reqwest::Client::new();
    let started = Instant::now();
    let mut requests = tokio::task::JoinSet::new();
    for url in urls {
        let (client, url) = (client.clone(), url.clone());
        requests.spawn(async move { convert(&client, &url, fresh_docx(), form).await });
    }
    let latencies = requests.join_all().await;
    Round { wall: started.elapsed(), latencies }
}

/// Samples the total RSS of `instances` every 50 ms while `work` runs; the highest sum.
async fn peak_rss_during<T>(instances: &[&Gotenberg], work: impl Future<Output = T>) -> (T, u64) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = async {
        let mut peak = 0u64;
        while stopped.try_recv().is_err() {
            peak = peak.max(instances.iter().map(|g| g.rss_bytes()).sum());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak
    };
    let work = async {
        let out = work.await;
        let _ = stop.send(());
        out
    };
    tokio::join!(work, sampler)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

async fn run() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("machine: {cores} CPUs, load average {}", renderpool_testkit::machine::load_average());

    // Straight at one Gotenberg: the audit's setup (Gotenberg queues internally).
    let single = gotenberg(16).await;
    let idle_rss = single.rss_bytes();
    convert(
        &reqwest::Client::new(),
        &format!("{}/forms/libreoffice/convert", single.url()),
        fresh_docx(),
        true,
    )
    .await;
    println!("\n### straight at one Gotenberg (queue 16), {DOCX}");
    let direct = format!("{}/forms/libreoffice/convert", single.url());
    let alone_direct = in_a_row(&direct, ALONE_RUNS, true).await;
    alone_direct.print_alone();
    let (four_direct, converting_rss) =
        peak_rss_during(&[&single], at_once(&direct, 4, true)).await;
    four_direct.print("four at once");
    println!(
        "  four at once / one alone: {:.2}x",
        four_direct.wall.as_secs_f64() / alone_direct.alone().as_secs_f64()
    );
    println!(
        "  RSS of one Gotenberg with its LibreOffice: idle {:.0} MiB, converting (peak) {:.0} MiB",
        mib(idle_rss),
        mib(converting_rss)
    );

    // Through the render pod, cache off so every request converts.
    println!("\n### through render-pod (cache off), one Gotenberg instance, share 1");
    let pod = RenderPod::start(
        &["--office-concurrency", "1", "--office-cache-bytes", "0", "--job-deadline-ms", "120000"],
        &[("RENDERPOD_GOTENBERG_URL", &single.url())],
    )
    .await;
    let through = pod.url("/v1/convert");
    let alone = in_a_row(&through, ALONE_RUNS, false).await;
    alone.print_alone();
    in_a_row(&through, 4, false).await.print("four in a row");
    let four = at_once(&through, 4, false).await;
    four.print("four at once (FIFO in the pod)");
    println!(
        "  four at once / one alone: {:.2}x",
        four.wall.as_secs_f64() / alone.alone().as_secs_f64()
    );
    drop(pod);
    bomb_then_good(&single, alone.alone()).await;
    drop(single);

    println!(
        "\n### through render-pod, {cores} instances (one per core, queue 1) behind a random-per-connection balancer standing in for the Service, share {cores}"
    );
    let mut instances = Vec::new();
    for _ in 0..cores {
        instances.push(gotenberg(1).await);
    }
    // The machine's own limit: one request straight at each instance, all at once, after one
    // conversion each to warm its LibreOffice.
    let direct: Vec<String> =
        instances.iter().map(|g| format!("{}/forms/libreoffice/convert", g.url())).collect();
    for url in &direct {
        in_a_row(url, 1, true).await;
    }
    let one_each = spread(&direct, true).await;
    one_each.print(&format!("straight, one at each of the {cores} at once"));
    let balancer = Balancer::start(instances.iter().map(Gotenberg::addr).collect()).await.unwrap();
    let share = cores.to_string();
    let pod = RenderPod::start(
        &[
            "--office-concurrency",
            &share,
            "--office-cache-bytes",
            "0",
            "--job-deadline-ms",
            "120000",
        ],
        &[("RENDERPOD_GOTENBERG_URL", &balancer.url())],
    )
    .await;
    let through = pod.url("/v1/convert");
    let alone = in_a_row(&through, ALONE_RUNS, false).await;
    alone.print_alone();
    in_a_row(&through, 4, false).await.print("four in a row");
    let k_at_once = at_once(&through, cores, false).await;
    k_at_once.print(&format!("{cores} at once"));
    at_once(&through, 4, false).await.print("four at once");
    println!(
        "  {cores} at once on {cores} instances / one alone: {:.2}x (goal <= 1.3)",
        k_at_once.wall.as_secs_f64() / alone.alone().as_secs_f64()
    );
    println!(
        "  (straight, one at each / one alone: {:.2}x: the machine's own share of that)",
        one_each.wall.as_secs_f64() / alone.alone().as_secs_f64()
    );
    // (+ 0.0: an empty sum of floats is -0.)
    let retried = pod.metric("renderpod_office_retries_total", &["busy"]).await + 0.0;
    println!("  429s retried on a new connection: {retried}");
    drop(pod);

    println!("\n### render-pod RSS added by its converted-PDF cache (budget 64 MiB)");
    let pod = RenderPod::start(
        &["--office-concurrency", &share],
        &[("RENDERPOD_GOTENBERG_URL", &balancer.url())],
    )
    .await;
    // One conversion first, so the client's and the front's own buffers are in the baseline.
    convert(
        &reqwest::Client::new(),
        &pod.url("/v1/convert?pages=1"),
        doc("office/cols.odp"),
        false,
    )
    .await;
    let before = rss_bytes(pod.pid()).unwrap_or(0);
    let files = [
        "office/having-images.docx",
        "office/test.pptx",
        "office/sld-slides.pptx",
        "office/images.odt",
        "office/tbl-having-tables.docx",
        "office/test.docx",
        "office/pythagoras.ods",
        "office/shp-embedded-xlsx.xlsx",
    ];
    let client = reqwest::Client::new();
    for name in files {
        for options in ["", "?pdfa=1b", "?pdfa=2b", "?pdfa=3b"] {
            convert(&client, &pod.url(&format!("/v1/convert{options}")), doc(name), false).await;
        }
    }
    let after = rss_bytes(pod.pid()).unwrap_or(0);
    let cached = pod.metric("renderpod_office_cache_bytes", &[]).await;
    let entries = pod.metric("renderpod_office_cache_entries", &[]).await;
    println!(
        "  {entries} PDFs, {:.1} MiB cached: supervisor RSS {:.1} -> {:.1} MiB (+{:.1} MiB)",
        cached / f64::from(1 << 20),
        mib(before),
        mib(after),
        mib(after.saturating_sub(before))
    );
}

/// An Office bomb (a small, honest DOCX that takes LibreOffice minutes to lay out) through a pod
/// that gives up on it at its deadline, then a good document at once: how long the bomb holds
/// Office after its answer (Gotenberg cancels the conversion, the unoconverter's watchdog
/// replaces the busy LibreOffice), against `alone`, one good conversion on an idle instance.
async fn bomb_then_good(gotenberg: &Gotenberg, alone: Duration) {
    let deadline_ms = 15_000;
    println!(
        "\n### an Office bomb, then the next good document, one Gotenberg instance, share 1, the pod's deadline {deadline_ms} ms"
    );
    let pod = RenderPod::start(
        &[
            "--office-concurrency",
            "1",
            "--office-cache-bytes",
            "0",
            "--job-deadline-ms",
            &deadline_ms.to_string(),
        ],
        &[("RENDERPOD_GOTENBERG_URL", &gotenberg.url())],
    )
    .await;
    let client = reqwest::Client::new();
    let url = pod.url("/v1/convert");
    for round in 1..=BOMB_ROUNDS {
        // A new document each round: a second strike on the same one would quarantine it.
        let bomb = packages::slow_docx(300_000, round);
        let sent = Instant::now();
        let response = client.post(&url).body(bomb).send().await.unwrap();
        let answered = sent.elapsed();
        let status = response.status();
        assert_eq!(status, 504, "the bomb: {:?}", response.text().await);
        let next = convert(&client, &url, fresh_docx(), false).await;
        println!(
            "  round {round}: the bomb answered 504 after {:.2} s; the next good document, sent then, converted in {:.2} s ({:.2}x one alone, {:.2} s)",
            answered.as_secs_f64(),
            next.as_secs_f64(),
            next.as_secs_f64() / alone.as_secs_f64(),
            alone.as_secs_f64()
        );
    }
}

fn main() {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(run());
}
