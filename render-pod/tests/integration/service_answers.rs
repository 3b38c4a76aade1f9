//! Answers are budgeted too, against the real service: large answers nobody reads fill the
//! answer budget and no more (in a pod-sized memory cgroup the supervisor stays within its
//! share and nothing is OOM-killed; answers past the budget are refused 503
//! answer_budget_exhausted with Retry-After; clients that read are served); once they leave
//! less than a sixteenth of it, new work is refused before its body is read; a client that
//! stops reading is cut off after the write timeout, one that reads a trickle for its rate, and
//! their answers' bytes are given back; a streamed filmstrip whose client stops reading holds
//! answer bytes, not the uploads' room.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    Group, LARGEST_BODY, ONE_LARGEST_BODY, ServeIn, Server, TWO_SLOT_POD_MEMORY, doc, raw,
};
use renderpool_testkit::bombs;
use renderpool_testkit::wait;

const MIB: u64 = 1 << 20;

/// A page of noise rendered 1600 pixels wide: a 13 MB PNG from a 614 KB upload.
const NOISY_RENDER: &str = "/v1/render?page=1&width=1600";

/// One page of noise (see [`NOISY_RENDER`]).
fn noisy_page() -> Vec<u8> {
    bombs::noise_pages(1, 1600, 128)
}

