//! Slow-sender benchmark: the share of ordinary uploads admitted while one client sends the
//! largest body the budget allows at just above the rate floor, against the same uploads with
//! no slow sender, and against a service that reserves all of a declared body at once
//! (`--upload-admit-share 1`, what admission did before the share). Two ordinary clients upload
//! a 135 KB PDF to `/v1/info` one after another, starting once the slow body is admitted; rounds
//! alternate between the three cases, each as long as the slow body takes (about 19 s). Real `render-pod serve` (release build), a
//! budget of one largest body (16 MiB here, as 100 MiB of 100 by default) and a floor raised to
//! 768 KiB/s so a round fits a benchmark. Asserts nothing.
//!
//! Run: cargo bench -p render-pod --bench slow_sender   (ROUNDS=1 for a shorter run)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{FLOOR_RATE, LARGEST_BODY, ONE_LARGEST_BODY, Server, doc, pdf_of_len, raw};

/// 15% above the floor.
const SLOW_RATE: u64 = FLOOR_RATE * 115 / 100;

fn flags(share: &'static str) -> Vec<&'static str> {
    ONE_LARGEST_BODY.iter().copied().chain(["--upload-admit-share", share]).collect()
}

/// Admitted and refused ordinary uploads, and the slow body's status (`None` without one).
struct Round {
    admitted: u32,
    refused: u32,
    slow_status: Option<u16>,
}

/// Two ordinary clients upload until the slow body, admitted first, is in (or for as long as
/// it would take).
async fn round(server: &Server, largest: Option<Arc<Vec<u8>>>, ordinary: Arc<Vec<u8>>) -> Round {
    let addr = raw::addr(&server.base);
    let slow = largest.map(|body| {
        let addr = addr.clone();
        tokio::spawn(async move { raw::paced(&addr, "/v1/info", &body, SLOW_RATE).await.0 })
    });
    if slow.is_some() {
        server.wait_metric("renderpod_upload_reserved_bytes", &[], 1.0).await;
    }
    let uploaders = raw::Uploaders::start(&addr, "/v1/info", ordinary, 2);
    let slow_status = match slow {
        Some(slow) => {
            let answer = slow.await.unwrap();
            if answer.status != 200 {
                println!("  slow body refused: {} {}", answer.status, answer.code());
            }
            Some(answer.status)
        }
        None => {
            let takes = LARGEST_BODY as f64 / SLOW_RATE as f64;
            tokio::time::sleep(Duration::from_secs_f64(takes)).await;
            None
        }
    };
    let uploads = uploaders.stop().await;
    let admitted = uploads.iter().filter(|u| u.invited).count();
    Round {
        admitted: u32::try_from(admitted).unwrap(),
        refused: u32::try_from(uploads.len() - admitted).unwrap(),
        slow_status,
    }
}

#[derive(Default)]
struct Tally {
    admitted: u32,
    refused: u32,
    slow_ok: u32,
    slow_rounds: u32,
}

impl Tally {
    fn add(&mut self, round: Round) {
        self.admitted += round.admitted;
        self.refused += round.refused;
        if let Some(status) = round.slow_status {
            self.slow_rounds += 1;
            self.slow_ok += u32::from(status == 200);
        }
    }

    fn share(&self) -> f64 {
        f64::from(self.admitted) / f64::from(self.admitted + self.refused).max(1.0)
    }

    fn print(&self, name: &str) {
        let slow = if self.slow_rounds > 0 {
            format!("; slow body answered 200 in {} of {} rounds", self.slow_ok, self.slow_rounds)
        } else {
            String::new()
        };
        println!(
            "  {name}: {} of {} ordinary uploads admitted ({:.1}%){slow}",
            self.admitted,
            self.admitted + self.refused,
            self.share() * 100.0
        );
    }
}

fn main() {
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let largest = Arc::new(pdf_of_len(LARGEST_BODY));
        let ordinary = Arc::new(doc("pdf/masks.pdf"));
        println!();
        println!(
            "== slow sender: a {} MiB body at {} KiB/s beside two ordinary clients, {rounds} rounds each",
            largest.len() >> 20,
            SLOW_RATE >> 10
        );
        let shared = Server::start(&flags("0.25"));
        let whole = Server::start(&flags("1"));
        shared.wait_ready().await;
        whole.wait_ready().await;
        let (mut with_share, mut alone, mut with_whole) =
            (Tally::default(), Tally::default(), Tally::default());
        for _ in 0..rounds {
            with_share.add(round(&shared, Some(largest.clone()), ordinary.clone()).await);
            alone.add(round(&shared, None, ordinary.clone()).await);
            with_whole.add(round(&whole, Some(largest.clone()), ordinary.clone()).await);
        }
        alone.print("no slow sender");
        with_share.print("slow sender, --upload-admit-share 0.25 (default)");
        with_whole.print("slow sender, --upload-admit-share 1 (all declared at once)");
        println!(
            "admitted share during a slow sender / without one: {:.3} (default share), {:.3} (whole)",
            with_share.share() / alone.share().max(f64::MIN_POSITIVE),
            with_whole.share() / alone.share().max(f64::MIN_POSITIVE)
        );
    });
}
