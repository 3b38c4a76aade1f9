//! Reading the document from a request: raw body or multipart `file`, size-checked while read.

use std::time::Duration;

use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, StatusCode, header};
use futures::StreamExt;

use super::error::ApiError;

/// Header carrying the password of an encrypted PDF.
pub const PASSWORD_HEADER: &str = "x-pdf-password";

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

fn unsupported(mime: &str) -> ApiError {
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

/// Most bytes read and thrown away after refusing a request whose body was not read yet.
const LINGER_BYTES: usize = 64 << 20;
/// Longest time spent doing so.
const LINGER_TIME: Duration = Duration::from_secs(10);

/// Answers `error` without reading the body, but keeps reading and discarding the upload for a
/// bounded while (as nginx's lingering close does), so the client finishes sending and sees the
/// error instead of a broken pipe. Nothing is buffered.
pub fn refuse(request: Request, error: ApiError) -> ApiError {
    linger(request.into_body().into_data_stream());
    error
}

/// Reads and discards what is left of an upload in the background, up to [`LINGER_BYTES`] and
/// [`LINGER_TIME`].
fn linger(mut stream: BodyDataStream) {
    tokio::spawn(async move {
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

/// Reads the document from the body, refusing more than `max` bytes before buffering them.
pub async fn read_document(request: Request, max: u64) -> Result<Bytes, ApiError> {
    let headers = request.headers();
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max) {
        return Err(refuse(request, ApiError::too_large(max)));
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let multipart = match classify(content_type) {
        BodyKind::Document => false,
        BodyKind::Multipart => true,
        BodyKind::Unsupported(mime) => return Err(refuse(request, unsupported(&mime))),
    };
    let (parts, body) = request.into_parts();
    let mut bytes = read_limited(body, max, declared).await?;
    if multipart {
        bytes = multipart_file(Request::from_parts(parts, Body::from(bytes)), max).await?;
    }
    Ok(bytes)
}

/// The whole body, counted while it streams in: past `max` bytes (with or without a declared
/// length, e.g. a chunked upload) the rest is drained in the background, so the client reads
/// the 413 instead of a reset mid-upload. A declared length sizes the buffer once.
async fn read_limited(body: Body, max: u64, declared: Option<u64>) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let capacity = usize::try_from(declared.unwrap_or(0).min(max)).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::invalid(format!("cannot read the request body: {e}")))?;
        if (bytes.len() + chunk.len()) as u64 > max {
            linger(stream);
            return Err(ApiError::too_large(max));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(bytes))
}

/// The `file` field of a multipart form already read whole (and so already size-checked).
async fn multipart_file(request: Request, max: u64) -> Result<Bytes, ApiError> {
    let mut form = Multipart::from_request(request, &())
        .await
        .map_err(|e| ApiError::invalid(format!("bad multipart body: {}", e.body_text())))?;
    let field_error = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(max)
        } else {
            ApiError::invalid(format!("bad multipart body: {}", e.body_text()))
        }
    };
    while let Some(field) = form.next_field().await.map_err(field_error)? {
        if field.name() != Some("file") {
            continue;
        }
        match classify(field.content_type()) {
            BodyKind::Unsupported(mime) if mime != "multipart/form-data" => {
                return Err(unsupported(&mime));
            }
            _ => {}
        }
        return field.bytes().await.map_err(field_error);
    }
    Err(ApiError::invalid("multipart body has no field named \"file\""))
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
}