/// The resident memory (`VmRSS`) of `pid` now, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_answers_fill_the_answer_budget_and_no_more_in_a_pod_sized_group() {
    // A pod of two 384 MiB slots beside the supervisor's 296 MiB: 100 MiB of it for answers
    // (the default), uploads held to 32 MiB so that what is measured is the answers. A queue
    // of 16 with time enough to work it off, so that renders for unread clients keep coming
    // while the first ones are held (for the default write timeout, 30 s).
    let Some(group) = Group::memory("renderpool-answers", TWO_SLOT_POD_MEMORY) else {
        return;
    };
    let flags = [
        "--memory-per-slot",
        "384Mi",
        "--upload-budget",
        "32Mi",
        "--queue-depth",
        "16",
        "--job-deadline-ms",
        "60000",
    ];
    let server = Arc::new(group.serve(&flags));
    let ready = server.wait_ready().await;
    assert_eq!(ready["plan"]["slots"], 2, "{}", ready["plan"]);
    let share = 296 * MIB;
    let budget = server.metric("renderpod_answer_budget_bytes", &[]).await;
    assert_eq!(budget, (100 * MIB) as f64);
    let supervisor = server.pid();
    let addr = raw::addr(&server.base);
    let page = Arc::new(noisy_page());
    // What one answer weighs, read by a client that reads.
    let first = server.post(NOISY_RENDER, page.to_vec()).await;
    assert_eq!(first.status(), 200);
    let answer_len = first.bytes().await.unwrap().len() as u64;
    assert!(answer_len > 10 * MIB, "a noisy page is a large answer: {answer_len} bytes");

    // Waves of clients that send the render and never read, 300 in all, while the supervisor's
    // memory is sampled.
    let mut peak = 0;
    let mut reserved_peak = 0.0f64;
    let unread_clients = raw::unread_waves(&addr, NOISY_RENDER, &page, async || {
        peak = peak.max(rss(supervisor));
        reserved_peak =
            reserved_peak.max(server.metric("renderpod_answer_reserved_bytes", &[]).await);
    })
    .await;
    // The renders queued for them come out and are held, until the first of these clients is
    // cut off (the write timeout, 30 s after its answer stalled); sampled all along.
    let give_up = std::time::Instant::now() + Duration::from_secs(120);
    while server.metric("renderpod_write_timeouts_total", &[]).await < 1.0 {
        assert!(std::time::Instant::now() < give_up, "no client was cut off");
        peak = peak.max(rss(supervisor));
        reserved_peak =
            reserved_peak.max(server.metric("renderpod_answer_reserved_bytes", &[]).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The budget filled, and answers past it were dropped, not held.
    assert!(reserved_peak > budget / 2.0, "the budget never filled: {reserved_peak}");
    let refused = server.metric("renderpod_rejections_total", &["reason=\"answer_budget\""]).await;
    assert!(refused >= 1.0);
    // A client that reads, meanwhile: refused with Retry-After while the budget is full, or
    // served.
    let reader = server.post(NOISY_RENDER, page.to_vec()).await;
    let status = reader.status().as_u16();
    if status == 503 {
        assert!(reader.headers().contains_key("retry-after"));
        let (_, code) = common::error_code(reader).await;
        assert!(
            [
                "answer_budget_exhausted",
                "overloaded",
                "would_miss_deadline",
                "upload_budget_exhausted"
            ]
            .contains(&code.as_str()),
            "{code}"
        );
    } else {
        assert_eq!(status, 200);
    }
    peak = peak.max(rss(supervisor));
    let hwm = raw::peak_rss(supervisor);
    println!(
        "{} unread renders of {:.1} MiB answers: {refused} refused answer_budget_exhausted; answer bytes reserved at most {:.1} MiB of {:.0}; supervisor RSS at most {:.1} MiB sampled, VmHWM {:.1} MiB (share {} MiB)",
        unread_clients.len(),
        answer_len as f64 / MIB as f64,
        reserved_peak / MIB as f64,
        budget / MIB as f64,
        peak as f64 / MIB as f64,
        hwm as f64 / MIB as f64,
        share / MIB
    );
    assert!(reserved_peak <= budget, "reserved {reserved_peak} of {budget}");
    assert!(hwm <= share, "the supervisor grew to {} MiB, past its share", hwm / MIB);

    // The clients that stopped reading are cut off after the write timeout, and every reserved
    // byte comes back (the renders still queued for them come out, are held and are cut off in
    // turn); then readers are served.
    wait::until("every answer byte given back", Duration::from_secs(120), || async {
        let held = server.metric("renderpod_answer_reserved_bytes", &[]).await;
        if held == 0.0 { Ok(()) } else { Err(held) }
    })
    .await;
    drop(unread_clients);
    for _ in 0..3 {
        let served = server.post_honouring_retry_after(NOISY_RENDER, page.to_vec()).await;
        assert_eq!(served.status(), 200);
        assert_eq!(served.bytes().await.unwrap().len() as u64, answer_len);
    }
    assert_eq!(group.oom_kills(), 0, "the kernel's OOM killer fired");
    assert_eq!(group.read("memory.oom_control", Some("under_oom ")), 0);
    assert_eq!(server.pid(), supervisor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off_and_its_answer_given_back() {
    let server = Server::start(&["--slots", "1", "--write-timeout-ms", "1500"]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let page = noisy_page();
    let mut stalled = raw::unread(&addr, NOISY_RENDER, &page, "").await;
    // Its answer is read from the worker and held for it...
    let held = server.wait_metric("renderpod_answer_reserved_bytes", &[], (10 * MIB) as f64).await;
    // ...until the write timeout cuts it off; then it is given back.
    server.wait_metric("renderpod_write_timeouts_total", &[], 1.0).await;
    server.wait_metric_at("renderpod_answer_reserved_bytes", &[], 0.0).await;
    // What the client can still read is what the kernel had taken, then the end: not the
    // whole answer.
    let mut buffer = Vec::new();
    let mut answer = raw::read_head(&mut stalled, &mut buffer).await.expect("a head was sent");
    assert_eq!(answer.status, 200);
    let declared: u64 = answer.header("content-length").unwrap().parse().unwrap();
    raw::read_body(&mut stalled, &mut buffer, &mut answer).await;
    assert!(
        (answer.body.len() as u64) < declared,
        "{} of {declared} bytes arrived",
        answer.body.len()
    );
    assert!(held >= (10 * MIB) as f64);
    // The slot and the pod carry on.
    let next = server.post(NOISY_RENDER, page).await;
    assert_eq!(next.status(), 200);
    assert_eq!(next.bytes().await.unwrap().len() as u64, declared);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_filmstrip_holds_answer_bytes_not_the_uploads_room() {
    // The upload budget holds one largest body (16 MiB); the filmstrip's document is nearly
    // that. The answer budget has room for it and its lines.
    let flags = common::flags(&ONE_LARGEST_BODY, &["--answer-budget", "48Mi"]);
    let server = Server::start(&flags);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    // 60 pages of one 2364 x 2364 noise image: within 64 KiB of the whole budget, so that an
    // ordinary upload fits only if the filmstrip's bytes are not counted against it.
    let strip = bombs::noise_pages(60, 2364, 2364);
    assert!(strip.len() <= LARGEST_BODY && strip.len() > LARGEST_BODY - (64 << 10));
    let stalled =
        raw::unread(&addr, "/v1/thumbnails?width=300", &strip, "Accept: application/x-ndjson\r\n")
            .await;
    // The stream is under way (pages rendered), then stalls: its client reads nothing.
    server.wait_metric("renderpod_jobs_total", &["op=\"render\"", "outcome=\"ok\""], 3.0).await;
    // Meanwhile ordinary uploads are admitted.
    let uploaders = raw::Uploaders::start(&addr, "/v1/info", Arc::new(doc("pdf/masks.pdf")), 2);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let uploads = uploaders.stop().await;
    let admitted = uploads.iter().filter(|u| u.invited && u.answer.status == 200).count();
    println!(
        "a stalled filmstrip of a {:.1} MiB upload: {admitted} of {} ordinary uploads admitted",
        strip.len() as f64 / MIB as f64,
        uploads.len()
    );
    assert!(uploads.len() >= 20, "too few uploads to judge: {}", uploads.len());
    assert_eq!(admitted, uploads.len(), "{:?}", uploads.iter().find(|u| !u.invited));
    // The filmstrip is still held, its document in the answer budget, not the uploads'.
    assert!(server.metric("renderpod_answer_reserved_bytes", &[]).await >= strip.len() as f64);
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
    drop(stalled);
    server.wait_metric_at("renderpod_answer_reserved_bytes", &[], 0.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_answers_that_fill_the_budget_refuse_new_work_before_its_body_is_read() {
    // What one answer weighs, on a service with room for it.
    let page = noisy_page();
    let answer_len = {
        let server = Server::start(&["--slots", "1"]);
        server.wait_ready().await;
        let first = server.post(NOISY_RENDER, page.clone()).await;
        assert_eq!(first.status(), 200);
        first.bytes().await.unwrap().len() as u64
    };
    // A budget that one unread answer fills to within a 32nd of it: less than a 16th is left.
    let budget = (answer_len + answer_len / 32).to_string();
    let server = Server::start(&["--slots", "1", "--answer-budget", &budget]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let stalled = raw::unread(&addr, NOISY_RENDER, &page, "").await;
    server.wait_metric("renderpod_answer_reserved_bytes", &[], answer_len as f64).await;
    let bytes_in = server.metric("renderpod_bytes_in_total", &[]).await;
    let ordinary = doc("pdf/masks.pdf");
    let refused = raw::upload_expecting_continue(&addr, "/v1/info", &ordinary, "").await;
    assert!(!refused.invited, "its body was asked for");
    assert_eq!(refused.answer.status, 503);
    assert_eq!(refused.answer.code(), "answer_budget_exhausted", "{:?}", refused.answer);
    assert!(refused.answer.header("retry-after").is_some());
    assert!(String::from_utf8_lossy(&refused.answer.body).contains("bytes free"));
    assert_eq!(server.metric("renderpod_bytes_in_total", &[]).await, bytes_in, "a body was read");
    let rejected = server.metric("renderpod_rejections_total", &["reason=\"answer_budget\""]).await;
    assert_eq!(rejected, 1.0);
    // Once the stalled client is gone, its bytes come back and new work is taken again.
    drop(stalled);
    server.wait_metric_at("renderpod_answer_reserved_bytes", &[], 0.0).await;
    let served = raw::upload_expecting_continue(&addr, "/v1/info", &ordinary, "").await;
    assert!(served.invited);
    assert_eq!(served.answer.status, 200, "{:?}", served.answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_a_trickle_is_cut_off_for_its_rate_though_each_write_progresses() {
    // Writes may wait 10 s each, and a spell of them must average 1 MiB/s after its first
    // 10 s. The client reads 256 KiB/s: the kernel wakes the server's blocked write each time
    // about 1.4 MB of its send buffer is free (every 5.5 s or so), so no write waits near
    // 10 s, yet the answer (13 MB, 50 s at that rate) is cut off for its rate.
    let flags = ["--slots", "1", "--write-timeout-ms", "10000", "--write-min-rate", "1Mi"];
    let server = Server::start(&flags);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let page = noisy_page();
    let mut trickle = raw::unread(&addr, NOISY_RENDER, &page, "").await;
    let (answer, took) = raw::read_paced(&mut trickle, 256 << 10).await;
    assert_eq!(answer.status, 200);
    let declared: usize = answer.header("content-length").unwrap().parse().unwrap();
    // The end arrives after what the kernel's buffers held when the server cut it off.
    println!(
        "a reader of 256 KiB/s: its end after {:.1} s, {:.1} of {:.1} MiB read",
        took.as_secs_f64(),
        answer.body.len() as f64 / MIB as f64,
        declared as f64 / MIB as f64
    );
    assert!(answer.body.len() < declared, "the whole answer arrived");
    assert_eq!(server.metric("renderpod_write_too_slow_total", &[]).await, 1.0);
    assert_eq!(server.metric("renderpod_write_timeouts_total", &[]).await, 0.0, "a timeout cut it");
    server.wait_metric_at("renderpod_answer_reserved_bytes", &[], 0.0).await;
    // A client that reads at its own pace is served the whole answer.
    let next = server.post(NOISY_RENDER, page).await;
    assert_eq!(next.status(), 200);
    assert_eq!(next.bytes().await.unwrap().len(), declared);
}
