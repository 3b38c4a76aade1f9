//! Service benchmark: the real `render-pod serve` (release build) against baselines run by the
//! same script. Prints figures; asserts nothing about time.
//!
//! 1. Page render throughput at 150 dpi PNG with every slot busy, against PDFium called
//!    in-process in one loop with the same encoder (the per-slot limit, run in a child process
//!    of this bench right before each service run): on this machine as it is, and shaped like
//!    a production pod (the client off the pod's CPU: a 1.2 CPU cgroup quota, and exactly one
//!    pinned CPU).
//! 2. `/healthz` latency while every slot is busy and the queue is full.
//! 3. Six concurrent `/v1/extract` of gnuplot.pdf against six in a row divided by the slots.
//! 4. Peak RSS of each worker and of the supervisor.
//! 5. What the workers' memory ceiling costs: throughput with it against without it, rounds
//!    alternating between the two services.
//! 6. Peak RSS of the supervisor and the workers while resource bombs run into the ceiling.
//! 7. Time from a client's disconnect to its slot being free, and to a new worker being ready.
//! 8. What the front's limits cost (upload budget, body rate and idle limits, header read
//!    timeout): throughput with them against `--front-limits false`, rounds alternating.
//! 9. What the workers' sandbox costs: throughput with it against `--sandbox false`, rounds
//!    alternating.
//! 10. What the answer budget costs: throughput with it against `--answer-budget off`, rounds
//!     alternating.
//!
//! Run: cargo bench -p render-pod --bench service   (ROUNDS=15 for steadier ratios)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::raw::{percentile, probe, process_cpu};
use common::{ServeIn, Server, doc, raw};
use render_pod::ops::{Document, Executor, ImageFormat, Op, OpLimits, RenderSize};
use renderpool_testkit::bombs;

/// Pages of R-intro.pdf (a text manual) rendered per pass.
const PAGES: u32 = 40;

fn render_op(page: u32) -> Op {
    Op::Render { page, size: RenderSize::Dpi(150.0), format: ImageFormat::Png, quality: None }
}

/// Pages per second of PDFium + the service's PNG encoder in this process, one loop over
/// `passes` x PAGES.
fn in_process_limit(bytes: &[u8], passes: u32) -> f64 {
    let mut executor = Executor::new(render_pod::pdfium_lib::bind().unwrap(), OpLimits::default());
    let doc = Document::new(bytes, None); // hashed once, as the front does for a worker
    executor.execute(&doc, &render_op(1)).unwrap(); // open once, as a worker would
    let start = Instant::now();
    for _ in 0..passes {
        for page in 1..=PAGES {
            executor.execute(&doc, &render_op(page)).unwrap();
        }
    }
    f64::from(passes * PAGES) / start.elapsed().as_secs_f64()
}

/// Set (to a number of passes) in the child processes of [`limit_in_children`].
const LIMIT_CHILD: &str = "RENDERPOD_BENCH_LIMIT_CHILD";

/// The in-process loop in one child process per entry of `cpus` (this bench re-run), all at
/// once, each pinned to its CPU if given; their pages/s summed. With `n` unpinned children it is
/// what this machine gives `n` independent PDFium loops with nothing else running: the ceiling
/// of any service on it.
fn limit_in_children(cpus: &[Option<usize>]) -> f64 {
    let children: Vec<_> = cpus
        .iter()
        .map(|cpu| {
            let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
            cmd.env(LIMIT_CHILD, "2").stdout(std::process::Stdio::piped());
            if let Some(cpu) = *cpu {
                pin_command(&mut cmd, cpu);
            }
            cmd.spawn().unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse::<f64>().unwrap()
        })
        .sum()
}

fn cpu_set(cpu: usize) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is a plain bitmask; CPU_SET writes one bit inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    }
}

/// Makes `cmd`'s process (and everything it starts) run on `cpu` only.
fn pin_command(cmd: &mut std::process::Command, cpu: usize) {
    use std::os::unix::process::CommandExt;
    let set = cpu_set(cpu);
    // SAFETY: sched_setaffinity is async-signal-safe and touches only the child's own state.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Moves every thread of this process to `cpu` (threads started later inherit it).
fn pin_self(cpu: usize) {
    set_self_affinity(&cpu_set(cpu));
}

/// Lets every thread of this process run on any CPU again.
fn unpin_self() {
    // SAFETY: as in cpu_set; every bit set.
    let all = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
        }
        set
    };
    set_self_affinity(&all);
}

