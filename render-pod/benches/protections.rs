//! What the workers' sandbox and the answer budget cost, each measured where it acts: the
//! sandbox in the worker, with nothing else on its CPU; the answer budget in the supervisor's
//! path of an answer. The service bench's sections 9 and 10 measure the same two end to end,
//! through HTTP, where rounds on this VM spread wider (0.79-1.41) than the effect sought (under
//! 2%).
//!
//! 1. Rendering: PDFium and the service's PNG encoder over 40 pages of R-intro.pdf at 150 dpi,
//!    in a child process of this bench pinned to one CPU, set up as a worker is (PDFium bound,
//!    its font provider cleared, the time zone settled) and then, in one arm, the worker's sandbox
//!    entered (`engine::sandbox::enter`: the seccomp filter, NO_NEW_PRIVS, the limits); rounds
//!    alternate which arm runs first. Printed: the ratio of pages per second with / without (median
//!    and every round), and the children's CPU per page (user + system: the filter runs in the
//!    kernel, so system time is where it would show).
//! 2. The filter's price per system call: a pinned child making 2,000,000 calls with the filter
//!    and without; `read` of nothing from a pipe (the call the filter checks first) and
//!    `getrandom` of nothing (the allowed call with the highest number, checked last).
//! 3. A real worker's system calls per page, when strace is on PATH: `render-pod serve --slots 1`
//!    (sandboxed, as by default), its worker counted by `strace -c -p` while it renders the 40
//!    pages three times through `/v1/render` (reading each job from its pipe, writing each answer
//!    back). Calls per page x the dearer call of (2) / the page's time is the filter's share.
//! 4. The answer budget's price per answer: what the supervisor does with every answer frame (a
//!    reservation of its size, the frame held with it until written, both dropped) against the
//!    same frame held without a budget, 200,000 answers of 300 KB (a page PNG's size) a round,
//!    rounds alternating; plus the admission check every request makes (how much is free). Its
//!    share of a page is that price over a page's time from (1).
//!
//! Run: cargo bench -p render-pod --bench protections   (ROUNDS, default 15)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use render_pod::byte_budget::ByteBudget;
use render_pod::engine::sandbox;
use render_pod::ops::{Document, Executor, ImageFormat, Op, OpLimits, RenderSize};

/// Pages of R-intro.pdf rendered per pass, and passes per round.
const PAGES: u32 = 40;
const PASSES: u32 = 3;
/// Calls per round of section 2.
const CALLS: u32 = 2_000_000;
/// Set in a child: what it runs (`render` or `read`/`getrandom`) and whether it is sandboxed.
const CHILD: &str = "RENDERPOD_BENCH_SANDBOX_CHILD";

fn rounds() -> usize {
    std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(15)
}

/// This process's CPU time (user + system) so far: a system call the filter allows.
fn cpu_now() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
    Duration::new(u64::try_from(now.tv_sec).unwrap(), u32::try_from(now.tv_nsec).unwrap())
}

/// A child's work, set up as a worker is; prints what it measured on one line.
fn child(what: &str, sandboxed: bool) {
    render_pod::malloc::tune();
    if what == "render" {
        let bytes = renderpool_testkit::corpus::read("pdf/R-intro.pdf");
        let mut pdfium = render_pod::pdfium_lib::bind().unwrap();
        pdfium.clear_custom_font_provider();
        sandbox::settle_time_zone();
        let mut executor = Executor::new(pdfium, OpLimits::default());
        if sandboxed {
            sandbox::enter().unwrap();
        }
        let doc = Document::new(&bytes, None);
        let op = |page| Op::Render {
            page,
            size: RenderSize::Dpi(150.0),
            format: ImageFormat::Png,
            quality: None,
        };
        executor.execute(&doc, &op(1)).unwrap(); // the document opened, as a worker holds it
        let (start, cpu) = (Instant::now(), cpu_now());
        for _ in 0..PASSES {
            for page in 1..=PAGES {
                executor.execute(&doc, &op(page)).unwrap();
            }
        }
        let pages = f64::from(PASSES * PAGES);
        let rate = pages / start.elapsed().as_secs_f64();
        println!("{rate} {}", (cpu_now() - cpu).as_secs_f64() / pages);
        return;
    }
    let mut fds = [0; 2];
    // SAFETY: pipe into a local array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    if sandboxed {
        sandbox::enter().unwrap();
    }
    let mut byte = 0u8;
    let start = Instant::now();
    for _ in 0..CALLS {
        // SAFETY: reads or fills nothing (count 0) into a local.
        let rc = unsafe {
            match what {
                "read" => libc::read(fds[0], (&raw mut byte).cast(), 0),
                _ => libc::getrandom((&raw mut byte).cast(), 0, 0),
            }
        };
        assert_eq!(rc, 0);
    }
    println!("{}", start.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS));
}

