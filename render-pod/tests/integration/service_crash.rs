//! Workers dying mid-job (SIGKILL, SIGSEGV), deadlines, poison pills and overload, against the
//! real service and real PDFium. The slow job is a 1200 dpi render of a gnuplot page (seconds).
//! A worker killed from outside is not the document's fault: one strike, not a quarantine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{ALLOW_SLOW_RENDER, SLOW_RENDER, Server, doc, error_code, flags, kill};
use renderpool_testkit::wait;

/// Waits until some worker is busy; returns its pid.
async fn busy_worker(server: &Server) -> u64 {
    wait::until("a busy worker", Duration::from_secs(20), || async {
        let workers = server.readyz().await["engine"]["workers"].clone();
        let busy = workers.as_array().unwrap().iter().find(|w| w["busy"] == true);
        busy.and_then(|w| w["pid"].as_u64()).ok_or(workers)
    })
    .await
}

/// Waits until every slot is alive again without `gone` among the workers.
async fn replaced(server: &Server, gone: u64) -> Vec<u64> {
    let what = format!("every slot alive without worker {gone}");
    wait::until(&what, Duration::from_secs(20), || async {
        let pids = server.worker_pids().await;
        if pids.iter().all(|p| p.is_some_and(|p| p != gone)) {
            Ok(pids.into_iter().flatten().collect())
        } else {
            Err(pids)
        }
    })
    .await
}

/// Starts the slow render on a two-slot server and waits until its worker is busy.
async fn slow_job(
    server: &std::sync::Arc<Server>,
) -> (tokio::task::JoinHandle<reqwest::Response>, u64) {
    let slow = {
        let server = server.clone();
        tokio::spawn(async move { server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await })
    };
    (slow, busy_worker(server).await)
}

fn two_slots() -> std::sync::Arc<Server> {
    std::sync::Arc::new(Server::start(&flags(&["--slots", "2"], &ALLOW_SLOW_RENDER)))
}

