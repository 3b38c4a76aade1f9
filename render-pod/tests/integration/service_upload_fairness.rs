//! Admission that is fair to slow senders, against the real service: one client sending the
//! largest body the budget allows at just above the rate floor does not keep other uploads
//! out while it sends, and still completes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use common::{FLOOR_RATE, LARGEST_BODY, ONE_LARGEST_BODY, Server, doc, pdf_of_len, raw};

const MIB: u64 = 1 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sender_of_the_largest_body_leaves_room_for_everyone_else_and_completes() {
    let server = Server::start(&ONE_LARGEST_BODY);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    // The largest body accepted, the whole budget, sent 15% above the floor: about 19 s.
    let largest = Arc::new(pdf_of_len(LARGEST_BODY));
    let rate = FLOOR_RATE * 115 / 100;
    let slow = {
        let (addr, largest) = (addr.clone(), largest.clone());
        tokio::spawn(async move { raw::paced(&addr, "/v1/info", &largest, rate).await })
    };
    // Admitted, it holds a quarter of the budget (--upload-admit-share), not all it declared.
    server.wait_metric_at("renderpod_upload_reserved_bytes", &[], (4 * MIB) as f64).await;
    // Two ordinary clients upload a 135 KB document one after another while it sends.
    let uploaders = raw::Uploaders::start(&addr, "/v1/info", Arc::new(doc("pdf/masks.pdf")), 2);
    let (answer, took) = slow.await.unwrap();
    let uploads = uploaders.stop().await;
    let mut admitted = 0;
    for upload in &uploads {
        if upload.invited {
            assert_eq!(upload.answer.status, 200, "{:?}", upload.answer);
            admitted += 1;
        } else {
            let refusal = (upload.answer.status, upload.answer.code());
            assert_eq!(refusal, (503, "upload_budget_exhausted".into()), "{:?}", upload.answer);
        }
    }
    let share = f64::from(admitted) / uploads.len().max(1) as f64;
    println!(
        "a {:.1} MiB body at {} KiB/s took {:.1} s; meanwhile {admitted} of {} ordinary uploads admitted ({:.1}%)",
        largest.len() as f64 / MIB as f64,
        rate >> 10,
        took.as_secs_f64(),
        uploads.len(),
        share * 100.0
    );
    assert_eq!(answer.status, 200, "the slow upload failed: {answer:?}");
    let info: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(info["page_count"], 1, "{info}");
    assert!(uploads.len() >= 50, "too few ordinary uploads to judge: {}", uploads.len());
    assert!(share >= 0.95, "only {admitted} of {} ordinary uploads admitted", uploads.len());
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
}
