//! `?source=s3://bucket/key`: a document route's document read from the object store instead of
//! the body (a viewer's previews of a stored upload never stream it through the client), in
//! the buckets the pod may read, within the body limit and the upload budget, through the
//! object cache keyed by ETag. Also the API errors of the object store, which the job routes
//! answer with too.
//!
//! The one seam between the document routes and where a document comes from is [`fetch`]: it
//! answers a [`HeldDocument`] as reading a body does (hashed, reserved, not empty).

use axum::extract::Request;
use axum::http::{StatusCode, header};
use renderpool_api::jobs::{self, ObjectUrl};

use super::AppState;
use super::error::ApiError;
use super::input;
use super::params::Query;
use crate::doc_cache::HeldDocument;
use crate::objects::ObjectError;
use crate::ops::OpError;

/// The query parameter naming a stored document.
pub const PARAM: &str = "source";
/// The query parameter naming the version of the stored document by its ETag.
pub const ETAG_PARAM: &str = "source_etag";

/// A stored document a request names: the object, and the version it asks for, if it names
/// one.
#[derive(Debug)]
pub struct Stored {
    pub url: ObjectUrl,
    pub etag: Option<String>,
}

/// The stored document a request names with `?source=` (and `&source_etag=`), if it names one.
pub fn requested(request: &Request) -> Result<Option<Stored>, ApiError> {
    let query = Query::of_uri(request.uri())?;
    let etag = query.get(ETAG_PARAM);
    let Some(url) = query.get(PARAM) else {
        return match etag {
            Some(_) => Err(ApiError::invalid(format!(
                "{ETAG_PARAM}= names a version of a {PARAM}=; give the {PARAM}= too"
            ))),
            None => Ok(None),
        };
    };
    if let Some(etag) = etag
        && !jobs::is_etag(etag)
    {
        return Err(ApiError::invalid(format!(
            "{ETAG_PARAM}={etag:?} is not an ETag: 1 to {} visible ASCII characters",
            jobs::MAX_ETAG
        )));
    }
    let url = ObjectUrl::parse(url).map_err(|e| ApiError::invalid(e.to_string()))?;
    if url.key.is_empty() || url.key.ends_with('/') {
        return Err(ApiError::invalid(format!("{PARAM}={url} names no object")));
    }
    let has_body =
        request.headers().get(header::CONTENT_LENGTH).is_some_and(|len| len.as_bytes() != b"0")
            || request.headers().contains_key(header::TRANSFER_ENCODING);
    if has_body {
        return Err(ApiError::invalid(format!(
            "give the document as {PARAM}= or as the body, not both"
        )));
    }
    Ok(Some(Stored { url, etag: etag.cloned() }))
}

/// Reads the document `stored` names, as a body would be read: within the body limit, reserved
/// in the upload budget, from the ETag cache when unchanged. A version named by its ETag is
/// served from the cache with no request to the store when held, read with `If-Match`
/// otherwise, and refused (`input_changed`) once the object was written over.
pub async fn fetch(
    app: &AppState,
    request: Request,
    stored: &Stored,
) -> Result<HeldDocument, ApiError> {
    let Some(objects) = &app.objects else {
        return Err(input::refuse(
            request,
            ApiError::invalid(format!(
                "this pod has no object store (no --objects-* flag): send the document as the body, not as {PARAM}="
            )),
        ));
    };
    drop(request);
    let max = app.uploads.limits.max_bytes;
    let url = &stored.url;
    let fetched = objects
        .fetch(url, stored.etag.as_deref(), max, &app.uploads.budget)
        .await
        .inspect_err(|e| {
            if matches!(e, ObjectError::NoRoom { .. }) {
                app.metrics.reject("upload_budget");
            }
        })?;
    app.metrics.bytes_in.inc_by(fetched.document.bytes.len() as u64);
    if fetched.document.bytes.is_empty() {
        return Err(OpError::Unreadable { detail: format!("the document {url} is empty") }.into());
    }
    Ok(fetched.document)
}

impl From<ObjectError> for ApiError {
    fn from(error: ObjectError) -> Self {
        let message = error.to_string();
        match error {
            ObjectError::NotAllowed { .. } | ObjectError::OtherStore { .. } => {
                ApiError::new(StatusCode::FORBIDDEN, "bucket_not_allowed", message)
            }
            ObjectError::NotFound { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "object_not_found", message)
            }
            ObjectError::Changed { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "input_changed", message)
            }
            ObjectError::TooLarge { max, .. } => ApiError { message, ..ApiError::too_large(max) },
            ObjectError::NoRoom { .. } => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "upload_budget_exhausted", message)
            },
            ObjectError::Store { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "object_store_unavailable", message)
            }
            ObjectError::Hash { .. } => ApiError::internal(message),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use axum::body::Body;

    use super::*;

    fn asked(query: &str) -> Result<Option<Stored>, ApiError> {
        let request = Request::builder().uri(format!("/v1/info?{query}")).body(Body::empty());
        requested(&request.unwrap())
    }

    fn refusal(query: &str) -> String {
        asked(query).expect_err(query).message
    }

    #[test]
    fn a_source_is_read_in_the_version_its_etag_names() {
        let stored = asked("source=s3://uploads/a.pdf&source_etag=%229b2c%22").unwrap().unwrap();
        assert_eq!(stored.url.to_string(), "s3://uploads/a.pdf");
        assert_eq!(stored.etag.as_deref(), Some("\"9b2c\""));
        let unnamed = asked("source=s3://uploads/a.pdf").unwrap().unwrap();
        assert_eq!(unnamed.etag, None);
        assert!(asked("page=1").unwrap().is_none());
    }

    #[test]
    fn an_etag_without_a_source_or_that_is_no_etag_is_refused() {
        assert!(refusal("source_etag=%22x%22").contains("give the source= too"));
        let long = "e".repeat(jobs::MAX_ETAG + 1);
        for etag in ["", "%22a%20b%22", "%C3%A9", long.as_str()] {
            let message = refusal(&format!("source=s3://uploads/a.pdf&source_etag={etag}"));
            assert!(message.contains("is not an ETag"), "{etag}: {message}");
        }
    }
}
