//! The HTTP front's limits against the real service: an upload flood refused before the uploads
//! are sent with the supervisor inside its budget, slow bodies and unfinished heads cut off,
//! client deadlines, ETags, and bounded filmstrips (refused past the pixel cap, or streamed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::raw::{ms, percentile};
use common::{Server, doc, raw};
use renderpool_testkit::{bombs, metrics};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;

/// The sum of `renderpod_jobs` (every op and outcome).
async fn jobs(server: &Server, needles: &[&str]) -> f64 {
    server.metric("renderpod_jobs_total", needles).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_flood_is_refused_before_it_is_sent_and_the_front_stays_in_budget() {
    // A 160 MiB share for the supervisor: 32 MiB at rest, 64 MiB the Office cache's, and the
    // rest halved between uploads and answers, so 32 MiB of uploads at once: six of these
    // 4.7 MB documents, each within the quarter of the budget admitted whole.
    let server = Arc::new(Server::start(&["--slots", "2", "--supervisor-overhead", "160Mi"]));
    server.wait_ready().await;
    assert_eq!(server.metric("renderpod_upload_budget_bytes", &[]).await, (32 * MIB) as f64);
    let body = Arc::new(bombs::padded_page(4_700_000));
    let addr = raw::addr(&server.base);
    let prober = raw::Prober::start(&addr, "/healthz", Duration::from_millis(5));
    let (mut admitted, mut refused, mut refusal_times) = (0, 0, Vec::new());
    let mut by_code = std::collections::BTreeMap::<String, u32>::new();
    for _wave in 0..3 {
        let uploads: Vec<_> = (0..200)
            .map(|_| {
                let (addr, body) = (addr.clone(), body.clone());
                tokio::spawn(async move {
                    raw::upload_expecting_continue(&addr, "/v1/render?page=1&dpi=36", &body, "")
                        .await
                })
            })
            .collect();
        for upload in uploads {
            let upload = upload.await.unwrap();
            if upload.invited {
                // Admitted before its body was sent: nothing may fail it afterwards.
                assert_eq!(
                    upload.answer.status, 200,
                    "admitted upload failed: {:?}",
                    upload.answer
                );
                admitted += 1;
            } else {
                // Refused on its head alone: the body was never sent.
                assert_eq!(upload.answer.status, 503, "{:?}", upload.answer);
                assert!(upload.answer.header("retry-after").is_some(), "{:?}", upload.answer);
                *by_code.entry(upload.answer.code()).or_default() += 1;
                refusal_times.push(upload.took);
                refused += 1;
            }
        }
    }
    let latencies = prober.stop();
    refusal_times.sort();
    let peak = raw::peak_rss(server.pid());
    println!(
        "flood of 3 x 200 uploads of {:.1} MB: {admitted} admitted (all 200), {refused} refused before sending {by_code:?}",
        body.len() as f64 / 1e6
    );
    println!(
        "  time to a 503: p50 {:.1} ms, p99 {:.1} ms; supervisor VmHWM {:.1} MiB (share 160 MiB)",
        ms(percentile(&refusal_times, 0.5)),
        ms(percentile(&refusal_times, 0.99)),
        peak as f64 / MIB as f64
    );
    println!(
        "  /healthz during the flood ({} probes): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len(),
        ms(percentile(&latencies, 0.5)),
        ms(percentile(&latencies, 0.99)),
        ms(*latencies.last().unwrap())
    );
    assert!(admitted > 0 && refused > 0, "{admitted} admitted, {refused} refused");
    assert!(by_code.contains_key("upload_budget_exhausted"), "{by_code:?}");
    assert!(peak < 160 * MIB, "the supervisor peaked at {} MiB", peak / MIB);
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
    assert_eq!(server.readyz().await["engine"]["queued"], 0);
    assert!(server.metric("renderpod_rejections_total", &["upload_budget"]).await > 0.0);
}

/// Writes the head of a `Content-Length` upload, then `chunk` bytes every `every` until the
/// server answers; returns the answer and how long it took.
async fn trickle(
    addr: &str,
    length: usize,
    chunk: usize,
    every: Duration,
) -> (raw::Answer, Duration) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    let head = format!(
        "POST /v1/render?page=1 HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\nContent-Length: {length}\r\n\r\n"
    );
    write.write_all(head.as_bytes()).await.unwrap();
    let start = Instant::now();
    let writer = tokio::spawn(async move {
        let piece = vec![b'%'; chunk];
        let mut sent = 0;
        while sent + chunk < length {
            if write.write_all(&piece).await.is_err() {
                return;
            }
            sent += chunk;
            tokio::time::sleep(every).await;
        }
    });
    let mut buffer = Vec::new();
    let mut bytes = [0u8; 4096];
    loop {
        let n = read.read(&mut bytes).await.unwrap_or(0);
        assert!(n > 0, "the server closed without an answer");
        buffer.extend_from_slice(&bytes[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let took = start.elapsed();
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            let headers = head
                .split("\r\n")
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let mut answer = raw::Answer { status, headers, body: buffer[end + 4..].to_vec() };
            let len: usize = answer.header("content-length").unwrap().parse().unwrap();
            while answer.body.len() < len {
                let n = read.read(&mut bytes).await.unwrap();
                answer.body.extend_from_slice(&bytes[..n]);
            }
            writer.abort();
            return (answer, took);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_and_unfinished_heads_are_cut_off_and_free_what_they_held() {
    let server = Arc::new(Server::start(&[
        "--slots",
        "1",
        "--body-min-rate",
        "64Ki",
        "--body-idle-timeout-ms",
        "1000",
        "--header-read-timeout-ms",
        "1000",
    ]));
    server.wait_ready().await;
    let addr = raw::addr(&server.base);

    // A slowloris upload: 1 MiB declared, 10 KiB/s sent, far below the floor of 64 KiB/s.
    let slow = {
        let addr = addr.clone();
        tokio::spawn(async move { trickle(&addr, 1 << 20, 1024, Duration::from_millis(100)).await })
    };
    // While it trickles it holds its bytes in the budget and a queue place.
    server.wait_metric_at("renderpod_upload_reserved_bytes", &[], MIB as f64).await;
    assert_eq!(server.readyz().await["engine"]["queued"], 1);
    assert!(!slow.is_finished(), "the reservation came only with the answer");
    let (answer, took) = slow.await.unwrap();
    assert_eq!((answer.status, answer.code().as_str()), (408, "body_too_slow"), "{answer:?}");
    println!("slowloris upload cut off after {:.2} s", took.as_secs_f64());
    assert!(String::from_utf8_lossy(&answer.body).contains("slower than 65536 bytes per second"));
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
    assert_eq!(server.readyz().await["engine"]["queued"], 0);

    // A stall: 100 KiB at once, then nothing.
    let (answer, _) = trickle(&addr, 1 << 20, 100 << 10, Duration::from_secs(60)).await;
    assert_eq!((answer.status, answer.code().as_str()), (408, "body_too_slow"), "{answer:?}");
    assert!(String::from_utf8_lossy(&answer.body).contains("no body bytes arrived for 1000 ms"));
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, 0.0);
    assert!(server.metric("renderpod_rejections_total", &["body_too_slow"]).await >= 2.0);

    // 200 connections that send half a request line, and one idle keep-alive connection: all
    // closed by the server after the header read timeout.
    let mut half = Vec::new();
    for _ in 0..200 {
        let mut stream = TcpStream::connect(&addr).await.unwrap();
        stream.write_all(b"POST /v1/render?pa").await.unwrap();
        half.push(stream);
    }
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
    let mut buffer = Vec::new();
    let answer = raw::read_head(&mut idle, &mut buffer).await.unwrap();
    assert_eq!(answer.status, 200);
    let start = Instant::now();
    for stream in &mut half {
        assert!(
            raw::closed_within(stream, Duration::from_secs(10)).await,
            "a half head stayed open"
        );
    }
    assert!(
        raw::closed_within(&mut idle, Duration::from_secs(10)).await,
        "idle keep-alive stayed open"
    );
    println!(
        "200 unfinished heads and an idle connection closed within {:.2} s",
        start.elapsed().as_secs_f64()
    );
    assert!(server.metric("renderpod_rejections_total", &["header_timeout"]).await >= 200.0);
    // The front answers as before.
    let ok = server.post("/v1/info", doc("pdf/R-intro.pdf")).await;
    assert_eq!(ok.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_upload_reserves_as_it_comes_and_is_refused_past_the_budget() {
    // No floor and a long idle limit: the silent holder below keeps its bytes for the test.
    let flags =
        ["--upload-budget", "4Mi", "--body-min-rate", "0", "--body-idle-timeout-ms", "60000"];
    let server = Server::start(&flags);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    // An admitted upload holds 1 MiB of the 4 (invited, then silent): all it declared, a
    // quarter of the budget.
    let mut holder = TcpStream::connect(&addr).await.unwrap();
    holder
        .write_all(
            b"POST /v1/info HTTP/1.1\r\nHost: test\r\nContent-Length: 1048576\r\nExpect: 100-continue\r\n\r\n",
        )
        .await
        .unwrap();
    let mut buffer = Vec::new();
    assert_eq!(raw::read_head(&mut holder, &mut buffer).await.unwrap().status, 100);
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, MIB as f64);
    // A chunked upload of 4 MiB: its reservation grows with each chunk until the budget is out
    // (and no room comes back within a second).
    let stream = TcpStream::connect(&addr).await.unwrap();
    let (mut read, mut write) = stream.into_split();
    write
        .write_all(b"POST /v1/info HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let writer = tokio::spawn(async move {
        let piece = vec![b'%'; 64 << 10];
        for _ in 0..64 {
            let frame = format!("{:x}\r\n", piece.len());
            if write.write_all(frame.as_bytes()).await.is_err()
                || write.write_all(&piece).await.is_err()
                || write.write_all(b"\r\n").await.is_err()
            {
                return;
            }
        }
        let _ = write.write_all(b"0\r\n\r\n").await;
    });
    let mut lines = tokio::io::BufReader::new(&mut read).lines();
    let status = lines.next_line().await.unwrap().unwrap();
    assert!(status.starts_with("HTTP/1.1 503"), "{status}");
    let mut retry_after = None;
    let mut body = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("retry-after:") {
            retry_after = Some(v.trim().to_string());
        }
        if line.starts_with('{') {
            body = line;
            break;
        }
    }
    writer.abort();
    assert!(retry_after.is_some(), "no Retry-After");
    assert!(body.contains("upload_budget_exhausted"), "{body}");
    // The chunked upload's share is back; the holder keeps its own.
    assert_eq!(server.metric("renderpod_upload_reserved_bytes", &[]).await, MIB as f64);
    drop(holder);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_shorter_than_the_expected_wait_is_refused_before_it_queues() {
    // A deadline far past a 1200 dpi page even on a loaded machine: only the client's
    // Request-Timeout may end these jobs.
    let flags =
        common::flags(&["--slots", "1", "--job-deadline-ms", "120000"], &common::ALLOW_SLOW_RENDER);
    let server = Arc::new(Server::start(&flags));
    server.wait_ready().await;
    let gnuplot = doc("pdf/gnuplot.pdf");
    // One slow render teaches the service how long a job takes.
    let first = server.post(common::SLOW_RENDER, gnuplot.clone()).await;
    assert_eq!(first.status(), 200);
    let busy = {
        let (server, gnuplot) = (server.clone(), gnuplot.clone());
        tokio::spawn(async move { server.post(common::SLOW_RENDER, gnuplot).await.status() })
    };
    server.wait_metric_at("renderpod_slots", &["state=\"busy\""], 1.0).await;
    let before = jobs(&server, &[]).await;
    let addr = raw::addr(&server.base);
    let hurried = raw::upload_expecting_continue(
        &addr,
        "/v1/render?page=2&dpi=72",
        &gnuplot,
        "Request-Timeout: 0.3\r\n",
    )
    .await;
    assert!(!hurried.invited, "refused before the body was asked for");
    assert_eq!(
        (hurried.answer.status, hurried.answer.code().as_str()),
        (503, "would_miss_deadline")
    );
    assert!(hurried.answer.header("retry-after").is_some());
    assert_eq!(server.readyz().await["engine"]["queued"], 0, "nothing was queued");
    assert_eq!(server.metric("renderpod_rejections_total", &["deadline_unmet"]).await, 1.0);
    // With time enough the same request is admitted.
    let patient = raw::upload_expecting_continue(
        &addr,
        "/v1/render?page=2&dpi=72",
        &gnuplot,
        "Request-Timeout: 60\r\n",
    )
    .await;
    assert!(patient.invited);
    assert_eq!(patient.answer.status, 200);
    assert_eq!(busy.await.unwrap(), 200);
    assert_eq!(jobs(&server, &[]).await, before + 2.0, "the refused request ran no job");
    // A deadline that passes mid-render ends the job (504) without blaming the document.
    let late = server
        .client
        .post(server.url(common::SLOW_RENDER))
        .header("request-timeout", "0.5")
        .body(gnuplot.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(common::error_code(late).await, (504, "deadline_exceeded".to_string()));
    assert_eq!(
        server.wait_metric("renderpod_worker_restarts_total", &["client_deadline"], 1.0).await,
        1.0
    );
    server.wait_ready().await;
    let again = server.post("/v1/render?page=1&dpi=72", gnuplot).await;
    assert_eq!(again.status(), 200, "a client's deadline does not quarantine the document");
}

#[tokio::test]
async fn if_none_match_with_the_etag_answers_304_without_a_job() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let pdf = doc("pdf/R-intro.pdf");
    let first = server.post("/v1/render?page=1&dpi=72", pdf.clone()).await;
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.len() > 10, "a strong tag: {etag}");
    let jobs_before = jobs(&server, &[]).await;
    for tag in [etag.clone(), format!("\"x\", W/{etag}")] {
        let again = server
            .client
            .post(server.url("/v1/render?page=1&dpi=72"))
            .header("if-none-match", tag)
            .body(pdf.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304);
        assert_eq!(again.headers()["etag"], etag.as_str());
        assert!(again.bytes().await.unwrap().is_empty());
    }
    // Multipart uploads are the same document.
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(pdf.clone()).mime_str("application/pdf").unwrap(),
    );
    let multipart = server
        .client
        .post(server.url("/v1/render?page=1&dpi=72"))
        .header("if-none-match", &etag)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(multipart.status(), 304);
    assert_eq!(jobs(&server, &[]).await, jobs_before, "no job ran for a 304");
    assert_eq!(server.metric("renderpod_not_modified_total", &[]).await, 3.0);
    // Other parameters are another answer.
    let other = server
        .client
        .post(server.url("/v1/render?page=2&dpi=72"))
        .header("if-none-match", &etag)
        .body(pdf.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    assert_ne!(other.headers()["etag"], etag.as_str());
    // Deterministic answers carry one; a watermarked PDF (PDFium writes a new file ID) does not.
    for route in ["/v1/info", "/v1/extract?pages=1", "/v1/thumbnails?pages=1-2"] {
        let response = server.post(route, pdf.clone()).await;
        assert_eq!(response.status(), 200, "{route}");
        assert!(response.headers().contains_key("etag"), "{route}");
    }
    let marked = server.post("/v1/watermark?text=DRAFT", pdf).await;
    assert_eq!(marked.status(), 200);
    assert!(!marked.headers().contains_key("etag"));
}

#[tokio::test]
async fn thumbnails_past_the_caps_are_refused_up_front() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let gnuplot = doc("pdf/gnuplot.pdf");
    // The filmstrip: 113 pages 3000 px wide. Past the width cap: refused on the query.
    let wide = server.post("/v1/thumbnails?pages=1-113&width=3000", gnuplot.clone()).await;
    assert_eq!(common::error_code(wide).await, (400, "invalid_request".to_string()));
    // 200 pages at 1000 px come to 259 megapixels: measured, then refused before any render.
    let big = server.post("/v1/thumbnails?pages=1-200&width=1000", gnuplot.clone()).await;
    let (status, body) = (big.status().as_u16(), big.text().await.unwrap());
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("output_too_large") && body.contains("x-ndjson"), "{body}");
    // The one job this server ran was the measure: no render series exists yet.
    let text = server.metrics_text().await;
    assert_eq!(metrics::sum(&text, "renderpod_jobs_total", &["op=\"measure\""]), 1.0);
    let renders = metrics::value(&text, "renderpod_jobs_total", &["op=\"render\""]);
    assert!(renders.is_err(), "no page was rendered: {renders:?}");
    // Within the cap the JSON form answers in page order, with the page count.
    let small = server.post("/v1/thumbnails?pages=3,1-2&width=120", gnuplot).await;
    assert_eq!(small.status(), 200);
    assert_eq!(small.headers()["x-page-count"], "311");
    let strip: serde_json::Value = small.json().await.unwrap();
    let pages: Vec<u64> =
        strip["pages"].as_array().unwrap().iter().map(|p| p["page"].as_u64().unwrap()).collect();
    assert_eq!(pages, [1, 2, 3]);
    assert_eq!(strip["pages"][0]["width"], 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_thumbnails_arrive_as_pages_finish_with_bounded_memory() {
    let server = Server::start(&["--slots", "2"]);
    server.wait_ready().await;
    let gnuplot = doc("pdf/gnuplot.pdf");
    // Warm up, so the peak below is the stream's.
    assert_eq!(
        server.post("/v1/thumbnails?pages=1-4&width=1000", gnuplot.clone()).await.status(),
        200
    );
    let peak_before = raw::peak_rss(server.pid());
    let mut response = server
        .client
        .post(server.url("/v1/thumbnails?pages=1-60&width=1000"))
        .header("accept", "application/x-ndjson")
        .body(gnuplot)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    assert_eq!(response.headers()["x-page-count"], "311", "the document's count, not the strip's");
    let mut pending = Vec::new();
    let (mut lines, mut streamed, mut rendered_at_first_line) = (Vec::new(), 0usize, None);
    while let Some(chunk) = response.chunk().await.unwrap() {
        streamed += chunk.len();
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: serde_json::Value = serde_json::from_slice(&pending[..end]).unwrap();
            pending.drain(..=end);
            if rendered_at_first_line.is_none() {
                rendered_at_first_line = Some(jobs(&server, &["op=\"render\""]).await);
            }
            lines.push(line);
        }
    }
    let peak_after = raw::peak_rss(server.pid());
    let rendered_at_first_line = rendered_at_first_line.unwrap();
    println!(
        "streamed 60 thumbnails, {:.1} MB: {rendered_at_first_line} of 60 pages rendered when the first line arrived; supervisor peak {:.1} -> {:.1} MiB",
        streamed as f64 / 1e6,
        peak_before as f64 / MIB as f64,
        peak_after as f64 / MIB as f64
    );
    assert!(rendered_at_first_line < 30.0, "the first page came only after the whole strip");
    assert_eq!(lines.len(), 60);
    let mut pages: Vec<u64> = lines
        .iter()
        .map(|line| {
            assert!(line.get("error").is_none(), "{line}");
            assert_eq!(line["width"], 1000);
            line["page"].as_u64().unwrap()
        })
        .collect();
    let png = base64::engine::general_purpose::STANDARD
        .decode(lines[0]["data"].as_str().unwrap())
        .unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    assert_eq!(decoder.read_info().unwrap().info().width, 1000);
    pages.sort();
    assert_eq!(pages, (1..=60).collect::<Vec<_>>());
    // The whole strip never sat in the supervisor: its peak grew by far less than was sent.
    assert!(streamed > 20 << 20, "the strip is big enough to tell ({streamed} bytes)");
    let growth = peak_after.saturating_sub(peak_before) as usize;
    assert!(growth < streamed / 4, "the supervisor grew by {growth} bytes for {streamed} streamed");
}
