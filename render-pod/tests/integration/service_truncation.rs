//! Limits that truncate where a partial answer serves: `/v1/extract` of a document past the page
//! limit, without a range, answers its first pages with `truncated` and the page count; a named
//! range past the limit is still refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Server, error_code};
use renderpool_testkit::bombs;

#[tokio::test]
async fn extract_of_a_long_document_answers_its_first_pages_and_says_it_cut() {
    let server = Server::start(&["--max-pages", "500"]);
    server.wait_ready().await;
    let manual = bombs::many_pages(1200, true);

    let response = server.post("/v1/extract", manual.clone()).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["truncated"], true);
    assert_eq!(body["page_count"], 1200);
    let pages = body["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 500);
    for (i, page) in pages.iter().enumerate() {
        assert_eq!(page["page"], i + 1);
        assert_eq!(page["text"].as_str().unwrap().trim(), format!("Page {}", i + 1));
    }

    // A range within the limit, anywhere in the document, is answered whole.
    let body: serde_json::Value =
        server.post("/v1/extract?pages=1101-1200", manual.clone()).await.json().await.unwrap();
    assert_eq!(
        (body["truncated"].clone(), body["pages"].as_array().unwrap().len()),
        (false.into(), 100)
    );
    assert_eq!(body["pages"][0]["text"].as_str().unwrap().trim(), "Page 1101");

    // The character cap still applies on top.
    let body: serde_json::Value =
        server.post("/v1/extract?max_chars=20", manual.clone()).await.json().await.unwrap();
    assert_eq!((body["truncated"].clone(), body["page_count"].clone()), (true.into(), 1200.into()));
    let kept: usize = body["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap().chars().count())
        .sum();
    assert_eq!(kept, 20);

    // An explicit range past the limit is refused, as before.
    let refused = server.post("/v1/extract?pages=1-501", manual).await;
    assert_eq!(error_code(refused).await, (422, "too_many_pages".to_string()));
}
