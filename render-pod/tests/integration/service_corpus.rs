//! The service over real PDFium and the real corpus: info, extract, render, thumbnails,
//! watermark, bad documents, limits, and the service staying up through all of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Server, doc, error_code, manifest};

fn pdf_names() -> Vec<String> {
    let mut names: Vec<String> =
        manifest().as_object().unwrap().keys().filter(|k| k.starts_with("pdf/")).cloned().collect();
    names.sort();
    assert!(names.len() >= 20, "corpus has {} PDFs", names.len());
    names
}

#[tokio::test]
async fn every_pdf_gives_manifest_page_count_words_and_image_size() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let manifest = manifest();
    for name in pdf_names() {
        let entry = &manifest[&name];
        let bytes = doc(&name);

        let response = server.post("/v1/info", bytes.clone()).await;
        assert_eq!(response.status(), 200, "{name}");
        let info: serde_json::Value = response.json().await.unwrap();
        assert_eq!(info["page_count"], entry["pages"], "{name}");
        let (w_pt, h_pt) = (
            info["pages"][0]["width_pt"].as_f64().unwrap(),
            info["pages"][0]["height_pt"].as_f64().unwrap(),
        );
        let expected_pt = entry["first_page_pt"].as_array().unwrap();
        assert!((w_pt - expected_pt[0].as_f64().unwrap()).abs() < 0.5, "{name} width {w_pt}");
        assert!((h_pt - expected_pt[1].as_f64().unwrap()).abs() < 0.5, "{name} height {h_pt}");

        let response = server.post("/v1/extract?pages=1", bytes.clone()).await;
        assert_eq!(response.status(), 200, "{name}");
        let text: serde_json::Value = response.json().await.unwrap();
        let first = text["pages"][0]["text"].as_str().unwrap();
        for word in entry["first_page_words"].as_array().unwrap() {
            let word = word.as_str().unwrap();
            assert!(first.contains(word), "{name}: {word:?} missing from page 1 text");
        }

        let response = server.post("/v1/render?page=1&dpi=36", bytes).await;
        assert_eq!(response.status(), 200, "{name}");
        assert_eq!(response.headers()["content-type"], "image/png");
        let png = response.bytes().await.unwrap();
        let image = image::load_from_memory_with_format(&png, image::ImageFormat::Png).unwrap();
        let (ew, eh) = ((w_pt / 2.0).round() as i64, (h_pt / 2.0).round() as i64);
        assert!(
            (i64::from(image.width()) - ew).abs() <= 1,
            "{name}: width {} vs {ew}",
            image.width()
        );
        assert!(
            (i64::from(image.height()) - eh).abs() <= 1,
            "{name}: height {} vs {eh}",
            image.height()
        );
    }
}

#[tokio::test]
async fn formats_and_width_give_decodable_images_of_the_asked_size() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let bytes = doc("pdf/R-intro.pdf");
    for (format, decoder) in [
        ("png", image::ImageFormat::Png),
        ("jpeg", image::ImageFormat::Jpeg),
        ("webp", image::ImageFormat::WebP),
    ] {
        let response = server
            .post(&format!("/v1/render?page=2&width=400&format={format}"), bytes.clone())
            .await;
        assert_eq!(response.status(), 200, "{format}");
        let headers = response.headers().clone();
        let body = response.bytes().await.unwrap();
        let image = image::load_from_memory_with_format(&body, decoder).unwrap();
        assert_eq!(image.width(), 400, "{format}");
        assert_eq!(image.height(), 518, "{format}: 400 * 792 / 612");
        assert_eq!(headers["x-image-width"], "400");
    }
    // 150 dpi default.
    let response = server.post("/v1/render?page=1", bytes).await;
    let image = image::load_from_memory(&response.bytes().await.unwrap()).unwrap();
    assert_eq!((image.width(), image.height()), (1275, 1650));
}

