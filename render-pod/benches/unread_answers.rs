//! Unread-answers benchmark: the supervisor's peak RSS while 300 clients, in waves of 10 every
//! 200 ms, send a render of a page of noise 1600 pixels wide (a 13 MB PNG) and never
//! read the answer, with the answer budget on (the default: 100 MiB) against
//! `--answer-budget off`, in rounds alternating between the two. Real `render-pod serve`
//! (release build), uploads held to 32 MiB so that what grows is the answers. What the budget
//! costs readers is the service bench's (`--bench service`). Asserts nothing.
//!
//! Run: cargo bench -p render-pod --bench unread_answers   (ROUNDS=1 for a shorter run)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Server, raw};
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
    let mut reserved_peak = 0.0f64;
    let clients = raw::unread_waves(&addr, NOISY_RENDER, &page, async || {
        reserved_peak =
            reserved_peak.max(server.metric("renderpod_answer_reserved_bytes", &[]).await);
    })
    .await;
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
    std::env::var("ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3)
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        println!();
        println!("== unread answers: 300 clients render a noisy page 1600 px wide and never read");
        for round in 0..rounds() {
            // Which runs first alternates, so a machine speeding up or slowing down favours
            // neither.
            let mut cases = [("answer budget on (default)", &[][..]), ("--answer-budget off", &["--answer-budget", "off"][..])];
            if round % 2 == 1 {
                cases.reverse();
            }
            for (title, flags) in cases {
                let run = unread_answers(flags).await;
                println!(
                    "  round {}, {title}: supervisor peak RSS {:.1} MiB; answer bytes reserved at most {:.1} MiB; \
                     {} answers refused answer_budget_exhausted ({:.1} MiB each)",
                    round + 1, run.peak_mib, run.reserved_peak_mib, run.refused, run.answer_mib
                );
            }
        }
    });
}
