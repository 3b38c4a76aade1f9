//! Admission that is fair to slow senders, against the real service: one client sending the
//! largest body the budget allows at just above the rate floor does not keep other uploads
//! out while it sends, and still completes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use common::{Server, doc, raw};
use renderpool_testkit::bombs;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sender_of_the_largest_body_leaves_room_for_everyone_else_and_completes() {
    // The budget holds one largest body, as by default (there: 100 MiB of each); the floor is
    // raised so that a body of the whole budget at the floor arrives within a test's time.
    let server = Arc::new(Server::start(&[
        "--slots",
        "1",
        "--upload-budget",
        "16Mi",
        "--max-body-bytes",
        "16Mi",
        "--body-min-rate",
        "768Ki",
        "--job-deadline-ms",
        "60000",
    ]));
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    // The largest body accepted, sent 15% above the floor: about 19 s.
    let limit = usize::try_from(16 * MIB).unwrap();
    let overhead = bombs::padded_page(limit - 4096).len() - (limit - 4096);
    let largest = Arc::new(bombs::padded_page(limit - overhead));
    assert_eq!(largest.len(), limit);
    let rate = 768 * KIB * 115 / 100;
    let slow = {
        let (addr, largest) = (addr.clone(), largest.clone());
        tokio::spawn(async move { raw::paced(&addr, "/v1/info", &largest, rate).await })
    };
    // Admitted, it holds a quarter of the budget (--upload-admit-share), not all it declared.
    server.wait_metric_at("renderpod_upload_reserved_bytes", &[], (4 * MIB) as f64).await;

    // Two ordinary clients upload a 135 KB document one after another while it sends.
    let ordinary = Arc::new(doc("pdf/masks.pdf"));
    let sending = Arc::new(AtomicBool::new(true));
    let (admitted, refused) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (addr, ordinary, sending) = (addr.clone(), ordinary.clone(), sending.clone());
            let (admitted, refused) = (admitted.clone(), refused.clone());
            tokio::spawn(async move {
                while sending.load(Ordering::Relaxed) {
                    let upload =
                        raw::upload_expecting_continue(&addr, "/v1/info", &ordinary, "").await;
                    if !sending.load(Ordering::Relaxed) {
                        break;
                    }
                    if upload.invited {
                        assert_eq!(upload.answer.status, 200, "{:?}", upload.answer);
                        admitted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        assert_eq!(
                            (upload.answer.status, upload.answer.code().as_str()),
                            (503, "upload_budget_exhausted"),
                            "{:?}",
                            upload.answer
                        );
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        })
        .collect();
    let (answer, took) = slow.await.unwrap();
    sending.store(false, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    let (admitted, refused) = (admitted.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    let share = f64::from(admitted) / f64::from(admitted + refused).max(1.0);
    println!(
        "a {:.1} MiB body at {} KiB/s took {:.1} s; meanwhile {admitted} of {} ordinary uploads admitted ({:.1}%)",
        largest.len() as f64 / MIB as f64,
        rate / KIB,
        took.as_secs_f64(),
        admitted + refused,
        share * 100.0
    );
    assert_eq!(answer.status, 200, "the slow upload failed: {answer:?}");
    let info: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(info["page_count"], 1, "{info}");
    assert!(admitted + refused >= 50, "too few ordinary uploads to judge: {admitted} + {refused}");
    assert!(share >= 0.95, "only {admitted} of {} ordinary uploads admitted", admitted + refused);
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
}