#[tokio::test]
async fn bad_documents_get_typed_errors_and_the_service_keeps_serving() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    for (name, code) in [
        ("bad/empty.pdf", "unreadable_document"),
        ("bad/invalid.pdf", "unreadable_document"),
        ("bad/truncated-R-intro.pdf", "unreadable_document"),
        ("bad/r2-user-password.pdf", "password_required"),
        ("bad/r6-user-password.pdf", "password_required"),
    ] {
        for route in ["/v1/info", "/v1/extract", "/v1/render?page=1", "/v1/thumbnails?pages=1"] {
            let (status, got) = error_code(server.post(route, doc(name)).await).await;
            assert_eq!((status, got.as_str()), (422, code), "{name} {route}");
        }
    }
    for name in ["bad/r2-user-password.pdf", "bad/r6-user-password.pdf"] {
        let wrong = server
            .client
            .post(server.url("/v1/info"))
            .header("x-pdf-password", "nope")
            .body(doc(name))
            .send()
            .await
            .unwrap();
        assert_eq!(error_code(wrong).await, (422, "wrong_password".to_string()), "{name}");
        let right = server
            .client
            .post(server.url("/v1/extract"))
            .header("x-pdf-password", "asdfzxcv")
            .body(doc(name))
            .send()
            .await
            .unwrap();
        assert_eq!(right.status(), 200, "{name}");
        let text: serde_json::Value = right.json().await.unwrap();
        assert_eq!(text["pages"].as_array().unwrap().len(), 1, "{name}");
    }
    // Still serving, and no worker was lost on the way.
    let ok = server.post("/v1/info", doc("pdf/trivial.pdf")).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(server.metric("renderpod_worker_restarts_total", &[]).await, 0.0);
    assert_eq!(server.client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn request_errors_and_limits_are_checked_up_front() {
    let server =
        Server::start(&["--max-body-bytes", "1Mi", "--max-pages", "50", "--max-pixels", "2000000"]);
    server.wait_ready().await;
    let small = doc("pdf/R-intro.pdf"); // 632 KB, 113 pages
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("/v1/render?page=0", small.clone(), 400, "invalid_request"),
        ("/v1/render?page=1&dpi=72&width=100", small.clone(), 400, "invalid_request"),
        ("/v1/render?page=1&format=gif", small.clone(), 400, "invalid_request"),
        ("/v1/render?page=1&dpi=0", small.clone(), 400, "invalid_request"),
        ("/v1/render?page=500", small.clone(), 422, "page_out_of_range"),
        ("/v1/render?page=1&dpi=600", small.clone(), 422, "too_many_pixels"),
        ("/v1/extract?pages=1-60", small.clone(), 422, "too_many_pages"),
        ("/v1/extract?pages=3-x", small.clone(), 400, "invalid_request"),
        ("/v1/thumbnails", small.clone(), 422, "too_many_pages"),
        ("/v1/thumbnails?pages=110-120", small.clone(), 422, "page_out_of_range"),
        ("/v1/watermark", small.clone(), 400, "invalid_request"),
        ("/v1/info", doc("pdf/gnuplot.pdf"), 413, "body_too_large"),
    ];
    for (route, body, status, code) in cases {
        assert_eq!(
            error_code(server.post(route, body).await).await,
            (status, code.to_string()),
            "{route}"
        );
    }
    let office = server
        .client
        .post(server.url("/v1/info"))
        .header(
            "content-type",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        )
        .body(doc("office/test.docx"))
        .send()
        .await
        .unwrap();
    // No Gotenberg configured: Office input is refused with a clear 503, PDFs are unaffected.
    assert_eq!(error_code(office).await, (503, "office_not_configured".to_string()));
    // Office bytes are recognised whatever the label; a damaged package never reaches Gotenberg.
    let sniffed = server.post("/v1/info", doc("office/tagged.odt")).await;
    assert_eq!(error_code(sniffed).await, (422, "unreadable_document".to_string()));
    let image = server
        .client
        .post(server.url("/v1/info"))
        .header("content-type", "image/png")
        .body(vec![1, 2, 3])
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(image).await, (415, "unsupported_media_type".to_string()));
    // Multipart over the size limit.
    let form = reqwest::multipart::Form::new()
        .part("file", reqwest::multipart::Part::bytes(doc("pdf/gnuplot.pdf")).file_name("g.pdf"));
    let big = server.client.post(server.url("/v1/info")).multipart(form).send().await.unwrap();
    assert_eq!(error_code(big).await, (413, "body_too_large".to_string()));
    assert_eq!(server.metric("renderpod_worker_restarts_total", &[]).await, 0.0);
}

#[tokio::test]
async fn a_chunked_upload_over_the_limit_is_answered_413_not_cut_off() {
    // No Content-Length, so the limit is only found while reading; the client must still be
    // able to send everything and read a JSON 413, not hit a reset mid-upload.
    let server = Server::start(&["--max-body-bytes", "1Mi"]);
    server.wait_ready().await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let answer = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        let head = "POST /v1/info HTTP/1.1\r\nHost: test\r\nContent-Type: application/pdf\r\n\
                    Transfer-Encoding: chunked\r\n\r\n";
        stream.write_all(head.as_bytes()).unwrap();
        // 20 MB: more than the socket buffers between client and server can absorb.
        let upload = doc("pdf/gnuplot.pdf").repeat(16);
        for chunk in upload.chunks(64 << 10) {
            stream.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).unwrap();
            stream.write_all(chunk).unwrap();
            stream.write_all(b"\r\n").unwrap();
        }
        stream.write_all(b"0\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"body_too_large\""), "{answer}");
}

#[tokio::test]
async fn multipart_thumbnails_and_watermark() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(doc("pdf/libtasn1.pdf"))
            .file_name("libtasn1.pdf")
            .mime_str("application/pdf")
            .unwrap(),
    );
    let response = server
        .client
        .post(server.url("/v1/thumbnails?pages=1-5,9&width=160&format=jpeg"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    let pages = body["pages"].as_array().unwrap();
    let numbers: Vec<u64> = pages.iter().map(|p| p["page"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 9]);
    use base64::Engine as _;
    for page in pages {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(page["data"].as_str().unwrap())
            .unwrap();
        let image = image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).unwrap();
        assert_eq!(image.width(), 160);
        assert_eq!(u64::from(image.height()), page["height"].as_u64().unwrap());
    }
    // The page tasks went through the shared queue: one info job plus one job per page.
    assert_eq!(server.metric("renderpod_jobs_total", &["op=\"render\""]).await, 6.0);

    let original = doc("pdf/tagged.pdf");
    let response = server.post("/v1/watermark?text=CONFIDENTIAL%20DRAFT", original).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/pdf");
    let stamped = response.bytes().await.unwrap().to_vec();
    let info: serde_json::Value =
        server.post("/v1/info", stamped.clone()).await.json().await.unwrap();
    assert_eq!(info["page_count"], 2);
    let text: serde_json::Value = server.post("/v1/extract", stamped).await.json().await.unwrap();
    for page in text["pages"].as_array().unwrap() {
        assert!(page["text"].as_str().unwrap().contains("CONFIDENTIAL DRAFT"), "{page}");
    }
}
