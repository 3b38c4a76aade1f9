//! Front benchmark: the upload flood against the real `render-pod serve` (release
//! build, default limits), then against the same service with `--front-limits false` (no upload
//! budget; queue places are still taken before the body) as the baseline of the same run:
//! 2,000 renders of a 4.7 MB PDF, 500 at a time. Half the clients ask `Expect: 100-continue`
//! (curl does for bodies over 1 MiB), half send their body at once, as most HTTP libraries do.
//! Prints the supervisor's peak RSS, the time to a 503 and how much of the upload was sent by
//! then, and `/healthz` latency during the flood, each with its ratio to the baseline. Asserts
//! nothing about time.
//!
//! Run: cargo bench -p render-pod --bench front   (FLOOD=400 for a shorter run)
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::raw::{ms, percentile};
use common::{Server, raw};
use renderpool_testkit::bombs;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Requests at once.
const AT_ONCE: usize = 500;
/// The render every request asks for (cheap: the flood is the front's, not the slots').
const ROUTE: &str = "/v1/render?page=1&dpi=36";

/// How one request went.
struct Outcome {
    status: u16,
    /// Time from the first byte written to the answer's head.
    took: Duration,
    /// Body bytes written when the answer came.
    sent: usize,
}

/// One client that sends its body without waiting to be invited.
async fn eager(addr: &str, body: Arc<Vec<u8>>) -> Outcome {
    let stream = TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST {ROUTE} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/pdf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let sent = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    write.write_all(head.as_bytes()).await.unwrap();
    let writer = {
        let sent = sent.clone();
        tokio::spawn(async move {
            for piece in body.chunks(64 << 10) {
                if write.write_all(piece).await.is_err() {
                    return;
                }
                sent.fetch_add(piece.len(), Ordering::Relaxed);
            }
        })
    };
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let status = loop {
        match read.read(&mut chunk).await {
            Ok(0) | Err(_) => break 0, // reset before an answer
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
        if buffer.windows(4).any(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer);
            break head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        }
    };
    let took = start.elapsed();
    let sent = sent.load(Ordering::Relaxed);
    // Read the rest so an admitted render completes as a client would see it.
    while matches!(read.read(&mut chunk).await, Ok(n) if n > 0) {}
    writer.abort();
    Outcome { status, took, sent }
}

/// What one flood showed.
struct Figures {
    /// Supervisor VmHWM, MiB.
    peak_mib: f64,
    /// Median time to a 503 of the clients that send at once.
    eager_503_p50: Option<Duration>,
    /// `/healthz` p99.
    healthz_p99: Duration,
}

/// Floods `server` with `total` uploads of `body`, [`AT_ONCE`] at a time, printing what it saw.
async fn flood(server: &Server, total: usize, body: &Arc<Vec<u8>>, label: &str) -> Figures {
    let ready = server.wait_ready().await;
    let budget = server.metric("renderpod_upload_budget_bytes", &[]).await;
    let addr = raw::addr(&server.base);
    println!();
    println!(
        "-- {label} (slots: {}, upload budget {}, queue {})",
        ready["engine"]["slots"],
        if budget >= i64::MAX as f64 {
            "none".to_string()
        } else {
            format!("{:.0} MiB", budget / (1 << 20) as f64)
        },
        ready["engine"]["queue_depth"]
    );
    let prober = raw::Prober::start(&addr, "/healthz", Duration::from_millis(2));
    let started = Instant::now();
    let queue = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..AT_ONCE.min(total))
        .map(|client| {
            let (addr, body, queue) = (addr.clone(), body.clone(), queue.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                while queue.fetch_add(1, Ordering::Relaxed) < total {
                    let outcome = if client % 2 == 0 {
                        let upload = raw::upload_expecting_continue(&addr, ROUTE, &body, "").await;
                        let sent = if upload.invited { body.len() } else { 0 };
                        Outcome { status: upload.answer.status, took: upload.took, sent }
                    } else {
                        eager(&addr, body.clone()).await
                    };
                    outcomes.push((client % 2 == 0, outcome));
                }
                outcomes
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for worker in workers {
        outcomes.extend(worker.await.unwrap());
    }
    let elapsed = started.elapsed();
    let latencies = prober.stop();
    let peak_mib = raw::peak_rss(server.pid()) as f64 / (1 << 20) as f64;
    let ok = outcomes.iter().filter(|(_, o)| o.status == 200).count();
    let refused = outcomes.iter().filter(|(_, o)| o.status == 503).count();
    let other = outcomes.len() - ok - refused;
    println!(
        "{total} renders of a {:.1} MB PDF, {AT_ONCE} at a time, in {:.1} s: {ok} answered 200, {refused} 503, {other} other",
        body.len() as f64 / 1e6,
        elapsed.as_secs_f64()
    );
    let mut eager_503_p50 = None;
    for (expecting, label) in [(true, "Expect: 100-continue"), (false, "body sent at once")] {
        let refusals: Vec<&Outcome> = outcomes
            .iter()
            .filter(|(e, o)| *e == expecting && o.status == 503)
            .map(|(_, o)| o)
            .collect();
        let mut times: Vec<Duration> = refusals.iter().map(|o| o.took).collect();
        times.sort();
        if times.is_empty() {
            println!("  {label}: no 503");
            continue;
        }
        let sent: usize = refusals.iter().map(|o| o.sent).sum();
        let p50 = percentile(&times, 0.5);
        if !expecting {
            eager_503_p50 = Some(p50);
        }
        println!(
            "  {label}: time to a 503 p50 {:.1} ms, p99 {:.1} ms; body sent by then {:.1}% on average",
            ms(p50),
            ms(percentile(&times, 0.99)),
            100.0 * sent as f64 / (times.len() * body.len()) as f64
        );
    }
    println!("  supervisor peak RSS (VmHWM): {peak_mib:.1} MiB");
    let healthz_p99 = percentile(&latencies, 0.99);
    println!(
        "  /healthz during the flood ({} probes): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        ms(percentile(&latencies, 0.5)),
        ms(healthz_p99),
        ms(*latencies.last().unwrap())
    );
    Figures { peak_mib, eager_503_p50, healthz_p99 }
}

fn main() {
    let total: usize = std::env::var("FLOOD").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let body = Arc::new(bombs::padded_page(4_700_000));
        println!();
        println!("== render-pod front benchmark");
        let limited = Server::start(&[]);
        let with = flood(&limited, total, &body, "default front limits").await;
        drop(limited);
        let open = Server::start(&["--front-limits", "false"]);
        let without = flood(&open, total, &body, "baseline: --front-limits false").await;
        drop(open);
        println!();
        println!("with the limits / baseline, same run:");
        println!("  supervisor peak RSS: {:.3}", with.peak_mib / without.peak_mib);
        if let (Some(on), Some(off)) = (with.eager_503_p50, without.eager_503_p50) {
            println!(
                "  time to a 503 (body sent at once), p50: {:.3}",
                on.as_secs_f64() / off.as_secs_f64()
            );
        }
        println!(
            "  /healthz p99: {:.3}",
            with.healthz_p99.as_secs_f64() / without.healthz_p99.as_secs_f64()
        );
    });
}
