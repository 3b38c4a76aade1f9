//! Memory that cannot run away: the service runs in a memory-limited cgroup v1 group shaped like
//! a pod, and resource bombs built by the test fail their own job with a JSON error while the
//! supervisor and the other slot carry on, without the kernel's OOM killer (the workers' ceiling
//! stops them first). With the ceiling switched off, the OOM killer takes the bomb's worker, not
//! the supervisor. The two tests in a group need the `cgroup-v1-memory` capability: without it
//! they record a skip, which fails CI (it declares the capability). A render whose bitmap the
//! ceiling cannot hold is refused without a crash.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Group, ServeIn, Server, TWO_SLOT_POD_MEMORY, doc, error_code};
use render_pod::engine::WORKER_OOM_SCORE_ADJ;
use renderpool_testkit::bombs;

const MIB: u64 = 1 << 20;

/// True while `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit(") ").next().is_some_and(|rest| !rest.starts_with('Z')))
}

/// Renders R-intro.pdf pages on whatever slot is free until `stop`; returns (ok, failed).
fn ordinary_renders(
    server: &Arc<Server>,
    stop: &Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(u32, Vec<u16>)> {
    let (server, stop) = (server.clone(), stop.clone());
    tokio::spawn(async move {
        let bytes = doc("pdf/R-intro.pdf");
        let (mut ok, mut failed) = (0, Vec::new());
        let mut page = 0;
        while !stop.load(Ordering::Relaxed) {
            page = page % 100 + 1;
            let response =
                server.post(&format!("/v1/render?page={page}&dpi=100"), bytes.clone()).await;
            match response.status().as_u16() {
                200 => ok += 1,
                other => failed.push(other),
            }
        }
        (ok, failed)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bombs_fail_their_own_job_in_a_pod_sized_group_and_nothing_is_oom_killed() {
    // A pod of two 384 MiB slots beside the supervisor's share.
    let Some(group) = Group::memory("renderpool-ceiling", TWO_SLOT_POD_MEMORY) else {
        return;
    };
    let server =
        Arc::new(group.serve(&["--memory-per-slot", "384Mi", "--job-deadline-ms", "60000"]));
    let ready = server.wait_ready().await;
    assert_eq!(ready["plan"]["slots"], 2, "{}", ready["plan"]);
    assert_eq!(ready["plan"]["limits"]["memory_bytes"], TWO_SLOT_POD_MEMORY, "{}", ready["plan"]);
    assert_eq!(ready["engine"]["memory_ceiling_bytes"], 384 * MIB);
    let supervisor = server.pid();
    for pid in server.worker_pids().await.into_iter().flatten() {
        let score = std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap();
        assert_eq!(score.trim(), WORKER_OOM_SCORE_ADJ.to_string(), "worker {pid}");
        let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let data = limits.lines().find(|l| l.starts_with("Max data size")).unwrap();
        assert!(data.contains(&(384 * MIB).to_string()), "worker {pid}: {data}");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let background = ordinary_renders(&server, &stop);
    let cases: [(&str, Vec<u8>, &str, u16, &str); 4] = [
        (
            "form XObject fan-out",
            bombs::xobject_fanout(8, 8),
            "/v1/render?page=1",
            422,
            "memory_limit_exceeded",
        ),
        (
            "3 million rectangles",
            bombs::path_storm(3_000_000),
            "/v1/render?page=1",
            422,
            "memory_limit_exceeded",
        ),
        (
            "15000x15000 inline image",
            bombs::huge_image(15_000, 15_000),
            "/v1/render?page=1",
            422,
            "memory_limit_exceeded",
        ),
        ("50000 pages", bombs::many_pages(50_000, false), "/v1/thumbnails", 422, "too_many_pages"),
    ];
    for (name, bomb, route, status, code) in cases {
        let answer = error_code(server.post(route, bomb.clone()).await).await;
        assert_eq!(answer, (status, code.to_string()), "{name}");
        if code == "memory_limit_exceeded" {
            // Tripping the ceiling once quarantines the document.
            let again = error_code(server.post(route, bomb).await).await;
            assert_eq!(again, (422, "document_quarantined".to_string()), "{name}");
        }
        assert!(alive(supervisor), "the supervisor survived {name}");
    }
    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = background.await.unwrap();
    assert!(failed.is_empty(), "ordinary renders failed: {failed:?}");
    assert!(ok > 0, "no ordinary render ran beside the bombs");
    assert_eq!(server.pid(), supervisor);
    assert!(alive(supervisor));
    let restarts =
        server.metric("renderpod_worker_restarts_total", &["reason=\"memory_limit\""]).await;
    assert_eq!(restarts, 3.0);
    assert_eq!(group.oom_kills(), 0, "the kernel's OOM killer fired");
    assert_eq!(group.read("memory.oom_control", Some("under_oom ")), 0);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ceiling_the_oom_killer_takes_the_worker_not_the_supervisor() {
    // A 640 MiB pod of two 256 MiB slots and 128 MiB for the supervisor, ceilings off: the
    // fan-out runs into the group's limit.
    let Some(group) = Group::memory("renderpool-oom", 640 * MIB) else {
        return;
    };
    let server = Arc::new(group.serve(&[
        "--memory-per-slot",
        "256Mi",
        "--supervisor-overhead",
        "128Mi",
        "--memory-ceiling",
        "false",
        "--job-deadline-ms",
        "60000",
    ]));
    assert_eq!(server.wait_ready().await["plan"]["slots"], 2);
    let supervisor = server.pid();
    let bomb = bombs::xobject_fanout(8, 8);
    for strike in 1..=2 {
        let answer = error_code(server.post("/v1/render?page=1", bomb.clone()).await).await;
        assert_eq!(answer, (502, "worker_crashed".to_string()), "strike {strike}");
        assert_eq!(group.oom_kills(), strike, "one OOM kill per bomb");
        assert!(alive(supervisor), "the OOM killer took the supervisor");
        server.wait_ready().await;
    }
    assert!(server.logs().iter().any(|l| l.contains("SIGKILL")));
    // The pod's OOM is no proof against the document; the second strike is.
    assert_eq!(server.metric("renderpod_worker_restarts_total", &["reason=\"killed\""]).await, 2.0);
    let refused = error_code(server.post("/v1/render?page=1", bomb).await).await;
    assert_eq!(refused, (422, "document_quarantined".to_string()));
    assert_eq!(server.post("/v1/render?page=1&dpi=72", doc("pdf/trivial.pdf")).await.status(), 200);
    assert!(alive(supervisor));
    drop(server);
}

#[tokio::test]
async fn a_bitmap_past_the_ceiling_is_refused_without_blaming_the_document() {
    let server =
        Server::start(&["--slots", "1", "--memory-per-slot", "64Mi", "--max-pixels", "400000000"]);
    server.wait_ready().await;
    // 600 dpi of a gnuplot page is a 135 MB bitmap.
    let big = server.post("/v1/render?page=1&dpi=600", doc("pdf/gnuplot.pdf")).await;
    assert_eq!(error_code(big).await, (422, "memory_limit_exceeded".to_string()));
    assert_eq!(server.metric("renderpod_worker_restarts_total", &[]).await, 0.0);
    let small = server.post("/v1/render?page=1&dpi=72", doc("pdf/gnuplot.pdf")).await;
    assert_eq!(small.status(), 200, "the document is not quarantined for the size asked of it");
}
