//! Office to PDF end to end: the real render-pod binary in front of a real Gotenberg (its
//! LibreOffice-only command over Debian's LibreOffice), started with exactly the arguments the
//! operator generates. Gotenberg's own metrics, access log and process list are the witnesses,
//! not the render pod's counters alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use renderpool_operator::build::gotenberg_args;
use renderpool_operator::crd::RenderPoolSpec;
use renderpool_operator::validate::validate;
use renderpool_testkit::{capability, packages, skip, wait};
use renderpool_tests::corpus_dir;
use renderpool_tests::gotenberg::{Access, Gotenberg, queue_size_at};
use renderpool_tests::render_pod::{RenderPod, error_code};

/// Each test runs its own Gotenberg and LibreOffice; one at a time keeps two cores honest.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The Office files of the corpus and the pages their PDFs must have: presentations one per
/// slide in the package, text documents the page count in their own statistics
/// (docProps/app.xml, meta.xml). A spreadsheet's pages depend on how LibreOffice lays out its
/// print ranges, which the file does not state: at least one.
const OFFICE_FILES: &[(&str, Option<u64>)] = &[
    ("office/cols.odp", Some(1)),
    ("office/having-images.docx", Some(1)),
    ("office/images.odt", Some(1)),
    ("office/pythagoras.ods", None),
    ("office/shp-embedded-xlsx.xlsx", None),
    ("office/sld-slides.pptx", Some(3)),
    ("office/tbl-having-tables.docx", Some(1)),
    ("office/test.docx", Some(1)),
    ("office/test.pptx", Some(1)),
];

fn doc(name: &str) -> Vec<u8> {
    std::fs::read(corpus_dir().join(name)).unwrap_or_else(|err| panic!("corpus file {name}: {err}"))
}

/// The operator's Gotenberg arguments for a pool with this spec.
fn operator_args(spec: serde_json::Value) -> Vec<String> {
    let spec: RenderPoolSpec = serde_json::from_value(spec).unwrap();
    let plan = validate(&spec).unwrap().gotenberg.expect("the pool has a Gotenberg");
    gotenberg_args(&spec.gotenberg, &plan)
}

async fn gotenberg(queue_size: u32) -> Gotenberg {
    // A 60 s job deadline: Gotenberg's timeout follows it.
    Gotenberg::start(&operator_args(
        serde_json::json!({ "jobDeadlineMs": 60_000, "gotenberg": { "queueSize": queue_size } }),
    ))
    .await
}

async fn pod_for(gotenberg: &Gotenberg, flags: &[&str]) -> RenderPod {
    RenderPod::start(flags, &[("RENDERPOD_GOTENBERG_URL", &gotenberg.url())]).await
}

async fn pdf_pages(pod: &RenderPod, pdf: Vec<u8>) -> u64 {
    let response = pod.post("/v1/info", pdf).await;
    assert_eq!(response.status(), 200);
    let info: serde_json::Value = response.json().await.unwrap();
    info["page_count"].as_u64().unwrap()
}

/// Gotenberg's access log once it holds `n` conversions (it is written just after the answer).
async fn conversions(gotenberg: &Gotenberg, n: usize) -> Vec<Access> {
    wait::until(&format!("{n} conversions in Gotenberg's log"), Duration::from_secs(10), || async {
        let log = gotenberg.conversions();
        if log.len() >= n { Ok(log) } else { Err(log) }
    })
    .await
}

/// Whether `access` carried `upload` (its multipart form adds less than 1 KiB).
fn carried(access: &Access, upload: &[u8]) -> bool {
    let size = upload.len() as u64;
    access.bytes_in >= size && access.bytes_in - size < 1024
}

/// Gotenberg's access log once its last entry is the conversion of `marker`, an upload sent
/// after every request in question: each of those is in the log by then (its line is written
/// as it is answered), so the log is whole, and a request that should not have reached
/// Gotenberg shows as an extra entry instead of as a line that might still come.
async fn conversions_through(gotenberg: &Gotenberg, marker: &[u8], at_least: usize) -> Vec<Access> {
    let what = format!("Gotenberg's log ending with the marker, at least {at_least} conversions");
    wait::until(&what, Duration::from_secs(10), || async {
        let log = gotenberg.conversions();
        let last = log.last().is_some_and(|a| carried(a, marker));
        if last && log.len() >= at_least { Ok(log) } else { Err(log) }
    })
    .await
}

