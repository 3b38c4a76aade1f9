//! Worker recycling (after N jobs, over the memory budget) and graceful drain on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{Server, doc};
use renderpool_testkit::wait;

#[tokio::test]
async fn workers_are_recycled_after_n_jobs() {
    let server = Server::start(&["--slots", "1", "--recycle-after-jobs", "3"]);
    let first = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
    let mut pids = vec![first];
    for _ in 0..9 {
        assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
        let pid = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
        if pids.last() != Some(&pid) {
            pids.push(pid);
        }
    }
    // 3 jobs per worker (3 / 10 leaves no room for jitter): replaced after jobs 3, 6 and 9.
    let recycled =
        server.wait_metric("renderpod_worker_restarts_total", &["reason=\"recycle_jobs\""], 3.0);
    assert_eq!(recycled.await, 3.0);
    assert_eq!(pids.len(), 4, "{pids:?}");
}

#[tokio::test]
async fn worker_over_its_memory_budget_is_recycled() {
    // A worker holds about 10 MiB idle and 22 MiB after a small render; a 300 dpi render of a
    // gnuplot page (a 34 MB bitmap) leaves it near 57 MiB, as malloc keeps freed buffers below
    // its tuned thresholds for the next page. With 96 MiB per slot the render fits under the
    // ceiling and the worker is recycled past half of it (48 MiB).
    let server = Server::start(&["--slots", "1", "--memory-per-slot", "96Mi"]);
    let first = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
    assert_eq!(server.post("/v1/render?page=1&dpi=72", doc("pdf/trivial.pdf")).await.status(), 200);
    assert_eq!(
        server.metric("renderpod_worker_restarts_total", &["reason=\"recycle_memory\""]).await,
        0.0
    );
    assert_eq!(
        server.post("/v1/render?page=1&dpi=300", doc("pdf/gnuplot.pdf")).await.status(),
        200
    );
    let recycled =
        server.wait_metric("renderpod_worker_restarts_total", &["reason=\"recycle_memory\""], 1.0);
    assert_eq!(recycled.await, 1.0);
    let now = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
    assert_ne!(now, first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_jobs_in_flight_finishes_them_then_exits_zero() {
    let mut server = Server::start(&["--slots", "2", "--drain-delay-ms", "2000"]);
    let ready = server.wait_ready().await;
    let workers: Vec<u64> = ready["engine"]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["pid"].as_u64().unwrap())
        .collect();
    let base = server.base.clone();
    let client = server.client.clone();
    // Two running and two queued: 300 dpi renders of gnuplot pages take a while each.
    let in_flight: Vec<_> = (1..=4)
        .map(|page| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                let response = client
                    .post(format!("{base}/v1/render?page={page}&dpi=300"))
                    .header("content-type", "application/pdf")
                    .body(doc("pdf/gnuplot.pdf"))
                    .send()
                    .await
                    .unwrap();
                let status = response.status().as_u16();
                (status, response.bytes().await.unwrap().len())
            })
        })
        .collect();
    wait::until("both slots busy", Duration::from_secs(10), || async {
        let engine = server.readyz().await["engine"].clone();
        if engine["busy"] == 2 { Ok(()) } else { Err(engine) }
    })
    .await;
    server.signal(libc::SIGTERM);
    // Readiness goes false first: while the jobs in flight still run, and before the pod stops
    // taking work (the drain delay, 2 s here).
    let draining = wait::until("/readyz 503 after SIGTERM", Duration::from_secs(10), || async {
        let response = client.get(format!("{base}/readyz")).send().await.unwrap();
        match response.status().as_u16() {
            503 => Ok(response.json::<serde_json::Value>().await.unwrap()),
            other => Err(other),
        }
    })
    .await;
    assert_eq!(draining["draining"], true);
    assert!(!in_flight.iter().any(|r| r.is_finished()), "readiness went false after the jobs");
    let late = client
        .post(format!("{base}/v1/info"))
        .header("content-type", "application/pdf")
        .body(doc("pdf/trivial.pdf"))
        .send()
        .await
        .unwrap();
    let status = late.status();
    assert_eq!(status, 200, "refused before readiness went false: {:?}", late.text().await);
    for request in in_flight {
        let (status, len) = request.await.unwrap();
        assert_eq!(status, 200);
        assert!(len > 1000);
    }
    let (exit, server) = tokio::task::spawn_blocking(move || {
        let exit = server.wait_exit(Duration::from_secs(30));
        (exit, server)
    })
    .await
    .unwrap();
    assert_eq!(exit.code(), Some(0), "exit status {exit:?}");
    // No worker outlives the service.
    wait::until_blocking("every worker gone with the server", Duration::from_secs(5), || {
        let alive: Vec<&u64> = workers
            .iter()
            .filter(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        if alive.is_empty() { Ok(()) } else { Err(alive) }
    });
    drop(server);
}
