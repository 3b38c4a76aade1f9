//! Viewer benchmark: a viewer pages through one 5 MB document, 50 pages in order on one keep-alive
//! connection, against the real `render-pod serve` (release build, default flags):
//!
//! - **upload**: the whole document with every page, as a client without digests does;
//! - **digest**: the document named by `Repr-Digest` (SHA-256), sent once (the first page), then
//!   every page with no body;
//! - **expect**: the same header with `Expect: 100-continue` and the body declared every time:
//!   the pod asks for it once, then answers at once (and closes the connection, so this client
//!   reconnects for each page).
//!
//! Rounds alternate between the three; each digest round pages through a document the pod has
//! never seen (a fresh padding). Prints pages per second, the bytes the pod received per page,
//! and the front's (the supervisor's) CPU per page, each with its ratio to the upload round.
//! Asserts nothing about time.
//!
//! The document: R-intro.pdf (113 pages, 0.6 MB) with 4.4 MB of noise appended as an incremental
//! update nothing refers to, so PDFium reads the same pages from a 5 MB file.
//!
//! Run: cargo bench -p render-pod --bench viewer
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::raw::{self, KeepAlive, process_cpu};
use common::{Server, doc};
use renderpool_testkit::machine::load_average;
use sha2::{Digest, Sha256};

/// Pages shown per round, in order.
const PAGES: u32 = 50;
/// The document's size.
const DOCUMENT_BYTES: usize = 5_000_000;
/// Rounds of each way.
const ROUNDS: usize = 3;
/// What the viewer asks for each page.
fn page_path(page: u32) -> String {
    format!("/v1/render?page={page}&dpi=100")
}

/// `pdf` grown to `len` bytes by an incremental update: an object of noise (seeded by `seed`)
/// nothing refers to, and a cross-reference stream for it whose `/Prev` is the file's own.
fn padded(pdf: &[u8], len: usize, seed: u64) -> Vec<u8> {
    let text = String::from_utf8_lossy(pdf);
    let tail = &text[text.rfind("startxref").unwrap()..];
    let prev: usize = tail.split_whitespace().nth(1).unwrap().parse().unwrap();
    let xref = String::from_utf8_lossy(&pdf[prev..(prev + 1024).min(pdf.len())]);
    let field = |name: &str| {
        let at = xref.find(name).unwrap() + name.len();
        xref[at..].split('/').next().unwrap().trim().to_string()
    };
    let (size, root): (usize, String) = (field("/Size ").parse().unwrap(), field("/Root "));
    let mut out = pdf.to_vec();
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    let head = format!("{size} 0 obj\n<< /Length PAD >>\nstream\n");
    let overhead = head.len() + 400;
    let pad = len.saturating_sub(out.len() + overhead);
    let noise_at = out.len();
    out.extend_from_slice(head.replace("PAD", &pad.to_string()).as_bytes());
    let mut state = seed | 1;
    out.extend((0..pad).map(|_| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u8
    }));
    out.extend_from_slice(b"\nendstream\nendobj\n");
    let xref_at = out.len();
    let entry = |offset: usize| {
        let mut e = vec![1u8];
        e.extend_from_slice(&u32::try_from(offset).unwrap().to_be_bytes());
        e.push(0);
        e
    };
    let entries = [entry(noise_at), entry(xref_at)].concat();
    out.extend_from_slice(
        format!(
            "{} 0 obj\n<< /Type /XRef /Size {} /Index [{size} 2] /W [1 4 1] /Root {root} /Prev {prev} /Length {} >>\nstream\n",
            size + 1,
            size + 2,
            entries.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&entries);
    out.extend_from_slice(format!("\nendstream\nendobj\nstartxref\n{xref_at}\n%%EOF\n").as_bytes());
    out
}

/// How the viewer sends each page's request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Upload,
    Digest,
    Expect,
}

/// One round's figures.
struct Round {
    pages_per_sec: f64,
    /// Document bytes the pod received (its `renderpod_bytes_in`), per page.
    received: f64,
    /// Bytes this client wrote (heads and bodies), per page.
    sent: f64,
    /// Supervisor CPU per page.
    front: Duration,
}

async fn bytes_in(server: &Server) -> f64 {
    server.metric("renderpod_bytes_in_total", &[]).await
}