#[tokio::test]
async fn every_office_file_converts_and_pdfium_counts_its_pages() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(4).await;
    let pod = pod_for(&gotenberg, &["--job-deadline-ms", "60000"]).await;
    for &(name, pages) in OFFICE_FILES {
        let response = pod.post("/v1/convert", doc(name)).await;
        assert_eq!(response.status(), 200, "{name}: {:?}", response.text().await);
        assert_eq!(response.headers()["content-type"], "application/pdf", "{name}");
        let pdf = response.bytes().await.unwrap().to_vec();
        assert!(pdf.starts_with(b"%PDF-"), "{name}");
        let counted = pdf_pages(&pod, pdf).await;
        match pages {
            Some(pages) => assert_eq!(counted, pages, "{name}"),
            None => assert!(counted >= 1, "{name}"),
        }
    }
    // LibreOffice refuses the damaged ODT, and so does the pod, before Gotenberg sees it.
    let (status, code) = error_code(pod.post("/v1/convert", doc("office/tagged.odt")).await).await;
    assert_eq!((status, code.as_str()), (422, "unreadable_document"));
    let marker = doc("office/test.docx");
    assert_eq!(pod.post("/v1/convert?pdfa=1b", marker.clone()).await.status(), 200);
    let log = conversions_through(&gotenberg, &marker, OFFICE_FILES.len() + 1).await;
    assert_eq!(log.len(), OFFICE_FILES.len() + 1, "only the convertible files reached Gotenberg");
}

#[tokio::test]
async fn libreoffice_leaves_its_pipes_in_its_instances_folder_not_in_the_machines_tmp() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(1).await;
    if !gotenberg.has_mount_namespace() {
        skip(
            capability::MOUNT_NAMESPACE,
            "scripts/read-only-tmp.sh could not make a mount namespace",
        );
        return;
    }
    let pod = pod_for(&gotenberg, &["--job-deadline-ms", "60000"]).await;
    assert_eq!(pod.post("/v1/convert", doc("office/test.docx")).await.status(), 200);
    // Each name carries a hash of its LibreOffice's own profile folder, so one in the machine's
    // /tmp under the same name would be this LibreOffice's.
    let pipes = gotenberg.libreoffice_pipes();
    assert!(
        !pipes.is_empty(),
        "no OSL_PIPE_* in the instance's tmp: LibreOffice's pipe went elsewhere"
    );
    for pipe in &pipes {
        let name = pipe.file_name().unwrap();
        assert!(!std::path::Path::new("/tmp").join(name).exists(), "{name:?} in /tmp");
    }
}

#[tokio::test]
async fn docx_previews_convert_once_and_options_reach_libreoffice() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(4).await;
    let pod = pod_for(&gotenberg, &["--job-deadline-ms", "60000"]).await;
    let docx = doc("office/test.docx");

    let render = pod.post("/v1/render?page=1&width=300", docx.clone()).await;
    assert_eq!(render.status(), 200);
    assert_eq!(render.headers()["content-type"], "image/png");
    assert_eq!(render.headers()["x-image-width"], "300");
    let extract = pod.post("/v1/extract", docx.clone()).await;
    assert_eq!(extract.status(), 200);
    let text: serde_json::Value = extract.json().await.unwrap();
    let pages = text["pages"].as_array().unwrap();
    assert!(!pages.is_empty());
    assert!(!pages[0]["text"].as_str().unwrap().trim().is_empty());
    let thumbnails = pod.post("/v1/thumbnails?width=80", docx.clone()).await;
    assert_eq!(thumbnails.status(), 200);
    let strip: serde_json::Value = thumbnails.json().await.unwrap();
    assert_eq!(strip["pages"].as_array().unwrap().len(), pages.len());
    assert_eq!(strip["pages"][0]["width"], 80);

    // One conversion served all three; the second and third were cache hits.
    let lookups = "renderpod_office_cache_lookups_total";
    assert_eq!(pod.metric(lookups, &["miss"]).await, 1.0);
    assert_eq!(pod.metric(lookups, &["hit"]).await, 2.0);
    assert_eq!(pod.metric("renderpod_office_conversions_total", &["\"ok\""]).await, 1.0);
    assert!(pod.metric("renderpod_office_cache_bytes", &[]).await > 1000.0);

    // Native page range and PDF/A: a new cache key each, done by LibreOffice.
    let slides = doc("office/sld-slides.pptx");
    let second = pod.post("/v1/convert?pages=2-3", slides).await;
    assert_eq!(second.status(), 200);
    assert_eq!(pdf_pages(&pod, second.bytes().await.unwrap().to_vec()).await, 2);
    let archival = pod.post("/v1/convert?pdfa=2b", docx.clone()).await;
    assert_eq!(archival.status(), 200);
    let archival = archival.bytes().await.unwrap();
    assert!(
        archival.windows(12).any(|w| w == b"pdfaid:part=" || w == b"<pdfaid:part"),
        "no PDF/A identification in the XMP metadata"
    );
    // Gotenberg saw the DOCX twice in all: once for the three previews, once as PDF/A.
    let log = conversions_through(&gotenberg, &docx, 3).await;
    assert_eq!(log.len(), 3, "{log:?}");
    let (status, code) = error_code(pod.post("/v1/convert?pdfa=9z", docx).await).await;
    assert_eq!((status, code.as_str()), (400, "invalid_request"));
}

