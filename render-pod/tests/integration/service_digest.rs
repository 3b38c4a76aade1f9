//! Documents named by digest (RFC 9530 `Repr-Digest`, `Content-Digest`) against the real
//! service and real PDFium: a pod that holds the document answers without its body (no `100
//! Continue`, or no body at all on a kept connection), one that does not asks for it; a wrong
//! digest is refused and never kept; the pod never answers one document's pages for another's
//! digest; held documents stay within the upload budget and give way to uploads.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use render_pod::ops::DocHash;
use sha2::{Digest, Sha256};

use crate::common::raw::{self, KeepAlive};
use crate::common::{Server, doc};

/// The header line naming `document` by SHA-256.
fn sha256_line(document: &[u8]) -> String {
    format!("Repr-Digest: sha-256=:{}:\r\n", STANDARD.encode(Sha256::digest(document)))
}

/// The header line naming `document` by the pod's own hash.
fn blake3_line(document: &[u8]) -> String {
    format!("Repr-Digest: blake3=:{}:\r\n", STANDARD.encode(DocHash::of(document).0))
}

/// The answer to a plain upload (no digest): what every other way of asking must match.
async fn plain(server: &Server, path: &str, document: &[u8]) -> Vec<u8> {
    let response = server.post(path, document.to_vec()).await;
    assert_eq!(response.status(), 200, "{path}");
    response.bytes().await.unwrap().to_vec()
}

async fn hits(server: &Server) -> f64 {
    server.metric("renderpod_document_cache_lookups_total", &["result=\"hit\""]).await
}

async fn received(server: &Server) -> f64 {
    server.metric("renderpod_bytes_in_total", &[]).await
}

#[tokio::test]
async fn a_held_document_is_answered_without_its_body() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let manual = doc("pdf/R-intro.pdf");
    let (page3, page4) = ("/v1/render?page=3&dpi=72", "/v1/render?page=4&dpi=72");
    // Not held yet: the pod asks for the body (100 Continue), checks and keeps it.
    let first = raw::upload_expecting_continue(&addr, page3, &manual, &sha256_line(&manual)).await;
    assert!(first.invited, "a document the pod does not hold is asked for");
    assert_eq!(first.answer.status, 200);
    assert_eq!(first.answer.body, plain(&server, page3, &manual).await, "the same PNG bytes");
    let before = received(&server).await;
    // Held: answered at once, the body never asked for, and the connection closed (the body
    // it declared was never sent).
    let second = raw::upload_expecting_continue(&addr, page4, &manual, &sha256_line(&manual)).await;
    assert!(!second.invited, "the pod asked for a document it holds");
    assert_eq!(second.answer.status, 200);
    assert_eq!(second.answer.header("connection"), Some("close"));
    assert_eq!(received(&server).await, before, "no document bytes were received");
    assert_eq!(second.answer.body, plain(&server, page4, &manual).await);
    assert!(hits(&server).await >= 1.0);
    // The pod's own hash names it as well.
    let by_blake3 =
        raw::upload_expecting_continue(&addr, page4, &manual, &blake3_line(&manual)).await;
    assert!(!by_blake3.invited);
    assert_eq!(by_blake3.answer.body, second.answer.body);
}

#[tokio::test]
async fn a_viewer_pages_through_a_held_document_on_one_connection() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let manual = doc("pdf/R-intro.pdf");
    let digest = sha256_line(&manual);
    let mut viewer = KeepAlive::connect(&raw::addr(&server.base)).await;
    // Named without a body: not held yet, 412, and the connection stays.
    let (refused, _) = viewer.post("/v1/info", &digest, &[], false).await.unwrap();
    assert_eq!((refused.status, refused.code().as_str()), (412, "document_not_held"));
    assert_eq!(refused.header("connection"), None, "the connection is kept");
    // Sent once with its digest on the same connection, then named by it page after page.
    let (info, sent) = viewer.post("/v1/info", &digest, &manual, false).await.unwrap();
    assert_eq!((info.status, sent), (200, true));
    let after_upload = viewer.sent;
    for page in 1..=5 {
        let path = format!("/v1/render?page={page}&dpi=50");
        let (image, sent) = viewer.post(&path, &digest, &[], false).await.expect("connection kept");
        assert_eq!((image.status, sent), (200, false), "page {page}");
        assert_eq!(image.body, plain(&server, &path, &manual).await, "page {page}");
    }
    assert!(viewer.sent - after_upload < 5 * 1024, "five pages cost only their heads");
    assert!(!viewer.closed_within(std::time::Duration::from_millis(100)).await);
}

#[tokio::test]
async fn a_digest_the_pod_does_not_hold_falls_back_to_the_upload() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let (a, b) = (doc("pdf/libtasn1.pdf"), doc("pdf/cmyk.pdf"));
    let mut viewer = KeepAlive::connect(&addr).await;
    for (document, path) in [(&a, "/v1/render?page=2&dpi=60"), (&b, "/v1/render?page=1&dpi=60")] {
        // On a kept connection, asking first: the pod invites the body and keeps the
        // connection after reading it.
        let (answer, sent) =
            viewer.post(path, &sha256_line(document), document, true).await.unwrap();
        assert_eq!((answer.status, sent), (200, true), "{path}");
        assert_eq!(answer.body, plain(&server, path, document).await);
        assert_eq!(answer.header("connection"), None);
    }
    // Both are held now.
    let again = raw::upload_expecting_continue(&addr, "/v1/info", &a, &sha256_line(&a)).await;
    assert!(!again.invited);
    let info: serde_json::Value = serde_json::from_slice(&again.answer.body).unwrap();
    assert_eq!(info["page_count"], 36, "libtasn1.pdf's pages");
}