fn set_self_affinity(set: &libc::cpu_set_t) {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let tid: libc::pid_t = task.unwrap().file_name().to_str().unwrap().parse().unwrap();
        // SAFETY: as above, on a thread of this process.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), set) };
        let error = std::io::Error::last_os_error();
        // A runtime thread may exit between the listing and the call (ESRCH): nothing to pin.
        assert!(rc == 0 || error.raw_os_error() == Some(libc::ESRCH), "sched_setaffinity: {error}");
    }
}

/// Busy CPU time of the whole machine (all CPUs, `/proc/stat`).
fn machine_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .map(|t| t.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
    let busy: u64 =
        ticks.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, t)| t).sum();
    Duration::from_millis(busy * 10) // USER_HZ is 100 on Linux
}

/// Where the CPU went during a throughput run, per page: (workers and the rest of the machine,
/// HTTP front, load-generating client).
struct CpuSplit {
    workers: Duration,
    front: Duration,
    client: Duration,
}

async fn measured_throughput(
    server: &Arc<Server>,
    bytes: &Arc<Vec<u8>>,
    concurrency: usize,
    passes: u32,
) -> (f64, CpuSplit) {
    let (machine, front, client) =
        (machine_cpu(), process_cpu(server.pid()), process_cpu(std::process::id()));
    let rate = service_throughput(server, bytes, concurrency, passes).await;
    let pages = passes * PAGES;
    let front = (process_cpu(server.pid()) - front) / pages;
    let client = (process_cpu(std::process::id()) - client) / pages;
    let workers = ((machine_cpu() - machine) / pages).saturating_sub(front + client);
    (rate, CpuSplit { workers, front, client })
}

/// Pages per second through the service with `concurrency` clients over `passes` x PAGES.
async fn service_throughput(
    server: &Arc<Server>,
    bytes: &Arc<Vec<u8>>,
    concurrency: usize,
    passes: u32,
) -> f64 {
    common::render_throughput(server, bytes, PAGES, concurrency, passes).await
}

/// `/healthz` latencies while clients keep every slot busy and the queue full.
async fn healthz_under_saturation(server: &Arc<Server>) -> (Vec<Duration>, f64) {
    let heavy = Arc::new(doc("pdf/gnuplot.pdf"));
    let stop = Arc::new(AtomicBool::new(false));
    let loaders: Vec<_> = (0..24)
        .map(|i| {
            let (server, heavy, stop) = (server.clone(), heavy.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let page = 1 + (i * 7) % 300;
                    let response = server
                        .post(&format!("/v1/render?page={page}&dpi=300"), heavy.to_vec())
                        .await;
                    if response.status() == 503 {
                        // A well-behaved client waits as told (the service says at least 1 s).
                        let retry_after = response.headers()["retry-after"].to_str().unwrap();
                        let secs: u64 = retry_after.parse().unwrap();
                        tokio::time::sleep(Duration::from_secs(secs)).await;
                    }
                }
            })
        })
        .collect();
    let mut full_checks = 0u32;
    // Let the queue fill.
    let start = Instant::now();
    while server.readyz().await["engine"]["queued"].as_u64() < Some(8)
        && start.elapsed() < Duration::from_secs(20)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The prober runs on its own OS thread, as the kubelet does from outside the pod: latency
    // is the service's, not the load generator's runtime queueing the probe behind its uploads.
    let addr = server.base.trim_start_matches("http://").to_string();
    let prober = std::thread::spawn(move || {
        (0..1000)
            .map(|_| {
                let latency = probe(&addr, "/healthz");
                std::thread::sleep(Duration::from_millis(2));
                latency
            })
            .collect::<Vec<_>>()
    });
    let mut full_samples = 0u32;
    while !prober.is_finished() {
        let engine = server.readyz().await["engine"].clone();
        full_samples += 1;
        if engine["queued"] == engine["queue_depth"] && engine["busy"] == engine["slots"] {
            full_checks += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut latencies = prober.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for loader in loaders {
        loader.await.unwrap();
    }
    latencies.sort();
    (latencies, f64::from(full_checks) / f64::from(full_samples.max(1)))
}

async fn extract_six(server: &Arc<Server>, concurrent: bool) -> Duration {
    let bytes = Arc::new(doc("pdf/gnuplot.pdf"));
    let start = Instant::now();
    if concurrent {
        let all: Vec<_> = (0..6)
            .map(|_| {
                let (server, bytes) = (server.clone(), bytes.clone());
                tokio::spawn(async move {
                    let response = server.post("/v1/extract", bytes.to_vec()).await;
                    assert_eq!(response.status(), 200);
                    response.bytes().await.unwrap();
                })
            })
            .collect();
        for one in all {
            one.await.unwrap();
        }
    } else {
        for _ in 0..6 {
            let response = server.post("/v1/extract", bytes.to_vec()).await;
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap();
        }
    }
    start.elapsed()
}

fn peak_rss_mib(pid: u32) -> f64 {
    raw::peak_rss(pid) as f64 / f64::from(1 << 20)
}

/// Limit/service pairs per configuration (`ROUNDS`, 5 by default; more for a steadier median on
/// a busy machine). This VM's speed drifts by a fifth over seconds, so each service run is
/// divided by a limit run made just before it, and the median ratio counts.
fn rounds() -> usize {
    std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5)
}

