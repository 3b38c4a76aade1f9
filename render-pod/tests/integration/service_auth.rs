//! `--auth-token-file`: the real `render-pod serve` with real PDFium answers `/v1/*` only to
//! `Authorization: Bearer <the file's token>` (401 `unauthorized` with `WWW-Authenticate: Bearer`
//! otherwise), keeps health, readiness, metrics and the API description open, takes a rotated
//! file without a restart, and refuses to start without a usable file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Server, binary, doc, error_code, serve_args};
use renderpool_testkit::wait;

/// A POST of a PDF to `path` with `authorization` as the header, if any.
async fn post(server: &Server, path: &str, authorization: Option<&str>) -> reqwest::Response {
    let mut request = server
        .client
        .post(server.url(path))
        .header("content-type", "application/pdf")
        .body(doc("pdf/trivial.pdf"));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    request.send().await.unwrap()
}

/// Replaces the token file the way the kubelet updates a Secret volume: a new file renamed over.
fn rotate(path: &std::path::Path, token: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, token).unwrap();
    std::fs::rename(&next, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_routes_need_the_token_and_health_readiness_and_metrics_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "first-token-4f1c\n").unwrap();
    let server = Server::start(&["--slots", "1", "--auth-token-file", file.to_str().unwrap()]);
    // Readiness answers without a token.
    server.wait_ready().await;

    let refused = [
        None,
        Some("Bearer wrong-token"),
        Some("Bearer first-token-4f1"),
        Some("Bearer first-token-4f1cX"),
        Some("Basic first-token-4f1c"),
        Some("first-token-4f1c"),
    ];
    for authorization in refused {
        for path in ["/v1/info", "/v1/render?page=1&dpi=72"] {
            let response = post(&server, path, authorization).await;
            let challenge = response.headers().get("www-authenticate").cloned();
            assert_eq!(challenge.as_ref().map(|v| v.to_str().unwrap()), Some("Bearer"));
            assert_eq!(
                error_code(response).await,
                (401, "unauthorized".into()),
                "{path} {authorization:?}"
            );
        }
    }
    let refusals = 2.0 * refused.len() as f64;
    let counted = server.metric("renderpod_rejections_total", &["reason=\"unauthorized\""]).await;
    assert_eq!(counted, refusals);

    // The right token, in any case of the scheme: PDFium does the work.
    let info = post(&server, "/v1/info", Some("Bearer first-token-4f1c")).await;
    assert_eq!(info.status(), 200);
    let info: serde_json::Value = info.json().await.unwrap();
    assert_eq!(info["page_count"], 1, "{info}");
    let page = post(&server, "/v1/render?page=1&dpi=72", Some("bearer first-token-4f1c")).await;
    assert_eq!(page.status(), 200);
    assert!(page.bytes().await.unwrap().starts_with(b"\x89PNG"));

    // What the kubelet and a scraper call needs no token.
    for path in ["/healthz", "/readyz", "/metrics", "/openapi.json"] {
        let response = server.client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    // Only the two admitted requests ran: a refusal never reaches a slot.
    server.wait_metric_at("renderpod_jobs_total", &[], 2.0).await;

    // A rotated Secret: the new token is taken within a second or so, the old one refused.
    rotate(&file, "second-token-9d2e");
    wait::until("the rotated token admitted", Duration::from_secs(10), || async {
        match post(&server, "/v1/info", Some("Bearer second-token-9d2e")).await.status().as_u16() {
            200 => Ok(()),
            other => Err(other),
        }
    })
    .await;
    let old = post(&server, "/v1/info", Some("Bearer first-token-4f1c")).await;
    assert_eq!(error_code(old).await, (401, "unauthorized".into()));

    // A file gone mid-rotation keeps the last token.
    std::fs::remove_file(&file).unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let kept = post(&server, "/v1/info", Some("Bearer second-token-9d2e")).await;
    assert_eq!(kept.status(), 200);
}

#[test]
fn a_missing_or_empty_token_file_stops_the_pod_before_it_listens() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let missing = dir.path().join("missing");
    for (file, says) in [(&missing, "cannot read the auth token file"), (&empty, "is empty")] {
        let output = Command::new(binary())
            .args(serve_args(&["--slots", "1", "--auth-token-file", file.to_str().unwrap()]))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("\"listening\""), "{stderr}");
    }
}