async fn round(server: &Server, way: Way, document: &[u8]) -> Round {
    let addr = raw::addr(&server.base);
    let digest =
        format!("Repr-Digest: sha-256=:{}:\r\n", STANDARD.encode(Sha256::digest(document)));
    let (received_before, cpu_before) = (bytes_in(server).await, process_cpu(server.pid()));
    let start = Instant::now();
    let mut sent = 0usize;
    let mut viewer = KeepAlive::connect(&addr).await;
    for page in 1..=PAGES {
        let path = page_path(page);
        let answer = match way {
            Way::Upload => viewer.post(&path, "", document, false).await,
            Way::Digest => match viewer.post(&path, &digest, &[], false).await {
                Some((refused, _)) if refused.status == 412 => {
                    viewer.post(&path, &digest, document, false).await
                }
                other => other,
            },
            Way::Expect => {
                let mut fresh = KeepAlive::connect(&addr).await;
                let answer = fresh.post(&path, &digest, document, true).await;
                sent += fresh.sent;
                answer
            }
        };
        let (answer, _) = answer.expect("an answer");
        assert_eq!(
            answer.status,
            200,
            "{way:?} page {page}: {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    let elapsed = start.elapsed();
    sent += viewer.sent;
    let pages = f64::from(PAGES);
    Round {
        pages_per_sec: pages / elapsed.as_secs_f64(),
        received: (bytes_in(server).await - received_before) / pages,
        sent: sent as f64 / pages,
        front: (process_cpu(server.pid()) - cpu_before) / PAGES,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let manual = doc("pdf/R-intro.pdf");
        let server = Server::start(&[]);
        let ready = server.wait_ready().await;
        println!();
        println!(
            "== viewer: {PAGES} pages of a {:.1} MB document in order on one connection, 100 dpi PNG ({} slots; load average {})",
            DOCUMENT_BYTES as f64 / 1e6,
            ready["engine"]["slots"],
            load_average()
        );
        // Warm the workers on the document once.
        let warm = padded(&manual, DOCUMENT_BYTES, 1);
        round(&server, Way::Upload, &warm).await;
        let mut rounds: Vec<(Way, Round)> = Vec::new();
        for r in 0..ROUNDS {
            // Which goes first turns, so a machine speeding up or slowing down favours none.
            let mut order = [Way::Upload, Way::Digest, Way::Expect];
            order.rotate_left(r % 3);
            for way in order {
                // A document the pod has not seen for every round of the digest ways.
                let document = padded(&manual, DOCUMENT_BYTES, 100 + r as u64 * 3 + way as u64);
                rounds.push((way, round(&server, way, &document).await));
            }
        }
        let of = |way: Way, f: &dyn Fn(&Round) -> f64| {
            median(rounds.iter().filter(|(w, _)| *w == way).map(|(_, r)| f(r)).collect())
        };
        let base_rate = of(Way::Upload, &|r| r.pages_per_sec);
        let base_front = of(Way::Upload, &|r| r.front.as_secs_f64());
        println!(
            "{:<44} {:>9} {:>8} {:>14} {:>12} {:>13} {:>8}",
            "way (median of rounds)", "pages/s", "x upload", "received/page", "sent/page", "front CPU/page", "x upload"
        );
        for (way, name) in [
            (Way::Upload, "upload: the document with every page"),
            (Way::Digest, "digest: Repr-Digest, sent once, then no body"),
            (Way::Expect, "expect: Repr-Digest + Expect: 100-continue"),
        ] {
            let rate = of(way, &|r| r.pages_per_sec);
            let front = of(way, &|r| r.front.as_secs_f64());
            println!(
                "{name:<44} {rate:>9.1} {:>8.2} {:>12.0} B {:>10.0} B {:>10.3} ms {:>8.2}",
                rate / base_rate,
                of(way, &|r| r.received),
                of(way, &|r| r.sent),
                front * 1e3,
                front / base_front,
            );
        }
        println!(
            "rounds (pages/s): {}",
            rounds
                .iter()
                .map(|(way, r)| format!("{way:?} {:.1}", r.pages_per_sec))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("load average afterwards {}", load_average());
    });
}