/// One configuration's rounds: (limit pages/s, service pages/s, CPU split) each.
type Rounds = Vec<(f64, f64, CpuSplit)>;

/// Runs [`rounds`] pairs: the in-process loop in a child (pinned to `cpu` if given), then
/// `clients` clients through `server` over 2 x PAGES pages.
async fn paired_rounds(
    server: &Arc<Server>,
    bytes: &Arc<Vec<u8>>,
    cpu: Option<usize>,
    clients: usize,
) -> Rounds {
    service_throughput(server, bytes, clients, 1).await; // warm every worker's document
    let mut pairs = Vec::new();
    for _ in 0..rounds() {
        let limit = limit_in_children(&[cpu]);
        let (rate, split) = measured_throughput(server, bytes, clients, 2).await;
        pairs.push((limit, rate, split));
    }
    pairs
}

/// Prints a configuration's median ratio service / (limit x slots), its range, and the CPU
/// split of the median round.
fn report(title: &str, slots: u64, mut rounds: Rounds) {
    let ratio = |r: &(f64, f64, CpuSplit)| r.1 / (r.0 * slots as f64);
    rounds.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    let median = &rounds[rounds.len() / 2];
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("{title}:");
    println!(
        "  service {:.1} pages/s, limit {:.1} pages/s per slot ({:.2} ms/page), {slots} slot(s)",
        median.1,
        median.0,
        1e3 / median.0
    );
    println!(
        "  ratio service / (limit x slots): {:.3}  (target >= 0.9; rounds: {})",
        ratio(median),
        rounds.iter().map(|r| format!("{:.3}", ratio(r))).collect::<Vec<_>>().join(", ")
    );
    println!(
        "  CPU per page: workers {:.2} ms, HTTP front {:.2} ms, client {:.2} ms",
        ms(median.2.workers),
        ms(median.2.front),
        ms(median.2.client)
    );
}