/// Runs this bench again as a child doing `what`, pinned to CPU 0; its line of figures.
fn run_child(what: &str, sandboxed: bool) -> Vec<f64> {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.env(CHILD, format!("{what}:{sandboxed}")).stdout(Stdio::piped());
    pin(&mut command);
    let out = command.output().unwrap();
    assert!(out.status.success(), "{what} child (sandboxed: {sandboxed}): {:?}", out.status);
    String::from_utf8(out.stdout).unwrap().split_whitespace().map(|f| f.parse().unwrap()).collect()
}

fn pin(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: sched_setaffinity of the child itself, between fork and exec, with a local set.
    unsafe {
        command.pre_exec(|| {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// [`rounds`] pairs of `what` with and without the sandbox, alternating which goes first: each
/// pair's figures, (with, without).
fn pairs(what: &str) -> Vec<(Vec<f64>, Vec<f64>)> {
    (0..rounds())
        .map(|round| {
            if round % 2 == 0 {
                let with = run_child(what, true);
                (with, run_child(what, false))
            } else {
                let without = run_child(what, false);
                (run_child(what, true), without)
            }
        })
        .collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn listed(values: &[f64]) -> String {
    values.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>().join(", ")
}

/// Answers per round of section 4, and their size.
const ANSWERS: u32 = 200_000;
const ANSWER_BYTES: usize = 300_000;

/// Section 4, one round: ns per answer held through the budget (`budgeted`) or without it.
fn answer_round(budget: &Arc<ByteBudget>, budgeted: bool) -> f64 {
    let start = Instant::now();
    for _ in 0..ANSWERS {
        // Allocated, not filled: the same in both arms, so the difference is the budget's.
        let frame: Vec<u8> = Vec::with_capacity(ANSWER_BYTES);
        let held = if budgeted {
            let reservation = budget.reserve(ANSWER_BYTES as u64).unwrap();
            reservation.hold(frame)
        } else {
            Bytes::from(frame)
        };
        std::hint::black_box(&held);
    }
    start.elapsed().as_secs_f64() * 1e9 / f64::from(ANSWERS)
}

/// Section 4: (ns more per answer with the budget, ns per admission check).
fn answer_budget_price() -> (f64, f64) {
    let budget = ByteBudget::new(100 << 20, Gauge::default());
    let mut more = Vec::new();
    for round in 0..rounds() {
        let (with, without) = if round % 2 == 0 {
            let with = answer_round(&budget, true);
            (with, answer_round(&budget, false))
        } else {
            let without = answer_round(&budget, false);
            (answer_round(&budget, true), without)
        };
        more.push(with - without);
    }
    let start = Instant::now();
    for _ in 0..ANSWERS {
        std::hint::black_box(budget.free());
    }
    let check = start.elapsed().as_secs_f64() * 1e9 / f64::from(ANSWERS);
    (median(more), check)
}

/// Section 3: a one-slot service's worker under `strace -c -p` for `PASSES` x `PAGES` renders;
/// its system calls per page, in all and by name (most first).
async fn calls_per_page() -> Option<(f64, Vec<(String, f64)>)> {
    let server = Arc::new(common::Server::start(&["--slots", "1"]));
    server.wait_ready().await;
    let worker = *renderpool_testkit::machine::children_of(server.pid()).first()?;
    let bytes = Arc::new(renderpool_testkit::corpus::read("pdf/R-intro.pdf"));
    common::render_throughput(&server, &bytes, PAGES, 1, 1).await; // the document held
    let report = std::env::temp_dir().join(format!("renderpod-sandbox-{worker}.strace"));
    let mut strace = Command::new("strace")
        .args(["-c", "-U", "name,calls", "-o"])
        .arg(&report)
        .args(["-p", &worker.to_string()])
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    tokio::time::sleep(Duration::from_millis(500)).await; // attached
    common::render_throughput(&server, &bytes, PAGES, 1, PASSES).await;
    // SAFETY: SIGINT to the strace this bench started: it detaches and writes its counts.
    unsafe { libc::kill(i32::try_from(strace.id()).ok()?, libc::SIGINT) };
    strace.wait().ok()?;
    let text = std::fs::read_to_string(&report).ok()?;
    let _ = std::fs::remove_file(&report);
    let pages = f64::from(PASSES * PAGES);
    let mut calls: Vec<(String, f64)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (name, count) = (fields.next()?, fields.next()?.parse::<f64>().ok()?);
            (name != "total").then(|| (name.to_string(), count / pages))
        })
        .collect();
    calls.sort_by(|a, b| b.1.total_cmp(&a.1));
    Some((calls.iter().map(|(_, n)| n).sum(), calls))
}

fn main() {
    if let Some(spec) = std::env::var_os(CHILD) {
        let spec = spec.into_string().unwrap();
        let (what, sandboxed) = spec.split_once(':').unwrap();
        child(what, sandboxed == "true");
        return;
    }
    println!("workers' sandbox, in the worker alone: {} rounds, child pinned to CPU 0", rounds());
    let render = pairs("render");
    let ratio: Vec<f64> = render.iter().map(|(with, without)| with[0] / without[0]).collect();
    let cpu: Vec<f64> = render.iter().map(|(with, without)| with[1] / without[1]).collect();
    let page_ms = median(render.iter().map(|(_, without)| without[1] * 1e3).collect());
    println!(
        "1. rendering, pages per second with / without: {:.4} (rounds: {})",
        median(ratio.clone()),
        listed(&ratio)
    );
    println!(
        "   CPU per page with / without: {:.4} (rounds: {}); {page_ms:.2} ms a page without",
        median(cpu.clone()),
        listed(&cpu)
    );
    let mut cost_ns = 0.0;
    for call in ["read", "getrandom"] {
        let pairs = pairs(call);
        let with = median(pairs.iter().map(|(with, _)| with[0]).collect());
        let without = median(pairs.iter().map(|(_, without)| without[0]).collect());
        cost_ns = f64::max(cost_ns, with - without);
        println!(
            "2. {call}: {with:.1} ns a call with the filter, {without:.1} ns without: {:.1} ns more",
            with - without
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    match runtime.block_on(calls_per_page()) {
        Some((total, calls)) => {
            let top: Vec<String> =
                calls.iter().take(6).map(|(name, n)| format!("{name} {n:.1}")).collect();
            println!("3. system calls per page, sandboxed: {total:.1} ({})", top.join(", "));
            let share = total * cost_ns / (page_ms * 1e6);
            println!(
                "   the filter's share of a page: {total:.1} calls x {cost_ns:.1} ns / {page_ms:.2} ms = {:.4}%",
                share * 100.0
            );
        }
        None => println!("3. system calls per page: not counted (strace is not on PATH or failed)"),
    }
    let (more, check) = answer_budget_price();
    println!(
        "4. answer budget: {more:.1} ns more per answer held through it (median of rounds), {check:.1} ns per admission check"
    );
    println!(
        "   its share of a page: ({more:.1} + {check:.1}) ns / {page_ms:.2} ms = {:.4}%",
        (more + check) / (page_ms * 1e6) * 100.0
    );
}
