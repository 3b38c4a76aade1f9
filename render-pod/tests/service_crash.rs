//! Workers dying mid-job (SIGKILL, SIGSEGV), deadlines, poison pills and overload, against the
//! real service and real PDFium. The slow job is a 1200 dpi render of a gnuplot page (seconds).
//! A worker killed from outside is not the document's fault: one strike, not a quarantine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{ALLOW_SLOW_RENDER, SLOW_RENDER, Server, doc, error_code, flags, kill};

/// Waits until some worker is busy; returns its pid.
async fn busy_worker(server: &Server) -> u64 {
    let start = Instant::now();
    loop {
        let body = server.readyz().await;
        let busy = body["engine"]["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["busy"] == true)
            .and_then(|w| w["pid"].as_u64());
        if let Some(pid) = busy {
            return pid;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no worker became busy");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until every slot is alive again without `gone` among the workers.
async fn replaced(server: &Server, gone: u64) -> Vec<u64> {
    let start = Instant::now();
    loop {
        let pids = server.worker_pids().await;
        if pids.iter().all(|p| p.is_some_and(|p| p != gone)) {
            return pids.into_iter().flatten().collect();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "slot never came back: {pids:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    tokio::time::sleep(Duration::from_millis(50)).await;
    kill(victim, libc::SIGKILL);
    let (status, _) = error_code(slow.await.unwrap()).await;
    assert_eq!(status, 502);
    replaced(&server, victim).await;
    let answers = prober.stop().len();
    assert!(answers > 10, "only {answers} probes");
    assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_whose_worker_is_killed_twice_is_quarantined() {
    let server = two_slots();
    server.wait_ready().await;
    for strike in 1..=2 {
        let (slow, victim) = slow_job(&server).await;
        kill(victim, libc::SIGKILL);
        let (status, code) = error_code(slow.await.unwrap()).await;
        assert_eq!((status, code.as_str()), (502, "worker_crashed"), "strike {strike}");
        replaced(&server, victim).await;
    }
    // Twice in a row is no longer bad luck: the document is refused fast for a while.
    let started = Instant::now();
    let refused = server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await;
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(error_code(refused).await, (422, "document_quarantined".to_string()));
    assert!(started.elapsed() < Duration::from_secs(2));
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
    let server =
        Server::start(&flags(&["--slots", "1", "--job-deadline-ms", "1500"], &ALLOW_SLOW_RENDER));
    let ready = server.wait_ready().await;
    let before = ready["engine"]["workers"][0]["pid"].as_u64().unwrap();
    let started = Instant::now();
    let (status, code) = error_code(server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await).await;
    assert_eq!((status, code.as_str()), (504, "deadline_exceeded"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at the deadline, not when the job ended"
    );
    let after = replaced(&server, before).await;
    assert_ne!(after, [before]);
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
async fn flood_beyond_the_queue_gets_immediate_rejections_with_retry_after() {
    let server = std::sync::Arc::new(Server::start(&flags(
        &["--slots", "1", "--queue-depth", "2", "--job-deadline-ms", "4000"],
        &ALLOW_SLOW_RENDER,
    )));
    server.wait_ready().await;
    // One running and two queued fill the pod. A request takes its queue place on arrival,
    // before its body is read, so the first is let through to the slot before the others come
    // (three at once would find two places and one refusal).
    let mut held = Vec::new();
    for (count, (busy, queued)) in [(1, (1, 0)), (2, (1, 2))] {
        for _ in 0..count {
            let server = server.clone();
            held.push(tokio::spawn(async move {
                server.post(SLOW_RENDER, doc("pdf/gnuplot.pdf")).await.status()
            }));
        }
        let start = Instant::now();
        loop {
            let engine = server.readyz().await["engine"].clone();
            if engine["busy"] == busy && engine["queued"] == queued {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "queue never filled: {engine}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
    assert!(api.text().await.unwrap() == include_str!("../openapi.json"), "/openapi.json");
    // Immediate means without waiting for room: every rejection came back while the jobs that
    // fill the pod were all still pending.
    assert!(held.iter().all(|job| !job.is_finished()), "a rejection waited for a slot");
    assert_eq!(server.client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
    assert!(server.metric("renderpod_rejections_total", &["reason=\"queue_full\""]).await >= 20.0);
    for request in held {
        // The running one hits its deadline; the queued ones expire behind it.
        assert_eq!(request.await.unwrap(), 504);
    }
    assert_eq!(
        server.post_honouring_retry_after("/v1/info", doc("pdf/trivial.pdf")).await.status(),
        200
    );
}