fn main() {
    render_pod::malloc::tune(); // as the service's processes do, so the limit is comparable
    if let Some(passes) = std::env::var_os(LIMIT_CHILD) {
        let passes = passes.to_str().unwrap().parse().unwrap();
        println!("{}", in_process_limit(&doc("pdf/R-intro.pdf"), passes));
        return;
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let bytes = Arc::new(doc("pdf/R-intro.pdf"));
        let flags = ["--queue-depth", "8", "--job-deadline-ms", "120000"];

        let server = Arc::new(Server::start(&flags));
        let ready = server.wait_ready().await;
        let slots = ready["engine"]["slots"].as_u64().unwrap();
        println!();
        println!("== render-pod service benchmark (slots: {slots}, {})", ready["plan"]["reason"]);
        println!(
            "render 150 dpi PNG, R-intro.pdf pages 1-{PAGES} (one upload per page), {} rounds of limit then service:",
            rounds()
        );
        let single = limit_in_children(&[None]);
        let ceiling = limit_in_children(&vec![None; slots as usize]);
        println!(
            "machine ceiling: {slots} in-process loops at once {ceiling:.1} pages/s = {:.3} of one loop x {slots}",
            ceiling / (single * slots as f64)
        );
        // Two clients per slot keep the queue from running dry.
        let rounds = paired_rounds(&server, &bytes, None, 2 * slots as usize).await;
        report("this machine, every slot busy (client, front and workers share its CPUs)", slots, rounds);

        // What each protection costs: the same service with it switched off, same run.
        for (flag, off, title) in [
            ("--memory-ceiling", "false", "memory ceiling (RLIMIT_DATA at --memory-per-slot) against none, same run"),
            ("--front-limits", "false", "front limits (upload budget, body rate and idle limits, header and write timeouts, write rate) against --front-limits false"),
            ("--sandbox", "false", "workers' sandbox (seccomp filter, NO_NEW_PRIVS, limits) against --sandbox false"),
            ("--answer-budget", "off", "answer budget (every answer reserved until written, admission checks it) against --answer-budget off"),
        ] {
            let without: Vec<&str> = flags.iter().copied().chain([flag, off]).collect();
            let unlimited = Arc::new(Server::start(&without));
            unlimited.wait_ready().await;
            paired_cost(title, &server, &unlimited, &bytes, 2 * slots as usize).await;
        }

        // The shape of a production pod: the client is elsewhere. On a 2-CPU machine, one
        // slot's pod gets CPU 1 and the client CPU 0.
        if std::thread::available_parallelism().map_or(1, usize::from) >= 2 {
            // A CFS quota of 1.2 CPU: still 1 slot (floor), and the front gets the 0.2 left.
            match common::Group::cpu("renderpool-bench", 120_000, 100_000) {
                Some(group) => {
                    let pod = Arc::new(group.serve(&flags));
                    let pod_slots = pod.wait_ready().await["engine"]["slots"].as_u64().unwrap();
                    let rounds = paired_rounds(&pod, &bytes, Some(1), 2).await;
                    report("pod with a 1.2 CPU quota (cgroup v1; the front gets the 0.2 left)", pod_slots, rounds);
                }
                None => println!("pod with a 1.2 CPU quota: skipped (no writable cgroup v1 cpu controller)"),
            }
            // Exactly one CPU for slot and front: affinity, client pinned to the other CPU.
            pin_self(0);
            let mut cmd = std::process::Command::new(common::binary());
            cmd.args(common::serve_args(&flags));
            pin_command(&mut cmd, 1);
            let pod = Arc::new(Server::spawn(cmd));
            let pod_slots = pod.wait_ready().await["engine"]["slots"].as_u64().unwrap();
            let rounds = paired_rounds(&pod, &bytes, Some(1), 2).await;
            report("pod on exactly 1 CPU (affinity; slot and front share it), client on the other", pod_slots, rounds);
            drop(pod);
            unpin_self();
        }

        let sequential = extract_six(&server, false).await;
        let concurrent = extract_six(&server, true).await;
        let ideal = sequential.as_secs_f64() / slots as f64;
        println!("six /v1/extract of gnuplot.pdf (311 pages):");
        println!("  six in a row:      {:7.3} s  (/ {slots} slots = {ideal:.3} s)", sequential.as_secs_f64());
        println!(
            "  six concurrently:  {:7.3} s  = {:.3} of the ideal (target within 1.15)",
            concurrent.as_secs_f64(),
            concurrent.as_secs_f64() / ideal
        );

        let (latencies, full_share) = healthz_under_saturation(&server).await;
        println!(
            "/healthz with every slot busy and the queue full ({} samples, queue full in {:.0}% of checks):",
            latencies.len(),
            full_share * 100.0
        );
        println!(
            "  p50 {:.3} ms   p99 {:.3} ms   max {:.3} ms  (target p99 < 5 ms)",
            percentile(&latencies, 0.50).as_secs_f64() * 1e3,
            percentile(&latencies, 0.99).as_secs_f64() * 1e3,
            latencies.last().unwrap().as_secs_f64() * 1e3
        );

        let status = server.readyz().await;
        println!("peak RSS (VmHWM):");
        println!("  supervisor: {:.1} MiB", peak_rss_mib(server.pid()));
        for worker in status["engine"]["workers"].as_array().unwrap() {
            let peak = worker["memory"]["peak_rss_bytes"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0);
            println!(
                "  worker slot {} (pid {}, {} jobs): {:.1} MiB",
                worker["slot"], worker["pid"], worker["jobs"], peak
            );
        }
        println!(
            "  (workers are recycled after jobs/memory, so a slot's peak is its current worker's)"
        );
        drop(server);

        memory_under_bombs().await;
        disconnect_to_free_slot().await;
    });
}