#[tokio::test]
async fn a_share_of_two_holds_gotenberg_at_two_the_rest_wait_in_order_and_the_line_is_bounded() {
    let _serial = SERIAL.lock().await;
    // Gotenberg would queue up to 16 itself: only the pod's admission keeps it at two.
    let gotenberg = gotenberg(16).await;
    let share_dir = tempfile::tempdir().unwrap();
    let share_file = share_dir.path().join("concurrency");
    std::fs::write(&share_file, "2\n").unwrap();
    let pod = RenderPod::start(
        &["--office-concurrency", "1", "--office-queue-depth", "4", "--job-deadline-ms", "120000"],
        &[
            ("RENDERPOD_GOTENBERG_URL", &gotenberg.url()),
            ("RENDERPOD_OFFICE_SHARE_FILE", share_file.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(pod.readyz().await["office"]["admission"]["share"], 2);

    // Six different uploads (one conversion each), sent one after another into the line.
    let names = [
        "office/having-images.docx",
        "office/test.pptx",
        "office/test.docx",
        "office/images.odt",
        "office/sld-slides.pptx",
        "office/pythagoras.ods",
    ];
    // Gotenberg's own gauge of requests inside it, sampled all through the run.
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let sampler = {
        let url = gotenberg.url();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while stopped.try_recv().is_err() {
                if let Some(value) = queue_size_at(&url).await {
                    seen.push(value);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            seen
        })
    };
    let mut requests = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let (client, url, body) = (pod.client.clone(), pod.url("/v1/convert"), doc(name));
        requests.push(tokio::spawn(async move {
            client.post(url).body(body).send().await.unwrap().status()
        }));
        let admitted = i as f64 + 1.0;
        wait::until(&format!("request {i} at admission"), Duration::from_secs(10), || async {
            let seen = pod.metric("renderpod_office_in_flight", &[]).await
                + pod.metric("renderpod_office_waiting", &[]).await;
            if seen >= admitted { Ok(()) } else { Err(seen) }
        })
        .await;
    }
    assert_eq!(pod.metric("renderpod_office_in_flight", &[]).await, 2.0);
    assert_eq!(pod.metric("renderpod_office_waiting", &[]).await, 4.0);
    // The line is full: the seventh is refused at once, with a time to come back.
    let refused = pod.post("/v1/convert", doc("office/cols.odp")).await;
    assert_eq!(refused.status(), 503);
    let retry_after: u64 = refused.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry_after));
    assert_eq!(error_code(refused).await.1, "office_busy");

    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    stop.send(()).unwrap();
    let seen = sampler.await.unwrap();
    let most = seen.iter().copied().fold(0.0, f64::max);
    assert_eq!(most, 2.0, "Gotenberg's queue gauge over the run: {seen:?}");

    // Gotenberg's own account: never more than two requests inside it, and two at times.
    let log = conversions(&gotenberg, 6).await;
    assert_eq!(log.len(), 6);
    // Requests inside Gotenberg just after each arrival (20 ms on, past a hand-over's jitter).
    let most_at_once = log
        .iter()
        .map(|a| {
            let t = a.started + 0.02;
            log.iter().filter(|b| b.started <= t && t < b.ended).count()
        })
        .max()
        .unwrap();
    assert_eq!(most_at_once, 2, "overlapping requests in Gotenberg's access log: {log:?}");
    // FIFO: Gotenberg received them in the order they were sent (told apart by their sizes;
    // places granted within a few milliseconds of each other may swap on the way).
    let sizes: Vec<u64> = names.iter().map(|n| doc(n).len() as u64).collect();
    let arrival = |i: usize| {
        let matching: Vec<&Access> =
            log.iter().filter(|a| a.bytes_in >= sizes[i] && a.bytes_in - sizes[i] < 1024).collect();
        assert_eq!(matching.len(), 1, "request {i} in {log:?}");
        matching[0].started
    };
    let arrivals: Vec<f64> = (0..names.len()).map(arrival).collect();
    for i in 1..arrivals.len() {
        assert!(
            arrivals[i] + 0.05 >= arrivals[i - 1],
            "request {i} overtook request {}: {arrivals:?}",
            i - 1
        );
    }
    drop(share_dir);
}

