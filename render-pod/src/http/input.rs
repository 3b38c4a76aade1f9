//! What a request's headers say before its body is read (what the body is, the password, the
//! client's deadline, the answer's form), and refusing a request without reading its body.

use std::time::Duration;

use axum::body::BodyDataStream;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use futures::StreamExt;
use tokio::sync::Semaphore;

use super::error::ApiError;

/// Header carrying the password of an encrypted PDF.
pub const PASSWORD_HEADER: &str = "x-pdf-password";

/// Header carrying the client's own deadline: seconds from sending the request (decimal, e.g.
/// `2.5`) after which the answer is of no use to it.
pub const REQUEST_TIMEOUT_HEADER: &str = "request-timeout";

/// The media type of the streaming filmstrip: one JSON object a line.
pub const NDJSON: &str = "application/x-ndjson";

/// What a declared content type says the body is. It only tells a raw document from a form:
/// what the document is comes from its bytes (`office::detect`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyKind {
    /// A PDF, an Office document or unlabelled bytes: the document itself.
    Document,
    /// A multipart form whose `file` field holds the document.
    Multipart,
    /// Anything else.
    Unsupported(String),
}

/// Classifies a `Content-Type` value (parameters ignored).
pub fn classify(content_type: Option<&str>) -> BodyKind {
    let Some(value) = content_type else {
        return BodyKind::Document;
    };
    let mime = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match mime.as_str() {
        // curl --data-binary labels bodies x-www-form-urlencoded unless told otherwise.
        ""
        | "application/pdf"
        | "application/x-pdf"
        | "application/octet-stream"
        | "application/x-www-form-urlencoded"
        | "application/msword"
        | "application/vnd.ms-excel"
        | "application/vnd.ms-powerpoint"
        | "application/rtf"
        | "text/rtf" => BodyKind::Document,
        "multipart/form-data" => BodyKind::Multipart,
        m if m.starts_with("application/vnd.openxmlformats-officedocument.")
            || m.starts_with("application/vnd.oasis.opendocument.") =>
        {
            BodyKind::Document
        }
        _ => BodyKind::Unsupported(mime),
    }
}

/// 415 `unsupported_media_type` for a body of type `mime`.
pub fn unsupported(mime: &str) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!(
            "content type {mime:?} is not accepted: send a PDF or Office document as the body or as multipart field \"file\""
        ),
    )
}

/// The password header, if present and valid UTF-8.
pub fn password(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    match headers.get(PASSWORD_HEADER) {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(|s| Some(s.to_string()))
            .map_err(|_| ApiError::invalid("X-Pdf-Password must be visible ASCII")),
    }
}

/// The client's `Request-Timeout`, if it sent one: positive seconds, at most a day.
pub fn request_timeout(headers: &HeaderMap) -> Result<Option<Duration>, ApiError> {
    let Some(value) = headers.get(REQUEST_TIMEOUT_HEADER) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::invalid(format!(
            "Request-Timeout must be a number of seconds above 0 and at most 86400, got {:?}",
            String::from_utf8_lossy(value.as_bytes())
        ))
    };
    let secs: f64 = value.to_str().map_err(|_| bad())?.trim().parse().map_err(|_| bad())?;
    if !(secs > 0.0 && secs <= 86_400.0) {
        return Err(bad());
    }
    // 1e-300 is above 0 but rounds to no time at all.
    let timeout = Duration::from_secs_f64(secs);
    if timeout.is_zero() {
        return Err(bad());
    }
    Ok(Some(timeout))
}

/// Whether the client asks for the streaming form (`Accept: application/x-ndjson`).
pub fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| item.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case(NDJSON))
}

/// Most bytes read and thrown away after refusing a request whose body was not read yet.
const LINGER_BYTES: usize = 64 << 20;
/// Longest time spent doing so.
const LINGER_TIME: Duration = Duration::from_secs(10);
/// Refused uploads drained at once; past that a refused connection is closed undrained, so a
/// flood of refused uploads costs the front no more than this many read buffers.
const LINGERING: usize = 16;
static LINGER_PLACES: Semaphore = Semaphore::const_new(LINGERING);