/// Prints the median throughput ratio of the service with a limit (`with`) to the same service
/// without it, over [`rounds`] pairs.
async fn paired_cost(
    title: &str,
    with: &Arc<Server>,
    without: &Arc<Server>,
    bytes: &Arc<Vec<u8>>,
    clients: usize,
) {
    service_throughput(without, bytes, clients, 1).await; // warm its workers too
    let mut ratios = Vec::new();
    for round in 0..rounds() {
        // Which runs first alternates, so a machine speeding up or slowing down favours neither.
        let (on, off) = if round % 2 == 0 {
            let on = service_throughput(with, bytes, clients, 2).await;
            (on, service_throughput(without, bytes, clients, 2).await)
        } else {
            let off = service_throughput(without, bytes, clients, 2).await;
            (service_throughput(with, bytes, clients, 2).await, off)
        };
        ratios.push(on / off);
    }
    ratios.sort_by(f64::total_cmp);
    println!("{title}:");
    println!(
        "  throughput ratio with / without: {:.3}  (target >= 0.97; rounds: {})",
        ratios[ratios.len() / 2],
        ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(", ")
    );
}

/// Each bomb against a two-slot service with 384 MiB per slot: the answer, its time, and the
/// peak RSS of the supervisor and of the bomb's worker (sampled from `/readyz` every 10 ms,
/// since a worker that hits its ceiling is gone before its `VmHWM` can be read).
async fn memory_under_bombs() {
    let server = Arc::new(Server::start(&[
        "--slots",
        "2",
        "--memory-per-slot",
        "384Mi",
        "--job-deadline-ms",
        "60000",
    ]));
    server.wait_ready().await;
    println!("resource bombs, 2 slots of 384 MiB (worker ceiling 384 MiB):");
    let cases = [
        ("form XObject fan-out 8^8", bombs::xobject_fanout(8, 8), "/v1/render?page=1"),
        ("3 million rectangles", bombs::path_storm(3_000_000), "/v1/render?page=1"),
        ("15000x15000 inline image", bombs::huge_image(15_000, 15_000), "/v1/render?page=1"),
        ("50000 pages", bombs::many_pages(50_000, false), "/v1/extract"),
    ];
    for (name, bomb, route) in cases {
        let request = {
            let (server, route) = (server.clone(), route.to_string());
            tokio::spawn(async move {
                let start = Instant::now();
                let response = server.post(&route, bomb).await;
                let status = response.status().as_u16();
                let body: serde_json::Value = response.json().await.unwrap_or_default();
                (
                    status,
                    body["error"]["code"].as_str().unwrap_or("ok").to_string(),
                    start.elapsed(),
                )
            })
        };
        let mut worker_peak = 0f64;
        while !request.is_finished() {
            let status = server.readyz().await;
            for worker in status["engine"]["workers"].as_array().unwrap() {
                worker_peak =
                    worker_peak.max(worker["memory"]["peak_rss_bytes"].as_f64().unwrap_or(0.0));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (status, code, took) = request.await.unwrap();
        println!(
            "  {name:<26} {status} {code:<22} {:6.2} s   worker peak {:6.1} MiB   supervisor peak {:5.1} MiB",
            took.as_secs_f64(),
            worker_peak / (1024.0 * 1024.0),
            peak_rss_mib(server.pid())
        );
        server.wait_ready().await;
    }
}

/// Disconnects a client mid-render five times; prints the time until the slot is no longer busy
/// and until its new worker is ready, against the grace the slot gives a job to finish.
async fn disconnect_to_free_slot() {
    let server = Server::start(&common::flags(&["--slots", "1"], &common::ALLOW_SLOW_RENDER));
    server.wait_ready().await;
    let body = doc("pdf/gnuplot.pdf");
    let addr = server.base.trim_start_matches("http://").to_string();
    let (mut freed, mut ready) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        use std::io::Write;
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: bench\r\nContent-Length: {}\r\n\r\n",
            common::SLOW_RENDER,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        while server.readyz().await["engine"]["busy"] != 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let old = server.worker_pids().await[0];
        tokio::time::sleep(Duration::from_millis(200)).await; // well into the render
        drop(stream);
        let start = Instant::now();
        while server.readyz().await["engine"]["busy"] != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        freed.push(start.elapsed());
        loop {
            let now = server.worker_pids().await[0];
            if now.is_some() && now != old {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        ready.push(start.elapsed());
    }
    freed.sort();
    ready.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "client disconnect mid-render (1200 dpi page, default --cancel-grace-ms 100), 5 times:"
    );
    println!(
        "  slot free after: median {:.1} ms, max {:.1} ms;  new worker ready after: median {:.1} ms, max {:.1} ms",
        ms(freed[2]),
        ms(freed[4]),
        ms(ready[2]),
        ms(ready[4])
    );
}
