//! Entry points of the fuzz targets in `fuzz/` and of the replay of their corpora in the test
//! suite: each runs arbitrary bytes through a parser of what a caller sends (the Office
//! detector, a route's query, the request headers the routes read) and panics only where the
//! parser breaks a promise of its own. Not part of the service's API.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Uri, header};

use super::documents::query_of;
use super::{ThumbnailLimits, digest, etag, input, params};
use crate::office::InflationLimits;
use crate::office::detect::{Detected, detect, inflation};
use crate::ops::{Op, RenderSize};

/// Limits the parsers are judged against: any would do, and small ones make refusals common.
const MAX_PAGES: u32 = 50;
const THUMBNAILS: ThumbnailLimits =
    ThumbnailLimits { max_width: 400, max_dpi: 96.0, max_pixels: 1 << 22 };
const INFLATION: InflationLimits =
    InflationLimits { max_inflated_bytes: 1 << 20, max_part_bytes: 512 << 10, max_ratio: 100 };

/// The Office detector on a whole upload (ZIP, ZIP64, CFB, RTF or anything else), and the
/// weighing of a package's declared sizes against the default limits.
pub fn office_detect(data: &[u8]) {
    let detected = detect(data);
    // A PDF verdict means PDFium reads the bytes as they are: it must have seen the marker.
    if detected == Detected::Pdf {
        assert!(data.windows(5).any(|w| w == b"%PDF-"), "a PDF without %PDF-");
    }
    if let Ok(weighed) = inflation::check(data, &INFLATION) {
        let total = weighed.inflated_bytes;
        assert!(total <= INFLATION.max_inflated_bytes, "{total} inflated bytes admitted");
    }
}

/// Every route's query parser on `data` as the query string.
pub fn query(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(uri) = format!("/v1/render?{text}").parse::<Uri>() else { return };
    let Ok(query) = query_of(&uri) else { return };
    let _ = params::render(&query);
    let _ = params::watermark(&query);
    let _ = params::convert(&query, MAX_PAGES);
    if let Ok(Op::Extract { pages: Some(pages), .. }) = params::extract(&query, MAX_PAGES) {
        let count = pages.count();
        assert!(count <= u64::from(MAX_PAGES), "{count} pages admitted past {MAX_PAGES}");
    }
    if let Ok((_, RenderSize::Width(width), _, _)) =
        params::thumbnails(&query, MAX_PAGES, THUMBNAILS)
    {
        let max = THUMBNAILS.max_width;
        assert!(width <= max, "width {width} admitted past {max}");
    }
}

/// The headers the document routes read: `data` is lines, each the value of the next header of
/// the list below in turn (a line that is no valid header value is skipped).
pub fn headers(data: &[u8]) {
    let names = [
        HeaderName::from_static(input::PASSWORD_HEADER),
        HeaderName::from_static(input::REQUEST_TIMEOUT_HEADER),
        header::ACCEPT,
        header::CONTENT_TYPE,
        header::IF_NONE_MATCH,
        HeaderName::from_static(digest::REPR_DIGEST),
        HeaderName::from_static(digest::CONTENT_DIGEST),
    ];
    let mut headers = HeaderMap::new();
    let lines = data.split(|b| *b == b'\n');
    for (line, name) in lines.zip(names.iter().cycle()) {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            headers.append(name.clone(), value);
        }
    }
    let _ = input::password(&headers);
    if let Ok(Some(timeout)) = input::request_timeout(&headers) {
        let day = std::time::Duration::from_secs(86_400);
        assert!(!timeout.is_zero() && timeout <= day, "Request-Timeout {timeout:?} admitted");
    }
    let _ = input::wants_ndjson(&headers);
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let _ = input::classify(content_type);
    if let Some(if_none_match) = headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        let _ = etag::none_match(if_none_match, "\"0123456789abcdef\"");
    }
    // Each digest read names what the header said: written back alone, it reads the same.
    for found in digest::requested(&headers).unwrap_or_default() {
        let mut alone = HeaderMap::new();
        let value = digest::header_value(&found);
        alone.insert(
            HeaderName::from_static(digest::REPR_DIGEST),
            value.parse().unwrap_or_else(|_| panic!("{value:?} is no header value")),
        );
        assert_eq!(digest::requested(&alone).ok(), Some(vec![found]), "{value}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::PathBuf;

    /// Fewer inputs than this and the replay would prove next to nothing.
    const MIN_INPUTS: usize = 10;

    /// Runs `entry` on every input of `fuzz/corpus/<target>`.
    fn replay(target: &str, entry: fn(&[u8])) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
        let inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        assert!(inputs.len() >= MIN_INPUTS, "{}: {} inputs", dir.display(), inputs.len());
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            let result = std::panic::catch_unwind(|| entry(&bytes));
            assert!(result.is_ok(), "{target} panics on {}", input.display());
        }
    }

    #[test]
    fn the_office_detector_corpus_replays_without_a_panic() {
        replay("office_detect", super::office_detect);
    }

    #[test]
    fn the_query_corpus_replays_without_a_panic() {
        replay("query", super::query);
    }

    #[test]
    fn the_headers_corpus_replays_without_a_panic() {
        replay("headers", super::headers);
    }
}