#[tokio::test]
async fn the_share_file_resizes_admission_at_run_time_and_garbage_keeps_the_last_good_share() {
    let _serial = SERIAL.lock().await;
    let share_dir = tempfile::tempdir().unwrap();
    let share_file = share_dir.path().join("concurrency");
    std::fs::write(&share_file, "3").unwrap();
    let pod = RenderPod::start(
        &["--office-share-poll-ms", "50"],
        &[("RENDERPOD_OFFICE_SHARE_FILE", share_file.to_str().unwrap())],
    )
    .await;
    let share = || async { pod.readyz().await["office"]["admission"]["share"].as_u64() };
    assert_eq!(share().await, Some(3));
    std::fs::write(&share_file, "5").unwrap();
    wait::until("a share of 5", Duration::from_secs(5), || async {
        let seen = share().await;
        if seen == Some(5) { Ok(()) } else { Err(seen) }
    })
    .await;
    std::fs::write(&share_file, "many").unwrap();
    // Once the pod has read the garbage (it says so), the share is still the last good one.
    wait::until("the pod's word on the garbage share", Duration::from_secs(5), || async {
        pod.log_text().contains("keeping the last good Office share")
    })
    .await;
    assert_eq!(share().await, Some(5));
    assert_eq!(pod.metric("renderpod_office_share", &[]).await, 5.0);
    drop(share_dir);
}

