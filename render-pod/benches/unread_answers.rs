//! Unread-answers benchmark: the supervisor's peak RSS while 300 clients, in waves of 10 every
//! 200 ms, send a render of a page of noise 1600 pixels wide (a 13 MB PNG) and never
//! read the answer, with the answer budget on (the default: 100 MiB) against
//! `--answer-budget off`; and what the budget costs on the service bench's path (150 dpi PNG
//! renders of R-intro.pdf, two clients per slot, every answer read), rounds alternating
//! between the two services, ratio printed. Real `render-pod serve` (release build), uploads
//! held to 32 MiB so that what grows is the answers. Asserts nothing.
//!
//! Run: cargo bench -p render-pod --bench unread_answers   (ROUNDS=3 for a shorter run)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Server, doc, raw};
use renderpool_testkit::bombs;

const MIB: f64 = (1u64 << 20) as f64;
const NOISY_RENDER: &str = "/v1/render?page=1&width=1600";
const UPLOADS: [&str; 2] = ["--upload-budget", "32Mi"];

/// What one run of unread clients left behind.
struct Unread {
    answer_mib: f64,
    peak_mib: f64,
    reserved_peak_mib: f64,
    refused: f64,
}

/// 300 clients that never read, against a fresh service started with `flags`.
async fn unread_answers(flags: &[&str]) -> Unread {
    let server = Server::start(&common::flags(&UPLOADS, flags));
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let page = Arc::new(bombs::noise_pages(1, 1600, 128));
    let first = server.post(NOISY_RENDER, page.to_vec()).await;
    let answer_mib = first.bytes().await.unwrap().len() as f64 / MIB;
    let mut clients = Vec::new();
    let mut reserved_peak = 0.0f64;
    for _ in 0..30 {
        let wave: Vec<_> = (0..10)
            .map(|_| {
                let (addr, page) = (addr.clone(), page.clone());
                tokio::spawn(async move { raw::unread(&addr, NOISY_RENDER, &page, "").await })
            })
            .collect();
        for client in wave {
            clients.push(client.await.unwrap());
        }
        reserved_peak =
            reserved_peak.max(server.metric("renderpod_answer_reserved_bytes", &[]).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The renders still queued come out meanwhile.
    tokio::time::sleep(Duration::from_secs(3)).await;
    reserved_peak = reserved_peak.max(server.metric("renderpod_answer_reserved_bytes", &[]).await);
    let text = server.metrics_text().await;
    // No series until an answer is refused (never, without the budget).
    let refused = renderpool_testkit::metrics::value(
        &text,
        "renderpod_rejections_total",
        &["reason=\"answer_budget\""],
    )
    .unwrap_or(0.0);
    let peak_mib = raw::peak_rss(server.pid()) as f64 / MIB;
    drop(clients);
    Unread { answer_mib, peak_mib, reserved_peak_mib: reserved_peak / MIB, refused }
}

fn rounds() -> usize {
    std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(5)
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        println!();
        println!("== unread answers: 300 clients render a noisy page 1600 px wide and never read");
        for (title, flags) in
            [("answer budget on (default)", &[][..]), ("--answer-budget off", &["--answer-budget", "off"][..])]
        {
            let run = unread_answers(flags).await;
            println!(
                "  {title}: supervisor peak RSS {:.1} MiB; answer bytes reserved at most {:.1} MiB; \
                 {} answers refused answer_budget_exhausted ({:.1} MiB each)",
                run.peak_mib, run.reserved_peak_mib, run.refused, run.answer_mib
            );
        }

        let flags = ["--queue-depth", "8", "--job-deadline-ms", "120000"];
        let on = Arc::new(Server::start(&flags));
        let slots = on.wait_ready().await["engine"]["slots"].as_u64().unwrap() as usize;
        let off_flags = common::flags(&flags, &["--answer-budget", "off"]);
        let off = Arc::new(Server::start(&off_flags));
        off.wait_ready().await;
        let bytes = Arc::new(doc("pdf/R-intro.pdf"));
        let clients = 2 * slots;
        // Warm every worker's document on both.
        common::render_throughput(&on, &bytes, 40, clients, 1).await;
        common::render_throughput(&off, &bytes, 40, clients, 1).await;
        let mut ratios = Vec::new();
        for round in 0..rounds() {
            // Which runs first alternates, so a machine speeding up or slowing down favours
            // neither.
            let (with, without) = if round % 2 == 0 {
                let with = common::render_throughput(&on, &bytes, 40, clients, 2).await;
                (with, common::render_throughput(&off, &bytes, 40, clients, 2).await)
            } else {
                let without = common::render_throughput(&off, &bytes, 40, clients, 2).await;
                (common::render_throughput(&on, &bytes, 40, clients, 2).await, without)
            };
            ratios.push((with / without, with, without));
        }
        ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
        let median = ratios[ratios.len() / 2];
        println!(
            "answer budget's cost, 150 dpi PNG renders of R-intro.pdf pages 1-40, {clients} clients, {slots} slot(s):"
        );
        println!(
            "  throughput ratio on / off: {:.3}  ({:.1} against {:.1} pages/s; goal: cost under 2%; rounds: {})",
            median.0,
            median.1,
            median.2,
            ratios.iter().map(|r| format!("{:.3}", r.0)).collect::<Vec<_>>().join(", ")
        );
    });
}
