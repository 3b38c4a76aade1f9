//! Nobody waiting, no work: a client that disconnects frees its slot, whether its job was
//! queued (dropped unrun) or running (its worker killed past the grace and replaced). This also
//! shows that hyper drops the handler when the connection closes: nothing else closes the job's
//! reply channel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{ALLOW_SLOW_RENDER, SLOW_RENDER, Server, doc, flags};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Sends a whole request on a connection of its own and keeps the connection open, unread.
async fn send_and_hold(server: &Server, path: &str, body: &[u8]) -> TcpStream {
    let addr = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_leave_free_the_slot_and_the_next_job_runs_on_it() {
    let server =
        Server::start(&flags(&["--slots", "1", "--cancel-grace-ms", "100"], &ALLOW_SLOW_RENDER));
    let first = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
    let running = send_and_hold(&server, SLOW_RENDER, &doc("pdf/gnuplot.pdf")).await;
    server.wait_metric_at("renderpod_slots", &["state=\"busy\""], 1.0).await;
    let queued = send_and_hold(&server, "/v1/info", &doc("pdf/trivial.pdf")).await;
    server.wait_metric_at("renderpod_queue_depth", &[], 1.0).await;

    // Both clients go away: the running render is cancelled long before it would end, and the
    // job queued behind it is dropped without running.
    drop(queued);
    drop(running);
    server.wait_metric_at("renderpod_slots", &["state=\"busy\""], 0.0).await;
    assert_eq!(server.metric("renderpod_jobs_total", &["outcome=\"cancelled\""]).await, 1.0);
    let cancelled =
        server.wait_metric("renderpod_worker_restarts_total", &["reason=\"cancelled\""], 1.0).await;
    assert_eq!(cancelled, 1.0);
    let dropped =
        server.wait_metric("renderpod_rejections_total", &["reason=\"client_gone\""], 1.0).await;
    assert_eq!(dropped, 1.0, "the queued job of a client that left never ran");

    // The slot serves the next client with a new worker, and the render was never finished.
    assert_eq!(server.post("/v1/info", doc("pdf/trivial.pdf")).await.status(), 200);
    let now = server.wait_ready().await["engine"]["workers"][0]["pid"].as_u64().unwrap();
    assert_ne!(now, first);
    // A document whose client left is not to blame for anything; this render is the first to
    // finish.
    let again = server.post("/v1/render?page=1&dpi=72", doc("pdf/gnuplot.pdf")).await;
    assert_eq!(again.status(), 200);
    let rendered = server.metric("renderpod_jobs_total", &["op=\"render\"", "outcome=\"ok\""]);
    assert_eq!(rendered.await, 1.0, "the cancelled render never finished");
}