#[tokio::test]
async fn a_wrong_digest_is_refused_and_never_served() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let (a, b) = (doc("pdf/libtasn1.pdf"), doc("pdf/R-intro.pdf"));
    // a sent under b's digest: refused after reading, and not kept under either digest.
    let lie = raw::upload_expecting_continue(&addr, "/v1/info", &a, &sha256_line(&b)).await;
    assert!(lie.invited);
    assert_eq!((lie.answer.status, lie.answer.code().as_str()), (400, "digest_mismatch"));
    let mut viewer = KeepAlive::connect(&addr).await;
    for digest in [sha256_line(&b), sha256_line(&a), blake3_line(&a), blake3_line(&b)] {
        let (answer, _) = viewer.post("/v1/info", &digest, &[], false).await.unwrap();
        assert_eq!((answer.status, answer.code().as_str()), (412, "document_not_held"), "{digest}");
    }
    // b kept rightly. Then a named by b's digest, waiting to be asked: the pod holds b and
    // answers for b, never reading a.
    let (kept, _) = viewer.post("/v1/info", &sha256_line(&b), &b, false).await.unwrap();
    assert_eq!(kept.status, 200);
    let named = raw::upload_expecting_continue(&addr, "/v1/info", &a, &blake3_line(&b)).await;
    assert!(!named.invited);
    assert_eq!(named.answer.body, kept.body, "b's own info");
    // a sent at once under b's digest: read, refused, and b's digest still names b.
    let mut liar = KeepAlive::connect(&addr).await;
    let (lie, sent) = liar.post("/v1/info", &blake3_line(&b), &a, false).await.unwrap();
    assert!(sent);
    assert_eq!((lie.status, lie.code().as_str()), (400, "digest_mismatch"));
    let (by_digest, _) = viewer.post("/v1/info", &sha256_line(&b), &[], false).await.unwrap();
    assert_eq!(by_digest.body, kept.body);
    let (by_blake3, _) = viewer.post("/v1/info", &blake3_line(&b), &[], false).await.unwrap();
    assert_eq!(by_blake3.body, kept.body);
    // A malformed digest is a bad request, answered before the body.
    let bad =
        raw::upload_expecting_continue(&addr, "/v1/info", &a, "Repr-Digest: sha-256=:AAAA:\r\n")
            .await;
    assert!(!bad.invited);
    assert_eq!((bad.answer.status, bad.answer.code().as_str()), (400, "invalid_request"));
    assert_eq!(server.metric("renderpod_rejections_total", &["digest_mismatch"]).await, 2.0);
}

#[tokio::test]
async fn the_pod_never_answers_one_documents_pages_for_anothers_digest() {
    let server = Server::start(&[]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let documents = [doc("pdf/libtasn1.pdf"), doc("pdf/R-intro.pdf"), doc("pdf/gnuplot.pdf")];
    let mut viewer = KeepAlive::connect(&addr).await;
    for document in &documents {
        let (answer, _) =
            viewer.post("/v1/info", &sha256_line(document), document, false).await.unwrap();
        assert_eq!(answer.status, 200);
    }
    // Each digest, in both algorithms and in turn, gets its own document's info and pages.
    for _ in 0..2 {
        for document in &documents {
            for digest in [sha256_line(document), blake3_line(document)] {
                let (info, _) = viewer.post("/v1/info", &digest, &[], false).await.unwrap();
                assert_eq!(info.body, plain(&server, "/v1/info", document).await);
                let path = "/v1/render?page=2&width=120";
                let (page, _) = viewer.post(path, &digest, &[], false).await.unwrap();
                assert_eq!(page.body, plain(&server, path, document).await);
            }
        }
    }
}

#[tokio::test]
async fn held_documents_stay_in_the_upload_budget_and_give_way_to_uploads() {
    // A budget of 3 MiB: gnuplot.pdf (1.2 MB) held, then uploads that need the room.
    let server = Server::start(&["--upload-budget", "3Mi", "--max-body-bytes", "3Mi"]);
    server.wait_ready().await;
    let addr = raw::addr(&server.base);
    let gnuplot = doc("pdf/gnuplot.pdf");
    let mut viewer = KeepAlive::connect(&addr).await;
    let (kept, _) = viewer.post("/v1/info", &sha256_line(&gnuplot), &gnuplot, false).await.unwrap();
    assert_eq!(kept.status, 200);
    // At rest, the held document is what the budget holds, to the byte.
    let reserved = || server.metric("renderpod_upload_reserved_bytes", &[]);
    assert_eq!(reserved().await, gnuplot.len() as f64);
    assert_eq!(server.metric("renderpod_document_cache_bytes", &[]).await, gnuplot.len() as f64);
    // An upload of 2.5 MB does not fit beside it: the held document makes room.
    let large = crate::common::pdf_of_len(2_500_000);
    let response = server.post("/v1/info", large).await;
    assert_eq!(response.status(), 200);
    let (gone, _) = viewer.post("/v1/info", &sha256_line(&gnuplot), &[], false).await.unwrap();
    assert_eq!((gone.status, gone.code().as_str()), (412, "document_not_held"));
    assert_eq!(reserved().await, 0.0, "nothing held, nothing reserved");
    assert!(server.metric("renderpod_document_cache_reclaimed_total", &[]).await >= 1.0);
    // A multipart form's document is held for its own bytes, not the form's.
    let form = reqwest::multipart::Form::new()
        .text("note", "x".repeat(100_000))
        .part("file", reqwest::multipart::Part::bytes(gnuplot.clone()));
    let response = server
        .client
        .post(server.url("/v1/info"))
        .header("Repr-Digest", sha256_line(&gnuplot).trim_end().trim_start_matches("Repr-Digest: "))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(reserved().await, gnuplot.len() as f64);
}