#[tokio::test]
async fn a_client_gone_while_waiting_frees_its_place_and_one_gone_mid_conversion_cancels_it() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(4).await;
    let pod =
        pod_for(&gotenberg, &["--office-concurrency", "1", "--job-deadline-ms", "120000"]).await;
    let send = |name: &'static str| {
        let (client, url, body) = (pod.client.clone(), pod.url("/v1/convert"), doc(name));
        tokio::spawn(async move { client.post(url).body(body).send().await.map(|r| r.status()) })
    };
    let waiting = || pod.metric("renderpod_office_waiting", &[]);

    let waiting_at = |n: f64| async move {
        let seen = waiting().await;
        if seen == n { Ok(()) } else { Err(seen) }
    };
    let first = send("office/having-images.docx");
    wait::until("the first conversion in flight", Duration::from_secs(10), || async {
        pod.metric("renderpod_office_in_flight", &[]).await == 1.0
    })
    .await;
    let leaver = send("office/test.pptx");
    wait::until("one waiting", Duration::from_secs(10), || waiting_at(1.0)).await;
    let next = send("office/test.docx");
    wait::until("two waiting", Duration::from_secs(10), || waiting_at(2.0)).await;
    // The client of the second goes away: its place is free at once, before the first ends.
    leaver.abort();
    wait::until("the leaver's place freed", Duration::from_secs(10), || waiting_at(1.0)).await;
    assert!(!first.is_finished(), "the waiter stayed in line until the first ended");
    assert_eq!(first.await.unwrap().unwrap(), 200);
    assert_eq!(next.await.unwrap().unwrap(), 200);
    let log = conversions_through(&gotenberg, &doc("office/test.docx"), 2).await;
    assert_eq!(log.len(), 2, "the request that left never reached Gotenberg: {log:?}");
    // One at a time (a share of one): the next began once the first had ended.
    let gap = log[1].started - log[0].ended;
    println!("the next waiter reached Gotenberg {gap:.3} s after the first was answered");
    assert!(gap > -0.02, "the next overlapped the first by {:.3} s: {log:?}", -gap);

    // A client that leaves mid-conversion: Gotenberg sees the request cancelled (499) and
    // LibreOffice's unoconverter for it is gone, and the unoconverter's watchdog has Gotenberg
    // replace the LibreOffice that was still converting; the place is free for the next one.
    // (A document not converted yet: the first one would now come from the cache.)
    let cancelled = send("office/test.pptx");
    wait::until("a conversion in LibreOffice", Duration::from_secs(20), || async {
        gotenberg.converting() == 1
    })
    .await;
    cancelled.abort();
    wait::until(
        "Gotenberg's record of the cancellation (499)",
        Duration::from_secs(10),
        || async {
            let log = gotenberg.conversions();
            if log.iter().any(|a| a.status == 499) { Ok(()) } else { Err(log) }
        },
    )
    .await;
    wait::until("no conversion in LibreOffice", Duration::from_secs(10), || async {
        let converting = gotenberg.converting();
        if converting == 0 { Ok(()) } else { Err(converting) }
    })
    .await;
    assert_eq!(pod.metric("renderpod_office_in_flight", &[]).await, 0.0);
    // (A conversion sent before the new LibreOffice is up may start on the old one as it is
    // killed, and fail: docs/limits.md.)
    wait::until("the watchdog's restart of LibreOffice", Duration::from_secs(60), || async {
        let restarts = gotenberg.restarts();
        if restarts.len() == 1 { Ok(()) } else { Err(restarts) }
    })
    .await;
    assert_eq!(pod.post("/v1/convert", doc("office/cols.odp")).await.status(), 200);
}

#[tokio::test]
async fn hostile_input_gets_json_errors_before_gotenberg_and_the_pod_serves_the_next() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(4).await;
    let pod = pod_for(&gotenberg, &[]).await;
    let cases = [
        ("bad/random.bin", "/v1/convert", 415, "unsupported_format"),
        ("bad/random.bin", "/v1/info", 422, "unreadable_document"),
        ("bad/not-a-document.zip", "/v1/convert", 415, "unsupported_format"),
        ("bad/not-a-document.zip", "/v1/render", 415, "unsupported_format"),
        ("bad/truncated-test.docx", "/v1/convert", 422, "unreadable_document"),
        ("bad/truncated-test.docx", "/v1/thumbnails", 422, "unreadable_document"),
        ("bad/empty.docx", "/v1/convert", 422, "unreadable_document"),
        ("office/tagged.odt", "/v1/extract", 422, "unreadable_document"),
        ("pdf/trivial.pdf", "/v1/convert", 415, "unsupported_format"),
    ];
    for (name, route, status, code) in cases {
        let (got_status, got_code) = error_code(pod.post(route, doc(name)).await).await;
        assert_eq!((got_status, got_code.as_str()), (status, code), "{name} on {route}");
    }
    // The pod serves the next, and that one is all Gotenberg ever saw: each refusal came
    // before a conversion, so none waited on one or on its retries.
    let marker = doc("office/cols.odp");
    assert_eq!(pod.post("/v1/convert", marker.clone()).await.status(), 200);
    let log = conversions_through(&gotenberg, &marker, 1).await;
    assert_eq!(log.len(), 1, "Gotenberg saw: {log:?}");
    assert_eq!(pod.metric("renderpod_office_conversions_total", &[]).await, 1.0);
    assert_eq!(pod.metric("renderpod_worker_restarts_total", &[]).await, 0.0);
}