async fn killed_mid_job(signal: i32, signal_name: &str) {
    let server = two_slots();
    server.wait_ready().await;
    let (slow, victim) = slow_job(&server).await;
    // Work on the other slot runs while the victim is busy and after it dies.
    let others: Vec<_> = (0..4)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(
                async move { server.post("/v1/info", doc("pdf/libtasn1.pdf")).await.status() },
            )
        })
        .collect();
    kill(victim, signal);
    let (status, code) = error_code(slow.await.unwrap()).await;
    assert_eq!((status, code.as_str()), (502, "worker_crashed"));
    for other in others {
        assert_eq!(other.await.unwrap(), 200);
    }
    let pids = replaced(&server, victim).await;
    assert_eq!(pids.len(), 2);
    assert_eq!(server.metric("renderpod_worker_restarts_total", &["reason=\"killed\""]).await, 1.0);
    assert_eq!(server.metric("renderpod_worker_restarts_total", &["reason=\"crash\""]).await, 0.0);
    assert!(
        server.logs().iter().any(|l| l.contains(signal_name)),
        "the crash log names {signal_name}"
    );
    // The document did nothing wrong: it is served again at once.
    let again = server.post("/v1/render?page=1&dpi=150", doc("pdf/gnuplot.pdf")).await;
    assert_eq!(again.status(), 200);
    for _ in 0..3 {
        assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_slot_pod_stays_ready_while_its_killed_worker_is_replaced() {
    let server = std::sync::Arc::new(Server::start(&flags(&["--slots", "1"], &ALLOW_SLOW_RENDER)));
    server.wait_ready().await;
    let (slow, victim) = slow_job(&server).await;
    // /readyz every 2 ms from before the kill until the new worker runs; a 503 fails the probe.
    let prober = common::raw::Prober::start(
        &common::raw::addr(&server.base),
        "/readyz",
        Duration::from_millis(2),
    );
    wait::until("a first /readyz probe", Duration::from_secs(10), || async {
        prober.answered() > 0
    })
    .await;
    let before_kill = prober.answered();
    kill(victim, libc::SIGKILL);
    let (status, _) = error_code(slow.await.unwrap()).await;
    assert_eq!(status, 502);
    replaced(&server, victim).await;
    // Probes answered 200 between the kill and the new worker's start: the replacement window
    // was probed, and never unready.
    let during = prober.answered() - before_kill;
    assert!(during > 0, "no probe fell between the kill and the replacement");
    prober.stop();
    assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_whose_worker_is_killed_twice_is_quarantined() {
    // A long deadline: the other document's renders below are to end, however loaded the host.
    let more = ["--slots", "2", "--job-deadline-ms", "120000"];
    let server = std::sync::Arc::new(Server::start(&flags(&more, &ALLOW_SLOW_RENDER)));
    server.wait_ready().await;
    for strike in 1..=2 {
        let (slow, victim) = slow_job(&server).await;
        kill(victim, libc::SIGKILL);
        let (status, code) = error_code(slow.await.unwrap()).await;
        assert_eq!((status, code.as_str()), (502, "worker_crashed"), "strike {strike}");
        replaced(&server, victim).await;
    }
    // Both slots busy with another slow document: a refusal that waited for a slot, or that
    // ran the document again, would come after one of them ends.
    let other = || {
        let server = server.clone();
        tokio::spawn(async move { server.post(SLOW_RENDER, doc("pdf/R-intro.pdf")).await.status() })
    };
    let (first, second) = (other(), other());
    wait::until("both slots busy", Duration::from_secs(20), || async {
        let engine = server.readyz().await["engine"].clone();
        if engine["busy"] == 2 { Ok(()) } else { Err(engine) }
    })
    .await;
    let jobs_before = server.metric("renderpod_jobs_total", &[]).await;
    // Twice in a row is no longer bad luck: the document is refused fast for a while, before
    // it queues.
    let refused = server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await;
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(error_code(refused).await, (422, "document_quarantined".to_string()));
    assert!(!first.is_finished() && !second.is_finished(), "the refusal waited for a slot");
    assert_eq!(server.metric("renderpod_jobs_total", &[]).await, jobs_before, "no job ran");
    assert_eq!(server.metric("renderpod_rejections_total", &["reason=\"quarantined\""]).await, 1.0);
    assert_eq!((first.await.unwrap().as_u16(), second.await.unwrap().as_u16()), (200, 200));
    assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_with_sigkill_mid_job_fails_only_that_request() {
    killed_mid_job(libc::SIGKILL, "SIGKILL").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_with_sigsegv_mid_job_fails_only_that_request() {
    killed_mid_job(libc::SIGSEGV, "SIGSEGV").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_past_its_deadline_kills_and_replaces_its_worker() {
    let server = std::sync::Arc::new(Server::start(&flags(
        &["--slots", "1", "--job-deadline-ms", "1500"],
        &ALLOW_SLOW_RENDER,
    )));
    server.wait_ready().await;
    let (slow, victim) = slow_job(&server).await;
    // Stopped, the worker can never finish the job: an answer at all is the deadline's (the
    // bound is for a broken run, twenty deadlines).
    kill(victim, libc::SIGSTOP);
    let answer = tokio::time::timeout(Duration::from_secs(30), slow).await;
    let answer = answer.expect("no answer for a job whose worker never finishes");
    let (status, code) = error_code(answer.unwrap()).await;
    assert_eq!((status, code.as_str()), (504, "deadline_exceeded"));
    let after = replaced(&server, victim).await;
    assert_ne!(after, [victim]);
    assert_eq!(
        server.metric("renderpod_worker_restarts_total", &["reason=\"deadline\""]).await,
        1.0
    );
    // It had the whole deadline to itself, so the document is to blame: refused for a while
    // instead of taking a slot for another full deadline.
    let refused = server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await;
    assert_eq!(error_code(refused).await, (422, "document_quarantined".to_string()));
    assert_eq!(
        server.post_honouring_retry_after("/v1/info", doc("pdf/trivial.pdf")).await.status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conviction_by_an_expensive_render_refuses_that_work_only() {
    // A deadline long enough for a 150 dpi page of the same document however loaded the host.
    let server = std::sync::Arc::new(Server::start(&flags(
        &["--slots", "2", "--job-deadline-ms", "6000"],
        &ALLOW_SLOW_RENDER,
    )));
    server.wait_ready().await;
    let (slow, victim) = slow_job(&server).await;
    // Stopped, the 1200 dpi render has the whole deadline to itself: the document is convicted
    // for renders of that cost.
    kill(victim, libc::SIGSTOP);
    let (status, code) = error_code(slow.await.unwrap()).await;
    assert_eq!((status, code.as_str()), (504, "deadline_exceeded"));
    replaced(&server, victim).await;
    let jobs_before = server.metric("renderpod_jobs_total", &[]).await;
    for expensive in [SLOW_RENDER, "/v1/render?page=1&dpi=1000", "/v1/render?page=1&width=10000"] {
        let refused = server.post(expensive, doc("pdf/gnuplot.pdf")).await;
        assert!(refused.headers().contains_key("retry-after"), "{expensive}");
        let body: serde_json::Value = refused.json().await.unwrap();
        assert_eq!(body["error"]["code"], "document_quarantined", "{expensive}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("renders above 600 dpi"), "{message}");
    }
    assert_eq!(server.metric("renderpod_jobs_total", &[]).await, jobs_before, "no job ran");
    // Cheaper work on the same document is served.
    for cheaper in ["/v1/info", "/v1/render?page=1&dpi=150", "/v1/extract?pages=1"] {
        let answer = server.post(cheaper, doc("pdf/gnuplot.pdf")).await;
        assert_eq!(answer.status(), 200, "{cheaper}: {}", answer.text().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_beyond_the_queue_gets_immediate_rejections_with_retry_after() {
    let server = std::sync::Arc::new(Server::start(&flags(
        &["--slots", "1", "--queue-depth", "2", "--job-deadline-ms", "4000"],
        &ALLOW_SLOW_RENDER,
    )));
    server.wait_ready().await;
    // One running and two queued fill the pod. A request takes its queue place on arrival,
    // before its body is read, so the first is let through to the slot before the others come
    // (three at once would find two places and one refusal). The queued ones are another
    // document: the running one's deadline convicts its own, and a queued job of a convicted
    // document is refused (422) when it reaches the new worker instead of expiring.
    let mut held = Vec::new();
    for (count, (busy, queued), name) in
        [(1, (1, 0), "pdf/gnuplot.pdf"), (2, (1, 2), "pdf/R-intro.pdf")]
    {
        for _ in 0..count {
            let server = server.clone();
            held.push(tokio::spawn(
                async move { server.post(SLOW_RENDER, doc(name)).await.status() },
            ));
        }
        let what = format!("{busy} busy and {queued} queued");
        wait::until(&what, Duration::from_secs(10), || async {
            let engine = server.readyz().await["engine"].clone();
            if engine["busy"] == busy && engine["queued"] == queued { Ok(()) } else { Err(engine) }
        })
        .await;
    }
    let flood: Vec<_> = (0..20)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move {
                let response = server.post("/v1/info", doc("pdf/trivial.pdf")).await;
                let retry_after =
                    response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
                let (status, code) = error_code(response).await;
                (status, code, retry_after)
            })
        })
        .collect();
    for request in flood {
        let (status, code, retry_after) = request.await.unwrap();
        assert_eq!((status, code.as_str()), (503, "overloaded"));
        let secs: u64 = retry_after.expect("Retry-After").parse().unwrap();
        assert!((1..=30).contains(&secs));
    }
    // The API's description is answered from memory too, whole, while every slot is taken.
    let api = server.client.get(server.url("/openapi.json")).send().await.unwrap();
    assert_eq!(api.status(), 200);
    assert_eq!(api.headers()["content-type"], "application/json");
    assert!(api.text().await.unwrap() == include_str!("../../openapi.json"), "/openapi.json");
    // Immediate means without waiting for room: every rejection came back while the jobs that
    // fill the pod were all still pending.
    assert!(held.iter().all(|job| !job.is_finished()), "a rejection waited for a slot");
    assert_eq!(server.client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
    assert!(server.metric("renderpod_rejections_total", &["reason=\"queue_full\""]).await >= 20.0);
    for request in held {
        // The running one hits its deadline; the queued ones expire behind it, or hit theirs
        // on the new worker.
        assert_eq!(request.await.unwrap(), 504);
    }
    assert_eq!(
        server.post_honouring_retry_after("/v1/info", doc("pdf/trivial.pdf")).await.status(),
        200
    );
}