/// Answers `error` without reading the body. A client that waits for `100 Continue` is told
/// before it sends a byte (the body is never polled, so hyper never invites it); one that
/// sends anyway has its upload read and discarded for a bounded while (as nginx's lingering
/// close does), so it finishes sending and sees the error instead of a broken pipe.
pub fn refuse(request: Request, error: ApiError) -> ApiError {
    if !expects_continue(request.headers()) {
        linger(request.into_body().into_data_stream());
    }
    error
}

/// Whether the client waits for `100 Continue` before it sends its body (hyper sends it when
/// the body is first read, so a body never read is never sent).
pub fn expects_continue(headers: &HeaderMap) -> bool {
    headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Whether the request carries no body at all: `Content-Length: 0`, or neither a length nor a
/// transfer coding (how HTTP/1.1 frames a request without one).
pub fn declares_no_body(headers: &HeaderMap) -> bool {
    match headers.get(header::CONTENT_LENGTH) {
        Some(length) => length.as_bytes().trim_ascii() == b"0",
        None => !headers.contains_key(header::TRANSFER_ENCODING),
    }
}

/// Reads and discards what is left of an upload in the background, up to [`LINGER_BYTES`] and
/// [`LINGER_TIME`], when one of the [`LINGERING`] places is free; nothing is buffered.
pub fn linger(mut stream: BodyDataStream) {
    let Ok(place) = LINGER_PLACES.try_acquire() else {
        return;
    };
    tokio::spawn(async move {
        let _place = place;
        let mut seen = 0usize;
        let discard = async {
            while let Some(Ok(chunk)) = stream.next().await {
                seen += chunk.len();
                if seen > LINGER_BYTES {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_TIME, discard).await;
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn content_types() {
        assert_eq!(classify(None), BodyKind::Document);
        assert_eq!(classify(Some("application/pdf")), BodyKind::Document);
        assert_eq!(classify(Some("multipart/form-data; boundary=x")), BodyKind::Multipart);
        assert_eq!(
            classify(Some(
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            )),
            BodyKind::Document
        );
        assert_eq!(classify(Some("application/vnd.oasis.opendocument.text")), BodyKind::Document);
        assert_eq!(classify(Some("application/msword")), BodyKind::Document);
        assert_eq!(classify(Some("image/png")), BodyKind::Unsupported("image/png".into()));
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (header::HeaderName::from_static(k), header::HeaderValue::from_static(v)))
            .collect()
    }

    #[test]
    fn request_timeout_is_positive_seconds() {
        assert_eq!(request_timeout(&headers(&[])).unwrap(), None);
        let t = |v| request_timeout(&headers(&[("request-timeout", v)]));
        assert_eq!(t("2.5").unwrap(), Some(Duration::from_millis(2500)));
        assert_eq!(t(" 30 ").unwrap(), Some(Duration::from_secs(30)));
        for bad in ["0", "-1", "abc", "NaN", "inf", "1e9", "", "1e-300"] {
            assert_eq!(t(bad).unwrap_err().code, "invalid_request", "{bad:?}");
        }
    }

    #[test]
    fn a_request_without_a_body_and_one_that_waits_to_send_it() {
        assert!(declares_no_body(&headers(&[])));
        assert!(declares_no_body(&headers(&[("content-length", "0")])));
        assert!(!declares_no_body(&headers(&[("content-length", "10")])));
        assert!(!declares_no_body(&headers(&[("transfer-encoding", "chunked")])));
        assert!(!expects_continue(&headers(&[])));
        assert!(expects_continue(&headers(&[("expect", "100-Continue")])));
    }

    #[test]
    fn ndjson_is_asked_for_by_accept() {
        assert!(!wants_ndjson(&headers(&[])));
        assert!(!wants_ndjson(&headers(&[("accept", "application/json")])));
        assert!(wants_ndjson(&headers(&[("accept", "application/x-ndjson")])));
        assert!(wants_ndjson(&headers(&[("accept", "text/html, Application/X-NDJSON;q=0.9")])));
    }
}