#[tokio::test]
async fn a_busy_gotenberg_is_retried_on_a_new_connection_until_it_has_room() {
    let _serial = SERIAL.lock().await;
    // Queue size 1: Gotenberg answers a second concurrent request 429 at once.
    let gotenberg = gotenberg(1).await;
    let pod =
        pod_for(&gotenberg, &["--office-concurrency", "2", "--job-deadline-ms", "120000"]).await;
    let (a, b) = tokio::join!(
        pod.post("/v1/convert", doc("office/having-images.docx")),
        pod.post("/v1/convert", doc("office/test.docx"))
    );
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    assert!(pod.metric("renderpod_office_retries_total", &["busy"]).await >= 1.0);
    wait::until("two conversions answered 200 by Gotenberg", Duration::from_secs(10), || async {
        let log = gotenberg.conversions();
        let answered = log.iter().filter(|a| a.status == 200).count();
        if answered == 2 { Ok(()) } else { Err(log) }
    })
    .await;
    // The busy answers were Gotenberg's own 429s, each on its own connection.
    assert!(
        gotenberg.conversions().iter().any(|a| a.status == 429),
        "{:?}",
        gotenberg.conversions()
    );
}

#[tokio::test]
async fn gotenberg_killed_or_absent_gives_clear_errors_and_pdfs_are_still_served() {
    let _serial = SERIAL.lock().await;
    let mut gotenberg = gotenberg(4).await;
    let pod = pod_for(&gotenberg, &["--job-deadline-ms", "60000"]).await;
    let pdf = doc("pdf/multipage.pdf");
    let converting = {
        let (client, url, body) =
            (pod.client.clone(), pod.url("/v1/convert"), doc("office/having-images.docx"));
        tokio::spawn(async move { client.post(url).body(body).send().await.unwrap() })
    };
    wait::until("a conversion in LibreOffice", Duration::from_secs(20), || async {
        gotenberg.converting() == 1
    })
    .await;
    gotenberg.kill();
    let (status, code) = error_code(converting.await.unwrap()).await;
    assert_eq!((status, code.as_str()), (503, "office_unavailable"));
    // Nothing listens now: a clear 503 after a few refused connections, not retries until the
    // deadline (60 s here): the first of three attempts and two retries.
    let response = pod.post("/v1/info", doc("office/test.docx")).await;
    assert!(response.headers().contains_key("retry-after"));
    assert_eq!(error_code(response).await, (503, "office_unavailable".to_string()));
    assert_eq!(pod.metric("renderpod_office_retries_total", &["reason=\"connect\""]).await, 2.0);
    assert_eq!(pod.post("/v1/info", pdf.clone()).await.status(), 200);
    assert_eq!(pod.client.get(pod.url("/readyz")).send().await.unwrap().status(), 200);

    // No Gotenberg configured at all.
    let plain = RenderPod::start(&[], &[]).await;
    let (status, code) = error_code(plain.post("/v1/convert", doc("office/test.docx")).await).await;
    assert_eq!((status, code.as_str()), (503, "office_not_configured"));
    assert_eq!(plain.post("/v1/render?page=1&dpi=20", pdf).await.status(), 200);
    assert_eq!(plain.client.get(plain.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(plain.readyz().await["office"]["configured"], false);
}

#[tokio::test]
async fn bombs_and_macros_are_refused_before_gotenberg_and_the_next_document_converts() {
    let _serial = SERIAL.lock().await;
    let gotenberg = gotenberg(4).await;
    // A total limit below the slow document's weight, to see the 413 as well.
    let pod = pod_for(&gotenberg, &["--office-max-inflated-bytes", "8Mi"]).await;
    // 256 MiB of paragraphs from about 300 KB: LibreOffice would lay it out for minutes.
    let bomb = packages::inflate_bomb_docx(256 << 20);
    for (attempt, route) in
        ["/v1/convert", "/v1/info", "/v1/convert", "/v1/render?page=1"].into_iter().enumerate()
    {
        let (status, code) = error_code(pod.post(route, bomb.clone()).await).await;
        assert_eq!((status, code.as_str()), (422, "office_inflate_bomb"), "attempt {attempt}");
    }
    let heavy = packages::slow_docx(200_000, 7);
    let (status, code) = error_code(pod.post("/v1/convert", heavy).await).await;
    assert_eq!((status, code.as_str()), (413, "office_inflated_too_large"));
    let (status, code) = error_code(pod.post("/v1/convert", packages::docm("hello")).await).await;
    assert_eq!((status, code.as_str()), (415, "macro_enabled_document"));
    // The next ordinary document converts, and it is the only one Gotenberg ever saw.
    let marker = packages::docx("after the bombs");
    let started = std::time::Instant::now();
    assert_eq!(pod.post("/v1/convert", marker.clone()).await.status(), 200);
    println!("the document after the bombs converted in {:.2} s", started.elapsed().as_secs_f64());
    let log = conversions_through(&gotenberg, &marker, 1).await;
    assert_eq!(log.len(), 1, "Gotenberg saw: {log:?}");
    assert_eq!(
        pod.metric("renderpod_office_conversions_total", &["office_inflate_bomb"]).await,
        4.0
    );
}

#[tokio::test]
async fn a_document_that_times_libreoffice_out_twice_is_quarantined_and_libreoffice_is_freed_each_time()
 {
    let _serial = SERIAL.lock().await;
    // Gotenberg's own timeout follows the operator's 60 s; the pod gives up after 15 s first.
    let gotenberg = gotenberg(4).await;
    let pod = pod_for(&gotenberg, &["--job-deadline-ms", "15000"]).await;
    // Honest and under every limit (about 2 to 1, 33 MB of text), but minutes of layout.
    let slow = packages::slow_docx(300_000, 1);
    for strike in 1..=2usize {
        let before = gotenberg.libreoffice();
        assert_eq!(before.len(), 1, "one LibreOffice before strike {strike}: {before:?}");
        let (status, code) = error_code(pod.post("/v1/convert", slow.clone()).await).await;
        assert_eq!((status, code.as_str()), (504, "conversion_timeout"), "strike {strike}");
        // The pod gave up and closed its connection; Gotenberg killed the unoconverter, and the
        // unoconverter's watchdog the LibreOffice still converting, and had Gotenberg start a
        // new one: with no conversion of ours asking for it.
        // (A minute: on a loaded machine LibreOffice takes tens of seconds to start.)
        let what = format!("a new LibreOffice in place of the busy one after strike {strike}");
        let renewed = wait::try_until(&what, Duration::from_secs(60), || async {
            let now = gotenberg.libreoffice();
            let renewed = !now.is_empty() && now.iter().all(|pid| !before.contains(pid));
            if renewed && gotenberg.restarts().len() == strike { Ok(()) } else { Err(now) }
        })
        .await;
        if let Err(timed_out) = renewed {
            let log = gotenberg.log_text();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!("{timed_out}; Gotenberg's log ends:\n{}", tail.join("\n"));
        }
    }
    assert_eq!(pod.metric("renderpod_office_strikes_total", &["quarantined=\"false\""]).await, 1.0);
    assert_eq!(pod.metric("renderpod_office_strikes_total", &["quarantined=\"true\""]).await, 1.0);
    // The third time it is refused before Gotenberg, on every route.
    for route in ["/v1/convert", "/v1/info"] {
        let (status, code) = error_code(pod.post(route, slow.clone()).await).await;
        assert_eq!((status, code.as_str()), (422, "document_quarantined"), "{route}");
    }
    // And LibreOffice is free for the next document at once, not after the slow one.
    let marker = packages::docx("after the slow one");
    let started = std::time::Instant::now();
    assert_eq!(pod.post("/v1/convert", marker.clone()).await.status(), 200);
    println!(
        "the next document, sent after the second timeout, converted in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let log = conversions_through(&gotenberg, &marker, 3).await;
    // Two abandoned conversions of the slow one, then the next document's: converted at once,
    // or on the pod's one retry of a 500 when its first attempt met the new LibreOffice still
    // starting (office::gotenberg's FAILED_ATTEMPTS; seen on a slow machine, the 500 0.1 s
    // after the second abandonment).
    let (abandoned, next) = log.split_at(2);
    assert!(
        abandoned.iter().all(|a| a.status == 499 && carried(a, &slow)),
        "two abandoned: {log:?}"
    );
    let statuses: Vec<u16> = next.iter().map(|a| a.status).collect();
    assert!(
        next.iter().all(|a| carried(a, &marker)) && matches!(statuses[..], [200] | [500, 200]),
        "then the next document converted: {log:?}"
    );
}
